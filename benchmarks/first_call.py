"""What the first call of a generator costs: tracing on TensorFlow, compiling on JAX.

`Seq2SeqGenerator.greedy` and `.beam` compile their search for the backend on
first use: a `tf.function` on TensorFlow, `jax.jit` on JAX (compiled again for
every new source shape and `max_length`), nothing on PyTorch (eager). This
script times that: one small model, untrained (every search runs to its
`max_length`, the worst case), a sequence of calls in one process per backend,
each call timed once (wall and CPU seconds of the process, all its threads:
the CPU time is what the call costs, the wall time what it took beside
whatever else ran on the machine):

1. greedy, batch 8, source length 12 (the first call);
2. the same shape again, other ids;
3. two new source lengths, 20 and 27, then 20 again;
4. a new `max_length` on a seen shape, and a new batch size (1);
5. beam search (width 4), its first and second call.

Every greedy call but the new-`max_length` one decodes `max_length=40` tokens,
so the calls differ only in what is compiled. It also checks the advice it
leads to (pad the sources to a few lengths): the same sources decoded at
length 12 and padded with id 0 to length 20 must give the same tokens
(`Embedding(mask_zero=True)` masks the padding).

Model: vocabulary 1,000, embedding 64, a bidirectional GRU of 64 per direction,
`BahdanauDecoder(128, BahdanauAttention(128))`, a Dense readout; the generator
from `Seq2SeqGenerator.from_model`. Each backend runs in a process of its own
(`KERAS_BACKEND`), one after the other, `--repeats` times.

Prints a table and writes it to docs/benchmarks.md (section "First call of a
generator") unless `--no-write`. Took 7 minutes with the defaults on a 2-core
CPU under a load of 10 to 13 (six processes, each importing its backend).

    python benchmarks/first_call.py
    python benchmarks/first_call.py --backends tensorflow,jax --repeats 1 --no-write
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SECTION = "First call of a generator"
BACKENDS = ("tensorflow", "jax", "torch")
MAX_LENGTH = 40
START, END = 1, 2

# (label, search, batch, source length, max_length); run in this order.
CALLS = [
    ("first call", "greedy", 8, 12, MAX_LENGTH),
    ("same shape again", "greedy", 8, 12, MAX_LENGTH),
    ("new source length", "greedy", 8, 20, MAX_LENGTH),
    ("another new source length", "greedy", 8, 27, MAX_LENGTH),
    ("a source length seen before", "greedy", 8, 20, MAX_LENGTH),
    ("new max_length", "greedy", 8, 12, MAX_LENGTH + 10),
    ("new batch size", "greedy", 1, 12, MAX_LENGTH),
    ("beam, first call", "beam", 8, 12, MAX_LENGTH),
    ("beam, same shape again", "beam", 8, 12, MAX_LENGTH),
]


def build_model(vocab, seed):
    import keras

    from keras_attention import BahdanauAttention
    from keras_attention import BahdanauDecoder

    keras.utils.set_random_seed(seed)
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(vocab, 64, mask_zero=True)(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(64, return_sequences=True))(x)
    y = keras.layers.Embedding(vocab, 64, mask_zero=True)(target_in)
    outputs, _, _ = BahdanauDecoder(128, BahdanauAttention(128))(y, memory)
    logits = keras.layers.Dense(vocab)(outputs)
    return keras.Model([source, target_in], logits)


def worker(args):
    """Times CALLS in this process (one backend); returns a dict."""
    import keras
    import numpy as np

    from keras_attention import Seq2SeqGenerator

    model = build_model(args.vocab, args.seed)
    generator = Seq2SeqGenerator.from_model(model, start_id=START, end_id=END)
    rng = np.random.default_rng(args.seed)
    rows = []
    for label, search, batch, length, max_length in CALLS:
        source = rng.integers(3, args.vocab, (batch, length)).astype("int32")
        start, start_cpu = time.perf_counter(), time.process_time()
        if search == "greedy":
            generator.greedy(source, max_length=max_length)
        else:
            generator.beam(source, beam_width=4, max_length=max_length)
        rows.append(
            {
                "call": label,
                "seconds": time.perf_counter() - start,
                "cpu_seconds": time.process_time() - start_cpu,
            }
        )
    # The advice: pad to a few lengths. Padding must not change the tokens.
    source = rng.integers(3, args.vocab, (8, 12)).astype("int32")
    padded = np.pad(source, ((0, 0), (0, 8)))  # (8, 20), a length compiled above
    plain = generator.greedy(source, max_length=MAX_LENGTH)["tokens"]
    start = time.perf_counter()
    again = generator.greedy(padded, max_length=MAX_LENGTH)["tokens"]
    padded_seconds = time.perf_counter() - start
    same = int(np.sum(np.all(plain == again, axis=1)))
    return {
        "backend": keras.backend.backend(),
        "rows": rows,
        "padded_seconds": padded_seconds,
        "padded_equal": same,
        "padded_rows": int(source.shape[0]),
    }


def run_backend(backend, args):
    """Runs this script as a worker under `KERAS_BACKEND=backend`; its dict."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--vocab",
            str(args.vocab),
            "--seed",
            str(args.seed),
            "--worker-json",
            out,
        ]
        env = dict(os.environ, KERAS_BACKEND=backend)
        subprocess.run(command, env=env, check=True)
        with open(out, encoding="utf-8") as f:
            return json.load(f)
    finally:
        os.remove(out)


def format_table(results):
    """results: {backend: [worker dicts, one per repeat]} → a Markdown table."""
    backends = list(results)
    header = "| call | batch × source length | max_length | " + " | ".join(
        f"{b}: wall s | {b}: CPU s" for b in backends
    )
    lines = [header + " |", "|---|---|---:|" + "---:|---:|" * len(backends)]
    for i, (label, search, batch, length, max_length) in enumerate(CALLS):
        cells = []
        for backend in backends:
            for key in ("seconds", "cpu_seconds"):
                seconds = [run["rows"][i][key] for run in results[backend]]
                cells.append(", ".join(f"{s:.2f}" for s in seconds))
        name = label if search == "greedy" else f"{label} (width 4)"
        lines.append(f"| {name} | {batch} × {length} | {max_length} | " + " | ".join(cells) + " |")
    cells = []
    for backend in backends:
        runs = results[backend]
        seconds = ", ".join(f"{run['padded_seconds']:.2f}" for run in runs)
        equal = min(run["padded_equal"] for run in runs)
        cells += [f"{seconds} ({equal}/{runs[0]['padded_rows']} equal)", ""]
    lines.append(
        "| length 12 padded to 20: tokens equal to unpadded | 8 × 20 | "
        f"{MAX_LENGTH} | " + " | ".join(cells) + " |"
    )
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help="comma-separated Keras backends, each run in a process of its own",
    )
    parser.add_argument(
        "--repeats", type=int, default=2, help="fresh processes per backend (first calls)"
    )
    parser.add_argument("--vocab", type=int, default=1000, help="source and target vocabulary")
    parser.add_argument("--seed", type=int, default=0, help="weights and source ids")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    parser.add_argument("--worker-json", help=argparse.SUPPRESS)  # one process's results
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker_json:
        result = worker(args)
        with open(args.worker_json, "w", encoding="utf-8") as f:
            json.dump(result, f)
        return result
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown or not backends:
        raise SystemExit(f"Invalid --backends {args.backends!r}; choose from {BACKENDS}")
    if args.repeats < 1:
        raise SystemExit(f"Invalid --repeats {args.repeats}; expected at least 1")
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    results = {b: [] for b in backends}
    for repeat in range(args.repeats):
        for backend in backends:
            print(f"{backend}, process {repeat + 1} of {args.repeats}", flush=True)
            results[backend].append(run_backend(backend, args))
    wall = time.perf_counter() - started
    table = format_table(results)
    print()
    print(table)
    if not args.no_write:
        import _report

        load_end = os.getloadavg()[0]
        body = "\n\n".join(
            [
                f"Command: `{_report.command_line()}`  \n"
                f"Machine: {_report.machine_description()}, load average {load_start:.1f} "
                f"at the start, {load_end:.1f} at the end; {_report.versions()}  \n"
                f"Date: {_report.today()}, revision {_report.git_revision()}; "
                f"wall time {wall:.0f} s.",
                f"Model: vocabulary {args.vocab:,}, embedding 64, a bidirectional GRU of 64 per "
                "direction, `BahdanauDecoder(128, BahdanauAttention(128))`, Dense readout, "
                "untrained (every search runs to `max_length`); the generator from "
                "`Seq2SeqGenerator.from_model`. The calls run in the order of the table in "
                "one process per backend; each cell lists one time per process "
                f"({args.repeats} fresh processes per backend). Wall: the seconds the call "
                "took; CPU: the CPU seconds of the process (all threads) during the call, "
                "which other work on the machine disturbs less. The last row decodes 12-token "
                "sources padded with id 0 to length 20 and counts the rows whose tokens equal "
                "those of the unpadded sources.",
                table,
            ]
        )
        path = _report.write_section(SECTION, body)
        print(f"Wrote the table to {os.path.relpath(path)}")
    return results


if __name__ == "__main__":
    main()
