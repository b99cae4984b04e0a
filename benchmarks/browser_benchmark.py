"""The translation page in Chromium against Python LiteRT: parity, speed, bytes.

Exports a training run for the browser (`--source-length`, `translate_beam`,
the chosen variants), writes the page beside it (`node web/build.mjs`),
serves it on 127.0.0.1 and drives it in headless Chromium
(`tests/browser/drive.mjs`). For the first `--sentences` English sentences of
test_2016_flickr that fit the static length, in each variant, greedy and beam:

- parity: the share of sentences whose output ids on the page equal Python
  LiteRT's (`ai_edge_litert`, same .tflite file, ids from tensorflow-text),
  and the BLEU of both against the references (sacreBLEU on
  `postprocess`-ed text), with their difference;
- speed: the median milliseconds per sentence on the page (tokenize, the
  signature call, detokenize; LiteRT.js on WebAssembly, one thread) and in
  Python LiteRT (the signature call alone, `num_threads=1`), and their ratio
  (target: at most 2×);
- page load: from navigation to the model ready, and to the first
  translation, in a fresh browser profile; the bytes the page downloads.

The page and Python run one after the other on the same machine, never at
the same time. Prints a table; `--write` puts it in docs/benchmarks.md
("In the browser (LiteRT.js)"), and `--screenshot PATH` saves the page with
its heatmap.

    python benchmarks/browser_benchmark.py --run-dir runs/bahdanau --write \\
        --screenshot docs/img/browser_translate.png

About 3 minutes for 200 sentences and two variants on a 2-core CPU, plus the
export (a minute per variant for the default preset).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, str(ROOT / "tests"))

import _browser  # noqa: E402
import _report  # noqa: E402

SECTION = "In the browser (LiteRT.js)"
SIGNATURES = {"greedy": "translate", "beam": "translate_beam"}
SPEED_TARGET = 2.0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run-dir", required=True, help="a finished training run")
    parser.add_argument(
        "--export-dir", help="where to export (default: a temporary folder, removed after)"
    )
    parser.add_argument("--data-dir", help="the Multi30k folder (default: the tests' one)")
    parser.add_argument("--sentences", type=int, default=200, help="test_2016_flickr sentences")
    parser.add_argument("--variants", default="float32,int8", help="comma-separated variants")
    parser.add_argument("--source-length", type=int, default=64, help="the static length")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--screenshot", help="save the page with its heatmap as this PNG")
    parser.add_argument(
        "--screenshot-text",
        default="A man in a blue shirt is riding a bike down the street.",
        help="the sentence of the screenshot",
    )
    parser.add_argument("--describe", default="", help="what the run is, for the report")
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    return parser.parse_args(argv)


def drive(chromium, url, cases, screenshot=None):
    """The page's answers to `cases` in a fresh browser profile."""
    with tempfile.TemporaryDirectory() as tmp:
        return _browser.drive(chromium, url, cases, tmp, screenshot, timeout_ms=600_000)


def bleu(target, outputs, references):
    import sacrebleu

    from keras_attention.translation.tokenizer import postprocess

    end = target.end_id
    rows = [ids + [end] for ids in outputs]
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), np.int32)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    texts = [postprocess(t, "fr") for t in target.detokenize(ids).numpy()]
    return sacrebleu.corpus_bleu(texts, [references]).score


def main(argv=None):
    args = parse_args(argv)
    from keras_attention.translation import load_multi30k
    from keras_attention.translation.export import export_run
    from keras_attention.translation.translator import load_run

    if shutil.which("node") is None or not Path(args.chromium).exists():
        raise SystemExit("needs `node` and Chromium (apt-get install -y chromium; npm ci)")
    variants = tuple(v for v in args.variants.split(",") if v)
    load = os.getloadavg()[0]
    translator, config = load_run(args.run_dir)
    source, target = translator.source_tokenizer, translator.target_tokenizer
    data_dir = args.data_dir
    if data_dir is None:
        from _data_paths import multi30k_dir

        data_dir = multi30k_dir()
    test = load_multi30k("test_2016_flickr", data_dir)["test_2016_flickr"]
    ids = source.tokenize(tf.constant(test.en[: args.sentences])).to_list()
    kept = [i for i, row in enumerate(ids) if len(row) <= args.source_length]
    sentences = [test.en[i] for i in kept]
    references = [test.fr[i] for i in kept]
    sources = [ids[i] for i in kept]

    temporary = None
    if args.export_dir is None:
        temporary = tempfile.TemporaryDirectory()
        out = Path(temporary.name)
    else:
        out = Path(args.export_dir)
    started = time.perf_counter()
    export_run(
        args.run_dir,
        out,
        variants=variants,
        saved_model=False,
        source_length=args.source_length,
        tflite_beam=True,
    )
    export_seconds = time.perf_counter() - started
    folder = out / "tflite"
    subprocess.run(["node", str(ROOT / "web" / "build.mjs"), str(folder)], check=True)
    rows, loads = [], []
    with _browser.static_server(folder) as (url, sent):
        for variant in variants:
            # A fresh profile for each variant: nothing cached.
            sent.clear()
            first = drive(
                args.chromium,
                url,
                [{"text": sentences[0], "variant": variant, "search": "greedy", "type": False}],
            )
            fetched = {p.split("?")[0] for p, _ in sent}
            size = sum((folder / p.lstrip("/")).stat().st_size for p in fetched)
            loads.append((variant, first["load_ms"], first["first_answer_ms"], size))
            for search, signature in SIGNATURES.items():
                cases = [
                    {"text": s, "variant": variant, "search": search, "type": False}
                    for s in sentences
                ]
                answer = drive(args.chromium, url, cases)
                page_ids = [r["ids"] for r in answer["results"]]
                page_ms = [r["ms"] for r in answer["results"]]
                call_ms = [r["model_ms"] for r in answer["results"]]
                source_equal = sum(
                    r["source_ids"] == s for r, s in zip(answer["results"], sources, strict=True)
                )
                lite_ids, lite_ms = _browser.python_litert(
                    folder / f"translator_{variant}.tflite",
                    signature,
                    "source_ids",
                    sources,
                    args.source_length,
                    target.end_id,
                )
                equal = sum(a == b for a, b in zip(page_ids, lite_ids, strict=True))
                rows.append(
                    {
                        "variant": variant,
                        "search": search,
                        "n": len(sentences),
                        "source_equal": source_equal,
                        "equal": equal,
                        "bleu_page": bleu(target, page_ids, references),
                        "bleu_python": bleu(target, lite_ids, references),
                        "page_ms": statistics.median(page_ms),
                        "call_ms": statistics.median(call_ms),
                        "python_ms": statistics.median(lite_ms),
                    }
                )
                print(rows[-1], flush=True)
        if args.screenshot:
            drive(
                args.chromium,
                url,
                [{"text": args.screenshot_text, "variant": variants[-1], "search": "beam"}],
                screenshot={"path": str(Path(args.screenshot).resolve()), "case": 0},
            )

    sizes = {v: (folder / f"translator_{v}.tflite").stat().st_size for v in variants}
    lines = [
        f"The page (`web/`, LiteRT.js {_litert_version()} on WebAssembly, headless "
        f"Chromium) against Python LiteRT (`ai_edge_litert`, one thread) on the same "
        f".tflite files: the first {args.sentences} English sentences of "
        f"test_2016_flickr, of which {len(sentences)} fit the static length "
        f"{args.source_length}. Model: {args.describe or config.get('attention')}; "
        f"exported in {export_seconds:.0f} s. Page ms: tokenize, signature call, "
        "detokenize; page call ms: the signature call alone, as Python ms is; medians. "
        "The target (≤ 2×) is judged on page ms over Python ms.",
        "",
        "| variant | search | source ids equal | output ids equal | BLEU page | "
        "BLEU Python | Δ BLEU | page ms | page call ms | Python ms | page / Python "
        "| page call / Python |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["page_ms"] / r["python_ms"]
        lines.append(
            f"| {r['variant']} | {r['search']} | {r['source_equal']}/{r['n']} | "
            f"{r['equal']}/{r['n']} | {r['bleu_page']:.2f} | {r['bleu_python']:.2f} | "
            f"{r['bleu_page'] - r['bleu_python']:+.2f} | {r['page_ms']:.1f} | "
            f"{r['call_ms']:.1f} | {r['python_ms']:.1f} | "
            f"{ratio:.2f}× {'✓' if ratio <= SPEED_TARGET else '✗'} | "
            f"{r['call_ms'] / r['python_ms']:.2f}× |"
        )
    lines += [
        "",
        "| variant | model file | bytes downloaded | page load to model ready | "
        "to first translation |",
        "|---|---|---|---|---|",
    ]
    for variant, load_ms, first_ms, size in loads:
        lines.append(
            f"| {variant} | {sizes[variant] / 1e6:.2f} MB | {size / 1e6:.2f} MB | "
            f"{load_ms / 1000:.2f} s | {first_ms / 1000:.2f} s |"
        )
    if config.get("preset") != "default" or len(sentences) < 1000:
        lines += [
            "",
            "Not measured here: the parity target on the trained translator of the "
            "default preset over all 1,000 test_2016_flickr sentences (float32 ids equal, "
            "float16 / int8 BLEU within 0.2 of Python). Run this script on such a run "
            "(`--run-dir runs/bahdanau --sentences 1000`; training it takes about an "
            "hour on a 2-core CPU).",
        ]
    lines += [
        "",
        f"Load average {load:.1f} at the start ({os.cpu_count()} cores): other jobs "
        "slow both sides, compare the ratio.  ",
        *_report.footer_lines(),
    ]
    body = "\n".join(lines)
    print(body)
    if args.write:
        print(f"\nWrote {_report.write_section(SECTION, body)}")
    if temporary is not None:
        temporary.cleanup()


def _litert_version():
    package = ROOT / "node_modules" / "@litertjs" / "core" / "package.json"
    return json.loads(package.read_text())["version"]


if __name__ == "__main__":
    main()
