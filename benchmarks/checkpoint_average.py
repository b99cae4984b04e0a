"""Checkpoint averaging chosen on the validation split, then scored once on the test splits.

For a finished run trained with `train --keep-epochs`, averages the weights of
its last k epochs for each k asked (k = 1 is the last epoch alone), decodes the
validation split (never a test split) with beam search and scores it with BLEU
on lowercased, Moses-tokenized text. The run's own model (the checkpoint with
the best validation loss) is scored the same way as the reference. The k with
the best validation BLEU is chosen, and only the chosen model and the
reference are decoded on the test splits, greedy and beam. Prints the tables
and writes them to the "Checkpoint averaging" section of docs/benchmarks.md,
unless `--no-write`.

    python benchmarks/checkpoint_average.py --run runs/bahdanau --data-dir ../shared/data/multi30k

With the defaults (k = 1, 2, 4, 8) it takes about three minutes for the default
model on a 2-core CPU.
"""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attention.training import averaging  # noqa: E402
from keras_attention.translation import evaluation  # noqa: E402
from keras_attention.translation import load_multi30k  # noqa: E402
from keras_attention.translation.translator import load_run  # noqa: E402

# Each model is a fresh load, so its decoding functions are traced again.
tf.get_logger().setLevel("ERROR")

SECTION = "Checkpoint averaging"
TEST_SPLITS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")
REFERENCE = "best validation loss (the run's model)"


def _score(translator, data, method, args):
    return evaluation.decode_and_score(
        translator,
        data,
        method=method,
        batch_size=args.batch_size,
        beam_width=args.beam_width,
        length_penalty=args.length_penalty,
        progress=False,
    )[0]


def _name(epochs):
    if len(epochs) == 1:
        return f"epoch {epochs[0]} alone"
    return f"mean of epochs {epochs[0]} to {epochs[-1]} ({len(epochs)})"


def best_row(rows):
    """The row with the best validation BLEU (lc, tok); the first one on a tie."""
    if not rows:
        raise ValueError("no models were scored")
    return max(rows, key=lambda r: (r["val"]["bleu_lc_tok"], -rows.index(r)))


def _load(run, epochs):
    """The run's translator, with the mean of `epochs` (None: the run's model)."""
    translator, config = load_run(run)
    if epochs is not None:
        paths = [averaging.epoch_weight_path(run, e) for e in epochs]
        averaging.average_weights(translator.model, paths)
    return translator, config


def run(args):
    counts = _report.int_list(args.last)
    saved = averaging.saved_epochs(args.run)
    # Fails at once, before any decoding, when the run has too few epochs.
    candidates = [averaging.last_epochs(args.run, k) for k in counts]
    splits = [args.val_split, *args.test_splits.split(",")]
    corpus = load_multi30k(splits, args.data_dir)
    val = corpus[args.val_split].head(args.max_sentences)
    rows = []
    for epochs in [None, *candidates]:
        translator, config = _load(args.run, epochs)
        scores = _score(translator, val, "beam", args)
        name = REFERENCE if epochs is None else _name(epochs)
        rows.append({"name": name, "epochs": epochs, "val": scores})
        print(
            f"{args.val_split}, {name}: BLEU lc tok {scores['bleu_lc_tok']:.2f}, "
            f"{scores['seconds']:.0f} s",
            flush=True,
        )
    best = best_row(rows[1:])
    tests = {}
    for row in (rows[0], best):
        translator, _ = _load(args.run, row["epochs"])
        for split in args.test_splits.split(","):
            data = corpus[split].head(args.max_sentences)
            for method in ("greedy", "beam"):
                tests[(row["name"], split, method)] = _score(translator, data, method, args)
    return config, saved, rows, best, tests, len(val.en)


def build_report(config, saved, rows, best, tests, args, sentences):
    lines = [
        f"Run: `{args.run}` ({config['attention']} attention, {len(saved)} epochs saved "
        f"with `--keep-epochs`). Each model decodes {args.val_split} ({sentences} "
        f"sentences) with beam {args.beam_width}, penalty {args.length_penalty:g}; the "
        "best validation BLEU (lc, tok) among the averages picks k, and only the "
        "chosen model and the run's own are decoded on the test splits.",
        "",
        f"| model | {args.val_split} BLEU (lc, tok) | BLEU (cased) | chrF | chosen |",
        "|---|---:|---:|---:|---|",
    ]
    for row in rows:
        chosen = "yes" if row is best else ""
        v = row["val"]
        lines.append(
            f"| {row['name']} | {v['bleu_lc_tok']:.2f} | {v['bleu']:.2f} | "
            f"{v['chrf']:.2f} | {chosen} |"
        )
    lines += [
        "",
        "On the test splits, BLEU (lc, tok) greedy / beam, and cased beam:",
        "",
        "| model | split | BLEU (lc, tok) greedy / beam | BLEU (cased) beam |",
        "|---|---|---|---:|",
    ]
    names = []
    for name, _, _ in tests:
        if name not in names:
            names.append(name)
    for name in names:
        for split in args.test_splits.split(","):
            greedy = tests[(name, split, "greedy")]
            beam = tests[(name, split, "beam")]
            lines.append(
                f"| {name} | {split} | {greedy['bleu_lc_tok']:.2f} / "
                f"{beam['bleu_lc_tok']:.2f} | {beam['bleu']:.2f} |"
            )
    lines += [
        "",
        *_report.footer_lines(),
    ]
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="runs/bahdanau", help="trained with --keep-epochs")
    parser.add_argument("--data-dir", help="folder with the Multi30k .gz files")
    parser.add_argument("--last", default="1,2,4,8", help="numbers of last epochs to average")
    parser.add_argument("--val-split", default="val", help="the split that picks k")
    parser.add_argument("--test-splits", default=",".join(TEST_SPLITS))
    parser.add_argument("--beam-width", type=int, default=4)
    parser.add_argument("--length-penalty", type=float, default=0.6)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-sentences", type=int, help="score only the first N (a quick look)")
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.val_split in args.test_splits.split(","):
        parser.error(f"--val-split {args.val_split} is also a test split; choose on another one")
    return args


def main(argv=None):
    args = parse_args(argv)
    config, saved, rows, best, tests, sentences = run(args)
    report = build_report(config, saved, rows, best, tests, args, sentences)
    print(report)
    if not args.no_write:
        print("written to", _report.write_section(SECTION, report))
    return config, rows, best, tests


if __name__ == "__main__":
    main()
