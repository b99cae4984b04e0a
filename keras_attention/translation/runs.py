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

import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import shutil
import time
import zipfile
from pathlib import Path

import h5py
import keras

from keras_attention.translation import averaging

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
# The folders of a run folder that `train` writes files into.
_TRAIN_FOLDERS = (SOURCE_VOCAB, TARGET_VOCAB, BACKUP_DIR, averaging.EPOCHS_DIR)
# Written into config.json by this version; a folder without it predates
# finished.json.
RUN_FORMAT = 2
# The keys of config.json that the commands read after loading a run.
REQUIRED_CONFIG_KEYS = ("attention",)

NEW = "new"
UNFINISHED = "unfinished"
FINISHED = "finished"

# Temporary files start with this (and the writer's process id): a glob for
# `remove_temporaries`, and never a name that `averaging` or Keras would read.
TEMP_PREFIX = ".tmp-"
# Test hook: seconds to sleep between writing a temporary file and renaming
# it, so that a test can kill a process inside a write.
WRITE_DELAY_ENV = "KERAS_ATTENTION_WRITE_DELAY"


class CorruptRunError(ValueError):
    """A file of a run folder exists but is damaged; the message names it."""


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
    temporary = path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{path.name}")
    try:
        yield temporary
        _fsync(temporary)
        delay = float(os.environ.get(WRITE_DELAY_ENV) or 0)
        if delay:
            time.sleep(delay)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    # The rename itself reaches the disk with the folder's entry.
    _fsync(path.parent, folder=True)


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as temporary:
        Path(temporary).write_text(text, encoding="utf-8")


def write_json(path, data):
    """Writes `data` as indented JSON to `path` atomically."""
    write_text(path, json.dumps(data, indent=2) + "\n")


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


def _fsync(path, folder=False):
    if folder and not hasattr(os, "O_DIRECTORY"):
        return  # Windows cannot open a folder; its rename is durable enough.
    descriptor = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if folder else 0))
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


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

    Raises:
        NotADirectoryError: `run_dir` is a file.
        CorruptRunError: `finished.json` or the backup is damaged.
    """
    run_dir = Path(run_dir)
    if not run_dir.exists():
        return RunStatus(NEW, detail=f"{run_dir} does not exist")
    run_dir = _folder(run_dir)
    if (run_dir / FINISHED_FILE).exists():
        read_json(run_dir / FINISHED_FILE)
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
    if not any(run_dir.iterdir()):
        return RunStatus(NEW, detail=f"{run_dir} is empty")
    return RunStatus(
        UNFINISHED, 0, f"{run_dir} holds an unfinished run with no epoch backed up yet"
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
