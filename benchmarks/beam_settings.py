"""Beam settings chosen on the validation split, then scored once on the test splits.

For a finished training run, decodes the validation split (never a test split)
greedily and with beam search for each beam width and GNMT length penalty
asked, scores each with BLEU on lowercased, Moses-tokenized text (the published
scoring) and cased sacreBLEU, and picks the setting with the best validation
BLEU. Only that setting is then decoded on the test splits, so the test
numbers are not tuned on the test data. Prints the tables and writes them to
the "Beam settings" section of docs/benchmarks.md, unless `--no-write`.

    python benchmarks/beam_settings.py --run runs/bahdanau --data-dir ../shared/data/multi30k

With the defaults (widths 4 and 8, penalties 0.6 and 1.0, plus greedy) it takes
about ten minutes for the default model on a 2-core CPU.
"""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report  # noqa: E402

from keras_attention.translation import evaluation  # noqa: E402
from keras_attention.translation import load_multi30k  # noqa: E402
from keras_attention.translation.translator import load_run  # noqa: E402

SECTION = "Beam settings"
TEST_SPLITS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")


def _floats(text):
    return [float(v) for v in text.split(",") if v]


def _score(translator, data, method, width, penalty, batch_size):
    return evaluation.decode_and_score(
        translator,
        data,
        method=method,
        batch_size=batch_size,
        beam_width=width,
        length_penalty=penalty,
        progress=False,
    )[0]


def settings(widths, penalties):
    """Greedy first, then every (width, penalty); width 1 is greedy already."""
    out = [("greedy", 1, None)]
    for width in widths:
        if width < 2:
            raise ValueError(f"beam widths must be at least 2 (greedy is always run); got {width}")
        for penalty in penalties:
            out.append(("beam", width, penalty))
    return out


def best_setting(rows):
    """The row with the best validation BLEU (lc, tok); the first one on a tie."""
    if not rows:
        raise ValueError("no settings were scored")
    return max(rows, key=lambda r: (r["bleu_lc_tok"], -rows.index(r)))


def _name(method, width, penalty):
    return "greedy" if method == "greedy" else f"beam {width}, penalty {penalty:g}"


def run(args):
    translator, config = load_run(args.run)
    splits = [args.val_split, *args.test_splits.split(",")]
    corpus = load_multi30k(splits, args.data_dir)
    val = corpus[args.val_split]
    val = val.head(args.max_sentences)
    rows = []
    for method, width, penalty in settings(_report.int_list(args.widths), _floats(args.penalties)):
        scores = _score(translator, val, method, width, penalty, args.batch_size)
        row = dict(scores, method=method, width=width, penalty=penalty)
        rows.append(row)
        print(
            f"{args.val_split} {_name(method, width, penalty)}: BLEU lc tok "
            f"{scores['bleu_lc_tok']:.2f}, {scores['seconds']:.0f} s",
            flush=True,
        )
    best = best_setting(rows)
    tests = {}
    for split in args.test_splits.split(","):
        tests[split] = _score(
            translator,
            corpus[split].head(args.max_sentences),
            best["method"],
            best["width"],
            best["penalty"],
            args.batch_size,
        )
    return config, rows, best, tests, len(val.en)


def _run_line(config, run):
    if run is None:
        return f"Run: the `{config['attention']}` model of the translation bar."
    # Runs trained before these options had neither.
    start = config.get("decoder_init", "final")
    decoder = "conditional" if config.get("conditional") else "plain"
    return (
        f"Run: `{run}` (`{config['attention']}`, {decoder} decoder, s_0 from the "
        f"{'mean of the memory' if start == 'mean' else 'final encoder states'}, "
        f"seed {config.get('seed', 0)})."
    )


def build_report(config, rows, best, tests, val_split, sentences, run=None):
    lines = [
        f"{_run_line(config, run)} Beam search is "
        f"scored on {val_split} ({sentences} sentences) for each setting; the best "
        "validation BLEU (lc, tok) picks the setting, and only that one is decoded on "
        "the test splits. Time: decoding the validation split in batches of 64.",
        "",
        f"| decoding | {val_split} BLEU (lc, tok) | BLEU (cased) | chrF | seconds | chosen |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        chosen = "yes" if row is best else ""
        lines.append(
            f"| {_name(row['method'], row['width'], row['penalty'])} | "
            f"{row['bleu_lc_tok']:.2f} | {row['bleu']:.2f} | {row['chrf']:.2f} | "
            f"{row['seconds']:.0f} | {chosen} |"
        )
    name = _name(best["method"], best["width"], best["penalty"])
    lines += [
        "",
        f"The chosen setting ({name}) on the test splits:",
        "",
        "| split | BLEU (lc, tok) | BLEU (cased) | chrF |",
        "|---|---:|---:|---:|",
    ]
    for split, scores in tests.items():
        lines.append(
            f"| {split} | {scores['bleu_lc_tok']:.2f} | {scores['bleu']:.2f} | "
            f"{scores['chrf']:.2f} |"
        )
    lines += [
        "",
        *_report.footer_lines(),
    ]
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="runs/bahdanau", help="a finished training run")
    parser.add_argument("--data-dir", help="folder with the Multi30k .gz files")
    parser.add_argument("--val-split", default="val", help="the split that picks the setting")
    parser.add_argument("--test-splits", default=",".join(TEST_SPLITS))
    parser.add_argument("--widths", default="4,8", help="beam widths, comma-separated")
    parser.add_argument("--penalties", default="0.6,1.0", help="GNMT length penalties")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-sentences", type=int, help="score only the first N (a quick look)")
    parser.add_argument("--no-write", action="store_true", help="do not touch docs/benchmarks.md")
    parser.add_argument(
        "--section",
        default=SECTION,
        help="the section of docs/benchmarks.md to write; another title than the "
        "default keeps the bar model's section and names the run",
    )
    args = parser.parse_args(argv)
    if args.val_split in args.test_splits.split(","):
        parser.error(f"--val-split {args.val_split} is also a test split; choose on another one")
    return args


def main(argv=None):
    args = parse_args(argv)
    config, rows, best, tests, sentences = run(args)
    named = None if args.section == SECTION else args.run
    report = build_report(config, rows, best, tests, args.val_split, sentences, named)
    print(report)
    if not args.no_write:
        print("written to", _report.write_section(args.section, report))
    return config, rows, best, tests


if __name__ == "__main__":
    main()
