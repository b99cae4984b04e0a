"""A user-built model through the generic export: size and one-thread latency.

Builds the README quickstart model at a realistic size (vocabulary 8,000,
embedding 256, a bidirectional GRU encoder of 2 × 128, a `BahdanauDecoder` of
256 units and a Dense output layer), fits it for a few steps on random
sequences, derives a `Seq2SeqGenerator` with `from_model` and exports it with
`keras_attention.export.export_tflite` (float32, float16, int8). Then, in the
same process:

- the size of the `.keras` file and of each `.tflite` file;
- the share of sources on which each TFLite variant's greedy tokens equal
  Keras' (the weights are nearly untrained, so the logits are flat: a small
  numeric change can flip an argmax; float32 should agree everywhere);
- greedy latency per sequence, batch 1, on ONE thread: TFLite `generate` with
  `num_threads=1`; Keras as `Seq2SeqGenerator.greedy` (a `tf.function`) with
  TensorFlow's intra- and inter-op pools at 1 thread. Every path decodes
  `--max-length` tokens (an untrained model rarely emits END), sources of
  `--source-length` tokens. The paths are timed interleaved, over several
  rounds; the table gives the median and the mean and their ratios to Keras
  (target: every TFLite variant ≤ 0.5× Keras, medians).

Prints a table and writes it to docs/benchmarks.md, section "Export: your own
model", unless `--no-write`.

    python benchmarks/generic_export_benchmark.py
    python benchmarks/generic_export_benchmark.py --sources 20 --rounds 1 --no-write  # quick look

Takes about 6 minutes on a 2-core CPU with the defaults.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _report  # noqa: E402

from keras_attention import BahdanauAttention  # noqa: E402
from keras_attention import BahdanauDecoder  # noqa: E402
from keras_attention import Seq2SeqGenerator  # noqa: E402
from keras_attention import export  # noqa: E402

SECTION = "Export: your own model"
KERAS = "Keras (Seq2SeqGenerator.greedy)"
VARIANTS = {"float32": None, "float16": "float16", "int8": "int8"}
LATENCY_RATIO_TARGET = 0.5
START, END = 1, 2


def build_model(vocab, embedding, units):
    """The README quickstart model, at the given sizes."""
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(vocab, embedding, mask_zero=True)(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(units // 2, return_sequences=True))(x)
    y = keras.layers.Embedding(vocab, embedding, mask_zero=True)(target_in)
    outputs, _, _ = BahdanauDecoder(units, BahdanauAttention(units))(y, memory)
    logits = keras.layers.Dense(vocab)(outputs)
    model = keras.Model([source, target_in], logits)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _progress(done, total, what):
    if not sys.stdout.isatty():
        return
    print(f"\r  {what}: {done}/{total}", end="", flush=True)
    if done == total:
        print()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--embedding", type=int, default=256)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--source-length", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=20, help="tokens decoded per source")
    parser.add_argument("--sources", type=int, default=60, help="sources timed per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fit-steps", type=int, default=20)
    parser.add_argument(
        "--compare-vocab",
        type=int,
        default=800,
        help="also time Keras and float32 at this vocabulary (0: no)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    return parser.parse_args(argv)


def measure(vocab, variants, args, rng):
    """Builds, fits and exports the model at `vocab`; times Keras and `variants`.

    Returns `(rows, sizes, seconds to export, timed sequences per path)`.
    """
    from ai_edge_litert.interpreter import Interpreter

    model = build_model(vocab, args.embedding, args.units)
    batch = 64
    src = rng.integers(3, vocab, (batch * args.fit_steps, args.source_length))
    tgt = rng.integers(3, vocab, (batch * args.fit_steps, args.source_length + 1))
    model.fit([src, tgt], tgt, batch_size=batch, epochs=1, verbose=0)
    folder = Path(tempfile.mkdtemp(prefix="generic_export_"))
    model.save(folder / "model.keras")
    sizes = {KERAS: (folder / "model.keras").stat().st_size}
    generator = Seq2SeqGenerator.from_model(model, start_id=START, end_id=END)
    runners = {KERAS: lambda ids: generator.greedy(ids, max_length=args.max_length)["tokens"]}
    started = time.perf_counter()
    for name in variants:
        path = folder / f"model_{name}.tflite"
        export.export_tflite(
            generator, path, quantization=VARIANTS[name], max_length=args.max_length
        )
        assert export.non_builtin_operators(path) == {}
        sizes[name] = path.stat().st_size
        interpreter = Interpreter(model_path=str(path), num_threads=1)
        runner = interpreter.get_signature_runner("generate")
        runners[name] = lambda ids, runner=runner: runner(source=ids)["tokens"]
    export_seconds = time.perf_counter() - started

    sources = [
        rng.integers(3, vocab, (1, args.source_length)).astype("int32") for _ in range(args.sources)
    ]
    agree = {name: 0 for name in runners}
    for ids in sources:
        reference = np.asarray(runners[KERAS](ids))
        for name, run in runners.items():
            agree[name] += int(np.array_equal(np.asarray(run(ids)), reference))
    times = {name: [] for name in runners}
    names = list(runners)
    for r in range(args.rounds):
        for i, ids in enumerate(sources):
            # Rotate the order so that no path always runs right after another.
            for name in names[i % len(names) :] + names[: i % len(names)]:
                tick = time.perf_counter()
                runners[name](ids)
                times[name].append(time.perf_counter() - tick)
            _progress(r * len(sources) + i + 1, args.rounds * len(sources), f"latency {vocab}")

    keras_median = statistics.median(times[KERAS])
    keras_mean = statistics.mean(times[KERAS])
    rows = []
    for name in runners:
        median, mean = statistics.median(times[name]), statistics.mean(times[name])
        ratio = median / keras_median
        met = "yes" if ratio <= LATENCY_RATIO_TARGET else "no"
        target = "reference" if name == KERAS else f"≤ {LATENCY_RATIO_TARGET}× Keras: {met}"
        label = name if name == KERAS else f"TFLite {name}"
        rows.append(
            f"| {vocab} | {label} | {sizes[name] / 1e6:.2f} | {agree[name]}/{len(sources)} "
            f"| {1e3 * median:.1f} | {ratio:.2f} | {1e3 * mean:.1f} | {mean / keras_mean:.2f} "
            f"| {target} |"
        )
    return rows, export_seconds, len(times[KERAS])


def main(argv=None):
    args = parse_args(argv)
    load = os.getloadavg()[0]
    # One thread for everything (TensorFlow fixes its pools at the first op).
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    rows, export_seconds, timed = measure(args.vocab, list(VARIANTS), args, rng)
    if args.compare_vocab:
        # The same model with a small vocabulary: how much of the float
        # latency is the per-token output projection (units × vocabulary).
        more, _, _ = measure(args.compare_vocab, ["float32"], args, rng)
        rows += more
    header = [
        "| vocabulary | model | size (MB) | tokens equal to Keras | ms / sequence (median) "
        "| × Keras (median) | ms / sequence (mean) | × Keras (mean) | target |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    body = "\n".join(
        [
            f"Model: the README quickstart model at vocabulary {args.vocab}, embedding "
            f"{args.embedding}, encoder 2 × {args.units // 2} (bidirectional GRU), "
            f"`BahdanauDecoder({args.units})`, Dense output; fitted {args.fit_steps} steps on "
            f"random sequences; generator from `Seq2SeqGenerator.from_model`, exported with "
            f"`keras_attention.export.export_tflite` (three variants in {export_seconds:.0f} s). "
            "The Keras size is the `.keras` file. The last rows: the same model with a "
            f"vocabulary of {args.compare_vocab}, Keras and float32 only, to show what the "
            "per-token output projection costs.  ",
            f"Latency: batch 1, source {args.source_length} tokens, {args.max_length} tokens "
            f"decoded, one thread (TFLite `num_threads=1`; Keras intra- and inter-op threads 1), "
            f"{timed} timed sequences per path ({args.rounds} rounds over "
            f"{args.sources} sources), interleaved.",
            "",
            *header,
            *rows,
            "",
            f"Command: `{_report.command_line()}`  ",
            f"Machine: {_report.machine_description()}, load average {load:.1f} at the start; "
            f"{_report.versions()}  ",
            f"Date: {_report.today()}, revision {_report.git_revision()}",
        ]
    )
    print(f"## {SECTION}\n\n{body}")
    if not args.no_write:
        print(f"\nWrote {_report.write_section(SECTION, body)}")
    return body


if __name__ == "__main__":
    main()
