"""How long a training step of the G2P recipe takes with each thread setting.

Builds today's recipe model of `examples/g2p_cmudict.py` (2-layer bi-LSTM
encoder of 256 per direction, location-sensitive attention, LSTM decoder of
256) and trains it on the first `--batches` batches of 128 pronunciations of
`cmudict-0.7b.train` (words of similar length, in the training's shuffled
order): one pass to build every shape, then `--passes` timed passes,
keeping the fastest. Each setting runs in its own
process (TensorFlow's threads are fixed when it starts), and the settings
alternate for `--rounds` rounds, so a machine that grows busier slows them
alike. Writes the "G2P: training step time" section of docs/benchmarks.md.

    python benchmarks/g2p_step_time.py --rounds 2

Settings: TensorFlow's default threads (`--intra-op-threads 0`), one thread
per operation (`--intra-op-threads 1`, the recipe's default), and with
`--jit` also XLA (`jit_compile=True`), whose first pass compiles every shape.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report  # noqa: E402

# name -> (intra-op threads, jit_compile); the first is the reference.
SETTINGS = {
    "TensorFlow's default threads (`--intra-op-threads 0`)": (0, False),
    "one thread per operation (`--intra-op-threads 1`)": (1, False),
    "one thread per operation, `jit_compile=True`": (1, True),
}


def measure(data_dir, threads, jit, batches, passes):
    """Runs in a fresh process: ms per step (wall and CPU) of the recipe model."""
    g2p = _report.load_g2p_example()
    g2p.training.set_intra_op_threads(threads)
    import keras
    import numpy as np

    lexicon = g2p.read_split(data_dir, "cmudict-0.7b.train")
    vocab = g2p.Vocabulary.from_lexicon(lexicon)
    pairs = g2p.training_pairs(lexicon, vocab)
    rng = np.random.default_rng(0)
    chosen = g2p.training.length_bucketed_batches(pairs, 128, rng, g2p.START, g2p.END)[:batches]
    keras.utils.set_random_seed(0)
    model = g2p.build_model(len(vocab.graphemes), len(vocab.phones))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3, clipnorm=5.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit,
    )

    def one_pass():
        wall, cpu = time.perf_counter(), time.process_time()
        for x, y in chosen:
            model.train_on_batch(x, y)
        return time.perf_counter() - wall, time.process_time() - cpu

    first = one_pass()[0]
    timed = min(one_pass() for _ in range(passes))
    return {
        "first_pass_s": first,
        "ms_per_step": 1000 * timed[0] / len(chosen),
        "cpu_ms_per_step": 1000 * timed[1] / len(chosen),
    }


def table(results, names):
    """Markdown rows: median ms per step over the rounds, and the ratio to the first."""
    reference = statistics.median(r["ms_per_step"] for r in results[names[0]])
    rows = [
        "| setting | ms per step (median; each round) | CPU ms per step | first pass (s) "
        "| vs TensorFlow's default |",
        "|---|---|---:|---:|---:|",
    ]
    for name in names:
        runs = results[name]
        wall = statistics.median(r["ms_per_step"] for r in runs)
        each = ", ".join(f"{r['ms_per_step']:.0f}" for r in runs)
        cpu = statistics.median(r["cpu_ms_per_step"] for r in runs)
        first = statistics.median(r["first_pass_s"] for r in runs)
        rows.append(
            f"| {name} | {wall:.0f} ({each}) | {cpu:.0f} | {first:.0f} | {wall / reference:.2f}× |"
        )
    return "\n".join(rows)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.path.join("..", "shared", "data", "cmudict"))
    parser.add_argument("--rounds", type=_report.positive_int, default=2)
    parser.add_argument("--batches", type=_report.positive_int, default=24)
    parser.add_argument("--passes", type=_report.positive_int, default=2)
    parser.add_argument("--jit", action="store_true", help="also time jit_compile=True")
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one measurement, as JSON
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child is not None:
        threads, jit = SETTINGS[args.child]
        print(json.dumps(measure(args.data_dir, threads, jit, args.batches, args.passes)))
        return
    names = [n for n, (_, jit) in SETTINGS.items() if args.jit or not jit]
    load = os.getloadavg()[0]
    results = {name: [] for name in names}
    for round_ in range(args.rounds):
        for name in names:
            out = subprocess.run(
                [sys.executable, __file__, "--child", name, "--data-dir", args.data_dir]
                + ["--batches", str(args.batches), "--passes", str(args.passes)],
                capture_output=True,
                text=True,
            )
            if out.returncode:
                raise SystemExit(f"{name}: the measuring process failed:\n{out.stderr[-2000:]}")
            results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"round {round_ + 1}, {name}: {results[name][-1]['ms_per_step']:.0f} ms a step")
    body = "\n".join(
        [
            "Today's G2P recipe model (`examples/g2p_cmudict.py`: 2-layer bi-LSTM 256, "
            "location-sensitive attention, LSTM decoder 256) trained on the first "
            f"{args.batches} batches of 128 pronunciations of `cmudict-0.7b.train` (words "
            "of similar length, in the training's shuffled order): one pass to build "
            "every shape (the first pass column), "
            f"then the fastest of {args.passes} timed passes; each setting in its own "
            f"process, the settings alternated over {args.rounds} rounds.",
            "",
            table(results, names),
            "",
            f"Load average {load:.1f} at the start and {os.getloadavg()[0]:.1f} at the end.  ",
            *_report.footer_lines(),
        ]
    )
    print()
    print(body)
    if args.write:
        _report.write_section("G2P: training step time", body)


if __name__ == "__main__":
    main()
