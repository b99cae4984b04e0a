"""The run folder of a training: its files, its states, and writing them safely.

A run folder holds:

| path | content |
|---|---|
| `keras_attention_run.json` | the mark: written first, when the run is created |
| `config.json` | the run's options (`TrainingRun(options=...)`) |
| `model.keras` | the model of the best epoch so far (the monitored value) |
| `history.csv` | one row per finished epoch |
| `backup/state.json` | the progress file: epochs done, best epoch, history |
| `backup/epoch_NNN.weights.h5` | the weights and optimizer where a resume starts |
| `epochs/epoch_NNN.weights.h5` | every epoch's weights, for averaging (`keep_epochs`) |
| `finished.json` | written last: the run is finished |
| `run.lock` | held by the process that writes the run (`RunLock`) |

and whatever files a client declares as its own (the translator's
vocabularies). Every file is written atomically (`keras_attention.files.atomic`):
a process killed at any instant leaves each file whole, old or new.

A folder is a run of this package only when it holds the mark, a file that
this package alone writes (`MARK_FILE`, holding the format name `FORMAT_NAME`
and a version), never because some file in it has a known name or key: a
folder of anyone's `model.keras`, `history.csv` or `config.json` is refused
(`NotARunError`) and left untouched, `overwrite` or not.

The states (`run_status`):

- `NEW`: no folder, or one that holds nothing but a lock file, temporary
  files or the `worker_N` folders of a multi-worker training.
- `FINISHED`: the mark and `finished.json`. A run whose training diverged (a
  loss or a weight not finite at the end of an epoch) is finished there:
  `finished.json` says at which epoch (`RunStatus.diverged`), and its
  `model.keras` is the best epoch before it (none when the first epoch
  diverged). It is not trained into again (`DivergedRunError`) but with
  `overwrite`.
- `UNFINISHED`: the mark without `finished.json`; it resumes after the epoch
  in `backup/state.json` (`RunStatus.epoch`), or from the start.

A client may recognise folders that its older versions wrote before the mark
existed (`legacy`): they are reported finished and read-only (`RunStatus.legacy`),
never trained into or cleared.

A file that exists but cannot be read is reported as corrupt
(`CorruptRunError`, naming the file and what is wrong), never as missing; a
path that is not a regular file (a FIFO, a device) is refused before it is
opened, so that nothing waits on it.
"""

import csv
import dataclasses
import io
import json
import math
import os
import re
import shutil
import stat
import zipfile
from pathlib import Path

import h5py
import keras
import numpy as np

from keras_attention.files.atomic import atomic_path
from keras_attention.files.atomic import is_temporary
from keras_attention.files.atomic import process_is_running
from keras_attention.files.atomic import temporary_pid
from keras_attention.files.atomic import write_json
from keras_attention.files.atomic import write_text
from keras_attention.training import averaging

MARK_FILE = "keras_attention_run.json"
# What the mark holds; a folder whose mark names another format is not ours.
FORMAT_NAME = "keras_attention.training_run"
FORMAT_VERSION = 1
MODEL_FILE = "model.keras"
CONFIG_FILE = "config.json"
HISTORY_FILE = "history.csv"
FINISHED_FILE = "finished.json"
BACKUP_DIR = "backup"
STATE_FILE = "state.json"
LOGS_DIR = "logs"
LOCK_FILE = "run.lock"
EPOCHS_DIR = averaging.EPOCHS_DIR
# What a run writes, and `clear` removes (with the client's own files).
RUN_WRITES = (MODEL_FILE, HISTORY_FILE, BACKUP_DIR, EPOCHS_DIR, CONFIG_FILE, LOGS_DIR)

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
    """The folder holds files but not the mark of a run of this package."""


class RunExistsError(RunFolderError):
    """The folder holds a run and `overwrite` was not given."""


class RunInUseError(RunFolderError):
    """Another process holds the folder's lock (`LOCK_FILE`)."""


class DivergedRunError(RunExistsError):
    """The run's training diverged: a loss or a weight was not finite at the
    end of an epoch. The message names the epoch and what the run holds."""


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
        legacy: a finished run of an older version, without the mark: it may
            be read, never written.
        diverged: the epoch (1-based) at which a finished run's training
            diverged; 0 when it did not.
    """

    state: str
    epoch: int = 0
    detail: str = ""
    legacy: bool = False
    diverged: int = 0


# ------------------------------------------------------------ writing


def save_model(model, path):
    """`model.save(path)`, atomically."""
    with atomic_path(path) as temporary:
        model.save(temporary)


def save_weights(model, path):
    """`model.save_weights(path)` (with the optimizer's state), atomically."""
    with atomic_path(path) as temporary:
        model.save_weights(temporary)


def write_mark(run_dir):
    """Writes the mark that makes `run_dir` a run of this package."""
    write_json(Path(run_dir) / MARK_FILE, {"format": FORMAT_NAME, "version": FORMAT_VERSION})


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


# The temporary names of versions before `TEMP_PREFIX` held the package's
# name (`.tmp-PID-NAME`): removed from a run's folders too, once their writer
# is gone.
_OLDER_TEMPORARY = re.compile(r"^\.tmp-(\d+)-.")


def remove_temporaries(run_dir, folders=()):
    """Deletes the temporary files that killed writers left in a run folder.

    Only this package's temporaries (`keras_attention.files.atomic.is_temporary`,
    or the `.tmp-PID-NAME` of older versions) whose writer is no longer
    running: a user's `.tmp-notes.txt` stays. Only in the folders a trainer
    writes (the run folder, `backup/`, `epochs/` and `folders`): another
    command may be writing its own files at the same time.
    """
    run_dir = Path(run_dir)
    for name in ("", BACKUP_DIR, EPOCHS_DIR, *folders):
        folder = run_dir / name
        if folder.is_symlink() or not folder.is_dir() or _linked_parent(run_dir, name):
            continue
        for path in folder.iterdir():
            pid = temporary_pid(path.name)
            if pid is None:
                older = _OLDER_TEMPORARY.match(path.name)
                pid = int(older.group(1)) if older else None
            if pid is None or (pid != os.getpid() and process_is_running(pid)):
                continue
            if path.is_file() and not path.is_symlink():
                path.unlink()


def remove(path):
    """Deletes a file, a folder or a symbolic link; a link is removed, never
    followed. Nothing to delete is not an error."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)  # removes the links inside, never their targets


def check_file_names(files, run_dir=None):
    """The client's `files` of a run (`TrainingRun(files=...)`) as a tuple,
    each a relative path inside the run: a run removes them when it starts
    over, so a name that could reach outside it is refused.

    Args:
        files: the names.
        run_dir: None, or the run folder: a name that resolves outside it
            (through a symbolic link in it) is refused too.

    Raises:
        ValueError: `files` is a string, or a name is not a string, is empty,
            absolute, holds a `..` part, is the run folder itself, is the
            run's mark or lock file, or resolves outside `run_dir` (the name
            and the argument named).
    """
    if isinstance(files, str | bytes | os.PathLike):
        raise ValueError(
            "Invalid value for argument `files`. Expected a tuple of names, e.g. "
            f"('vocab.json',). Received: files={files!r}"
        )
    files = tuple(files)
    for name in files:
        why = _bad_file_name(name)
        if not why and run_dir is not None:
            inside = Path(run_dir).resolve()
            if not (Path(run_dir) / name).resolve().is_relative_to(inside):
                why = f"resolves to {(Path(run_dir) / name).resolve()}, outside the run folder"
        if why:
            raise ValueError(
                f"Invalid value for argument `files`. Expected names of files or folders "
                f"inside the run folder, relative to it; {name!r} {why}. Received: "
                f"files={files!r}"
            )
    return files


def _bad_file_name(name):
    """Why `name` cannot be a client's file of a run; "" when it can."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a string"
    parts = Path(name).parts
    if os.path.isabs(name) or name.startswith(("/", "\\")) or Path(name).drive:
        return "is an absolute path"
    if ".." in parts or ".." in name.replace("\\", "/").split("/"):
        return "holds a '..' part, which leads out of the run folder"
    if not parts or parts == (".",):
        return "is the run folder itself"
    if Path(name).name in (MARK_FILE, LOCK_FILE) and len(parts) == 1:
        return "is a file of the run itself"
    return ""


def _linked_parent(run_dir, name):
    """The first folder between `run_dir` and `run_dir / name` that is a
    symbolic link, or None."""
    parts = Path(name).parts
    for depth in range(1, len(parts)):
        parent = run_dir.joinpath(*parts[:depth])
        if parent.is_symlink():
            return parent
    return None


def clear(run_dir, files=(), keep=()):
    """Removes what a run wrote (`RUN_WRITES` and the client's `files`), the
    finished marker first; the names in `keep` stay. The mark stays: the
    folder is still a run of this package (an unfinished one).

    Raises:
        RunFolderError: a name of `files` lies under a symbolic link in the
            run (named): nothing is removed through a link.
    """
    run_dir = Path(run_dir)
    for name in files:
        linked = _linked_parent(run_dir, name)
        if linked is not None:
            raise RunFolderError(
                f"{linked} is a symbolic link (to {os.readlink(linked)}); the run's file "
                f"{name} is never removed through it. Nothing was changed. Replace the "
                "link with a folder."
            )
    remove(run_dir / FINISHED_FILE)
    for name in (*RUN_WRITES, *files):
        if name not in keep:
            remove(run_dir / name)


def finish(run_dir, info):
    """Marks the run finished (`finished.json` holding `info`), then drops its backup."""
    run_dir = Path(run_dir)
    write_json(run_dir / FINISHED_FILE, info)
    remove(run_dir / BACKUP_DIR)


# ------------------------------------------------------------ reading


def check_regular_file(path):
    """Raises `CorruptRunError` unless `path` is a regular file (not a FIFO,
    a device or a folder, which reading could wait on forever)."""
    path = Path(path)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(mode)
            else "a folder"
            if stat.S_ISDIR(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise CorruptRunError(
            f"{path} is not a regular file: it is {kind}. A run writes a regular file there."
        )


def read_json(path):
    """The JSON object in `path`; `CorruptRunError` if it is not one."""
    path = Path(path)
    check_regular_file(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CorruptRunError(
            f"{path} is corrupt: not valid JSON ({path.stat().st_size} bytes; {error})."
        ) from None
    if not isinstance(data, dict):
        raise CorruptRunError(f"{path} is corrupt: expected a JSON object, found {data!r:.60}.")
    return data


def read_mark(run_dir):
    """The mark of `run_dir` (a dict), or None when it has none.

    Raises:
        NotARunError: the mark file is not this package's (another format,
            damaged, not a regular file) or comes from a newer version.
    """
    path = Path(run_dir) / MARK_FILE
    if not (path.exists() or path.is_symlink()):
        return None
    try:
        mark = read_json(path)
    except (CorruptRunError, OSError) as error:
        raise NotARunError(
            f"{Path(run_dir)} is not a run folder of keras_attention: {error}"
        ) from None
    if mark.get("format") != FORMAT_NAME:
        raise NotARunError(
            f"{Path(run_dir)} is not a run folder of keras_attention: its {MARK_FILE} names "
            f"the format {mark.get('format')!r}, not {FORMAT_NAME!r}. Nothing was changed."
        )
    version = mark.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise NotARunError(
            f"{path} is of version {version!r}; this version of keras_attention reads "
            f"runs up to version {FORMAT_VERSION}. Upgrade keras_attention. Nothing was changed."
        )
    return mark


def check_model_file(path):
    """Raises `CorruptRunError` unless `path` is a whole `.keras` archive."""
    path = Path(path)
    check_regular_file(path)
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
    check_regular_file(path)
    try:
        with h5py.File(path, "r"):
            pass
    except OSError as error:
        raise CorruptRunError(
            f"{path} is corrupt: not a readable HDF5 weights file "
            f"({path.stat().st_size} bytes; {error})."
        ) from None


def read_state(run_dir):
    """The progress of an unfinished run (`backup/state.json`), or None.

    The state holds `epoch` (epochs done), `weights` (the file in `backup/`
    with the weights and optimizer after that epoch), `best` and `best_epoch`
    (the monitored value of `model.keras` and its 1-based epoch), `stopped`
    (training had decided to stop), `history` (one row per epoch) and, from
    runs of this version on, `seconds` (the training time of those epochs,
    summed over the run's sessions: what its time budget has spent).
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


def entries(run_dir):
    """The names in `run_dir`, less this package's temporary files (a user's
    `.tmp-notes.txt` is one of the names)."""
    return {p.name for p in Path(run_dir).iterdir() if not is_temporary(p.name)}


def is_worker_folder(name):
    """Whether `name` is where a worker other than the chief of a
    multi-worker training writes (`worker_N`)."""
    return name.startswith("worker_") and name[len("worker_") :].isdigit()


def folder(run_dir):
    """`run_dir` as a `Path`; `NotADirectoryError` if it is a file."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise NotADirectoryError(f"{run_dir} is a file, not a run folder.")
    return run_dir


def run_status(run_dir, legacy=None):
    """Whether `run_dir` is a new, unfinished or finished run (`RunStatus`).

    Args:
        run_dir: the folder.
        legacy: a function of the folder, True when it holds a finished run
            of an older version without the mark (read-only); None: none.

    Raises:
        NotADirectoryError: `run_dir` is a file.
        NotARunError: the folder holds files but not the mark (and not a
            `legacy` run).
        CorruptRunError: `finished.json`, `config.json` or the backup is
            damaged.
    """
    run_dir = Path(run_dir)
    if not run_dir.exists():
        return RunStatus(NEW, detail=f"{run_dir} does not exist")
    run_dir = folder(run_dir)
    found = entries(run_dir)
    # The workers of a multi-worker training may create their folders
    # (`worker_N`) before the chief writes the mark.
    if not {name for name in found if not is_worker_folder(name)} - {LOCK_FILE}:
        return RunStatus(NEW, detail=f"{run_dir} is empty")
    if read_mark(run_dir) is None:
        if legacy is not None and legacy(run_dir):
            return RunStatus(
                FINISHED,
                detail=(
                    f"{run_dir} holds a finished run of an older version (no {MARK_FILE}; "
                    "it can be read, not trained into)"
                ),
                legacy=True,
            )
        shown = ", ".join(sorted(found)[:5]) + (
            f" and {len(found) - 5} more" if len(found) > 5 else ""
        )
        raise NotARunError(
            f"{run_dir} is not a run folder of keras_attention: it holds {shown} but not "
            f"{MARK_FILE}, which a run writes first. Nothing was changed. Give the run a "
            "new or empty folder."
        )
    if (run_dir / CONFIG_FILE).exists():
        read_json(run_dir / CONFIG_FILE)
    if (run_dir / FINISHED_FILE).exists() or (run_dir / FINISHED_FILE).is_symlink():
        info = read_json(run_dir / FINISHED_FILE)  # a damaged marker is reported as such
        diverged = info.get("diverged")
        if isinstance(diverged, dict) and isinstance(diverged.get("epoch"), int):
            return RunStatus(
                FINISHED,
                detail=diverged_detail(run_dir, info),
                diverged=diverged["epoch"],
            )
        return RunStatus(FINISHED, detail=f"{run_dir} holds a finished run ({FINISHED_FILE})")
    state = read_state(run_dir)
    if state is not None:
        return RunStatus(
            UNFINISHED,
            state["epoch"],
            f"{run_dir} holds an unfinished run; it resumes after epoch {state['epoch']}",
        )
    return RunStatus(
        UNFINISHED, 0, f"{run_dir} holds an unfinished run with no epoch backed up yet"
    )


def diverged_detail(run_dir, info):
    """The sentence that says where a run diverged and what it holds, from
    its `finished.json` (`info`, with a `diverged` entry)."""
    diverged = info["diverged"]
    best = info.get("best_epoch") or 0
    if best and (Path(run_dir) / MODEL_FILE).exists():
        holds = f"its {MODEL_FILE} is epoch {best}'s, the best before it"
    else:
        holds = f"no epoch before it ended with finite values, so it holds no {MODEL_FILE}"
    return (
        f"{run_dir} holds a run whose training diverged at epoch {diverged['epoch']} "
        f"({diverged.get('reason', 'a value not finite')}); {holds}"
    )


def check_options(run_dir, options, ignore=(), defaults=None):
    """Raises `RunOptionsError` unless `options` agree with the run's
    `config.json` on every key both hold (but those in `ignore`).

    Run before anything of the run is rewritten: a resumed run must train the
    model it started, on the data it started with.

    Args:
        run_dir: the run folder.
        options: the options asked for.
        ignore: keys that may differ.
        defaults: `{key: value}` that a `config.json` lacking `key` stands
            for (a run of a version before that option trained with it).
    """
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return
    saved = dict(defaults or {}, **read_json(path))
    # Through JSON, as config.json holds them: a tuple equals its list.
    options = json.loads(json.dumps(options))
    differences = {
        key: (saved[key], value)
        for key, value in options.items()
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


# ----------------------------------------------------- resuming, keeping


def restore(model, run_dir, state):
    """Puts an unfinished run back where its backup left it.

    Loads the weights and the optimizer's state of the last backed-up epoch
    into `model` (compiled, built), rewrites `history.csv` to one row per
    backed-up epoch, and rewrites `model.keras` when that epoch was the best
    (the process may have been killed before it did). Epoch weights saved
    after that epoch (`keep_epochs`) are removed: the epoch runs again.
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


class RunKeeper(keras.callbacks.Callback):
    """Keeps the run folder resumable and `model.keras` the best epoch's.

    At the end of every epoch, in this order: the weights and the optimizer's
    state go to a new `backup/epoch_NNN.weights.h5`; `backup/state.json` is
    replaced (the commit: a resume starts after this epoch); `model.keras` is
    replaced when the monitored value improved; `history.csv` is rewritten;
    the previous backup weights are deleted. Each write is atomic, so a
    process killed at any point loses at most the epoch in progress.

    An epoch whose loss, monitored value or weights are not finite (NaN or
    infinite) is not kept: training stops there (`stop_training`), the
    backup and `model.keras` stay those of the epochs before, and
    `diverged` says where and why.

    It replaces `ModelCheckpoint(save_best_only=True)`, `BackupAndRestore` and
    `CSVLogger`, which write their files in place. Put it after the callbacks
    that change the weights or the logs at the end of an epoch
    (`SwapEMAWeights`, the learning-rate schedule), and after the ones that
    save other files of the epoch.

    Args:
        run_dir: the run folder.
        state: the state `restore` resumed from, or None for a new run.
        monitor: the log the best model is chosen on (lower is better);
            None: `model.keras` is the last epoch's.
        training_time: a function of no arguments returning the run's
            training time in seconds (`TrainingTime`), recorded in the state
            as `seconds`; None: not recorded.

    Attributes:
        diverged: None, or once an epoch diverged `{"epoch": N (1-based),
            "reason": what was not finite, "logs": that epoch's logs}`.
    """

    def __init__(self, run_dir, state=None, monitor="val_loss", training_time=None):
        super().__init__()
        self.run_dir = Path(run_dir)
        self.monitor = monitor
        self.training_time = training_time
        state = state or {}
        self.best = state.get("best")
        self.best_epoch = state.get("best_epoch", 0)
        self.history = list(state.get("history", []))
        self.diverged = None

    def _not_finite(self, logs):
        """What of the epoch is not finite (the loss, the monitored value,
        a weight), in words; None when all is."""
        for key in dict.fromkeys(("loss", self.monitor)):
            if key in logs and not math.isfinite(float(logs[key])):
                return f"{key} {float(logs[key])}"
        for variable in self.model.trainable_variables:
            value = keras.ops.convert_to_numpy(variable)
            if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all():
                return f"the weights {variable.path} hold values that are not finite"
        return None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        reason = self._not_finite(logs)
        if reason is not None:
            # Nothing of this epoch is kept: the backup and model.keras stay
            # the last finite epochs', which a load or a resume then finds.
            self.diverged = {
                "epoch": epoch + 1,
                "reason": reason,
                "logs": {key: float(v) for key, v in logs.items()},
            }
            self.model.stop_training = True
            return
        if self.monitor is None:
            improved = True  # model.keras is the last epoch's
        elif self.monitor not in logs:
            raise KeyError(
                f"RunKeeper: the logs have no {self.monitor!r} (keys: {sorted(logs)}); "
                "fit with validation data, or monitor another value (None: the last epoch)."
            )
        else:
            value = float(logs[self.monitor])
            improved = not math.isnan(value) and (self.best is None or value < self.best)
        if improved:
            self.best = None if self.monitor is None else value
            self.best_epoch = epoch + 1
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
        if self.training_time is not None:
            state["seconds"] = self.training_time()
        write_json(backup / STATE_FILE, state)
        if improved:
            save_model(self.model, self.run_dir / MODEL_FILE)
        write_history(self.run_dir, self.history)
        for path in backup.glob("epoch_*.weights.h5"):
            if path.name != weights:
                path.unlink()
