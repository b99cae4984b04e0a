"""TensorFlow's native start-up log, kept off the package's own commands' output.

TensorFlow 2.21 writes 8 to 20 lines to the process's standard error from C++
(`oneDNN custom operations are on`, `Could not find cuda drivers`,
`cpu_feature_guard`, `failed call to cuInit`, each twice, and a note at error
level when a kernel falls back to Eigen), written before
absl's logging starts, so `TF_CPP_MIN_LOG_LEVEL=3` does not remove them. On a
phone-bound command line they bury the package's own lines.

`filter_native_log()` puts a filter on the file descriptor of standard error:
a pipe, read by a thread that copies every line to the real standard error
except the lines of `NOISE` (C++ INFO and WARNING lines, absl's preamble, the
CPU-instruction notice, the CUDA probe's error on a machine without a GPU).
Errors, Python warnings and tracebacks pass. It is installed at import of
`keras_attention`, before TensorFlow is imported, and only in the package's
own commands (`should_filter`): `python -m keras_attention.translation`, the
console script `keras-attention-translate` and `python -m
keras_attention.export` without `--verbose`, and scripts that set
`KERAS_ATTENTION_QUIET_NATIVE_LOG=1` before importing the package (the
examples). The variable set to 0 leaves standard error untouched whatever
the command; a user's own process is never touched. Standard library only.
"""

import atexit
import os
import re
import sys
import threading
from pathlib import Path

from keras_attention.backend.check import CONSOLE_SCRIPTS

ENV_VAR = "KERAS_ATTENTION_QUIET_NATIVE_LOG"
# The package's commands, as `python -m` runs them (its console scripts are
# `check.CONSOLE_SCRIPTS`).
COMMAND_MODULES = ("keras_attention.translation", "keras_attention.export")
# Lines of TensorFlow's (and XLA's) C++ log that say nothing to a user of
# the command. An absl line: severity and date, time, thread, file:line].
NOISE = (
    re.compile(r"^[IW]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] "),
    re.compile(r"^E\d{4} [\d:.]+\s+\d+ cuda_\w+\.cc:\d+\] failed call to cuInit"),
    # Written at error level, but a note: a kernel falls back to Eigen.
    re.compile(r"^E\d{4} [\d:.]+\s+\d+ util\.cc:\d+\] oneDNN supports \w+ only on"),
    re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called"),
    # TensorFlow 2.16 and 2.17 date their lines, and say it at error level
    # when two CUDA plugins register the same factory.
    re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IW] \S+:\d+\] "),
    re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+: E \S+:\d+\] Unable to register cu\w+ factory"),
    re.compile(r"^To enable the following instructions: .* rebuild TensorFlow"),
)


def is_noise(line):
    """Whether `line` (text, without its line feed) is one of `NOISE`."""
    return any(pattern.search(line) for pattern in NOISE)


def should_filter(environ=None, orig_argv=None):
    """Whether this process is one of the package's commands, run without
    `--verbose` (read from the command line as Python received it)."""
    environ = os.environ if environ is None else environ
    orig_argv = list(getattr(sys, "orig_argv", sys.argv) if orig_argv is None else orig_argv)
    if environ.get(ENV_VAR) in ("0", "1"):
        return environ[ENV_VAR] == "1"
    if "--verbose" in orig_argv:
        return False
    if any(Path(word).name in CONSOLE_SCRIPTS for word in orig_argv[:2]):
        return True
    for flag, module in zip(orig_argv, orig_argv[1:], strict=False):
        if flag == "-m":
            return module in COMMAND_MODULES
    return False


class _LineFilter(threading.Thread):
    """Copies lines from `read_fd` to `write_fd`, but the noise."""

    def __init__(self, read_fd, write_fd):
        super().__init__(name="keras_attention-native-log", daemon=True)
        self.read_fd, self.write_fd = read_fd, write_fd

    def run(self):
        with os.fdopen(self.read_fd, "rb", buffering=0) as source:
            pending = b""
            while chunk := source.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                self._write(lines, with_newline=True)
            self._write([pending] if pending else [], with_newline=False)

    def _write(self, lines, with_newline):
        kept = [line for line in lines if not is_noise(line.decode("utf-8", "replace"))]
        if kept:
            data = b"\n".join(kept) + (b"\n" if with_newline else b"")
            os.write(self.write_fd, data)


_installed = None
_original = None  # standard error's own descriptor, while the filter is on


def filter_native_log():
    """Puts the filter on standard error's file descriptor (once); undone at
    exit, after the last line has passed. Returns whether it is on."""
    global _installed, _original
    if _installed is not None:
        return True
    try:
        original = os.dup(2)
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, 2)
        os.close(write_fd)
    except OSError:  # no file descriptor 2 (a service, an embedded interpreter)
        return False
    _installed, _original = _LineFilter(read_fd, original), original
    _installed.start()
    atexit.register(_restore, original)
    return True


def filtering():
    """Whether the filter is on in this process."""
    return _installed is not None


def stop_filter():
    """Ends the filter now, as the exit does: what it still holds is written,
    and standard error is back on its own descriptor. For a process that ends
    with `os._exit`, which runs no exit functions."""
    if _installed is not None and _original is not None:
        _restore(_original)


def _restore(original):
    """Standard error back on its own descriptor; the pipe then closes and the
    thread writes what it still holds."""
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(original, 2)  # the pipe's last writer goes: the reader sees its end
    _installed.join(timeout=5)
