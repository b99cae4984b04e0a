"""Writes a benchmark's table into docs/benchmarks.md, one section per benchmark.

A section runs from its `## Title` line to the next `## ` line. Writing a
section replaces the one of the same title, or appends it, and leaves every
other section as it was, so benchmarks can be rerun one at a time.
"""

import argparse
import importlib
import importlib.util
import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime
from datetime import timezone

DOCS = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "benchmarks.md")
G2P_EXAMPLE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples", "g2p_cmudict.py"
)
HEADER = (
    "# Benchmarks\n\n"
    "Measured by the scripts under `benchmarks/`, which write their own section "
    "here. Speeds depend on the machine and on whatever else runs on it: compare "
    "the ratios within one table, measured in the same run.\n"
)


def command_line(argv=None):
    """The command that ran this process, as a user would type it."""
    argv = sys.argv if argv is None else argv
    script = os.path.relpath(argv[0]) if argv else ""
    return " ".join(shlex.quote(a) for a in ["python", script, *argv[1:]])


def machine_description():
    """E.g. "2-core CPU, no GPU (x86_64, Linux)": cores and the GPUs seen.

    GPUs are counted by TensorFlow where it is installed, else by `nvidia-smi`
    (a machine with JAX or PyTorch alone), and named when `nvidia-smi` names them.
    """
    cores = os.cpu_count()
    names = _nvidia_gpu_names()
    try:
        import tensorflow as tf

        count = len(tf.config.list_logical_devices("GPU"))
    except ImportError:
        count = len(names)
    if count and names:
        accelerator = f"{count} GPU ({names[0]})"
    else:
        accelerator = f"{count} GPU" if count else "no GPU"
    return f"{cores}-core CPU, {accelerator} ({platform.machine()}, {platform.system()})"


def _nvidia_gpu_names():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def versions():
    """Python, Keras and whichever of TensorFlow, JAX and PyTorch are installed."""
    import keras

    found = [f"Python {platform.python_version()}"]
    for module, name in (("tensorflow", "TensorFlow"), ("jax", "JAX"), ("torch", "PyTorch")):
        if importlib.util.find_spec(module) is None:
            continue
        found.append(f"{name} {importlib.import_module(module).__version__}")
    found.append(f"Keras {keras.__version__}")
    return ", ".join(found)


def today():
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def git_revision():
    """The checkout's short revision; `BENCHMARK_REVISION` names it where the
    code runs from a copy without git (a machine lent for a benchmark)."""
    if os.environ.get("BENCHMARK_REVISION"):
        return os.environ["BENCHMARK_REVISION"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def replace_section(text, title, body):
    """`text` with the section `## title` replaced by `body` (or appended)."""
    heading = f"## {title}"
    section = f"{heading}\n\n{body.strip()}\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        text = text.rstrip("\n")
        return (text + "\n\n" if text else "") + section
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
        len(lines),
    )
    after = "".join(lines[end:])
    before = "".join(lines[:start])
    return before + section + ("\n" + after if after else "")


def load_g2p_example():
    """`examples/g2p_cmudict.py` as a module (a script a user copies, not a package module)."""
    spec = importlib.util.spec_from_file_location("g2p_cmudict", G2P_EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def int_list(text):
    """`"1,2,4"` → `[1, 2, 4]` (a comma-separated command-line option)."""
    return [int(v) for v in text.split(",") if v]


def positive_int(text):
    """A command-line count: 1 or more."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {text}")
    return value


def footer_lines():
    """The command, machine and date lines that end a benchmark's report."""
    return [
        f"Command: `{command_line()}`  ",
        f"Machine: {machine_description()}; {versions()}  ",
        f"Date: {today()}, revision {git_revision()}",
    ]


def write_section(title, body, path=DOCS):
    """Replaces or appends the section `## title` of `path` (created if absent)."""
    path = os.path.normpath(path)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    else:
        text = HEADER
    with open(path, "w", encoding="utf-8") as f:
        f.write(replace_section(text, title, body))
    return path
