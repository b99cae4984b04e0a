"""LiteRT.js in the browser: the first call at a source longer than any before it.

The page's count of `benchmarks/lite_first_growth.py`: the same small
attention models, exported as the page's are (`export_tflite(...,
source_length=6)`, sources padded with id 0), run in headless Chromium by
LiteRT.js (`@litertjs/core`, the `wasm` accelerator). Each growth call: a
fresh compiled model (the previous one deleted), called at a source of 4
tokens, then at 6 (the growth call), whose tokens are compared with those
of Python LiteRT without delegate on a fresh interpreter.

    python benchmarks/lite_first_growth_browser.py --write

Needs Chromium, Node.js and `npm ci` (as tests/test_browser.py). Prints a
table; `--write` records it in docs/benchmarks.md with the command, the
machine and the date.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, str(ROOT / "tests"))

import _browser  # noqa: E402
import _report  # noqa: E402
import lite_first_growth as growth  # noqa: E402

TITLE = "In the browser: the first call at a new largest source length"
DRIVER = ROOT / "benchmarks" / "browser" / "growth.mjs"
PAGE = (
    '<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">'
    '<script type="importmap">{"imports": {"@litertjs/core": "./vendor/litertjs-core.js",'
    ' "@litertjs/wasm-utils": "./vendor/litertjs-wasm-utils.js"}}</script>'
    "</head><body>growth</body></html>\n"
)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=_report.positive_int, default=4)
    parser.add_argument(
        "--calls", type=_report.positive_int, default=500, help="growth calls per model"
    )
    parser.add_argument(
        "--reproducer-calls",
        type=_report.positive_int,
        default=500,
        help="growth calls per model of the reproducer",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="record in docs/benchmarks.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    chromium = _browser.chromium_or_skip()
    kinds = ("growing state (reproducer)", "static export")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "site"
        folder.mkdir()
        # build.mjs copies LiteRT.js beside a manifest; this one names no model.
        (folder / "g2p.json").write_text(json.dumps({"source_length": 1, "models": {}}))
        _browser.build_page(folder)
        (folder / "growth.html").write_text(PAGE)
        paths = export_models(args.models, folder)
        models = []
        for kind in kinds:
            for m, path in enumerate(paths[kind]):
                sources = growth.sources(args.seed + 100 + m, growth.MAX_LENGTH)
                reference = growth.reference_outputs(path, sources)
                short, long = growth.LENGTHS
                models.append(
                    {
                        "url": Path(path).name,
                        "kind": kind,
                        "signature": "generate" if kind == "static export" else "serving_default",
                        "short": sources[short].ravel().tolist(),
                        "long": sources[long].ravel().tolist(),
                        "expected": reference[long]["tokens"].ravel().tolist(),
                        "calls": args.calls if kind == "static export" else args.reproducer_calls,
                    }
                )
        with _browser.static_server(folder) as (index_url, _):
            request = {
                "url": index_url.replace("index.html", "growth.html"),
                "chromium": chromium,
                "models": models,
                "shape": [1, growth.MAX_LENGTH],
            }
            answer = _browser.run_driver(DRIVER, request, tmp, timeout=3600)
    if answer["page_errors"]:
        raise RuntimeError(f"the page failed: {answer['page_errors']}")
    counts = {kind: [0, 0] for kind in kinds}
    for model in models:
        counts[model["kind"]][0] += answer["wrong"][model["url"]]
        counts[model["kind"]][1] += answer["calls"][model["url"]]
    lines = [
        f'{args.models} small trained attention models (as in "Python LiteRT: the first call '
        "at a new largest source length\"), exported with `source_length=6` as the page's "
        "are, in headless Chromium with LiteRT.js (`wasm`). Each growth call: a fresh "
        f"compiled model (the previous one deleted) called at {growth.LENGTHS[0]} tokens, then "
        f"at {growth.LENGTHS[1]}; wrong when its tokens differ from Python LiteRT's without "
        "delegate. The reproducer is the static export of earlier releases (the search over "
        "the state of the real positions).",
        "",
        "| model | wrong of growth calls |",
        "|---|---:|",
        *[f"| {kind} | {wrong:,} of {calls:,} |" for kind, (wrong, calls) in counts.items()],
        "",
        "Wrong tokens seen:" if answer["examples"] else "No call went wrong.",
        *[f"- {e}" for e in answer["examples"]],
        "",
        f"{time.perf_counter() - started:.0f} s in all.  ",
        *_report.footer_lines(),
    ]
    body = "\n".join(lines)
    print("\n" + body)
    if args.write:
        _report.write_section(TITLE, body)
    return counts


def export_models(count, folder):
    """{kind: [.tflite paths]}: the page's export (`source_length=6`) and the
    static export of earlier releases (the reproducer), of each model."""
    from keras_attention import Seq2SeqGenerator
    from keras_attention.export import export_tflite

    paths = {"growing state (reproducer)": [], "static export": []}
    for seed in range(count):
        model = growth.build_model(seed)
        generator = Seq2SeqGenerator.from_model(model, 1, growth.VOCAB - 1)
        path = folder / f"static_{seed}.tflite"
        export_tflite(generator, path, source_length=growth.MAX_LENGTH)
        paths["static export"].append(str(path))
        path = folder / f"reproducer_{seed}.tflite"
        growth.write_reproducer(generator, str(path), source_length=growth.MAX_LENGTH)
        paths["growing state (reproducer)"].append(str(path))
    return paths


if __name__ == "__main__":
    main()
