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
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="record in docs/benchmarks.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    chromium = _browser.chromium_or_skip()
    kind = "static export"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "site"
        folder.mkdir()
        # build.mjs copies LiteRT.js beside a manifest; this one names no model.
        (folder / "g2p.json").write_text(json.dumps({"source_length": 1, "models": {}}))
        _browser.build_page(folder)
        (folder / "growth.html").write_text(PAGE)
        paths = growth.export_models(args.models, str(folder), [kind])[kind]
        models = []
        for m, path in enumerate(paths):
            sources = growth.sources(args.seed + 100 + m, growth.MAX_LENGTH)
            reference = growth.reference_outputs(path, sources)
            short, long = growth.LENGTHS
            models.append(
                {
                    "url": Path(path).name,
                    "short": sources[short].ravel().tolist(),
                    "long": sources[long].ravel().tolist(),
                    "expected": reference[long]["tokens"].ravel().tolist(),
                }
            )
        with _browser.static_server(folder) as (index_url, _):
            request = {
                "url": index_url.replace("index.html", "growth.html"),
                "chromium": chromium,
                "models": models,
                "shape": [1, growth.MAX_LENGTH],
                "calls": args.calls,
            }
            answer = _browser.run_driver(DRIVER, request, tmp, timeout=3600)
    if answer["page_errors"]:
        raise RuntimeError(f"the page failed: {answer['page_errors']}")
    wrong, calls = sum(answer["wrong"].values()), sum(answer["calls"].values())
    lines = [
        f'{args.models} small trained attention models (as in "Python LiteRT: the first call '
        "at a new largest source length\"), exported with `source_length=6` as the page's "
        "are, in headless Chromium with LiteRT.js (`wasm`). Each growth call: a fresh "
        f"compiled model (the previous one deleted) called at {growth.LENGTHS[0]} tokens, then "
        f"at {growth.LENGTHS[1]}; wrong when its tokens differ from Python LiteRT's without "
        "delegate.",
        "",
        "| model | wrong of growth calls |",
        "|---|---:|",
        f"| {kind} | {wrong:,} of {calls:,} |",
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
    return wrong, calls


if __name__ == "__main__":
    main()
