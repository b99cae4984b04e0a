"""How a command ends when a file fails it: one line on standard error and a clean exit status.

Every command line of the package (`python -m keras_attention.translation`
and its console script, `python -m keras_attention.export`, and the G2P
example's) ends here, so that they agree:

- an `OSError` of a file (a full disk, a read-only file system, a permission,
  a missing file) and a special file refused by `reading` are said in one
  line, `COMMAND: PATH: what went wrong`, with exit status 1, not a
  traceback (`file_errors`, `file_error_message`);
- a command started from a shell that failed ends the process at once
  (`end_command`): a library object left behind by a failed write (an HDF5
  file that could not be extended) crashed the interpreter's shutdown with a
  segmentation fault after the message;
- a closed pipe (`translate ... | head -1`) ends quietly with status 141,
  128 + SIGPIPE, what a shell reports for any program a closed pipe ends
  (`cat`, `yes`): nothing more is written and nothing is printed;
- `check_can_write` tells before the work whether the output can be
  written at all, so that a read-only place is said before minutes of
  decoding, not after.

Standard library only (and `files.atomic` for the name of a probe file).
"""

import contextlib
import errno
import os
import re
import sys

# Python's documented way to end a process without its shutdown (os._exit).
from os import _exit as exit_without_shutdown
from pathlib import Path

from keras_attention.files.atomic import temporary_name
from keras_attention.files.reading import NotARegularFileError

__all__ = [
    "BROKEN_PIPE_STATUS",
    "ERROR_STATUS",
    "check_can_write",
    "end_command",
    "file_error_message",
    "file_errors",
    "is_file_error",
]

# The exit status of a command that failed with a message.
ERROR_STATUS = 1
# The exit status of a command whose standard output was closed (128 + SIGPIPE).
BROKEN_PIPE_STATUS = 141
# What to do about the errors of a write, said after the error itself.
_REMEDIES = {
    errno.EROFS: "the file system is read-only: write the output somewhere else",
    errno.EACCES: "write the output somewhere you may write",
    errno.EPERM: "write the output somewhere you may write",
    errno.ENOSPC: "free some space and run the command again",
    errno.EFBIG: "the file is larger than this file system or process allows",
}
if hasattr(errno, "EDQUOT"):
    _REMEDIES[errno.EDQUOT] = "the disk quota is spent: free some space and run it again"
# Errors that are not a file's: they keep their traceback.
_NOT_FILE_ERRORS = (BrokenPipeError, ConnectionError, TimeoutError)
# HDF5 (h5py) names the file and the errno inside its message (an OSError's,
# or a RuntimeError's when a file that failed a write is closed).
_HDF5_FILENAME = re.compile(r"filename = '([^']+)'")
_HDF5_ERRNO = re.compile(r"errno = (\d+)")
_LONGEST = 500


def is_file_error(error):
    """Whether `error` is a file's: an `OSError` (not a closed pipe, a
    connection's or a timeout), a `NotARegularFileError`, or HDF5's
    `RuntimeError` of a failed write (h5py closing a file it could not
    extend)."""
    if isinstance(error, _NOT_FILE_ERRORS):
        return False
    if isinstance(error, OSError | NotARegularFileError):
        return True
    return isinstance(error, RuntimeError) and bool(_HDF5_ERRNO.search(str(error)))


def file_error_message(error):
    """One line for a file's error (`is_file_error`): the path, what went
    wrong and, for a failed write, what to do."""
    code = getattr(error, "errno", None)
    if code is None and (found := _HDF5_ERRNO.search(str(error))):
        code = int(found.group(1))
    filename = getattr(error, "filename", None)
    text = " ".join(str(error).split())
    reason = getattr(error, "strerror", None) or text
    if filename is None and code is not None:
        found = _HDF5_FILENAME.search(str(error))
        filename, reason = (found.group(1), os.strerror(code)) if found else (None, reason)
    if filename is not None:
        text = f"{os.fsdecode(filename)}: {reason}"
        if getattr(error, "filename2", None) is not None:
            text = f"{os.fsdecode(filename)} -> {os.fsdecode(error.filename2)}: {reason}"
    text = " ".join(text.split())
    if filename is not None and code in _REMEDIES:  # a bare error of the system
        text += f" ({_REMEDIES[code]})"
    if len(text) > _LONGEST:
        text = text[:_LONGEST] + " ..."
    return text or type(error).__name__


@contextlib.contextmanager
def file_errors(command, also=()):
    """Inside, a file's error (`is_file_error`) becomes `SystemExit("COMMAND:
    message")` (`file_error_message`), and so does an error of the classes
    `also` (`COMMAND: str(error)`). A closed pipe, a connection's error and a
    timeout pass through."""
    try:
        yield
    except (OSError, NotARegularFileError, RuntimeError, *also) as error:
        if is_file_error(error):
            raise SystemExit(f"{command}: {file_error_message(error)}") from None
        if also and isinstance(error, also):
            raise SystemExit(f"{command}: {error}") from None
        raise


def end_command(function, prog, exit_process=True, before_exit=()):
    """Runs `function()`, a command's `main`, as a shell command; returns its
    exit status (its result when an int, else 0) when it succeeds.

    When it fails: `SystemExit("message")` prints the message, a file's
    `OSError` prints `PROG: message` (status `ERROR_STATUS`), and a closed
    standard output ends quietly (`BROKEN_PIPE_STATUS`); `SystemExit` with a
    status (argparse's 2, `--help`'s 0) exits as usual.

    Args:
        function: the command, called without arguments.
        prog: the first word of a file error's line.
        exit_process: True (a shell's command): a failed command ends the
            process itself (`os._exit`, after flushing standard output and
            error), without the interpreter's shutdown. False (called from
            Python): it raises `SystemExit` with the message or the status.
        before_exit: functions called before the process ends that way,
            as the exit would have (`keras_attention.backend.native_log.
            stop_filter`: standard error's filter writes what it holds).
    """
    try:
        with _quiet_hdf5_cleanup():
            status = function()
        sys.stdout.flush()  # a pipe closed after the last write shows here
    except BrokenPipeError:
        _quiet_stdout()
        return _end(BROKEN_PIPE_STATUS, None, exit_process, before_exit)
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            raise
        return _end(ERROR_STATUS, str(exit.code), exit_process, before_exit)
    except (OSError, NotARegularFileError, RuntimeError) as error:
        if not is_file_error(error):
            raise
        return _end(ERROR_STATUS, f"{prog}: {file_error_message(error)}", exit_process, before_exit)
    if isinstance(status, int) and not isinstance(status, bool) and status:
        return _end(status, None, exit_process, before_exit)
    return 0


@contextlib.contextmanager
def _quiet_hdf5_cleanup():
    """While inside, h5py's errors in freeing the objects of a file whose
    write failed (a traceback each, through `sys.excepthook` and
    `sys.unraisablehook`) are not printed: the failed write itself is said
    in one line."""
    hooks = sys.excepthook, sys.unraisablehook

    def excepthook(kind, value, traceback):
        if not is_file_error(value):
            hooks[0](kind, value, traceback)

    def unraisablehook(unraisable):
        if not is_file_error(unraisable.exc_value):
            hooks[1](unraisable)

    sys.excepthook, sys.unraisablehook = excepthook, unraisablehook
    try:
        yield
    finally:
        sys.excepthook, sys.unraisablehook = hooks


def _quiet_stdout():
    """Points standard output at the null device: what is still buffered
    goes nowhere, without another error at the exit."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _end(status, message, exit_process, before_exit):
    if not exit_process:
        raise SystemExit(message if message is not None else status)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    if message is not None:
        with contextlib.suppress(OSError, ValueError):
            print(message, file=sys.stderr)
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    for function in before_exit:
        function()
    # The shutdown is skipped: a library object left by a failed write (an
    # HDF5 file HDF5 could not extend) crashed it after the message.
    exit_without_shutdown(status)


def check_can_write(*paths):
    """Raises the `OSError` of creating a file where each of `paths` (files
    or folders to write; None: skipped) would be written, naming the path:
    a read-only file system or a folder one may not write is then said
    before the work, not after it.

    The probe is a file created in the folder itself (a path that is a
    folder), else in the folder that holds the path (or, when that does not
    exist yet, the nearest one above it that does), and removed at once.
    """
    for path in paths:
        if path is not None:
            _check_can_write(Path(path))


def _check_can_write(path):
    place = path
    while not place.is_dir() and place.parent != place:
        place = place.parent
    probe = temporary_name(place / "write-check")
    try:
        descriptor = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as error:
        where = "there" if place == path else f"in {place}"
        raise OSError(error.errno, f"cannot write {where}: {error.strerror}", str(path)) from None
    os.close(descriptor)
    with contextlib.suppress(OSError):
        os.unlink(probe)
