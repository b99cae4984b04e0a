"""A trainer killed at any instant resumes: a user's own model and the G2P
example, both trained through `keras_attention.training.TrainingRun`.

Each trainer runs in its own process and is killed with SIGKILL as each run
file first appears (its temporary file, with `KERAS_ATTENTION_WRITE_DELAY`
holding every write open 0.3 s, at a few delays into it), then started
again with the same command; each restart resumes from what the kill left
and goes on to the next kill point, and the last one finishes. The model
must then load and score. Between kills, in this process: a second trainer
on the running run is refused naming the holder, a resume with other
options names them, a folder of the user's own files is refused untouched.

About a minute each on a 2-core CPU (eight processes importing TensorFlow,
tiny data and models).
"""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
from _data_paths import require_cmudict
from _scripts import ROOT
from _scripts import load_script

from keras_attention import training
from keras_attention.files.atomic import TEMP_PREFIX
from keras_attention.files.atomic import WRITE_DELAY_ENV
from keras_attention.training import NotARunError
from keras_attention.training import RunInUseError
from keras_attention.training import RunOptionsError
from keras_attention.training import run_folder

pytestmark = pytest.mark.tensorflow

TRAINER = Path(__file__).with_name("_own_model_trainer.py")
CMUDICT = ROOT.parent / "shared" / "data" / "cmudict"
WRITE_DELAY = "0.3"


def _writing(name, sub=""):
    """A kill point: a temporary file for `name` exists in `RUN_DIR/sub`."""

    def moment(run_dir):
        try:
            entries = os.listdir(run_dir / sub)
        except FileNotFoundError:
            return False
        return any(e.startswith(TEMP_PREFIX) and e.endswith(f"-{name}") for e in entries)

    return moment


def _run_until(command, kill_when, run_dir, log, delay=0.0, while_running=None, timeout=300):
    """Runs `command`; SIGKILLs it `delay` s after `kill_when(run_dir)`, first
    calling `while_running(pid)`. Returns its exit code."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **{WRITE_DELAY_ENV: WRITE_DELAY})
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        try:
            while process.poll() is None:
                if kill_when is not None and kill_when(run_dir):
                    if while_running is not None:
                        # Paused meanwhile, so that it is still where it was.
                        process.send_signal(signal.SIGSTOP)
                        try:
                            while_running(process.pid)
                        finally:
                            process.send_signal(signal.SIGCONT)
                    time.sleep(delay)
                    process.send_signal(signal.SIGKILL)
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"{command} ran past {timeout} s")
                time.sleep(0.005)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
    return process.returncode


def _check_whole(run_dir):
    """What any kill leaves: a run of ours, unfinished, its files whole."""
    status = run_folder.run_status(run_dir)  # the mark, a whole finished.json
    assert status.state != run_folder.FINISHED
    state = run_folder.read_state(run_dir)  # the backup's weights open
    for name in ("config.json", "vocab.json", "progress.json"):
        if (run_dir / name).exists():
            run_folder.read_json(run_dir / name)
    if (run_dir / "model.keras").exists():
        run_folder.check_model_file(run_dir / "model.keras")
    done = state["epoch"] if state else 0
    assert len(_history(run_dir)) in (max(done - 1, 0), done)
    return done


def _history(run_dir):
    if not (run_dir / run_folder.HISTORY_FILE).exists():
        return []
    with open(run_dir / run_folder.HISTORY_FILE) as f:
        return [int(row["epoch"]) for row in csv.DictReader(f)]


def _snapshot(folder):
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _user_folder(folder):
    (folder / "backup").mkdir(parents=True)
    (folder / "epochs").mkdir()
    (folder / "model.keras").write_bytes(b"the user's own model")
    (folder / "history.csv").write_text("epoch,loss\n0,1.5\n")
    (folder / "backup" / "thesis.txt").write_text("chapter 1\n")
    (folder / "epochs" / "notes.txt").write_text("notes\n")
    (folder / "config.json").write_text(json.dumps({"attention": "bahdanau", "units": 8}))
    return folder


def _kill_and_resume(command, run_dir, tmp_path, kill_points, checks, finish=True):
    """Kills `command` at each of `kill_points` ((name, moment, delay)),
    restarting it each time (`checks[name](pid)` runs while it is alive);
    then, with `finish`, runs it to the end."""
    done = _check_whole(run_dir) if run_dir.exists() else 0
    for name, moment, delay in kill_points:
        log = tmp_path / f"{name.replace('/', '_').replace(' ', '_')}.log"
        check = checks.get(name)
        code = _run_until(command, moment, run_dir, log, delay, check)
        text = log.read_text()
        assert code == -signal.SIGKILL, f"the run ended before the kill point {name!r}:\n{text}"
        if done:
            assert f"resuming {run_dir} after epoch {done}" in text, text[-2000:]
        done = _check_whole(run_dir)
    if not finish:
        return
    log = tmp_path / "last.log"
    code = _run_until(command, None, run_dir, log)
    assert code == 0, log.read_text()[-3000:]
    assert run_folder.run_status(run_dir).state == run_folder.FINISHED
    assert not list(run_dir.rglob(f"{TEMP_PREFIX}*"))
    assert not (run_dir / run_folder.LOCK_FILE).exists()


# --------------------------------------------------------- a user's model


def test_own_model_killed_as_each_file_appears_resumes_and_scores(tmp_path):
    trainer = load_script("tests/_own_model_trainer.py")
    run_dir = tmp_path / "run"
    command = [sys.executable, str(TRAINER), str(run_dir)]

    def second_trainer_is_refused(pid):
        with pytest.raises(RunInUseError, match=f"in use by process {pid}"):
            trainer.main(run_dir)

    kill_points = [
        ("mark", _writing(run_folder.MARK_FILE), 0.0),
        ("config.json", _writing("config.json"), 0.1),
        ("first backup weights", _writing("epoch_001.weights.h5", "backup"), 0.0),
        ("backup/state.json", _writing("state.json", "backup"), 0.2),
        ("first model.keras", _writing("model.keras"), 0.0),
        ("history.csv", _writing("history.csv"), 0.1),
        ("finished.json", _writing("finished.json"), 0.0),
    ]
    checks = {"config.json": second_trainer_is_refused}
    _kill_and_resume(command, run_dir, tmp_path, kill_points[:4], checks, finish=False)
    # Killed runs keep refusing other options and the user's folders.
    before = _snapshot(run_dir)
    with pytest.raises(RunOptionsError, match=r"units 16 \(the run has 8\)"):
        trainer.main(run_dir, 16)
    assert _snapshot(run_dir) == before
    _kill_and_resume(command, run_dir, tmp_path, kill_points[4:], {})

    assert _history(run_dir) == list(range(trainer.EPOCHS))
    # model.keras loads, and scores what its best epoch scored on the
    # validation rows (float64 numpy against the logged val_loss).
    model = keras.saving.load_model(run_dir / "model.keras")
    x, y = trainer.data()
    x, y = x[: trainer.VALIDATION], y[: trainer.VALIDATION]
    mse = float(np.mean((model.predict(x, verbose=0).astype("float64") - y) ** 2))
    with open(run_dir / run_folder.HISTORY_FILE) as f:
        val_losses = [float(row["val_loss"]) for row in csv.DictReader(f)]
    np.testing.assert_allclose(mse, min(val_losses), rtol=1e-4)
    untrained = trainer.build(8)()
    mse_untrained = float(np.mean((untrained.predict(x, verbose=0) - y) ** 2))
    assert mse < 0.5 * mse_untrained, (mse, mse_untrained)
    info = json.loads((run_dir / "finished.json").read_text())
    assert info["epochs"] == trainer.EPOCHS


def test_own_model_refuses_a_folder_of_the_users_files(tmp_path):
    trainer = load_script("tests/_own_model_trainer.py")
    folder = _user_folder(tmp_path / "project")
    before = _snapshot(folder)
    with pytest.raises(NotARunError, match="not a run folder"):
        trainer.main(folder)
    code = subprocess.run(
        [sys.executable, str(TRAINER), str(folder)], capture_output=True, text=True
    )
    assert code.returncode == 1
    assert code.stderr.strip().splitlines()[-1].startswith("train: ")
    assert "Traceback" not in code.stderr
    assert _snapshot(folder) == before


# ------------------------------------------------------------ the G2P example


@pytest.mark.usefixtures("cmudict")
def test_g2p_killed_as_each_file_appears_resumes_and_scores(tmp_path, capsys):
    g2p = load_script("examples/g2p_cmudict.py")
    run_dir = tmp_path / "run"
    # --quick: a tiny model, 12 epochs; of 2 batches each here.
    argv = ["train", "--quick", "--steps-per-epoch", "2", "--verbose", "0"]
    argv += ["--data-dir", str(CMUDICT), "--run-dir", str(run_dir)]
    command = [sys.executable, str(ROOT / "examples" / "g2p_cmudict.py"), *argv]

    def second_trainer_is_refused(pid):
        with pytest.raises(SystemExit, match=f"^train: .* in use by process {pid}"):
            g2p.main(argv)

    kill_points = [
        ("mark", _writing(run_folder.MARK_FILE), 0.0),
        ("vocab.json", _writing("vocab.json"), 0.1),
        ("config.json", _writing("config.json"), 0.0),
        ("first progress.json", _writing("progress.json"), 0.2),
        ("first backup weights", _writing("epoch_001.weights.h5", "backup"), 0.0),
        ("first model.keras", _writing("model.keras"), 0.1),
        ("finished.json", _writing("finished.json"), 0.0),
    ]
    checks = {"vocab.json": second_trainer_is_refused}
    _kill_and_resume(command, run_dir, tmp_path, kill_points[:6], checks, finish=False)
    before = _snapshot(run_dir)
    with pytest.raises(SystemExit, match=r"other options: dropout 0\.5 \(the run has 0\.2\)"):
        g2p.main([*argv, "--dropout", "0.5"])
    assert _snapshot(run_dir) == before
    _kill_and_resume(command, run_dir, tmp_path, kill_points[6:], {})

    progress = json.loads((run_dir / "progress.json").read_text())
    assert [e["epoch"] for e in progress["epochs"]] == list(range(1, 13))
    assert _history(run_dir) == list(range(12))
    model, vocab, config = g2p.load_run(str(run_dir))
    assert config["max_epochs"] == 12
    lexicon = g2p.read_split(str(CMUDICT), "cmudict-0.7b.test")
    words = list(lexicon)[::997][:12]
    pairs = g2p.training_pairs({w: lexicon[w] for w in words}, vocab)
    batches = training.length_bucketed_dataset(pairs, len(pairs), 0, g2p.START, g2p.END)
    (source, phones_in), target = next(iter(batches))
    loss = float(model.loss(target, model([source, phones_in], training=False)))
    assert np.isfinite(loss) and loss < np.log(len(vocab.phones))  # better than uniform


@pytest.mark.usefixtures("cmudict")
def test_g2p_refuses_a_folder_of_the_users_files(tmp_path):
    g2p = load_script("examples/g2p_cmudict.py")
    folder = _user_folder(tmp_path / "project")
    before = _snapshot(folder)
    argv = ["train", "--quick", "--data-dir", str(CMUDICT), "--run-dir", str(folder)]
    for extra in ([], ["--overwrite"]):
        with pytest.raises(SystemExit, match=r"^train: .* is not a run folder"):
            g2p.main(argv + extra)
    assert _snapshot(folder) == before


@pytest.fixture
def cmudict():
    """Skips without CMUdict; fails under CI=true, where the data must be there."""
    return require_cmudict()
