"""The translation page in Chromium against Python LiteRT: parity, speed, bytes.

Exports a training run for the browser (`--source-length`, `translate_beam`,
the chosen variants), writes the page beside it (`node web/build.mjs`),
serves it on 127.0.0.1 and drives it in headless Chromium
(`tests/browser/drive.mjs`). For the first `--sentences` English sentences of
test_2016_flickr that fit the static length, in each variant, greedy and beam:

- parity: the share of sentences whose output ids on the page equal Python
  LiteRT's (`ai_edge_litert`, same .tflite file, ids from tensorflow-text),
  through the page's UI and through its API, and the BLEU of both against the
  references (sacreBLEU on `postprocess`-ed text), with their difference;
- speed, like for like: the median milliseconds per sentence of the page's
  API (`Translator.translate` in web/src/translator.js: tokenize, the
  signature call, detokenize; LiteRT.js on WebAssembly, one thread;
  benchmarks/browser/api_loop.mjs) and of Python LiteRT (the signature call
  alone, `num_threads=1`), and their ratio (target: at most 2×), in two
  patterns: back to back, and each call 20 ms after the last (a request at a
  time, when the caches have cooled: Python's call takes a quarter (float32)
  to a half (int8) longer then). The page first translates for 5 s: WebAssembly starts on a
  baseline compiler and recompiles hot functions in the background. The
  sides alternate over `--rounds` shares of the sentences (every R-th one),
  so that a slow spell of a shared machine falls on both; the table gives
  the pooled medians and the range of the rounds' ratios. For reference, the
  page's UI (from the click to the answer shown, in a fresh browser, cold);
- page load: from navigation to the model ready, and to the first
  translation, in a fresh browser profile; the bytes the page downloads.

The page and Python run one after the other on the same machine, never at
the same time. Prints a table; `--write` puts it in docs/benchmarks.md
("In the browser (LiteRT.js)"), and `--screenshot PATH` saves the page with
its heatmap.

    python benchmarks/browser_benchmark.py --run-dir runs/bahdanau --write \\
        --screenshot docs/img/browser_translate.png

About 10 minutes for 1,000 sentences and three variants on a 2-core CPU,
plus the export (a minute per variant for the default preset).
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
# Back to back, and each call after a pause (a request at a time: the caches
# have cooled, on both sides alike).
PAUSES_MS = (0, 20)
API_DRIVER = ROOT / "benchmarks" / "browser" / "api_loop.mjs"


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
    parser.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="page and Python alternate over this many interleaved shares of the sentences",
    )
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

    from keras_attention.translation.postprocess import postprocess

    end = target.end_id
    rows = [ids + [end] for ids in outputs]
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), np.int32)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    texts = [postprocess(t, "fr") for t in target.detokenize(ids).numpy()]
    return sacrebleu.corpus_bleu(texts, [references]).score


def measure(args, url, folder, variant, search, signature, sentences, sources, end_id):
    """One variant and search: parity through the page's UI, and the speed of
    the page's API and of Python LiteRT in each pattern of PAUSES_MS.

    The sides alternate over `args.rounds` shares of the sentences (every
    R-th one): the page's UI, the page's API (each pattern), then Python
    (each pattern), so that a slow spell of a shared machine falls on both.
    """
    n = len(sentences)
    ui, api, lite = {}, {p: {} for p in PAUSES_MS}, {p: {} for p in PAUSES_MS}
    round_ratios = {p: [] for p in PAUSES_MS}
    for start in range(args.rounds):
        chunk = list(range(start, n, args.rounds))
        cases = [
            {"text": sentences[i], "variant": variant, "search": search, "type": False}
            for i in chunk
        ]
        answer = drive(args.chromium, url, cases)
        ui.update(zip(chunk, answer["results"], strict=True))
        runs = api_loop(args.chromium, url, variant, search, [sentences[i] for i in chunk])
        for pause in PAUSES_MS:
            api[pause].update(zip(chunk, runs[str(pause)], strict=True))
            ids, ms = _browser.python_litert(
                folder / f"translator_{variant}.tflite",
                signature,
                "source_ids",
                [sources[i] for i in chunk],
                args.source_length,
                end_id,
                pause_ms=pause,
            )
            lite[pause].update((i, (a, b)) for i, a, b in zip(chunk, ids, ms, strict=True))
            round_ratios[pause].append(
                statistics.median(api[pause][i]["ms"] for i in chunk)
                / statistics.median(lite[pause][i][1] for i in chunk)
            )
    for pause in PAUSES_MS:
        for i in range(n):
            if api[pause][i]["ids"] != lite[pause][i][0]:
                print(
                    f"{variant} {search}, API {pause} ms apart, sentence {i}: page "
                    f"{api[pause][i]['ids']} != Python {lite[pause][i][0]}",
                    flush=True,
                )
    lite_ids = [lite[0][i][0] for i in range(n)]
    page_ids = [ui[i]["ids"] for i in range(n)]
    row = {
        "variant": variant,
        "search": search,
        "n": n,
        "source_equal": sum(ui[i]["source_ids"] == sources[i] for i in range(n)),
        "equal": sum(a == b for a, b in zip(page_ids, lite_ids, strict=True)),
        "api_equal": sum(api[p][i]["ids"] == lite[p][i][0] for p in PAUSES_MS for i in range(n)),
        "page_ids": page_ids,
        "lite_ids": lite_ids,
        "ui_ms": statistics.median(r["ms"] for r in ui.values()),
        "ui_call_ms": statistics.median(r["model_ms"] for r in ui.values()),
    }
    for pause in PAUSES_MS:
        row[f"page_ms_{pause}"] = statistics.median(r["ms"] for r in api[pause].values())
        row[f"python_ms_{pause}"] = statistics.median(ms for _, ms in lite[pause].values())
        row[f"rounds_{pause}"] = round_ratios[pause]
    return row


def api_loop(chromium, url, variant, search, texts):
    """The page's API (`Translator.translate`) on `texts` in each pattern of
    PAUSES_MS, in one fresh browser (benchmarks/browser/api_loop.mjs)."""
    request = {
        "url": url,
        "chromium": chromium,
        "variant": variant,
        "search": search,
        "texts": texts,
        "pauses_ms": list(PAUSES_MS),
    }
    with tempfile.TemporaryDirectory() as tmp:
        answer = _browser.run_driver(API_DRIVER, request, tmp, timeout=1800)
    if answer["page_errors"]:
        raise RuntimeError(f"the page failed: {answer['page_errors']}")
    return answer["runs"]


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
                rows.append(
                    measure(
                        args,
                        url,
                        folder,
                        variant,
                        search,
                        signature,
                        sentences,
                        sources,
                        target.end_id,
                    )
                )
                row = rows[-1]
                row["bleu_page"] = bleu(target, row.pop("page_ids"), references)
                row["bleu_python"] = bleu(target, row.pop("lite_ids"), references)
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
        f"exported in {export_seconds:.0f} s.",
        "",
        "Parity: the page's output ids through its UI, and through its API in every "
        "pattern below, against Python LiteRT's; BLEU of the page's UI and of Python.",
        "",
        "| variant | search | source ids equal | output ids equal (UI) | "
        "output ids equal (API) | BLEU page | BLEU Python | Δ BLEU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['search']} | {r['source_equal']}/{r['n']} | "
            f"{r['equal']}/{r['n']} | {r['api_equal']}/{len(PAUSES_MS) * r['n']} | "
            f"{r['bleu_page']:.2f} | {r['bleu_python']:.2f} | "
            f"{r['bleu_page'] - r['bleu_python']:+.2f} |"
        )
    apart = PAUSES_MS[1]
    lines += [
        "",
        "Speed, median ms per sentence. Like for like: the page's API "
        "(`Translator.translate`: tokenize, signature call, detokenize) and Python "
        "LiteRT (the signature call alone), both back to back and both with each call "
        f"{apart} ms after the last (a request at a time: the caches have cooled). "
        f"Measured in {args.rounds} rounds (each side in turn on every "
        f"{args.rounds}th sentence); the range is the rounds' ratios. The target "
        "(≤ 2×) is judged on page ms over Python ms in each pattern. The page's UI "
        "(click to answer shown, its call alone) for reference.",
        "",
        "| variant | search | back to back: page | Python | page / Python (rounds) | "
        f"{apart} ms apart: page | Python | page / Python (rounds) | "
        "UI: page | UI: call alone |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = []
        for pause in PAUSES_MS:
            page_ms, python_ms = r[f"page_ms_{pause}"], r[f"python_ms_{pause}"]
            ratio = page_ms / python_ms
            rounds = r[f"rounds_{pause}"]
            cells.append(
                f"{page_ms:.2f} | {python_ms:.2f} | "
                f"{ratio:.2f}× {'✓' if ratio <= SPEED_TARGET else '✗'} "
                f"({min(rounds):.2f}–{max(rounds):.2f}) |"
            )
        lines.append(
            f"| {r['variant']} | {r['search']} | {cells[0]} {cells[1]} "
            f"{r['ui_ms']:.1f} | {r['ui_call_ms']:.1f} |"
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
