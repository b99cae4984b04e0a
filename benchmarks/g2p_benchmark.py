"""G2P on the CMUdict test split: the trained run, its TFLite models and g2p-en.

For a run of `examples/g2p_cmudict.py train` (today's recipe), measures on
the 11,994 words of `cmudict-0.7b.test`:

- WER / PER, greedy and beam (width 4, length penalty 0.6), beside the
  published table;
- the exported TFLite models (exported first if `--export-dir` has none):
  float32 `generate` against Keras greedy on every test word (equal phones
  expected), WER / PER of float16 and int8, sizes;
- median latency per word on one thread: TFLite `generate` of each variant
  against Keras greedy (one word at a time, `Seq2SeqGenerator.greedy`);
- `g2p-en` 2.1.0 (PyPI), the G2P package users install today, if importable
  (`--g2p-en-path` adds the folder it was installed in with `pip install
  --target`): its neural predictor (a NumPy GRU seq2seq without attention)
  on the same words, its size and latency. It was trained on CMUdict words,
  which may include these test words.

Prints a table and writes it to docs/benchmarks.md with the command, machine
and date. About 15 minutes on a quiet 2-core CPU.

    python benchmarks/g2p_benchmark.py --run-dir runs/g2p --g2p-en-path runs/g2p_en_site
"""

import argparse
import os
import re
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

# One thread for every latency measured here (before TensorFlow starts).
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import _report  # noqa: E402

from keras_attention.scoring.error_rates import ErrorRates  # noqa: E402

VARIANTS = ("float32", "float16", "int8")
PUBLISHED = [
    ("Bisani & Ney 2008, joint-sequence model", "24.5", "5.9"),
    ("Yao & Zweig 2015, bi-LSTM", "23.55", "5.45"),
    ("Rao et al. 2015, LSTM + FST", "21.3", "—"),
    ("Toshniwal & Livescu 2016, attention, single model", "about 21.7", "about 5.0"),
    ("Toshniwal & Livescu 2016, attention, ensemble", "20.24", "4.69"),
]


def median_ms(fn, items, repeats=1):
    times = []
    for item in items:
        for _ in range(repeats):
            tick = time.perf_counter()
            fn(item)
            times.append(1000 * (time.perf_counter() - tick))
    return statistics.median(times)


def lite_pronouncer(path, manifest):
    from ai_edge_litert.interpreter import Interpreter

    generate = Interpreter(model_path=path, num_threads=1).get_signature_runner("generate")
    index = {g: i for i, g in enumerate(manifest["graphemes"])}
    phones = manifest["phones"]

    def pronounce(word):
        ids = np.array([[index[c] for c in word]], np.int32)  # (1, S)
        out = generate(source=ids)
        n = int(out["lengths"][0])
        return [phones[i] for i in out["tokens"][0, :n] if i >= 3]

    return pronounce


def g2p_en_pronouncer(path):
    """g2p-en's neural predictor, or None when g2p-en cannot be imported."""
    if path:
        sys.path.append(path)  # after the venv's packages: its numpy stays
    try:
        import g2p_en.g2p as module
    except ImportError as error:
        print(f"g2p-en not available ({error}); its rows are left out")
        return None, None

    class NoLookup:  # G2p() reads NLTK's CMUdict (a download); the predictor needs none
        @staticmethod
        def dict():
            return {}

    module.cmudict = NoLookup
    model = module.G2p()
    size = os.path.getsize(os.path.join(os.path.dirname(module.__file__), "checkpoint20.npz"))

    def pronounce(word):
        # Its graphemes are a-z (an apostrophe becomes <unk>); its phones carry
        # stress digits, which the standard split has removed.
        return [re.sub(r"\d", "", p) for p in model.predict(word.lower())]

    return pronounce, size


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--run-dir", default=os.path.join("runs", "g2p"))
    parser.add_argument("--data-dir", default=os.path.join("..", "shared", "data", "cmudict"))
    parser.add_argument("--export-dir", help="default: RUN/export (exported when absent)")
    parser.add_argument("--beam-width", type=int, default=4)
    parser.add_argument("--latency-words", type=int, default=300, help="words timed")
    parser.add_argument("--g2p-en-path", help="a folder holding g2p_en (pip install --target)")
    parser.add_argument("--limit", type=int, help="the first N test words only (a check)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    g2p = _report.load_g2p_example()
    started = time.perf_counter()
    load_start = os.getloadavg()[0]

    model, vocab, config = g2p.load_run(args.run_dir)
    test = g2p.read_split(args.data_dir, "cmudict-0.7b.test")
    if args.limit:
        test = dict(list(test.items())[: args.limit])
    words = list(test)

    def score(predictions, lexicon):  # WER, PER (%) and their counts
        return ErrorRates.of(predictions, lexicon, g2p.SCORE_NAMES).as_dict()

    generator = g2p.make_generator(model)
    scores, seconds = {}, {}
    tick = time.perf_counter()
    keras_greedy = g2p.pronounce_words(generator, vocab, words, progress=True)
    seconds["greedy"] = time.perf_counter() - tick
    scores["Keras greedy"] = score(keras_greedy, test)
    tick = time.perf_counter()
    beam = g2p.pronounce_words(generator, vocab, words, beam_width=args.beam_width, progress=True)
    seconds["beam"] = time.perf_counter() - tick
    scores[f"Keras beam {args.beam_width}"] = score(beam, test)

    export_dir = args.export_dir or os.path.join(args.run_dir, "export")
    manifest_path = os.path.join(export_dir, "tflite", "g2p.json")
    if not os.path.exists(manifest_path):
        g2p.main(["export", "--run-dir", args.run_dir, export_dir])
    import json

    with open(manifest_path) as f:
        manifest = json.load(f)
    sizes = {}
    lite = {}
    mismatches = {}
    for variant in VARIANTS:
        path = os.path.join(export_dir, "tflite", manifest["models"][variant])
        sizes[f"TFLite {variant}"] = os.path.getsize(path)
        lite[variant] = lite_pronouncer(path, manifest)
        predictions = {}
        for word in words:
            predictions[word] = lite[variant](word)
        scores[f"TFLite {variant} greedy"] = score(predictions, test)
        mismatches[variant] = sum(predictions[w] != keras_greedy[w] for w in words)
        print(f"TFLite {variant}: {mismatches[variant]} of {len(words)} words differ from Keras")
    keras_path = os.path.join(args.run_dir, "model.keras")
    sizes["Keras (.keras file)"] = os.path.getsize(keras_path)

    rng = np.random.default_rng(0)
    timed = [words[i] for i in rng.choice(len(words), min(args.latency_words, len(words)))]
    latency = {}

    def keras_one(word):
        source = np.array([vocab.encode_word(word)], "int32")
        return generator.greedy(source)["tokens"]

    for word in timed[:20]:  # traces the greedy function for each length
        keras_one(word)
    latency["Keras greedy"] = median_ms(keras_one, timed)
    for variant in VARIANTS:
        latency[f"TFLite {variant} greedy"] = median_ms(lite[variant], timed)

    g2p_en, g2p_en_size = g2p_en_pronouncer(args.g2p_en_path)
    if g2p_en is not None:
        predictions = {w: g2p_en(w) for w in words}
        scores["g2p-en 2.1.0 (neural predictor)"] = score(predictions, test)
        sizes["g2p-en 2.1.0 (neural predictor)"] = g2p_en_size
        latency["g2p-en 2.1.0 (neural predictor)"] = median_ms(g2p_en, timed)

    keras_ms = latency["Keras greedy"]
    lines = [
        f"The run `{args.run_dir}` ({config['attention']} attention, "
        f"{config['encoder_layers']}-layer bi-LSTM encoder of {config['encoder_units']} "
        f"per direction, decoder {config['units']}, trained on `{config['train_file']}` "
        f"with a {config['max_minutes']:g}-minute budget), on the {len(words):,} words of "
        "`cmudict-0.7b.test`; latency is the median over "
        f"{len(timed)} test words, one word at a time, one thread.",
        "",
        "| system | WER (%) | PER (%) | size (MB) | latency per word (ms) | vs Keras |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in scores.items():
        base = name.replace(f" beam {args.beam_width}", " greedy")
        size = sizes.get(name.replace(" greedy", ""), sizes.get(name))
        if name.startswith("Keras"):
            size = sizes["Keras (.keras file)"]
        ms = latency.get(base) if "beam" not in name else None
        ratio = f"{ms / keras_ms:.2f}×" if ms is not None else "—"
        lines.append(
            f"| {name} | {s['wer']:.2f} | {s['per']:.2f} | "
            f"{size / 1e6:.2f} | {f'{ms:.2f}' if ms is not None else '—'} | {ratio} |"
        )
    for name, wer, per in PUBLISHED:
        lines.append(f"| {name} (published) | {wer} | {per} | — | — | — |")
    lines.append("")
    lines.append(
        f"TFLite against Keras greedy, words whose phones differ: float32 "
        f"{mismatches['float32']}, float16 {mismatches['float16']}, int8 "
        f"{mismatches['int8']} of {len(words):,}. Keras greedy over all the words in "
        f"batches of 256: {seconds['greedy']:.0f} s; beam: {seconds['beam']:.0f} s."
    )
    if g2p_en is not None:
        lines.append(
            "g2p-en's figures are its neural predictor alone (its `G2p()` looks words "
            "up in CMUdict first): it was trained on CMUdict words that may include "
            "these test words, so its WER here may be optimistic; its phones have "
            "their stress digits removed, and an apostrophe is an unknown grapheme "
            "for it."
        )
    lines.append("")
    lines.append(
        f"Load average {load_start:.1f} at the start and {os.getloadavg()[0]:.1f} at "
        f"the end (other work shared the CPU); {time.perf_counter() - started:.0f} s in all.  "
    )
    lines.extend(_report.footer_lines())
    body = "\n".join(lines)
    print("\n" + body)
    if not args.no_write:
        _report.write_section("G2P: CMUdict test split, TFLite and g2p-en", body)
    return scores


if __name__ == "__main__":
    main()
