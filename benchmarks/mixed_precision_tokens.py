"""A model trained in mixed precision, exported: its tokens against float32 Keras.

For a run of `examples/g2p_cmudict.py train --mixed-precision POLICY` (a
real, trained model), exports the run as a user does (`export_folder`, no
step of the user's, the global policy still POLICY: SavedModel and TFLite
float32, float16 and int8, greedy and beam) and counts, on `--words` words
of `cmudict-0.7b.test` (evenly spaced through the file; 0: every word), the
words whose phones equal those of the reference: the same weights in the
same architecture built again under float32 by the example's own
`build_model` (not through `keras_attention.backend.precision`), run by
Keras, greedy and beam. The mixed model
run by Keras in its own policy is counted too, for comparison.

TFLite runs one word at a time at its own length, as `pronounce` in the
browser does; the SavedModel takes them in 0-padded batches of 64.

    python examples/g2p_cmudict.py train --run-dir runs/g2p_mixed16 \\
        --mixed-precision mixed_float16 --max-minutes 22
    python benchmarks/mixed_precision_tokens.py --run-dir runs/g2p_mixed16 --write

Prints a table; `--write` records it in docs/benchmarks.md with the command,
the machine and the date. About 5 minutes for 200 words on a 2-core CPU.
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _report  # noqa: E402

from keras_attention.scoring.error_rates import ErrorRates  # noqa: E402

TITLE = "Mixed precision to the device: a model trained in {policy}, its tokens"
VARIANTS = ("float32", "float16", "int8")
TARGET = 0.99


def spaced(words, count):
    """`count` words evenly spaced through `words` (all of them for 0)."""
    if not count or count >= len(words):
        return list(words)
    step = len(words) / count
    return [words[int(i * step)] for i in range(count)]


def float32_reference(g2p, model, vocab, config):
    """The run's architecture built again under float32 with its weights."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")
    try:
        options = {name: config[name] for name in g2p.MODEL_OPTIONS}
        reference = g2p.build_model(len(vocab.graphemes), len(vocab.phones), **options)
    finally:
        keras.config.set_dtype_policy(previous)
    reference.set_weights([keras.ops.convert_to_numpy(w) for w in model.weights])
    return reference


def lite_phones(path, signature, vocab, words):
    """{word: phones} from one signature of a TFLite model, a word at a time."""
    from ai_edge_litert.interpreter import Interpreter

    run = Interpreter(model_path=path).get_signature_runner(signature)
    out = {}
    for word in words:
        result = run(source=np.array([vocab.encode_word(word)], np.int32))
        n = int(result["lengths"][0])
        out[word] = vocab.decode_phones(result["tokens"][0, :n])
    return out


def saved_model_phones(path, signature, vocab, words, batch_size=64):
    """{word: phones} from one SavedModel signature, in 0-padded batches of
    `batch_size` (the SavedModel's default `max_batch`)."""
    import tensorflow as tf

    run = tf.saved_model.load(path).signatures[signature]
    out = {}
    for begin in range(0, len(words), batch_size):
        chunk = words[begin : begin + batch_size]
        sources = [vocab.encode_word(w) for w in chunk]
        batch = np.zeros((len(chunk), max(map(len, sources))), np.int32)
        for row, ids in enumerate(sources):
            batch[row, : len(ids)] = ids
        result = run(source=tf.constant(batch))
        tokens, lengths = result["tokens"].numpy(), result["lengths"].numpy()
        for i, word in enumerate(chunk):
            out[word] = vocab.decode_phones(tokens[i, : lengths[i]])
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--run-dir", required=True, help="a G2P run trained in mixed precision")
    parser.add_argument("--data-dir", default=os.path.join("..", "shared", "data", "cmudict"))
    parser.add_argument("--words", type=int, default=200, help="test words; 0: all")
    parser.add_argument("--beam-width", type=_report.positive_int, default=4)
    parser.add_argument("--write", action="store_true", help="record in docs/benchmarks.md")
    args = parser.parse_args(argv)
    g2p = _report.load_g2p_example()
    started = time.perf_counter()

    model, vocab, config = g2p.load_run(args.run_dir)
    policy = config.get("mixed_precision")
    if policy is None:
        raise SystemExit(f"{args.run_dir} was trained in float32: train with --mixed-precision")
    test = g2p.read_split(args.data_dir, "cmudict-0.7b.test")
    words = spaced(list(test), args.words)
    reference = g2p.make_generator(float32_reference(g2p, model, vocab, config))
    generator = g2p.make_generator(model)
    decodings = {"greedy": None, f"beam {args.beam_width}": args.beam_width}
    expected = {
        name: g2p.pronounce_words(reference, vocab, words, width)
        for name, width in decodings.items()
    }
    got = {
        f"Keras, {policy}": {
            name: g2p.pronounce_words(generator, vocab, words, width)
            for name, width in decodings.items()
        }
    }

    with tempfile.TemporaryDirectory() as folder:
        from keras_attention import export

        out = os.path.join(folder, "export")
        # As a user's one script does: train under the policy, then export
        # with the global policy still set to it.
        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy(policy)
        try:
            manifest = export.export_folder(
                generator, out, "g2p", variants=VARIANTS, beam_width=args.beam_width
            )
        finally:
            keras.config.set_dtype_policy(previous)
        saved = os.path.join(out, "saved_model")
        got["SavedModel"] = {
            "greedy": saved_model_phones(saved, "serving_default", vocab, words),
            f"beam {args.beam_width}": saved_model_phones(saved, "beam", vocab, words),
        }
        for variant in VARIANTS:
            path = os.path.join(out, "tflite", manifest["models"][variant])
            got[f"TFLite {variant}"] = {
                "greedy": lite_phones(path, "generate", vocab, words),
                f"beam {args.beam_width}": lite_phones(path, "generate_beam", vocab, words),
            }

    n = len(words)
    wer = ErrorRates.of(expected["greedy"], {w: test[w] for w in words}, g2p.SCORE_NAMES)
    lines = [
        f"The run `{args.run_dir}`: G2P ({config['attention']} attention, "
        f"{config['encoder_layers']}-layer bi-LSTM encoder of {config['encoder_units']} "
        f"per direction, decoder {config['units']}) trained under `{policy}` on "
        f"`{config['train_file']}` with a {config['max_minutes']:g}-minute budget, exported "
        f"by `export_folder` as it is, with the global policy still `{policy}`. On "
        f"{n:,} words of `cmudict-0.7b.test`, the words whose phones equal those of the "
        "same weights built again in float32 and run by Keras; the target is "
        f"{TARGET:.0%} ({int(np.ceil(TARGET * n))} of {n}). The reference's greedy WER on "
        f"these words: {wer.as_dict()['wer']:.1f} %.",
        "",
        "| model | greedy | beam | ≥ 99 % |",
        "|---|---:|---:|---|",
    ]
    results, differing = {}, []
    for name, by_decoding in got.items():
        for d in decodings:
            for w in words:
                if by_decoding[d][w] != expected[d][w]:
                    ours, theirs = " ".join(by_decoding[d][w]), " ".join(expected[d][w])
                    differing.append(f"{name} {d}: {w} {ours} (float32 Keras: {theirs})")
        counts = [sum(by_decoding[d][w] == expected[d][w] for w in words) for d in decodings]
        results[name] = counts
        met = "yes" if min(counts) >= TARGET * n else "no"
        met = "—" if name.startswith("Keras") else met  # not an export
        lines.append(f"| {name} | {counts[0]}/{n} | {counts[1]}/{n} | {met} |")
    lines += ["", "Words that differ:" if differing else "No word differs."]
    lines += [f"- {line}" for line in differing]
    lines += ["", f"{time.perf_counter() - started:.0f} s in all.  ", *_report.footer_lines()]
    body = "\n".join(lines)
    print("\n" + body)
    if args.write:
        _report.write_section(TITLE.format(policy=policy), body)  # one per policy
    return results


if __name__ == "__main__":
    main()
