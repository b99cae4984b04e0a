"""What the browser tests share: the requirements, a static server, the driver.

The pages of `web/` run in headless Chromium (Debian's `chromium`, or the
browser named by `KERAS_ATTENTION_CHROMIUM`) driven by puppeteer-core
(`tests/browser/drive.mjs`), against a static server on 127.0.0.1. Without a
browser, Node.js or `npm ci` the tests skip with the reason; under `CI=true`
that is a failure.
"""

import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import unquote
from urllib.parse import urlsplit

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "browser" / "drive.mjs"
BUILD = ROOT / "web" / "build.mjs"


def requirements():
    """What is missing to run a browser here, as one sentence, or None."""
    missing = []
    chromium = os.environ.get("KERAS_ATTENTION_CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists():
        missing.append(f"no browser at {chromium} (apt-get install -y chromium)")
    if shutil.which("node") is None:
        missing.append("no `node` on the PATH")
    for package in ("puppeteer-core", "@litertjs/core"):
        if not (ROOT / "node_modules" / package / "package.json").exists():
            missing.append(f"node_modules/{package} is missing (npm ci)")
    return "; ".join(missing) or None


def chromium_or_skip():
    """The browser's path; skips with the reason when one cannot run (fails under CI)."""
    reason = requirements()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the browser tests cannot run: {reason}")
        pytest.skip(f"browser tests need Chromium, Node.js and npm ci: {reason}")
    return os.environ.get("KERAS_ATTENTION_CHROMIUM", "/usr/bin/chromium")


def build_page(folder):
    """`node web/build.mjs folder`; asserts that it succeeded."""
    done = subprocess.run(["node", str(BUILD), str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def static_server(folder):
    """Serves `folder` on 127.0.0.1; yields (index URL, [(path, status)])."""
    served = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format, *args):
            served.append((self.path, args[1] if len(args) > 1 else None))

    handler = functools.partial(Handler, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/index.html", served
    finally:
        httpd.shutdown()
        httpd.server_close()


def run_driver(script, request, tmp_path, timeout=None):
    """Runs a Node browser driver (`node SCRIPT REQUEST.json`) on `request`
    with a fresh profile in `tmp_path`; returns its JSON answer, or raises
    with the end of its stderr."""
    request = {**request, "user_data_dir": str(Path(tmp_path) / "profile")}
    path = Path(tmp_path) / "request.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    done = subprocess.run(
        ["node", str(script), str(path)], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"{Path(script).name} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout)


def drive(chromium, url, cases, tmp_path, screenshot=None, button=None, timeout_ms=120_000):
    """Runs `cases` on the page in one browser session; returns the driver's answer.

    `tmp_path` receives the request and the browser profile; `timeout_ms`
    bounds the page's load and each case.
    """
    request = {
        "url": url,
        "chromium": chromium,
        "cases": cases,
        "screenshot": screenshot,
        "timeout_ms": timeout_ms,
    }
    if button:
        request["button"] = button
    answer = run_driver(DRIVER, request, tmp_path)
    assert answer["state"] == "ready", answer.get("load_error")
    return answer


def console_errors(answer):
    """The page's console errors, without LiteRT.js' INFO and WARNING log lines."""
    return [e for e in answer["console_errors"] if not e.startswith(("INFO:", "WARNING:"))]


def assert_fetched_only_its_folder(answer, url, served, folder):
    """Every request went to the page's server, for a file of its folder, without error."""
    origin = urlsplit(url).netloc
    assert answer["requests"]
    assert all(urlsplit(u).netloc == origin for u in answer["requests"]), answer["requests"]
    for path, status in served:
        assert status in ("200", "304"), (path, status)  # 304: cached
        assert (Path(folder) / unquote(urlsplit(path).path).lstrip("/")).is_file()
    assert answer["failed_requests"] == []
    assert answer["page_errors"] == []
    assert console_errors(answer) == []


def python_litert(path, signature, input_name, sources, source_length, end_id, pause_ms=0):
    """Python LiteRT on a page's .tflite file, one thread: each source padded
    with 0 to `source_length` as the page pads it, after a pause of `pause_ms`
    (0: back to back). Returns the output ids before END of each source, and
    the milliseconds of each call alone."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(path), num_threads=1).get_signature_runner(signature)
    outputs, times = [], []
    for ids in sources:
        padded = np.zeros((1, source_length), np.int32)
        padded[0, : len(ids)] = ids
        if pause_ms:
            time.sleep(pause_ms / 1000)
        started = time.perf_counter()
        out = runner(**{input_name: padded})
        times.append((time.perf_counter() - started) * 1000)
        tokens = out["tokens"][0, : int(out["lengths"][0])].tolist()
        outputs.append(tokens[:-1] if tokens and tokens[-1] == end_id else tokens)
    return outputs, times
