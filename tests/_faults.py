"""A full disk or a read-only file system under one folder, simulated in-process.

Root ignores file modes and `mount` needs privileges, so the tests inject the
error instead: after `install(folder, errno.ENOSPC)` every attempt of this
process to create, write, rename or delete something under `folder` raises
`OSError(ENOSPC)` (or `EROFS`, ...), as the kernel would; reading is left
alone. `run_command` does it in a fresh process and returns what it printed.
"""

import builtins
import errno
import io
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def install(folder, code, names=None):
    """From now on, writing under `folder` fails with `OSError(code)`; with
    `names`, only for paths whose last part contains one of those strings."""
    folder = os.path.realpath(folder)
    message = os.strerror(code)

    def inside(path):
        try:
            path = os.path.realpath(os.fsdecode(path))
        except TypeError:
            return False  # a file descriptor
        if names and not any(name in os.path.basename(path) for name in names):
            return False
        return path == folder or path.startswith(folder + os.sep)

    def refuse(path):
        raise OSError(code, message, os.fsdecode(path))

    def wrap(function, *checked):
        def guarded(*args, **kwargs):
            for i in checked:
                if i < len(args) and inside(args[i]):
                    refuse(args[i])
            return function(*args, **kwargs)

        return guarded

    real_open, real_os_open = builtins.open, os.open

    def open_(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and inside(file):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def os_open(path, flags, *args, **kwargs):
        if flags & _WRITE_FLAGS and inside(path):
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    builtins.open = io.open = open_
    os.open = os_open
    for name in ("mkdir", "unlink", "remove", "rmdir", "mkfifo"):
        setattr(os, name, wrap(getattr(os, name), 0))
    for name in ("replace", "rename", "link", "symlink"):
        setattr(os, name, wrap(getattr(os, name), 0, 1))
    try:
        import h5py
    except ImportError:
        return
    real_file_init = h5py.File.__init__

    def h5py_file(self, name, mode="r", *args, **kwargs):
        if mode != "r" and inside(name):
            refuse(name)
        return real_file_init(self, name, mode, *args, **kwargs)

    h5py.File.__init__ = h5py_file


_RUNNER = """
import runpy, sys
sys.path.insert(0, {tests!r})
import _faults
_faults.install({folder!r}, {code}, {names!r})
sys.argv = {argv!r}
{run}
"""


def run_command(argv, folder, code=errno.ENOSPC, module=None, names=None, timeout=600, env=None):
    """Runs `python -m module *argv` (or the script `argv[0]`) in a fresh
    process whose writes under `folder` fail with `code`; returns the
    `subprocess.CompletedProcess` (text)."""
    if module:
        run = f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
        argv = [module, *argv]
    else:
        run = f"runpy.run_path({str(argv[0])!r}, run_name='__main__')"
    source = _RUNNER.format(
        tests=str(TESTS), folder=str(folder), code=code, names=names, argv=argv, run=run
    )
    return subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=timeout,
        # As the command itself: TensorFlow's native start-up log filtered.
        env=dict(os.environ, KERAS_ATTENTION_QUIET_NATIVE_LOG="1", **(env or {})),
    )
