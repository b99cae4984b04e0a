"""Where the page's time goes: one operator, LiteRT.js against Python LiteRT.

The translation page is slower than Python LiteRT by more than the G2P page
(`docs/benchmarks.md`, "In the browser"). The two models differ most in the
output layer each decoder step runs: a (1, 256) × (256, V) product over a
target vocabulary of V = 8,000 subwords for the translator, about 40 phones
for G2P. This isolates that product: a builtin-only model that runs it
`--steps` times in a `WHILE` (as the decoder loop does), for each V and each
weight variant (float32, float16, int8 dynamic range), timed on one thread in
headless Chromium (LiteRT.js on WebAssembly, the page's runtime) and in Python
LiteRT, one after the other. The ratio says how much of the page's gap the
runtime's matrix product alone explains.

    python benchmarks/browser_kernel_benchmark.py --write
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, str(ROOT / "tests"))

import _browser  # noqa: E402
import _report  # noqa: E402

SECTION = "In the browser: one matrix product per step"
DRIVER = ROOT / "benchmarks" / "browser" / "kernel.mjs"
UNITS = 256


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vocabularies", default="40,8000", help="comma-separated V")
    # Below V = 1000, 30 times as many steps: a call must last well above the
    # browser's 0.1 ms timer resolution.
    parser.add_argument("--steps", type=int, default=30, help="products per call, V >= 1000")
    parser.add_argument("--repeats", type=int, default=200, help="timed calls per model")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    return parser.parse_args(argv)


def product_model(vocabulary, steps, quantization, seed=0):
    """A builtin-only .tflite: `steps` times x ← tanh(x + mean(x W) / 10), W (256, V)."""
    rng = np.random.default_rng(seed)
    weights = tf.constant(rng.normal(size=(UNITS, vocabulary)).astype("float32") / 16)

    @tf.function(input_signature=[tf.TensorSpec([1, UNITS], tf.float32, name="x")])
    def serving_default(x):
        def body(i, x):
            logits = tf.matmul(x, weights)  # (1, V), a FULLY_CONNECTED
            return i + 1, tf.tanh(x + tf.reduce_mean(logits, axis=1, keepdims=True) / 10)

        _, x = tf.while_loop(lambda i, x: i < steps, body, (tf.constant(0), x))
        return {"y": x}

    module = tf.Module()
    module.serving_default = serving_default
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [serving_default.get_concrete_function()], module
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantization:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "float16":
        converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def python_ms(path, x, repeats):
    runner = Interpreter(model_path=str(path), num_threads=1).get_signature_runner()
    expected = runner(x=x)["y"]
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        runner(x=x)
        times.append((time.perf_counter() - started) * 1e3)
    return times, expected


def kernel_page(folder):
    """Builds the page's runtime (LiteRT.js) into `folder`, with no model of its own."""
    # build.mjs copies LiteRT.js beside a manifest; this one names no model.
    (folder / "g2p.json").write_text(json.dumps({"source_length": 1, "models": {}}))
    _browser.build_page(folder)


def browser_ms(folder, models, x, repeats, chromium, tmp, **request):
    """Page milliseconds per call of each model (kernel.mjs); `request` adds its
    optional keys (signatures, input_name, dtype)."""
    page = folder / "kernel.html"
    page.write_text(
        '<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        '<script type="importmap">{"imports": {"@litertjs/core": "./vendor/litertjs-core.js",'
        ' "@litertjs/wasm-utils": "./vendor/litertjs-wasm-utils.js"}}</script>'
        "</head><body>kernel</body></html>\n"
    )
    with _browser.static_server(folder) as (index_url, _):
        request = {
            "url": index_url.replace("index.html", "kernel.html"),
            "chromium": chromium,
            "models": models,
            "input": x.ravel().tolist(),
            "shape": list(x.shape),
            "repeats": repeats,
            **request,
        }
        answer = _browser.run_driver(DRIVER, request, tmp, timeout=1800)
    if answer["page_errors"]:
        raise RuntimeError(f"the page failed: {answer['page_errors']}")
    return answer["ms"]


def main(argv=None):
    args = parse_args(argv)
    vocabularies = [int(v) for v in args.vocabularies.split(",")]
    variants = {"float32": None, "float16": "float16", "int8": "int8"}
    x = (np.random.default_rng(1).normal(size=(1, UNITS)) / 4).astype("float32")
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = tmp / "page"
        folder.mkdir()
        kernel_page(folder)
        models, python = [], {}
        steps = {v: args.steps if v >= 1000 else 30 * args.steps for v in vocabularies}
        for v in vocabularies:
            for variant, quantization in variants.items():
                name = f"product_{v}_{variant}.tflite"
                (folder / name).write_bytes(product_model(v, steps[v], quantization))
                python[name] = python_ms(folder / name, x, args.repeats)[0]
                models.append(name)
        browser = browser_ms(folder, models, x, args.repeats, args.chromium, tmp)
        for name in models:
            _, v, variant = Path(name).stem.split("_")
            page, py = statistics.median(browser[name]), statistics.median(python[name])
            rows.append((int(v), variant, steps[int(v)], page, py, page / py))
    lines = [
        f"A builtin-only model that runs x ← tanh(x + mean(x W) / 10), W ({UNITS}, V), "
        "N times in a `WHILE` per call (seven operators a step: the product, the mean, "
        "the scaling, the sum, tanh and the loop's counter and test); median µs per step "
        f"over {args.repeats} calls after a warm-up (the page calls for 3 s first: its "
        "WebAssembly is recompiled by the optimizing compiler as it runs; Python once), "
        "on one thread: LiteRT.js 2.5.3 "
        "(`wasm`, headless Chromium) and Python LiteRT (`ai_edge_litert`, `num_threads=1`).",
        "",
        "| V | weights | steps N | page µs / step | Python µs / step | page / Python |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for v, variant, n, page, py, ratio in rows:
        lines.append(
            f"| {v:,} | {variant} | {n} | {1e3 * page / n:.2f} | {1e3 * py / n:.2f} "
            f"| {ratio:.2f}× |"
        )
    lines += ["", f"Load average {load:.1f} at the start (2 cores).  ", *_report.footer_lines()]
    body = "\n".join(lines)
    print(body)
    if args.write:
        print(f"\nWrote {_report.write_section(SECTION, body)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
