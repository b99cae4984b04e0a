"""The attention lesson on a monotonic task: G2P on CMUdict's dev split.

Trains the same small model of `examples/g2p_cmudict.py` with each attention
(content-only Bahdanau, Luong general, location-sensitive, monotonic) on
`cmudict-0.7b.train-dev-20-21` for a fixed time budget, for each seed, and
scores it greedily on `cmudict-0.7b.train-dev-1-21` (the monotonic model
twice: decoded soft, with the expected alignment it was trained on, and hard,
one position per step as a streaming decoder would). Prints WER / PER per
attention (mean and range over the seeds run), writes the table to
docs/benchmarks.md and an alignment plot per attention to docs/img/.

Takes `--minutes` per model and about a minute of evaluation each: with the
defaults (4 attentions, 1 seed, 10 minutes) about an hour on a 2-core CPU.

    python benchmarks/g2p_attention_lesson.py --runs-dir runs/g2p_lesson --seeds 0
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import _report  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
EXAMPLE = os.path.join(ROOT, "examples", "g2p_cmudict.py")
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
    # Epochs of 200 batches: the time budget stops within a few minutes of
    # its end even on a loaded machine.
    "--steps-per-epoch",
    "200",
]


def load_example():
    import importlib.util

    spec = importlib.util.spec_from_file_location("g2p_cmudict", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_example(argv):
    subprocess.run([sys.executable, EXAMPLE, *argv], check=True)


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


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--data-dir", default=os.path.join("..", "shared", "data", "cmudict"))
    parser.add_argument("--runs-dir", default=os.path.join("runs", "g2p_lesson"))
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated attentions")
    parser.add_argument("--seeds", type=_report.int_list, default=[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training budget per model")
    parser.add_argument("--img-dir", default=os.path.join(ROOT, "docs", "img"))
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--quick", action="store_true", help="a tiny check of the script: 300 words, 100 scored"
    )
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    g2p = load_example()
    words = alignment_words(g2p, args.data_dir)
    results = {}  # column → [(seed, greedy score)]
    epochs = {}
    for kind in kinds:
        for seed in args.seeds:
            run = os.path.join(args.runs_dir, f"{kind}_seed{seed}")
            tick = time.perf_counter()
            # Each command in its own process, as a user runs them.
            run_example(
                ["train", "--split", "dev", "--data-dir", args.data_dir, "--run-dir", run]
                + ["--attention", kind, "--seed", str(seed), "--max-minutes", str(args.minutes)]
                + ["--verbose", "2"]
                + (["--quick"] if args.quick else MODEL_FLAGS)
            )
            with open(os.path.join(run, "progress.json")) as f:
                epochs.setdefault(kind, []).append(len(json.load(f)["epochs"]))
            print(f"{kind} seed {seed}: trained in {time.perf_counter() - tick:.0f} s")
            modes = ["soft", "hard"] if kind == "monotonic" else ["hard"]
            for mode in modes:
                column = f"{kind}, decoded {mode}" if kind == "monotonic" else kind
                plot = None
                if seed == args.seeds[0]:
                    slug = column.replace(", decoded ", "_").replace("-", "_")
                    plot = os.path.join(args.img_dir, f"g2p_alignments_{slug}.png")
                flags = ["--alignments", ",".join(words), "--alignment-plot", plot] if plot else []
                out = os.path.join(run, f"eval_dev_{mode}.json")
                run_example(
                    ["evaluate", "--run-dir", run, "--data-dir", args.data_dir, "--split", "dev"]
                    + ["--beam-width", "0", "--verbose", "0", "--monotonic-mode", mode]
                    + ["--json", out]
                    + (["--limit", "100"] if args.quick else [])
                    + flags
                )
                with open(out) as f:
                    results.setdefault(column, []).append((seed, json.load(f)["greedy"]))
    lines = [
        f"Dev split (train on `cmudict-0.7b.train-dev-20-21`, score greedy on the "
        f"5,447 words of `cmudict-0.7b.train-dev-1-21`, 721 of which also appear in "
        f"the training file with another pronunciation); a small model "
        f"(`{' '.join(MODEL_FLAGS)}`), {args.minutes:g} minutes of training each, "
        f"seeds {', '.join(map(str, args.seeds))} ({len(args.seeds)} run each; the "
        "range in parentheses when more than one).",
        "",
        "| attention | epochs | WER (%) | PER (%) |",
        "|---|---:|---:|---:|",
    ]
    for column, rows in results.items():
        kind = column.split(",")[0]
        wer = [s["wer"] for _, s in rows]
        per = [s["per"] for _, s in rows]
        lines.append(
            f"| {column} | {', '.join(map(str, epochs[kind]))} | {spread(wer)} | {spread(per)} |"
        )
    lines.append("")
    lines.append(f"Alignment plots of {', '.join(words)}: `docs/img/g2p_alignments_*.png`.")
    lines.append("")
    lines.extend(_report.footer_lines())
    load = os.getloadavg()[0]
    lines.insert(-3, f"Load average at the end: {load:.1f} (other work shared the CPU).  ")
    body = "\n".join(lines)
    print("\n" + body)
    if not args.no_write:
        _report.write_section("G2P: the attention lesson (CMUdict dev split)", body)
    return results


if __name__ == "__main__":
    main()
