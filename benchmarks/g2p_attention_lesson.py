"""The attention lesson on a monotonic task: G2P on CMUdict's dev split.

Trains the same small model of `examples/g2p_cmudict.py` with each attention
(content-only Bahdanau, Luong general, location-sensitive, monotonic) on
`cmudict-0.7b.train-dev-20-21` for the same number of steps (`--epochs` of 200
batches, the learning rate decaying over them), for each seed, and scores it
greedily on `cmudict-0.7b.train-dev-1-21` (the monotonic model twice: decoded
soft, with the expected alignment it was trained on, and hard, one position
per step as a streaming decoder would). Prints WER / PER per attention (mean
and range over the seeds), writes the table to docs/benchmarks.md and an
alignment plot per attention to docs/img/.

A fixed step count makes the runs comparable whatever else the machine does:
each attention sees the same batches in the same order, with the same
schedule. `--jobs 2` trains two models at once, each process pinned to one
core with one TensorFlow thread; that changes the time taken, not the steps.
With the defaults (4 attentions, seeds 0-2, 40 epochs of 200 batches, each
epoch about 13 s on one core) about an hour on a 2-core CPU with `--jobs 2`.

    python benchmarks/g2p_attention_lesson.py --runs-dir runs/g2p_lesson_steps --jobs 2
"""

import argparse
import concurrent.futures
import json
import os
import queue
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import _report  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
EXAMPLE = _report.G2P_EXAMPLE
KINDS = ("bahdanau", "luong-general", "location-sensitive", "monotonic")
# The small model of the lesson (the final recipe is larger).
MODEL_FLAGS = [
    "--encoder-layers",
    "1",
    "--encoder-units",
    "128",
    "--units",
    "128",
    "--embedding-dim",
    "64",
    "--batch-size",
    "128",
    # The peak rate of the recorded lesson (the recipe's default was 2e-3 then;
    # it is 3e-3 since, row g12 of docs/experiments.md).
    "--learning-rate",
    "2e-3",
    # The recorded lesson trained without label smoothing (the recipe's
    # default is 0.1 since, rows g15 and g1j of docs/experiments.md).
    "--label-smoothing",
    "0",
    # Epochs of 200 batches (25,600 pronunciations, a quarter of the file).
    "--steps-per-epoch",
    "200",
]


def run_example(argv, core=None, log=None):
    """Runs the example in its own process, as a user runs it.

    `core`: pin the process to this CPU core with one TensorFlow thread (so
    that two runs side by side do not fight over both cores). `log`: a file
    for its output (runs side by side would interleave on the terminal).
    """
    env = None
    pin = None
    if core is not None:
        env = dict(os.environ, TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")

        def pin():
            os.sched_setaffinity(0, {core})

    if log is None:
        subprocess.run([sys.executable, EXAMPLE, *argv], check=True, env=env, preexec_fn=pin)
        return
    with open(log, "a") as out:
        process = subprocess.run(
            [sys.executable, EXAMPLE, *argv],
            env=env,
            preexec_fn=pin,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if process.returncode:
        raise SystemExit(f"{' '.join(argv[:1])} failed (exit {process.returncode}); see {log}")


def task_commands(kind, seed, run, args, plot_words=None):
    """The example's commands for one attention and seed: train, then evaluate.

    Returns `[(argv, eval_json or None, column)]`.
    """
    commands = [
        (
            ["train", "--split", "dev", "--data-dir", args.data_dir, "--run-dir", run]
            + ["--attention", kind, "--seed", str(seed)]
            + ["--max-minutes", str(args.minutes), "--verbose", "2"]
            + (["--quick"] if args.quick else MODEL_FLAGS + ["--epochs", str(args.epochs)]),
            None,
            None,
        )
    ]
    modes = ["soft", "hard"] if kind == "monotonic" else ["hard"]
    for mode in modes:
        column = f"{kind}, decoded {mode}" if kind == "monotonic" else kind
        flags = []
        if plot_words:
            slug = column.replace(", decoded ", "_").replace("-", "_")
            plot = os.path.join(args.img_dir, f"g2p_alignments_{slug}.png")
            flags = ["--alignments", ",".join(plot_words), "--alignment-plot", plot]
        out = os.path.join(run, f"eval_dev_{mode}.json")
        commands.append(
            (
                ["evaluate", "--run-dir", run, "--data-dir", args.data_dir, "--split", "dev"]
                + ["--beam-width", "0", "--verbose", "0", "--monotonic-mode", mode]
                + ["--json", out]
                + (["--limit", "100"] if args.quick else [])
                + flags,
                out,
                column,
            )
        )
    return commands


def run_tasks(tasks, jobs):
    """Runs each task's commands in order; up to `jobs` tasks at once, one core each."""
    if jobs == 1:
        for name, commands, log in tasks:
            tick = time.perf_counter()
            for argv, _, _ in commands:
                run_example(argv, log=log)
            print(f"{name}: done in {time.perf_counter() - tick:.0f} s", flush=True)
        return
    cores = queue.Queue()
    for core in sorted(os.sched_getaffinity(0))[:jobs]:
        cores.put(core)

    def run_one(task):
        name, commands, log = task
        core = cores.get()
        try:
            tick = time.perf_counter()
            for argv, _, _ in commands:
                run_example(argv, core=core, log=log)
            print(f"{name}: done in {time.perf_counter() - tick:.0f} s on core {core}", flush=True)
        finally:
            cores.put(core)

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for future in [pool.submit(run_one, task) for task in tasks]:
            future.result()


def alignment_words(g2p, data_dir):
    """Three dev words of 6, 8 and 10 letters (the first of each in the file)."""
    dev = g2p.read_split(data_dir, "cmudict-0.7b.train-dev-1-21")
    words = []
    for length in (6, 8, 10):
        words.append(next(w for w in dev if len(w) == length and w.isalpha()))
    return words


def spread(values):
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.mean(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--data-dir", default=os.path.join("..", "shared", "data", "cmudict"))
    parser.add_argument("--runs-dir", default=os.path.join("runs", "g2p_lesson"))
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated attentions")
    parser.add_argument("--seeds", type=_report.int_list, default=[0, 1, 2])
    parser.add_argument(
        "--epochs",
        type=_report.positive_int,
        default=40,
        help="epochs of 200 batches per model; the learning rate decays over them",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=120.0,
        help="a time budget per model that stops a run on a very slow machine (the "
        "schedule then ends with it); the epochs normally end first",
    )
    parser.add_argument(
        "--jobs",
        type=_report.positive_int,
        default=1,
        help="models trained at once, each pinned to one core with one thread",
    )
    parser.add_argument("--img-dir", default=os.path.join(ROOT, "docs", "img"))
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--quick", action="store_true", help="a tiny check of the script: 300 words, 100 scored"
    )
    args = parser.parse_args(argv)
    if args.jobs > len(os.sched_getaffinity(0)):
        parser.error(f"--jobs {args.jobs}: this machine has {len(os.sched_getaffinity(0))} cores")
    unknown = sorted(set(args.kinds.split(",")) - set(KINDS) - {""})
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; choose from {', '.join(KINDS)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    g2p = _report.load_g2p_example()
    words = alignment_words(g2p, args.data_dir)
    tasks = []
    for kind in kinds:
        for seed in args.seeds:
            run = os.path.join(args.runs_dir, f"{kind}_seed{seed}")
            os.makedirs(run, exist_ok=True)
            plot_words = words if seed == args.seeds[0] else None
            commands = task_commands(kind, seed, run, args, plot_words)
            log = os.path.join(run, "lesson.log") if args.jobs > 1 else None
            tasks.append((f"{kind} seed {seed}", commands, log))
    run_tasks(tasks, args.jobs)
    results = {}  # column → [greedy score per seed]
    epochs = {}
    minutes = {}
    for kind in kinds:
        for seed in args.seeds:
            run = os.path.join(args.runs_dir, f"{kind}_seed{seed}")
            with open(os.path.join(run, "progress.json")) as f:
                progress = json.load(f)
            epochs.setdefault(kind, []).append(len(progress["epochs"]))
            minutes.setdefault(kind, []).append(progress["seconds"] / 60)
    for _, commands, _ in tasks:
        for _, out, column in commands[1:]:
            with open(out) as f:
                results.setdefault(column, []).append(json.load(f)["greedy"])
    side_by_side = (
        f", {args.jobs} models at a time, each on one core with one thread" if args.jobs > 1 else ""
    )
    lines = [
        f"Dev split (train on `cmudict-0.7b.train-dev-20-21`, score greedy on the "
        f"5,447 words of `cmudict-0.7b.train-dev-1-21`, 721 of which also appear in "
        f"the training file with another pronunciation); a small model "
        f"(`{' '.join(MODEL_FLAGS)}`), the same {args.epochs} epochs of 200 batches "
        f"for each attention (the learning rate decaying over them), seeds "
        f"{', '.join(map(str, args.seeds))}: mean (range) over the seeds. Minutes: "
        f"training time per model{side_by_side}.",
        "",
        "| attention | epochs | minutes | WER (%) | PER (%) |",
        "|---|---:|---:|---:|---:|",
    ]
    for column, rows in results.items():
        kind = column.split(",")[0]
        wer = [s["wer"] for s in rows]
        per = [s["per"] for s in rows]
        lines.append(
            f"| {column} | {', '.join(map(str, sorted(set(epochs[kind]))))} | "
            f"{min(minutes[kind]):.0f}-{max(minutes[kind]):.0f} | {spread(wer)} | {spread(per)} |"
        )
    lines.append("")
    lines.append(
        "Each seed: "
        + "; ".join(
            f"{column} " + ", ".join(f"{s['wer']:.2f} / {s['per']:.2f}" for s in rows)
            for column, rows in results.items()
        )
        + " (WER / PER, seeds in order)."
    )
    lines.append("")
    lines.append(f"Alignment plots of {', '.join(words)}: `docs/img/g2p_alignments_*.png`.")
    lines.append("")
    lines.extend(_report.footer_lines())
    load = os.getloadavg()[0]
    lines.insert(-3, f"Load average at the end: {load:.1f}.  ")
    body = "\n".join(lines)
    print("\n" + body)
    if not args.no_write:
        _report.write_section("G2P: the attention lesson (CMUdict dev split)", body)
    return results


if __name__ == "__main__":
    main()
