"""`RunLock`: one process at a time writes a run folder."""

import logging
import os
import stat
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: the lock falls back to the pid in the file
    fcntl = None

from keras_attention.files.atomic import process_is_running
from keras_attention.training.run_folder import LOCK_FILE
from keras_attention.training.run_folder import RunFolderError
from keras_attention.training.run_folder import RunInUseError

# Where Linux lists the locks held on files, with their holders.
PROC_LOCKS = "/proc/locks"


class RunLock:
    """An exclusive lock on a run folder, held while a process writes it.

    `RUN_DIR/run.lock` holds the holder's process id. On POSIX the lock is an
    `flock` on that file, which the system releases when the process ends,
    however it ends; on Windows the file's existence is the lock. A lock file
    that no process holds (its writer was killed) is stale: it is taken over
    and reported (a warning, and `stale_pid`), saying whether the process it
    names is gone or alive but not holding the lock.

    A refusal names the process that holds the lock: on Linux the holder of
    the `flock` as the system lists it (`/proc/locks`), which may be another
    program than the one whose id the file holds; elsewhere, or when it
    cannot be found, the id in the file, said to be that.

    ```python
    with RunLock(run_dir):
        ...  # no other process writes run_dir meanwhile
    ```

    Raises (on entry):
        RunInUseError: another process holds the lock; the message names it
            and the lock file.
        RunFolderError: the lock file is a symbolic link or not a regular
            file (a FIFO, a folder): never followed, nothing written.
    """

    def __init__(self, run_dir):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.stale_pid = None
        self.stale_alive = False
        self._descriptor = None

    def __enter__(self):
        self.run_dir.mkdir(parents=True, exist_ok=True)
        take = self._flock if fcntl is not None else self._exclusive_create
        for _ in range(10):  # another process may replace the file meanwhile
            if take():
                break
        else:
            self._refuse(None, None)
        if self.stale_pid is not None:
            if self.stale_alive:
                why = "it is running but holds no lock on the file (it is not writing this run)"
            else:
                why = "it is no longer running (killed?)"
            logging.warning(
                "%s: took over the stale lock of process %d, which the file names: %s; "
                "the run resumes from its files.",
                self.path,
                self.stale_pid,
                why,
            )
        return self

    def __exit__(self, *exc_info):
        with_lock = self._descriptor
        self._descriptor = None
        # Removed while still held, so that no one locks the removed file.
        self.path.unlink(missing_ok=True)
        if with_lock is not None:
            os.close(with_lock)
        return False

    def _refuse(self, holder, named):
        if holder:
            who = f"process {holder}"
            if named and named != holder:
                who += f" (the file names process {named}, which does not hold it)"
        elif named:
            who = f"process {named} (the id in the lock file; the holder itself is not listed)"
        else:
            who = "another process (its id is unknown)"
        raise RunInUseError(
            f"{self.run_dir} is in use by {who} (its lock file {self.path}); two "
            "processes writing one run folder would mix their epochs. Wait for it to "
            "end, or use another run folder."
        )

    def _flock(self):
        # Never through a link: the pid written into the lock would truncate
        # whatever file the link names (any file the user can write).
        try:
            descriptor = os.open(
                self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666
            )
        except OSError as error:
            if self.path.is_symlink():
                raise self._not_a_file("a symbolic link") from error
            raise
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise self._not_a_file("not a regular file")
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            named = _read_pid(descriptor)
            holder = flock_holder(os.fstat(descriptor))
            os.close(descriptor)
            self._refuse(holder, named)
        try:
            same = os.fstat(descriptor).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            same = False  # its holder removed it after we opened it
        if not same:
            os.close(descriptor)
            return False
        previous = _read_pid(descriptor)
        if previous and previous != os.getpid():
            # It holds no flock: its process ended, or is another one now.
            self.stale_pid = previous
            self.stale_alive = process_is_running(previous)
        self._write_pid(descriptor)
        return True

    def _not_a_file(self, what):
        return RunFolderError(
            f"{self.path}, the lock file of the run {self.run_dir}, is {what}; the lock "
            "is a file of the run's own, never followed elsewhere. Nothing was written: "
            "remove it, or use another run folder."
        )

    def _exclusive_create(self):
        try:
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            holder = read_pid_file(self.path)
            if holder and process_is_running(holder):
                self._refuse(holder, holder)
            self.stale_pid = holder
            self.path.unlink(missing_ok=True)
            return False
        self._write_pid(descriptor)
        return True

    def _write_pid(self, descriptor):
        os.ftruncate(descriptor, 0)
        os.lseek(descriptor, 0, os.SEEK_SET)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        os.fsync(descriptor)
        self._descriptor = descriptor


def flock_holder(file_stat, locks=PROC_LOCKS):
    """The id of the process holding an `flock` on the file of `file_stat`
    (an `os.stat_result`), from the system's list of locks; None where there
    is no such list or the file is not in it."""
    major, minor = os.major(file_stat.st_dev), os.minor(file_stat.st_dev)
    try:
        with open(locks, encoding="ascii", errors="replace") as lines:
            for line in lines:
                # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a "->"
                # marks a waiter, not a holder.
                fields = line.split()
                if len(fields) < 6 or "->" in fields or fields[1] != "FLOCK":
                    continue
                pid, device = fields[4], fields[5].split(":")
                if len(device) != 3 or not pid.isdigit():
                    continue
                try:
                    ours = (int(device[0], 16), int(device[1], 16), int(device[2]))
                except ValueError:
                    continue
                if ours == (major, minor, file_stat.st_ino):
                    return int(pid)
    except OSError:
        return None
    return None


def _read_pid(descriptor):
    try:
        text = os.pread(descriptor, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def read_pid_file(path):
    """The process id a lock file names, or None."""
    try:
        text = Path(path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
