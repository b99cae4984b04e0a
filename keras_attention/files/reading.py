"""Reading a file the user controls: a regular file, or one line saying what it is instead.

A FIFO (named pipe) in place of a vocabulary, a model or a data file would make
`open` wait forever for a writer that never comes; a device (`/dev/zero`,
`/dev/urandom`) never ends; a socket cannot be opened at all. Every place the
package reads a file a user can put there (tokenizers, epoch weights, `.keras`
models, data files, input files) checks it here first, with `os.stat`, before
opening it, and `open_regular` checks the opened file again (a file swapped
for a FIFO in between is opened without waiting, `O_NONBLOCK`, and refused).

Standard library only.
"""

import os
import stat
from pathlib import Path

__all__ = [
    "NotARegularFileError",
    "require_regular_file",
    "file_kind",
    "open_regular",
    "read_bytes",
    "read_text",
]


class NotARegularFileError(ValueError):
    """A path to read is not a regular file (a FIFO, a device, a socket, a
    folder); the message, one line, names it and what it is."""


def file_kind(mode):
    """What a file of `st_mode` `mode` is, in words ("a FIFO (named pipe)")."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refuse(path, mode, what):
    return NotARegularFileError(
        f"{path} is not a regular file: it is {file_kind(mode)}. The {what} to read "
        "must be a regular file; it was not opened."
    )


def require_regular_file(path, what="file"):
    """Raises unless `path` is a regular file (a symbolic link to one is).

    Nothing is opened: the check is one `os.stat`.

    Args:
        path: the file to read (str or `os.PathLike`).
        what: what the file is for, in the message ("model file").

    Returns:
        The `os.stat_result` of `path`.

    Raises:
        FileNotFoundError: `path` does not exist (the message names it).
        NotARegularFileError: `path` is a FIFO, a device, a socket or a
            folder; the message names it and what it is.
    """
    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):
        raise _refuse(Path(path), status.st_mode, what)
    return status


def open_regular(path, mode="rb", what="file", **options):
    """`open(path, mode, **options)` for reading, after `require_regular_file`.

    The file is opened without blocking (a FIFO put in its place after the
    check does not make it wait) and checked again through the opened
    descriptor; the returned file object blocks as usual.

    Args:
        path: the file to read.
        mode: "r" or "rb" (reading only).
        what: what the file is for, in the messages.
        **options: `open`'s (`encoding`, `errors`, ...).

    Raises:
        FileNotFoundError, NotARegularFileError: as `require_regular_file`.
        ValueError: `mode` writes.
    """
    if mode not in ("r", "rb", "rt"):
        raise ValueError(
            f"Invalid value for argument `mode`. Expected 'r' or 'rb' (reading). "
            f"Received: mode={mode!r}"
        )
    require_regular_file(path, what)
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _refuse(Path(path), status.st_mode, what)
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        return open(descriptor, mode, **options)
    except BaseException:
        os.close(descriptor)
        raise


def read_bytes(path, what="file"):
    """The bytes of the regular file `path` (`open_regular`)."""
    with open_regular(path, "rb", what) as file:
        return file.read()


def read_text(path, what="file", encoding="utf-8"):
    """The text of the regular file `path` (`open_regular`), like
    `Path.read_text(encoding=encoding)`."""
    with open_regular(path, "r", what, encoding=encoding) as file:
        return file.read()
