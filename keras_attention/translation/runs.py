"""The translator's run folder: a `keras_attention.training` run with vocabularies.

A run folder (`python -m keras_attention.translation train --run-dir RUN_DIR`)
is a run of `keras_attention.training.TrainingRun` (its mark, `config.json`,
`model.keras`, `history.csv`, `backup/`, `epochs/`, `finished.json`,
`run.lock`; see `keras_attention.training.run_folder`) with the translator's
own files:

| path | content |
|---|---|
| `source_vocab/`, `target_vocab/` | the tokenizers, learned before `config.json` |
| `eval/`, `explain.json`, `export/` | what the commands write into a run |

This module names those files, checks that a run can be loaded
(`check_run`), writes a finished run from a model (`write_run`, for
`average`), and recognises the finished runs of versions before the mark
(`older_finished_run`): they load, evaluate and export as before, but are
never trained into, overwritten or cleared. Everything else (atomic writes,
the lock, the states, the checks) is `keras_attention.training`'s: import it
from there (`keras_attention.training.run_folder`, `keras_attention.files.atomic`).
"""

import os
from pathlib import Path

from keras_attention.files.atomic import is_temporary
from keras_attention.files.atomic import process_is_running
from keras_attention.files.atomic import write_json
from keras_attention.training import averaging
from keras_attention.training import run_folder
from keras_attention.training.run_folder import BACKUP_DIR
from keras_attention.training.run_folder import CONFIG_FILE
from keras_attention.training.run_folder import FINISHED
from keras_attention.training.run_folder import FINISHED_FILE
from keras_attention.training.run_folder import HISTORY_FILE
from keras_attention.training.run_folder import LOCK_FILE
from keras_attention.training.run_folder import LOGS_DIR
from keras_attention.training.run_folder import MODEL_FILE
from keras_attention.training.run_folder import NEW
from keras_attention.training.run_folder import CorruptRunError
from keras_attention.training.run_folder import DivergedRunError
from keras_attention.training.run_folder import NotARunError
from keras_attention.training.run_folder import RunExistsError
from keras_attention.training.run_folder import RunFolderError
from keras_attention.training.run_folder import check_model_file
from keras_attention.training.run_folder import finish
from keras_attention.training.run_folder import folder
from keras_attention.training.run_folder import read_json
from keras_attention.training.run_folder import save_model
from keras_attention.training.run_folder import write_mark
from keras_attention.training.run_lock import RunLock
from keras_attention.training.run_lock import flock_holder
from keras_attention.training.run_lock import read_pid_file
from keras_attention.training.training_run import TrainingRun

SOURCE_VOCAB = "source_vocab"
TARGET_VOCAB = "target_vocab"
# What loading a run needs (`translator.load_run`).
RUN_FILES = (MODEL_FILE, CONFIG_FILE, SOURCE_VOCAB, TARGET_VOCAB)
# What the commands write into a run folder besides the run itself:
# `evaluate` (its default --out-dir), `explain`, and the export of
# examples/run_translator.sh.
COMMAND_OUTPUTS = ("eval", "explain.json", "export")
# `evaluate`'s default folder in a run, and the mark it writes into its folder.
EVALUATION_DIR = "eval"
EVALUATION_MARK = "keras_attention_eval.json"
# The translator's own files in a run, cleared with it when it starts over.
TRANSLATOR_FILES = (SOURCE_VOCAB, TARGET_VOCAB)
# The keys of config.json that the commands read after loading a run.
REQUIRED_CONFIG_KEYS = ("attention",)
# Every name a run folder of a version before the mark may hold.
_OLDER_RUN_ENTRIES = frozenset(
    (*RUN_FILES, HISTORY_FILE, FINISHED_FILE, BACKUP_DIR, averaging.EPOCHS_DIR, LOGS_DIR)
    + (LOCK_FILE, *COMMAND_OUTPUTS)
)


def translator_run(run_dir, config, overwrite=False, ignore=(), setup=None, **options):
    """The `TrainingRun` of a translator's run folder; `options`: its
    `mixed_precision` and `distribution`."""
    return TrainingRun(
        run_dir,
        config,
        session_options=ignore,
        files=TRANSLATOR_FILES,
        overwrite=overwrite,
        legacy=older_finished_run,
        setup=setup,
        **options,
    )


def translator_run_status(run_dir):
    """`keras_attention.training.run_status` of a translator's run folder: a
    finished run of a version before the mark is `FINISHED`, with `legacy`."""
    return run_folder.run_status(run_dir, legacy=older_finished_run)


def older_finished_run(run_dir):
    """Whether `run_dir` holds a finished run of a version before the mark
    (read only).

    Such a run holds only the names a run then wrote, a `config.json` with
    `attention`, both vocabularies and a whole `model.keras`, and no
    `backup/` (an unfinished run of those versions is not resumed: it is
    refused like any folder that is not ours).
    """
    run_dir = Path(run_dir)
    names = {p.name for p in run_dir.iterdir() if not is_temporary(p.name)}
    worker = {n for n in names if n.startswith("worker_") and n[len("worker_") :].isdigit()}
    if names - worker - _OLDER_RUN_ENTRIES or (run_dir / BACKUP_DIR).exists():
        return False
    if not all((run_dir / name).is_dir() for name in (SOURCE_VOCAB, TARGET_VOCAB)):
        return False
    try:
        config = read_json(run_dir / CONFIG_FILE)
        check_model_file(run_dir / MODEL_FILE)
    except (OSError, CorruptRunError):
        return False
    return "attention" in config


def check_evaluation_folder(run_dir, out_dir=None):
    """Raises `RunFolderError` when `evaluate` would overwrite a file it did
    not write: `out_dir` (default `RUN_DIR/eval`) holds `results.json`, a
    `.fr` file or a `.png` but neither the mark `evaluate` writes
    (`EVALUATION_MARK`) nor is the default folder of a run of ours. A run's
    `eval/` that is a symbolic link is refused: `evaluate` never writes through
    a link in a run folder (to the user's own `results.json`)."""
    run_dir = Path(run_dir)
    own = run_dir / EVALUATION_DIR
    if own.is_symlink() and (out_dir is None or os.path.abspath(out_dir) == os.path.abspath(own)):
        raise RunFolderError(
            f"{own} is a symbolic link (to {os.readlink(own)}); `evaluate` never writes "
            "through a link in a run folder. Nothing was changed. Remove the link, or "
            "name a folder with --out-dir."
        )
    out_dir = Path(out_dir or own)
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise RunFolderError(f"--out-dir {out_dir} is a file, not a folder. Nothing was changed.")
    if (out_dir / EVALUATION_MARK).is_file():
        return
    if not own.is_symlink() and out_dir.resolve() == own.resolve():
        return  # inside the run folder, whose `eval/` older versions wrote unmarked
    written = sorted(
        p.name for p in out_dir.iterdir() if p.name == "results.json" or p.suffix in (".fr", ".png")
    )
    if written:
        shown = ", ".join(written[:3]) + (
            f" and {len(written) - 3} more" if len(written) > 3 else ""
        )
        raise RunFolderError(
            f"--out-dir {out_dir} holds {shown}, which `evaluate` did not write (it has no "
            f"{EVALUATION_MARK}); they would be overwritten. Nothing was changed. Give a new "
            "or empty folder, or one that `evaluate` wrote."
        )


def mark_evaluation_folder(out_dir):
    """Creates `evaluate`'s folder and marks it as `evaluate`'s."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not (out_dir / EVALUATION_MARK).exists():
        write_json(out_dir / EVALUATION_MARK, {"format": "keras_attention.evaluation"})


def export_state(run_dir):
    """What an export records of the run it comes from (`export.json`'s
    `run`): `state` (finished, unfinished or running), the epochs backed
    up (`epochs_backed_up`), and for a run that is not finished a `note` saying that its model is
    the best epoch so far, not the run's last word. A run whose training
    diverged has `diverged_at_epoch` and a `note` that says which epoch its
    model is.

    Read only: the lock is looked up (`flock_holder`), never taken, so that
    a trainer starting meanwhile is not refused.
    """
    status = translator_run_status(run_dir)
    lock = Path(run_dir) / LOCK_FILE
    holder = None
    if lock.is_file():
        holder = flock_holder(os.stat(lock))
        named = read_pid_file(lock)
        if holder is None and named and named != os.getpid() and process_is_running(named):
            holder = named  # no list of locks here: the id in the file
    state = "running" if holder and status.state != FINISHED else status.state
    found = {"state": state}
    if state != FINISHED:
        found["epochs_backed_up"] = status.epoch
    if status.legacy:
        found["older_version"] = True
    if status.diverged:
        found["diverged_at_epoch"] = status.diverged
        found["note"] = f"{status.detail}."
    if state != FINISHED:
        found["note"] = (
            f"exported from a {state} run"
            + (f" (process {holder} was training it)" if state == "running" else "")
            + ": its model is the best epoch so far, not the finished run's"
        )
    return found


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


def check_run(run_dir):
    """Checks that `run_dir` can be loaded; returns its config.

    Raises:
        NotADirectoryError: `run_dir` is a file.
        DivergedRunError: the run's training diverged in its first epoch:
            it holds no model (said so).
        FileNotFoundError: naming every missing file of `RUN_FILES`.
        CorruptRunError: a file exists but is damaged (or is not a regular
            file), or `config.json` lacks a key of `REQUIRED_CONFIG_KEYS`;
            the message names the file.
    """
    run_dir = folder(run_dir)
    missing = [name for name in RUN_FILES if not (run_dir / name).exists()]
    if MODEL_FILE in missing and (run_dir / FINISHED_FILE).is_file():
        info = read_json(run_dir / FINISHED_FILE)
        if isinstance(info.get("diverged"), dict):
            raise DivergedRunError(
                f"{run_folder.diverged_detail(run_dir, info)}. Nothing to load; train it "
                "over with --overwrite and other options (a lower learning rate, say)."
            )
    if missing:
        raise FileNotFoundError(
            f"The run folder {run_dir} is incomplete: missing "
            f"{', '.join(missing)}. A finished `train` command writes "
            f"{', '.join(RUN_FILES)} (the model after the first epoch)."
        )
    config = read_config(run_dir)
    check_model_file(run_dir / MODEL_FILE)
    return config


def check_writable(run_dir, overwrite=False):
    """Raises unless a new run may be written into `run_dir` (`write_run`):
    the folder is new or empty, or holds a run (whole or damaged) of this
    package and `overwrite` is given.

    Raises:
        NotARunError: the folder holds something else, or a run of a version
            before the mark (even with `overwrite`).
        RunExistsError: it holds a run and not `overwrite`.
        CorruptRunError: it holds a damaged run and not `overwrite`.
        NotADirectoryError: `run_dir` is a file.
    """
    try:
        status = translator_run_status(run_dir)
    except CorruptRunError as error:
        if not overwrite:
            raise CorruptRunError(f"{error} Pass `overwrite=True` to replace it.") from None
        return
    if status.legacy:
        raise NotARunError(f"{status.detail}. Nothing was changed. Use another folder.")
    if status.state != NEW and not overwrite:
        raise RunExistsError(
            f"{status.detail}. Nothing was changed. Use another folder, or pass "
            "`overwrite=True` to replace it."
        )


def write_run(run_dir, model, source_tokenizer, target_tokenizer, config, info, overwrite=False):
    """Writes a finished run folder from a model (what `average` writes).

    The folder must be new or empty, or hold a run of this package and
    `overwrite` be given; it is locked while written. The files go in this
    order: the mark, the vocabularies, `config.json`, `model.keras`, then
    `finished.json`, so that a process killed on the way leaves an
    unfinished run, never a finished one with missing files.

    Args:
        run_dir: the folder (created).
        model: the model, saved as `model.keras`.
        source_tokenizer: saved as `source_vocab/` (any object with `save`).
        target_tokenizer: saved as `target_vocab/`.
        config: the content of `config.json`.
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
        run_folder.clear(run_dir, TRANSLATOR_FILES)
        write_mark(run_dir)
        source_tokenizer.save(run_dir / SOURCE_VOCAB)
        target_tokenizer.save(run_dir / TARGET_VOCAB)
        write_json(run_dir / CONFIG_FILE, config)
        save_model(model, run_dir / MODEL_FILE)
        finish(run_dir, info)
    return run_dir
