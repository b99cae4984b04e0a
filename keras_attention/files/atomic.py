"""Files and folders written whole or not at all.

`atomic_path` writes one file: to a temporary file in the same folder, flushed
to disk, then renamed over the old one. `replaced_folder` writes a whole
folder (an export): into a temporary sibling folder, swapped in by renames
when it is complete. A process killed at any instant leaves the old content
or the new one, never a mix.

Temporary names start with `TEMP_PREFIX` (this package's mark) and the
writer's process id, so that they are never read as content, a later writer
can tell a dead writer's leftovers from a live one's, and no file of the
user's (a `.tmp-notes.txt`) is ever taken for one (`is_temporary`). New
files get the mode any other file gets (0666 less the umask), so that a web
server can read an exported model.

A write that fails because the disk is full (or the quota spent) raises
`DiskFullError`, naming the file, how far it got and the space left, and
leaves the old file as it was.

This module knows nothing of run folders (`keras_attention.training`) or
tokenizers; both write through it. It uses the standard library only.
"""

import contextlib
import errno
import json
import math
import os
import re
import shutil
import time
from pathlib import Path

# Temporary files and folders start with this (and the writer's process id):
# a glob for the cleanup, and never a name that Keras or an app would read.
# The package's name in it: a user's `.tmp-*` file is never taken for ours.
TEMP_PREFIX = ".tmp-keras-attention-"
# `TEMP_PREFIX PID - [tag -] NAME`: what `temporary_name` makes.
_TEMPORARY = re.compile(rf"^{re.escape(TEMP_PREFIX)}(\d+)-.")
# Test hook: seconds to sleep between writing a temporary file (or folder) and
# renaming it, so that a test can kill a process inside a write.
WRITE_DELAY_ENV = "KERAS_ATTENTION_WRITE_DELAY"


# The errors of a write that ran out of space.
_NO_SPACE = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e)


class DiskFullError(OSError):
    """A write ran out of disk space; the message names the file and the space.

    The file is left as it was before the write (`atomic_path`). Its `errno`
    is the original one (`ENOSPC` or `EDQUOT`).
    """

    def __str__(self):
        return self.strerror


def temporary_name(path, tag=""):
    """The temporary sibling of `path` for this process:
    `.tmp-keras-attention-PID-[tag-]NAME`."""
    path = Path(path)
    return path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{tag + '-' if tag else ''}{path.name}")


def temporary_pid(name):
    """The process id in `name` when it is a temporary name of this package
    (`temporary_name`), else None: any other `.tmp-*` name is the user's."""
    match = _TEMPORARY.match(name)
    return int(match.group(1)) if match else None


def is_temporary(name):
    """Whether `name` (a file or folder name) is a temporary name of this
    package (`temporary_name`), never a user's `.tmp-notes.txt`."""
    return temporary_pid(name) is not None


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path to write `path`'s new content to.

    When the block ends normally the temporary file is flushed to disk and
    renamed over `path` (`os.replace`: atomic on POSIX and Windows); when it
    raises, the temporary file is removed and `path` is left as it was.

    ```python
    with atomic_path(run_dir / "model.keras") as temporary:
        model.save(temporary)
    ```
    """
    path = Path(path)
    # Same folder (a rename across file systems is not atomic) and same
    # suffix (Keras checks `.keras` and `.weights.h5`).
    temporary = temporary_name(path)
    try:
        yield temporary
        fsync(temporary)
        _write_delay()
        os.replace(temporary, path)
    except BaseException as error:
        written = _size(temporary)
        with contextlib.suppress(OSError):
            temporary.unlink()
        if _is_disk_full(error):
            raise _disk_full(path, written, error) from error
        raise
    # The rename itself reaches the disk with the folder's entry.
    fsync(path.parent, folder=True)


def _is_disk_full(error):
    # h5py and zipfile wrap the OSError of the write in their own errors.
    while error is not None:
        if isinstance(error, OSError) and error.errno in _NO_SPACE:
            return True
        if isinstance(error, OSError | RuntimeError) and "No space left" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _size(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _disk_full(path, written, error):
    """The `DiskFullError` of a failed write of `path`."""
    previous = _size(path)
    try:
        usage = shutil.disk_usage(path.parent)
        free = f"{usage.free:,} bytes are free there"
    except OSError:
        free = "the free space is unknown"
    needed = max(written, previous)
    need = f"at least {needed:,} bytes" if needed else "more space"
    if previous:
        need += f" (its previous version is {previous:,} bytes)"
    code = getattr(error, "errno", None) or errno.ENOSPC
    return DiskFullError(
        code,
        f"No space left to write {path}: it needs {need} and {free}. "
        f"{path.name} was left as it was; free some space and run the command "
        "again (a training run resumes).",
    )


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as temporary:
        Path(temporary).write_text(text, encoding="utf-8")


def write_bytes(path, data):
    """Writes `data` (bytes) to `path` atomically."""
    with atomic_path(path) as temporary:
        Path(temporary).write_bytes(data)


def write_json(path, data):
    """Writes `data` as indented JSON to `path` atomically.

    JSON has no NaN or infinity: Python's `NaN` and `Infinity` tokens make a
    file that browsers, `jq` and strict parsers refuse. A float that is not
    finite (the BLEU of an empty length bucket, the loss of a diverged
    epoch) is written as `null`, so every file the package writes parses
    with a strict parser.
    """
    write_text(path, json.dumps(_finite_or_null(data), indent=2, allow_nan=False) + "\n")


def _finite_or_null(value):
    """`value` with every float that is not finite replaced by None, in
    dicts, lists and tuples at any depth."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_or_null(item) for item in value]
    return value


def fsync(path, folder=False):
    """Flushes a file (or, with `folder`, a folder's entries) to disk."""
    if folder and not hasattr(os, "O_DIRECTORY"):
        return  # Windows cannot open a folder; its rename is durable enough.
    descriptor = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if folder else 0))
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_delay():
    delay = float(os.environ.get(WRITE_DELAY_ENV) or 0)
    if delay:
        time.sleep(delay)


# ------------------------------------------------------------- folders


def _siblings(folder):
    """`(path, pid, is_old)` of the temporary siblings of `folder`:
    `TEMP_PREFIX PID-NAME` (a folder being written) and `TEMP_PREFIX
    PID-old-NAME` (the previous folder, during a swap)."""
    pattern = re.compile(rf"^{re.escape(TEMP_PREFIX)}(\d+)-(old-)?{re.escape(folder.name)}$")
    if not folder.parent.is_dir():
        return []
    found = []
    for path in folder.parent.iterdir():
        match = pattern.match(path.name)
        if match:
            found.append((path, int(match.group(1)), bool(match.group(2))))
    return found


def process_is_running(pid):
    """Whether a process with this id exists (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    except OSError:
        return False
    return True


def recover_folder(folder):
    """Undoes what a writer of `folder` killed inside `replaced_folder` left.

    A writer killed between its two renames left no `folder` and the previous
    one as `TEMP_PREFIX PID-old-NAME`: it is renamed back. The temporary siblings of
    writers that are no longer running are deleted.
    """
    folder = Path(folder)
    for path, pid, is_old in _siblings(folder):
        if process_is_running(pid) and pid != os.getpid():
            continue
        if is_old and not (folder.exists() or folder.is_symlink()):
            os.replace(path, folder)
        else:
            _remove_tree(path)


def _remove_tree(path):
    """Deletes a folder, or the link itself where `path` is a link (never
    its target); nothing there is not an error."""
    if path.is_symlink():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def replaced_folder(folder, keep=()):
    """Yields an empty temporary folder to write `folder`'s new content into.

    When the block ends normally the temporary folder replaces `folder` whole:
    `folder` is renamed aside, the new one renamed in, the old one deleted.
    When the block raises, the temporary folder is deleted and `folder` is
    left as it was. A process killed at any instant leaves `folder` old or
    new, never a mix (killed between the two renames, it leaves no `folder`
    and the old one beside it, which the next call puts back).

    Args:
        folder: the folder to replace (created if missing).
        keep: paths inside the old `folder`, relative to it, to carry over
            when the new content has none of that name (hard links where the
            file system allows, else copies), e.g. the other versions of a
            SavedModel. A path that is a symbolic link is carried over as
            that link: its target is never read, linked or written.

    Raises:
        ValueError: a path of `keep` lies under a symbolic link inside
            `folder`, or outside it (named; nothing is written).
    """
    folder = Path(folder)
    for name in keep:
        _check_kept(folder, name)
    folder.parent.mkdir(parents=True, exist_ok=True)
    recover_folder(folder)
    staging = temporary_name(folder)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
        for name in keep:
            old, new = folder / name, staging / name
            if (old.exists() or old.is_symlink()) and not new.exists():
                new.parent.mkdir(parents=True, exist_ok=True)
                _link_or_copy(old, new)
        fsync(staging, folder=True)
        _write_delay()
        previous = temporary_name(folder, "old")
        if folder.exists() or folder.is_symlink():
            os.replace(folder, previous)  # a link is moved aside, not followed
        os.replace(staging, folder)
        fsync(folder.parent, folder=True)
        _remove_tree(previous)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _check_kept(folder, name):
    """Raises `ValueError` unless `folder / name` is inside `folder` and
    reached through no symbolic link (its last part may be one)."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or ".." in parts:
        raise ValueError(
            f"Invalid value for argument `keep`: {name!r} is not a path inside {folder}."
        )
    for depth in range(len(parts) - 1):
        parent = folder.joinpath(*parts[: depth + 1])
        if parent.is_symlink():
            raise ValueError(
                f"{parent} is a symbolic link (to {os.readlink(parent)}); the files under it "
                f"are never carried into a new {folder.name} through it. Nothing was "
                "changed. Replace the link with a folder, or remove it."
            )


def _link_or_copy(source, target):
    def link(src, dst):
        try:
            os.link(src, dst, follow_symlinks=False)
        except (OSError, NotImplementedError):
            shutil.copy2(src, dst, follow_symlinks=False)

    if source.is_symlink():
        # The link itself, never its target's files (a user's folder).
        os.symlink(os.readlink(source), target)
    elif source.is_dir():
        shutil.copytree(source, target, copy_function=link, symlinks=True)
    else:
        link(source, target)
