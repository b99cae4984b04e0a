"""The run folder of a training: its files, its states, and writing them safely.

A run folder (`python -m keras_attention.translation train --run-dir RUN_DIR`) holds:

| path | content |
|---|---|
| `config.json` | the run's settings; `run_format` marks a folder of this version |
| `source_vocab/`, `target_vocab/` | the tokenizers |
| `model.keras` | the model of the best epoch so far (validation loss) |
| `history.csv` | one row per finished epoch |
| `backup/state.json`, `backup/epoch_NNN.weights.h5` | where an unfinished run resumes |
| `finished.json` | written last: the run is finished |

Every file is written atomically (`atomic_path`): to a temporary file in the
same folder, flushed to disk, then renamed over the old one. A process killed
at any instant leaves each file whole, either old or new, never partial.

The states (`run_status`):

- `NEW`: no folder, or an empty one.
- `FINISHED`: `finished.json` exists. A folder written by a version without
  the marker (its `config.json` has no `run_format`) is finished when it has no
  `backup/` and its `model.keras` is a whole archive.
- `UNFINISHED`: anything else; it resumes after the epoch in
  `backup/state.json` (`RunStatus.epoch`), or from the start when there is no
  backup yet.

A file that exists but cannot be read is reported as corrupt
(`CorruptRunError`, naming the file and what is wrong), never as missing.
"""

import csv
import dataclasses
import io
import json
import logging
import math
import os
import shutil
import zipfile
from pathlib import Path

import h5py
import keras

try:
    import fcntl
except ImportError:  # Windows: the lock falls back to the pid in the file
    fcntl = None

from keras_attention.translation import averaging
from keras_attention.translation.atomic import TEMP_PREFIX
from keras_attention.translation.atomic import WRITE_DELAY_ENV  # noqa: F401 (tests' hook)
from keras_attention.translation.atomic import atomic_path
from keras_attention.translation.atomic import process_is_running
from keras_attention.translation.atomic import write_json
from keras_attention.translation.atomic import write_text

MODEL_FILE = "model.keras"
CONFIG_FILE = "config.json"
SOURCE_VOCAB = "source_vocab"
TARGET_VOCAB = "target_vocab"
# What loading a run needs (`translator.load_run`).
RUN_FILES = (MODEL_FILE, CONFIG_FILE, SOURCE_VOCAB, TARGET_VOCAB)
HISTORY_FILE = "history.csv"
FINISHED_FILE = "finished.json"
BACKUP_DIR = "backup"
STATE_FILE = "state.json"
LOGS_DIR = "logs"
# Held (and holding the pid of) the process that writes the run folder.
LOCK_FILE = "run.lock"
# What the commands write into a run folder besides the run itself:
# `evaluate` (its default --out-dir), `explain`, and the export of
# examples/run_translator.sh.
COMMAND_OUTPUTS = ("eval", "explain.json", "export")
# The folders of a run folder that `train` writes files into.
_TRAIN_FOLDERS = (SOURCE_VOCAB, TARGET_VOCAB, BACKUP_DIR, averaging.EPOCHS_DIR)
# Written into config.json by this version; a folder without it predates
# finished.json.
RUN_FORMAT = 2
# The keys of config.json that the commands read after loading a run.
REQUIRED_CONFIG_KEYS = ("attention",)
# Every name a run folder may hold; `worker_N` folders and temporary files
# too (`_is_run_entry`).
RUN_ENTRIES = frozenset(
    (*RUN_FILES, HISTORY_FILE, FINISHED_FILE, BACKUP_DIR, averaging.EPOCHS_DIR, LOGS_DIR)
    + (LOCK_FILE, *COMMAND_OUTPUTS)
)
# What a run holds before its config.json exists (killed while it learned
# the vocabularies).
_BEFORE_CONFIG = frozenset((SOURCE_VOCAB, TARGET_VOCAB, LOCK_FILE))

NEW = "new"
UNFINISHED = "unfinished"
FINISHED = "finished"


class CorruptRunError(ValueError):
    """A file of a run folder exists but is damaged; the message names it."""


class RunFolderError(ValueError):
    """The folder cannot be used as asked; the message says why and what to do.

    Nothing in the folder was changed when it is raised.
    """


class NotARunError(RunFolderError):
    """The folder holds files that are not a run of this package."""


class RunExistsError(RunFolderError):
    """The folder holds a run and `overwrite` was not given."""


class RunInUseError(RunFolderError):
    """Another process holds the folder's lock (`LOCK_FILE`)."""


class RunOptionsError(RunFolderError):
    """A run was resumed with other options than it was started with.

    Attributes:
        differences: `{key: (value in config.json, value asked for)}`.
    """

    def __init__(self, message, differences):
        super().__init__(message)
        self.differences = differences


@dataclasses.dataclass(frozen=True)
class RunStatus:
    """What `run_status` found.

    Attributes:
        state: `NEW`, `UNFINISHED` or `FINISHED`.
        epoch: the epochs an unfinished run has backed up (it resumes after them).
        detail: a sentence for messages.
    """

    state: str
    epoch: int = 0
    detail: str = ""


# ------------------------------------------------------------ writing


def save_model(model, path):
    """`model.save(path)`, atomically."""
    with atomic_path(path) as temporary:
        model.save(temporary)


def save_weights(model, path):
    """`model.save_weights(path)` (with the optimizer's state), atomically."""
    with atomic_path(path) as temporary:
        model.save_weights(temporary)


def write_history(run_dir, rows):
    """Rewrites `history.csv` from `rows` (dicts with an `epoch` key), atomically.

    The columns are `epoch` and the other keys in sorted order, as Keras's
    `CSVLogger` writes them.
    """
    keys = sorted({key for row in rows for key in row} - {"epoch"})
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=["epoch", *keys], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(Path(run_dir) / HISTORY_FILE, text.getvalue())


def remove_temporaries(run_dir):
    """Deletes the temporary files that a killed `train` left in a run folder.

    Only in the folders `train` writes: another command may be writing its
    own files (`eval/`) at the same time.
    """
    run_dir = Path(run_dir)
    for folder in (run_dir, *(run_dir / name for name in _TRAIN_FOLDERS)):
        for path in folder.glob(f"{TEMP_PREFIX}*"):
            if path.is_file():
                path.unlink()


# ------------------------------------------------------------ reading


def read_json(path):
    """The JSON object in `path`; `CorruptRunError` if it is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CorruptRunError(
            f"{path} is corrupt: not valid JSON ({path.stat().st_size} bytes; {error})."
        ) from None
    if not isinstance(data, dict):
        raise CorruptRunError(f"{path} is corrupt: expected a JSON object, found {data!r:.60}.")
    return data


def read_config(run_dir, required=REQUIRED_CONFIG_KEYS):
    """The run's `config.json`, checked to hold the `required` keys."""
    path = Path(run_dir) / CONFIG_FILE
    config = read_json(path)
    missing = [key for key in required if key not in config]
    if missing:
        raise CorruptRunError(
            f"{path} is missing the key{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(repr, missing))}, which the commands read; `train` writes it."
        )
    return config


def check_model_file(path):
    """Raises `CorruptRunError` unless `path` is a whole `.keras` archive."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        raise CorruptRunError(f"{path} is corrupt: it is empty (0 bytes).")
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise CorruptRunError(
            f"{path} is corrupt: not a whole .keras (zip) archive ({size} bytes; {error})."
        ) from None
    if damaged is not None:
        raise CorruptRunError(f"{path} is corrupt: {damaged} fails its checksum.")
    if "config.json" not in names:
        raise CorruptRunError(f"{path} is corrupt: the archive has no config.json.")


def check_weights_file(path):
    """Raises `CorruptRunError` unless `path` is a readable `.weights.h5` file."""
    path = Path(path)
    try:
        with h5py.File(path, "r"):
            pass
    except OSError as error:
        raise CorruptRunError(
            f"{path} is corrupt: not a readable HDF5 weights file "
            f"({path.stat().st_size} bytes; {error})."
        ) from None


def check_run(run_dir):
    """Checks that `run_dir` can be loaded; returns its config.

    Raises:
        NotADirectoryError: `run_dir` is a file.
        FileNotFoundError: naming every missing file of `RUN_FILES`.
        CorruptRunError: a file exists but is damaged, or `config.json` lacks
            a key of `REQUIRED_CONFIG_KEYS`; the message names the file.
    """
    run_dir = _folder(run_dir)
    missing = [name for name in RUN_FILES if not (run_dir / name).exists()]
    if missing:
        raise FileNotFoundError(
            f"The run folder {run_dir} is incomplete: missing "
            f"{', '.join(missing)}. A finished `train` command writes "
            f"{', '.join(RUN_FILES)} (the model after the first epoch)."
        )
    config = read_config(run_dir)
    check_model_file(run_dir / MODEL_FILE)
    return config


def read_state(run_dir):
    """The backup of an unfinished run (`backup/state.json`), or None.

    The state holds `epoch` (epochs done), `weights` (the file in `backup/`
    with the weights and optimizer after that epoch), `best` and `best_epoch`
    (the validation loss of `model.keras` and its 1-based epoch), `stopped`
    (training had decided to stop) and `history` (one row per epoch).
    """
    path = Path(run_dir) / BACKUP_DIR / STATE_FILE
    if not path.exists():
        return None
    state = read_json(path)
    for key in ("epoch", "weights", "best", "best_epoch", "stopped", "history"):
        if key not in state:
            raise CorruptRunError(f"{path} is corrupt: it has no {key!r}.")
    weights = path.parent / state["weights"]
    if not weights.exists():
        raise CorruptRunError(f"{path} is corrupt: its weights file {weights} is missing.")
    check_weights_file(weights)
    return state


def run_status(run_dir):
    """Whether `run_dir` is a new, unfinished or finished run (`RunStatus`).

    A folder that holds nothing but a lock file (or temporary files) is new.

    Raises:
        NotADirectoryError: `run_dir` is a file.
        NotARunError: the folder holds files that are not a run's
            (`check_ours`).
        CorruptRunError: `finished.json`, `config.json` or the backup is
            damaged.
    """
    run_dir = Path(run_dir)
    if not run_dir.exists():
        return RunStatus(NEW, detail=f"{run_dir} does not exist")
    run_dir = _folder(run_dir)
    if not _entries(run_dir) - {LOCK_FILE}:
        return RunStatus(NEW, detail=f"{run_dir} is empty")
    finished = (run_dir / FINISHED_FILE).exists()
    if finished:
        read_json(run_dir / FINISHED_FILE)  # a damaged marker is reported as such
    check_ours(run_dir)
    if finished:
        return RunStatus(FINISHED, detail=f"{run_dir} holds a finished run ({FINISHED_FILE})")
    state = read_state(run_dir)
    if state is not None:
        return RunStatus(
            UNFINISHED,
            state["epoch"],
            f"{run_dir} holds an unfinished run; it resumes after epoch {state['epoch']}",
        )
    if _finished_by_an_older_version(run_dir):
        return RunStatus(
            FINISHED, detail=f"{run_dir} holds a finished run (of a version before {FINISHED_FILE})"
        )
    return RunStatus(
        UNFINISHED, 0, f"{run_dir} holds an unfinished run with no epoch backed up yet"
    )


def _entries(run_dir):
    """The names in `run_dir`, less temporary files."""
    return {p.name for p in Path(run_dir).iterdir() if not p.name.startswith(TEMP_PREFIX)}


def _is_worker_folder(name):
    # Where the workers other than the chief of a multi-worker training write.
    return name.startswith("worker_") and name[len("worker_") :].isdigit()


def _is_run_entry(name):
    return name in RUN_ENTRIES or _is_worker_folder(name) or name.startswith(TEMP_PREFIX)


def check_ours(run_dir):
    """Raises `NotARunError` unless `run_dir` is empty or holds a run of this
    package, and nothing else.

    A run folder holds only the names of `RUN_ENTRIES` (and `worker_N`
    folders, temporary files), and a `config.json` of a run (with
    `run_format`, or the `attention` of an older version) before any model,
    history or backup: `train` writes it right after the vocabularies. So a
    project folder that happens to hold a `model.keras`, a `history.csv` or
    a `backup/` of its own is never taken for a run, and nothing in it is
    deleted.

    Raises:
        NotARunError: naming what does not belong to a run.
        CorruptRunError: its `config.json` is not a JSON object.
    """
    run_dir = Path(run_dir)
    entries = _entries(run_dir)
    foreign = sorted(name for name in entries if not _is_run_entry(name))
    advice = (
        "Nothing was changed. Give the run a new or empty folder (a run folder "
        "holds only what a run writes)."
    )
    if foreign:
        shown = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        raise NotARunError(
            f"{run_dir} is not a run folder of keras_attention.translation: it holds "
            f"{shown}, which a run never writes. {advice}"
        )
    if (run_dir / CONFIG_FILE).exists():
        config = read_json(run_dir / CONFIG_FILE)
        if "run_format" not in config and "attention" not in config:
            raise NotARunError(
                f"{run_dir} is not a run folder of keras_attention.translation: its "
                f"{CONFIG_FILE} is not a run's (it has neither 'run_format' nor "
                f"'attention'). {advice}"
            )
    elif any(not _is_worker_folder(name) for name in entries - _BEFORE_CONFIG):
        # A worker may create its folder before the chief writes config.json.
        written = ", ".join(sorted(n for n in entries - _BEFORE_CONFIG if not _is_worker_folder(n)))
        raise NotARunError(
            f"{run_dir} is not a run folder of keras_attention.translation: it holds "
            f"{written} but no {CONFIG_FILE}, which a run writes before them. {advice}"
        )


def _folder(run_dir):
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise NotADirectoryError(f"{run_dir} is a file, not a run folder.")
    return run_dir


def _finished_by_an_older_version(run_dir):
    if (run_dir / BACKUP_DIR).exists() or not (run_dir / MODEL_FILE).exists():
        return False
    try:
        config = read_config(run_dir, required=())
        check_model_file(run_dir / MODEL_FILE)
    except (OSError, CorruptRunError):
        return False  # e.g. killed while its first checkpoint was written
    return "run_format" not in config


# ---------------------------------------------------------- life cycle


def clear(run_dir, keep_config=False):
    """Removes what `train` wrote, the finished marker first.

    With `keep_config`, `config.json` and the vocabularies stay (a run that
    starts over reuses them, so that the ids do not change).
    """
    run_dir = Path(run_dir)
    (run_dir / FINISHED_FILE).unlink(missing_ok=True)
    names = [MODEL_FILE, HISTORY_FILE, BACKUP_DIR, averaging.EPOCHS_DIR]
    if not keep_config:
        names += [CONFIG_FILE, SOURCE_VOCAB, TARGET_VOCAB, LOGS_DIR]
    for name in names:
        path = run_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def check_options(run_dir, config, ignore=()):
    """Raises `RunOptionsError` unless `config` agrees with the run's
    `config.json` on every key both hold (but those in `ignore`).

    Run before anything of the run is rewritten: a resumed run must train the
    model it started, on the vocabularies it learned.
    """
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return
    saved = read_json(path)
    differences = {
        key: (saved[key], value)
        for key, value in config.items()
        if key in saved and key not in ignore and saved[key] != value
    }
    if differences:
        listed = "; ".join(
            f"{key} {new!r} (the run has {old!r})" for key, (old, new) in differences.items()
        )
        raise RunOptionsError(
            f"{run_dir} holds a run started with other options: {listed}. Nothing was "
            "changed. Resume it with its own options, use another run folder, or pass "
            "`overwrite=True` to start it over with these.",
            differences,
        )


def write_run(run_dir, model, source_tokenizer, target_tokenizer, config, info, overwrite=False):
    """Writes a finished run folder from a model (what `average` writes).

    The folder must be new or empty, or hold a run of this package and
    `overwrite` be given; it is locked while written. The files go in this
    order: the vocabularies, `config.json`, `model.keras`, then
    `finished.json`, so that a process killed on the way leaves an
    unfinished run, never a finished one with missing files.

    Args:
        run_dir: the folder (created).
        model: the model, saved as `model.keras`.
        source_tokenizer: saved as `source_vocab/` (any object with `save`).
        target_tokenizer: saved as `target_vocab/`.
        config: the content of `config.json` (`run_format` is added).
        info: the content of `finished.json`.
        overwrite: replace a run the folder holds.

    Raises:
        NotARunError: the folder holds something else.
        RunExistsError: it holds a run and not `overwrite`.
        RunInUseError: another process holds its lock.
        CorruptRunError: it holds a damaged run and not `overwrite`.
    """
    run_dir = Path(run_dir)
    check_writable(run_dir, overwrite)
    with RunLock(run_dir):
        check_writable(run_dir, overwrite)  # again, now that no one else writes
        clear(run_dir)
        source_tokenizer.save(run_dir / SOURCE_VOCAB)
        target_tokenizer.save(run_dir / TARGET_VOCAB)
        write_json(run_dir / CONFIG_FILE, dict(config, run_format=RUN_FORMAT))
        save_model(model, run_dir / MODEL_FILE)
        finish(run_dir, info)
    return run_dir


def check_writable(run_dir, overwrite=False):
    """Raises unless a new run may be written into `run_dir` (`write_run`):
    the folder is new or empty, or holds a run (whole or damaged) of this
    package and `overwrite` is given.

    Raises:
        NotARunError: the folder holds something else (even with
            `overwrite`).
        RunExistsError: it holds a run and not `overwrite`.
        CorruptRunError: it holds a damaged run and not `overwrite`.
        NotADirectoryError: `run_dir` is a file.
    """
    try:
        status = run_status(run_dir)
    except CorruptRunError as error:
        if not overwrite:
            raise CorruptRunError(f"{error} Pass `overwrite=True` to replace it.") from None
        return
    if status.state != NEW and not overwrite:
        raise RunExistsError(
            f"{status.detail}. Nothing was changed. Use another folder, or pass "
            "`overwrite=True` to replace it."
        )


class RunLock:
    """An exclusive lock on a run folder, held while a process writes it.

    `RUN_DIR/run.lock` holds the holder's process id. On POSIX the lock is an
    `flock` on that file, which the system releases when the process ends,
    however it ends; on Windows the file's existence is the lock. A lock file
    whose process is no longer running (killed) is stale: it is taken over,
    and reported (a warning, and `stale_pid`).

    ```python
    with RunLock(run_dir):
        ...  # no other process writes run_dir meanwhile
    ```

    Raises (on entry):
        RunInUseError: another running process holds the lock; the message
            names its process id and the lock file.
    """

    def __init__(self, run_dir):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.stale_pid = None
        self._descriptor = None

    def __enter__(self):
        self.run_dir.mkdir(parents=True, exist_ok=True)
        take = self._flock if fcntl is not None else self._exclusive_create
        for _ in range(10):  # another process may replace the file meanwhile
            if take():
                break
        else:
            self._refuse(None)
        if self.stale_pid is not None:
            logging.warning(
                "%s: took over the stale lock of process %d, which is no longer running "
                "(killed?); the run resumes from its files.",
                self.path,
                self.stale_pid,
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

    def _refuse(self, holder):
        who = f"process {holder}" if holder else "another process"
        raise RunInUseError(
            f"{self.run_dir} is in use by {who} (its lock file {self.path}); two "
            "processes writing one run folder would mix their epochs. Wait for it to "
            "end, or use another run folder."
        )

    def _flock(self):
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(descriptor)
            os.close(descriptor)
            self._refuse(holder)
        try:
            same = os.fstat(descriptor).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            same = False  # its holder removed it after we opened it
        if not same:
            os.close(descriptor)
            return False
        previous = _read_pid(descriptor)
        if previous and previous != os.getpid():
            self.stale_pid = previous  # it holds no flock: its process ended
        self._write_pid(descriptor)
        return True

    def _exclusive_create(self):
        try:
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            holder = _read_pid_file(self.path)
            if holder and process_is_running(holder):
                self._refuse(holder)
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


def _read_pid(descriptor):
    try:
        text = os.pread(descriptor, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _read_pid_file(path):
    try:
        text = Path(path).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def restore(model, run_dir, state):
    """Puts an unfinished run back where its backup left it.

    Loads the weights and the optimizer's state of the last backed-up epoch
    into `model` (compiled, built), rewrites `history.csv` to one row per
    backed-up epoch, and rewrites `model.keras` when that epoch was the best
    (the process may have been killed before it did). Epoch weights saved
    after that epoch (`--keep-epochs`) are removed: the epoch runs again.
    """
    run_dir = Path(run_dir)
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    weights = run_dir / BACKUP_DIR / state["weights"]
    try:
        model.load_weights(weights)
    except (OSError, ValueError) as error:
        raise CorruptRunError(f"{weights} cannot be loaded into the model: {error}") from None
    write_history(run_dir, state["history"])
    if state["best_epoch"] == state["epoch"]:
        save_model(model, run_dir / MODEL_FILE)
    for epoch in averaging.saved_epochs(run_dir):
        if epoch > state["epoch"]:
            averaging.epoch_weight_path(run_dir, epoch).unlink()


def finish(run_dir, info):
    """Marks the run finished (`finished.json` holding `info`), then drops its backup."""
    run_dir = Path(run_dir)
    write_json(run_dir / FINISHED_FILE, info)
    shutil.rmtree(run_dir / BACKUP_DIR, ignore_errors=True)


class RunKeeper(keras.callbacks.Callback):
    """Keeps the run folder resumable and `model.keras` the best epoch's.

    At the end of every epoch, in this order: the weights and the optimizer's
    state go to a new `backup/epoch_NNN.weights.h5`; `backup/state.json` is
    replaced (the commit: a resume starts after this epoch); `model.keras` is
    replaced when the monitored value improved; `history.csv` is rewritten;
    the previous backup weights are deleted. Each write is atomic, so a
    process killed at any point loses at most the epoch in progress.

    It replaces `ModelCheckpoint(save_best_only=True)`, `BackupAndRestore` and
    `CSVLogger`, which write their files in place. Put it after the callbacks
    that change the weights or the logs at the end of an epoch
    (`SwapEMAWeights`, the learning-rate schedule), and after the ones that
    save other files of the epoch.

    Args:
        run_dir: the run folder.
        state: the state `restore` resumed from, or None for a new run.
        monitor: the log the best model is chosen on (lower is better).
    """

    def __init__(self, run_dir, state=None, monitor="val_loss"):
        super().__init__()
        self.run_dir = Path(run_dir)
        self.monitor = monitor
        state = state or {}
        self.best = state.get("best")
        self.best_epoch = state.get("best_epoch", 0)
        self.history = list(state.get("history", []))

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.monitor not in logs:
            raise KeyError(
                f"RunKeeper: the logs have no {self.monitor!r} (keys: {sorted(logs)}); "
                "fit with validation data."
            )
        value = float(logs[self.monitor])
        improved = not math.isnan(value) and (self.best is None or value < self.best)
        if improved:
            self.best, self.best_epoch = value, epoch + 1
        backup = self.run_dir / BACKUP_DIR
        backup.mkdir(parents=True, exist_ok=True)
        weights = f"epoch_{epoch + 1:03d}.weights.h5"
        save_weights(self.model, backup / weights)
        self.history.append({"epoch": epoch, **{key: float(v) for key, v in logs.items()}})
        state = {
            "epoch": epoch + 1,
            "weights": weights,
            "best": self.best,
            "best_epoch": self.best_epoch,
            "stopped": bool(self.model.stop_training),
            "history": self.history,
        }
        write_json(backup / STATE_FILE, state)
        if improved:
            save_model(self.model, self.run_dir / MODEL_FILE)
        write_history(self.run_dir, self.history)
        for path in backup.glob("epoch_*.weights.h5"):
            if path.name != weights:
                path.unlink()
