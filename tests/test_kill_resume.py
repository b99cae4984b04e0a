"""A training killed at any instant resumes and loses at most one epoch.

One tiny run of `python -m keras_attention.translation train` (64 pairs, 2
epochs, --keep-epochs) is killed with SIGKILL inside each kind of file write of
its run folder, in the order the writes happen, and started again each time:
every restart resumes from what the kill left and goes on to the next kill
point (so each resume is checked to get past the state the kill left); the last
one ends the run.
`KERAS_ATTENTION_WRITE_DELAY` makes each write wait 0.3 s between its temporary
file and the rename, so the kill lands inside the write. After each
kill the folder must hold only whole files and must not be reported finished;
at the end the model must load, be the best epoch's, and the history must have
one row per epoch.

About two minutes on a 2-core CPU: nine processes, each importing TensorFlow,
four of which train an epoch.
"""

import csv
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
from _data_paths import multi30k_dir

from keras_attention.files import atomic
from keras_attention.training import averaging
from keras_attention.training import run_folder
from keras_attention.translation import cli
from keras_attention.translation import runs
from keras_attention.translation.translator import load_run

# The translator's command line, as a command.
CLI = [sys.executable, "-m", "keras_attention.translation"]
EPOCHS = 2
TINY = ["--preset", "tiny", "--max-train-examples", "64", "--epochs", str(EPOCHS)]
WRITE_DELAY = "0.3"


def _writing(folder, name):
    """Whether a temporary file for `name` is being written in `folder`."""
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return False
    return any(e.startswith(atomic.TEMP_PREFIX) and e.endswith(f"-{name}") for e in entries)


def _state_epoch(run_dir):
    try:
        return runs.read_json(run_dir / runs.BACKUP_DIR / run_folder.STATE_FILE)["epoch"]
    except (OSError, ValueError):
        return None  # none yet


def _backup_weights(run_dir):
    folder = run_dir / runs.BACKUP_DIR
    return os.path.isdir(folder) and any(
        e.endswith(".weights.h5") for e in os.listdir(folder) if e.startswith(atomic.TEMP_PREFIX)
    )


# (name, the moment to kill at), in the order of a run's writes. Each restart
# resumes from what the previous kill left, so it meets the next moment.
KILL_POINTS = [
    ("vocabulary", lambda d: _writing(d / "target_vocab", "tokenizer.json")),
    ("config.json", lambda d: _writing(d, "config.json")),
    ("first backup weights", _backup_weights),  # epoch 1: nothing backed up yet
    ("first model.keras", lambda d: _writing(d, "model.keras")),  # epoch 1 backed up
    # The restart rewrites model.keras from the backup of its best epoch (the
    # kill came before the first one), then trains epoch 2.
    ("backup/state.json", lambda d: _writing(d / runs.BACKUP_DIR, "state.json")),
    (
        "model.keras replaced",
        lambda d: (d / "model.keras").exists() and _writing(d, "model.keras"),
    ),
    ("history.csv", lambda d: _writing(d, "history.csv") and _state_epoch(d) == 2),
    # All epochs backed up: the restart only marks the run finished.
    ("finished.json", lambda d: _writing(d, "finished.json")),
]


def _run_until(command, env, kill_when, run_dir, log, timeout=300):
    """Runs `command`; SIGKILLs it when `kill_when(run_dir)`. Returns its exit code."""
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        try:
            while process.poll() is None:
                if kill_when is not None and kill_when(run_dir):
                    process.send_signal(signal.SIGKILL)
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"{command} ran past {timeout} s")
                time.sleep(0.01)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
    return process.returncode


def _check_whole(run_dir):
    """What any kill must leave: whole files, an unfinished run, ≤ 1 epoch lost."""
    status = runs.translator_run_status(run_dir)  # raises on a damaged marker or backup
    assert status.state != run_folder.FINISHED
    state = run_folder.read_state(run_dir)  # its weights file opens
    if (run_dir / runs.CONFIG_FILE).exists():
        runs.read_json(run_dir / runs.CONFIG_FILE)
    if (run_dir / runs.MODEL_FILE).exists():
        runs.check_model_file(run_dir / runs.MODEL_FILE)
    epochs = _history_epochs(run_dir)
    assert epochs == list(range(len(epochs)))
    done = state["epoch"] if state else 0
    # history.csv is rewritten just after the backup: it may lack that epoch.
    assert len(epochs) in (done - 1, done)
    # The epoch in progress is the only one whose work is lost.
    assert max(averaging.saved_epochs(run_dir), default=0) <= done + 1
    return done


def _history_epochs(run_dir):
    if not (run_dir / runs.HISTORY_FILE).exists():
        return []
    with open(run_dir / runs.HISTORY_FILE) as f:
        return [int(row["epoch"]) for row in csv.DictReader(f)]


def test_run_killed_inside_every_write_resumes_to_a_whole_run(tmp_path):
    data_dir = multi30k_dir()
    run_dir = tmp_path / "run"
    command = [*CLI, "--data-dir", str(data_dir), "train", *TINY]
    command += ["--keep-epochs", "--run-dir", str(run_dir)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env[atomic.WRITE_DELAY_ENV] = WRITE_DELAY
    done = 0
    for index, (name, moment) in enumerate(KILL_POINTS):
        log = tmp_path / f"{index}.log"
        code = _run_until(command, env, moment, run_dir, log)
        tail = log.read_text()[-3000:]
        assert code == -signal.SIGKILL, f"the run ended before the kill point {name!r}:\n{tail}"
        if done:
            assert f"resuming {run_dir} after epoch {done}" in log.read_text()
        done = _check_whole(run_dir)

    # The last restart ends the run; it is killed as soon as it is marked
    # finished (while it deletes its backup), if it has not exited by then.
    log = tmp_path / "last.log"
    code = _run_until(command, env, lambda d: (d / runs.FINISHED_FILE).exists(), run_dir, log)
    assert code in (0, -signal.SIGKILL), log.read_text()[-3000:]
    assert runs.translator_run_status(run_dir).state == run_folder.FINISHED
    assert not list(run_dir.rglob(f"{atomic.TEMP_PREFIX}*"))

    assert _history_epochs(run_dir) == list(range(EPOCHS))
    assert averaging.saved_epochs(run_dir) == list(range(1, EPOCHS + 1))
    with open(run_dir / runs.HISTORY_FILE) as f:
        val_losses = [float(row["val_loss"]) for row in csv.DictReader(f)]
    best_epoch = int(np.argmin(val_losses)) + 1
    assert runs.read_json(run_dir / runs.FINISHED_FILE)["best_epoch"] == best_epoch
    translator, config = load_run(run_dir)
    assert config["epochs"] == EPOCHS
    # model.keras is the best epoch's model, whichever process wrote it.
    best = keras.saving.load_model(run_dir / runs.MODEL_FILE, compile=False)
    best.load_weights(averaging.epoch_weight_path(run_dir, best_epoch))
    for saved, expected in zip(translator.model.weights, best.weights, strict=True):
        np.testing.assert_array_equal(saved.numpy(), expected.numpy())

    assert cli.main(["status", "--run-dir", str(run_dir)]).state == run_folder.FINISHED
    with pytest.raises(SystemExit, match="already holds a finished run"):
        cli.main(["--data-dir", str(data_dir), "train", *TINY, "--run-dir", str(run_dir)])
