"""Python LiteRT's tokens on the first call at a new largest source length.

Builds `--models` small attention models (an embedding, a bidirectional GRU,
`BahdanauDecoder` over `BahdanauAttention`; random weights, then a few SGD
steps on random ids, a different seed each), exports each with
`export_tflite` (dynamic source length, greedy `generate`), and runs the
same workload through LiteRT three ways:

- `default`: `Interpreter(model_path=..., num_threads=1)`, LiteRT's default
  CPU path (the XNNPACK delegate);
- `warm_up`: the same, with `keras_attention.runtime.litert.warm_up` at the
  workload's largest length right after each interpreter is made;
- `no delegate`: `OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES`.

The workload: `--interpreters` times, an interpreter of a random model is
made (up to 8 stay alive, as in an app that holds a few; the others are
dropped), then 6 calls of sources of 4 or 6 tokens in a random order. Each
call's tokens are compared with those of the same source run on a fresh
interpreter without delegate, alone (the reference). The calls are counted
in three kinds: an interpreter's first call; a call whose source is longer
than every earlier call of that interpreter ("growth": the only calls that
went wrong); the others.

    python benchmarks/lite_first_growth.py --write

Prints a table; `--write` records it in docs/benchmarks.md with the command,
the machine and the date. About 2 minutes on a 2-core CPU (128 s measured).
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _report  # noqa: E402

TITLE = "Python LiteRT: the first call at a new largest source length"
VOCAB = 20
LENGTHS = (4, 6)
MAX_LENGTH = 6
LIVE = 8
KINDS = ("first", "growth", "other")


def build_model(seed):
    """A small trained attention model (random weights, 4 SGD steps)."""
    from keras_attention import BahdanauAttention
    from keras_attention import BahdanauDecoder

    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, 8, mask_zero=True)(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))(x)
    y = keras.layers.Embedding(VOCAB, 8, mask_zero=True)(target)
    outputs, _, _ = BahdanauDecoder(16, BahdanauAttention(8))(y, memory)
    model = keras.Model([source, target], keras.layers.Dense(VOCAB)(outputs))
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-0.8, 0.8, w.shape).astype("float32") for w in model.weights])
    ids = rng.integers(3, VOCAB, size=(16, 6)).astype("int32")
    ids[::3, 4:] = 0
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    model.compile(optimizer="sgd", loss=loss)
    keras.utils.set_random_seed(seed)
    model.fit([ids, ids[:, :5]], ids[:, 1:], epochs=2, batch_size=8, verbose=0)
    return model


def export_models(count, folder):
    """`count` .tflite paths, one model each."""
    from keras_attention import Seq2SeqGenerator
    from keras_attention.export import export_tflite

    paths = []
    for seed in range(count):
        generator = Seq2SeqGenerator.from_model(build_model(seed), 1, VOCAB - 1)
        path = os.path.join(folder, f"model_{seed}.tflite")
        export_tflite(generator, path, max_length=MAX_LENGTH)
        paths.append(path)
        print(f"exported {seed + 1}/{count}", end="\r", flush=True)
    print()
    return paths


def sources(seed):
    """One source of each length per model, ids of the model's vocabulary."""
    rng = np.random.default_rng(seed)
    return {n: rng.integers(3, VOCAB, (1, n)).astype("int32") for n in LENGTHS}


def reference_tokens(paths, by_model):
    """Each model's tokens for each source, from a fresh interpreter without
    delegate (one call per interpreter: nothing grows)."""
    from ai_edge_litert.interpreter import Interpreter
    from ai_edge_litert.interpreter import OpResolverType

    plain = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    reference = {}
    for m, path in enumerate(paths):
        for n, source in by_model[m].items():
            interpreter = Interpreter(model_path=path, experimental_op_resolver_type=plain)
            reference[m, n] = interpreter.get_signature_runner("generate")(source=source)["tokens"]
    return reference


def run_workload(mode, paths, by_model, reference, interpreters, seed):
    """{kind: [calls wrong, calls]} for the kinds "first", "growth" and
    "other", and examples of wrong tokens."""
    from ai_edge_litert.interpreter import Interpreter
    from ai_edge_litert.interpreter import OpResolverType

    from keras_attention.runtime.litert import warm_up

    options = {"num_threads": 1}
    if mode == "no delegate":
        options["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    rng = np.random.default_rng(seed)
    live, longest = {}, {}
    counts = {kind: [0, 0] for kind in KINDS}  # kind -> [wrong, calls]
    examples = []
    for _ in range(interpreters):
        m = int(rng.integers(len(paths)))
        interpreter = Interpreter(model_path=paths[m], **options)
        if mode == "warm_up":
            warm_up(interpreter, max(LENGTHS))
        live.pop(m, None)
        live[m] = interpreter
        longest[m] = max(LENGTHS) if mode == "warm_up" else None
        if len(live) > LIVE:
            live.pop(next(iter(live)))  # freed at once (reference counting)
        runner = interpreter.get_signature_runner("generate")
        for n in rng.choice(LENGTHS, size=6):
            n = int(n)
            tokens = runner(source=by_model[m][n])["tokens"]
            if longest[m] is None:
                kind, longest[m] = "first", n
            else:
                kind = "growth" if n > longest[m] else "other"
                longest[m] = max(longest[m], n)
            wrong = not np.array_equal(tokens, reference[m, n])
            counts[kind][0] += int(wrong)
            counts[kind][1] += 1
            if wrong and len(examples) < 3:
                examples.append(f"{tokens[0].tolist()} for {reference[m, n][0].tolist()}")
    return counts, examples


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=_report.positive_int, default=12)
    parser.add_argument("--interpreters", type=_report.positive_int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="record in docs/benchmarks.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        paths = export_models(args.models, folder)
        by_model = [sources(args.seed + 100 + m) for m in range(len(paths))]
        reference = reference_tokens(paths, by_model)
        rows = {}
        for mode in ("default", "warm_up", "no delegate"):
            rows[mode] = run_workload(
                mode, paths, by_model, reference, args.interpreters, args.seed
            )
            print(mode, rows[mode][0], flush=True)
    lines = [
        f"{args.models} small trained attention models (embedding, bidirectional GRU, "
        "`BahdanauDecoder` with `BahdanauAttention`), exported by `export_tflite` with a "
        f"dynamic source length; {args.interpreters:,} interpreters made in turn (up to "
        f"{LIVE} alive), 6 greedy calls each, sources of {' or '.join(map(str, LENGTHS))} "
        "tokens. A call is wrong when its tokens differ from those of the same source on a "
        "fresh interpreter without delegate. Growth: the source is longer than every earlier "
        "call of that interpreter (after `warm_up`, none is).",
        "",
        "| interpreter | wrong of first calls | wrong of growth calls | wrong of other calls |",
        "|---|---:|---:|---:|",
    ]
    examples = []
    for mode, (counts, seen) in rows.items():
        cells = [f"{wrong:,} of {calls:,}" for wrong, calls in counts.values()]
        lines.append(f"| {mode} | {' | '.join(cells)} |")
        examples += [f"{mode}: {e}" for e in seen]
    lines += ["", "Wrong tokens seen:" if examples else "No call went wrong."]
    lines += [f"- {e}" for e in examples]
    lines += ["", f"{time.perf_counter() - started:.0f} s in all.  ", *_report.footer_lines()]
    body = "\n".join(lines)
    print("\n" + body)
    if args.write:
        _report.write_section(TITLE, body)
    return rows


if __name__ == "__main__":
    main()
