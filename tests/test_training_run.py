"""`keras_attention.training.TrainingRun` with a user's own small model.

In-process and fast (a Dense model on 64 random rows, a few epochs): the run
folder's files, the refusals, the resume after an interrupted epoch, the
same run from the same seed, a disk that fills up. Killing the trainer with
SIGKILL inside each write is tests/test_training_run_kill.py. Keras only:
these run on every backend (tests/run_all_backends.sh).
"""

import argparse
import csv
import errno
import json
import os
import warnings

import keras
import numpy as np
import pytest

from keras_attention.backend import precision
from keras_attention.backend.precision import PolicyError
from keras_attention.files.atomic import DiskFullError
from keras_attention.training import CosineToBudget
from keras_attention.training import NotARunError
from keras_attention.training import RunExistsError
from keras_attention.training import RunInUseError
from keras_attention.training import RunLock
from keras_attention.training import RunOptionsError
from keras_attention.training import TrainingRun
from keras_attention.training import UntrainedRunError
from keras_attention.training import add_training_arguments
from keras_attention.training import averaging
from keras_attention.training import cosine_to_budget
from keras_attention.training import run_folder
from keras_attention.training import run_status
from keras_attention.training.distribution import DistributionError

OPTIONS = {"units": 8, "seed": 3}
EPOCHS = 3


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32"))[:, None]
    return x, y


def _build(units=8, seed=3):
    def build():
        init = keras.initializers.GlorotUniform(seed=seed)
        model = keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(units, activation="tanh", kernel_initializer=init),
                keras.layers.Dense(1, kernel_initializer=init),
            ]
        )
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        return model

    return build


def _fit(run_dir, options=OPTIONS, epochs=EPOCHS, callbacks=(), **kwargs):
    x, y = _data()
    run = TrainingRun(run_dir, options, **kwargs)
    return run.fit(
        _build(options["units"], options["seed"]),
        x,
        y,
        validation_data=(x[:16], y[:16]),
        epochs=epochs,
        batch_size=16,
        shuffle=False,
        learning_rate=1e-2,
        callbacks=callbacks,
        verbose=0,
    )


def _snapshot(folder):
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _history(run_dir):
    with open(run_dir / run_folder.HISTORY_FILE) as f:
        return list(csv.DictReader(f))


def test_a_run_leaves_its_files_and_is_finished_last(tmp_path):
    run_dir = tmp_path / "run"
    model = _fit(run_dir)
    assert run_status(run_dir).state == run_folder.FINISHED
    assert sorted(os.listdir(run_dir)) == sorted(
        [run_folder.MARK_FILE, "config.json", "model.keras", "history.csv", "finished.json"]
    )
    config = json.loads((run_dir / "config.json").read_text())
    assert {k: config[k] for k in OPTIONS} == OPTIONS
    rows = _history(run_dir)
    assert [int(r["epoch"]) for r in rows] == list(range(EPOCHS))
    best = int(np.argmin([float(r["val_loss"]) for r in rows])) + 1
    info = json.loads((run_dir / "finished.json").read_text())
    assert info["epochs"] == EPOCHS and info["best_epoch"] == best
    # The learning rate fell on the cosine, epoch by epoch.
    for row in rows:
        expected = cosine_to_budget(1e-2, 1e-2 * 0.05, int(row["epoch"]) / EPOCHS)
        np.testing.assert_allclose(float(row["learning_rate"]), expected, rtol=1e-6)
    loaded = keras.saving.load_model(run_dir / "model.keras")
    x, _ = _data()
    if best == EPOCHS:  # the best epoch is the last: the model returned
        np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    with pytest.raises(RunExistsError, match="already holds a finished run"):
        _fit(run_dir)


def test_the_same_seed_and_step_count_give_the_same_run(tmp_path):
    first = _fit(tmp_path / "a")
    second = _fit(tmp_path / "b")
    for a, b in zip(first.weights, second.weights, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
    assert _history(tmp_path / "a") == _history(tmp_path / "b")


def test_finished_says_a_finished_run_of_these_options_needs_no_training(tmp_path):
    run_dir = tmp_path / "run"
    assert not TrainingRun(run_dir, OPTIONS).finished()  # a new folder
    _fit(run_dir, epochs=1)
    before = _snapshot(run_dir)
    assert TrainingRun(run_dir, OPTIONS).finished()
    assert not TrainingRun(run_dir, OPTIONS, overwrite=True).finished()
    with pytest.raises(RunOptionsError, match="units"):
        TrainingRun(run_dir, dict(OPTIONS, units=9)).finished()
    assert _snapshot(run_dir) == before  # nothing written


def test_load_gives_the_model_config_and_client_files_of_a_run(tmp_path):
    run_dir = tmp_path / "run"
    x, y = _data()
    with TrainingRun(run_dir, OPTIONS, files=("vocab.json",)) as run:
        (run.run_dir / "vocab.json").write_text(json.dumps({"letters": "ab"}))
        model = run.fit(_build(), x, y, epochs=1, batch_size=16, monitor=None, verbose=0)
    loaded, config, (vocab,) = TrainingRun.load(run_dir, files=("vocab.json",))
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert {k: config[k] for k in OPTIONS} == OPTIONS and vocab == {"letters": "ab"}


def _run_with_vocab(run_dir, vocab, options=OPTIONS):
    x, y = _data()
    with TrainingRun(run_dir, options, files=("vocab.json",)) as run:
        run.client_json("vocab.json", vocab)
        return run.fit(_build(), x, y, epochs=1, batch_size=16, monitor=None, verbose=0)


def test_load_ensemble_gives_each_run_and_refuses_runs_that_differ(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    models = [_run_with_vocab(d, {"letters": "ab"}) for d in (first, second)]
    runs = TrainingRun.load_ensemble([first, second], ("vocab.json",), same=("units",))
    x, _ = _data()
    for (loaded, config, (vocab,)), model in zip(runs, models, strict=True):
        np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
        assert config["units"] == 8 and vocab == {"letters": "ab"}
    other_vocab, other_units = tmp_path / "other_vocab", tmp_path / "other_units"
    _run_with_vocab(other_vocab, {"letters": "ba"})
    _run_with_vocab(other_units, {"letters": "ab"}, dict(OPTIONS, units=9))
    with pytest.raises(
        RunOptionsError, match=rf"^{other_vocab} has another vocab.json than {first}"
    ):
        TrainingRun.load_ensemble([first, other_vocab], ("vocab.json",))
    with pytest.raises(
        RunOptionsError, match=rf"^{other_units} was trained with units 9 and {first} with 8: "
    ):
        TrainingRun.load_ensemble([first, second, other_units], ("vocab.json",), same=("units",))
    with pytest.raises(RunOptionsError) as error:
        TrainingRun.load_ensemble([first, other_vocab], ("vocab.json",))
    assert error.value.differences == {"vocab.json": ({"letters": "ba"}, {"letters": "ab"})}
    # Options not named in `same` may differ; no run at all is refused.
    assert len(TrainingRun.load_ensemble([first, other_units], ("vocab.json",))) == 2
    with pytest.raises(ValueError, match="at least one run"):
        TrainingRun.load_ensemble([])


def test_from_args_takes_the_run_flags_of_add_training_arguments(tmp_path):
    parser = argparse.ArgumentParser(prog="trainer")
    add_training_arguments(
        parser, batch_size=64, learning_rate=1e-3, epochs=5, max_minutes=30.0, batch_size_note="-"
    )
    args = parser.parse_args(["--run-dir", str(tmp_path / "run"), "--overwrite"])
    run = TrainingRun.from_args(args, OPTIONS, files=("vocab.json",))
    assert (run.run_dir, run.overwrite, run.files) == (tmp_path / "run", True, ("vocab.json",))
    assert run.options == dict(OPTIONS, mixed_precision=None, distribution=None, devices=None)
    args.mixed_precision = "mixed_bfloat16"
    assert TrainingRun.from_args(args, OPTIONS).mixed_precision == "mixed_bfloat16"


def test_time_budget_keeps_its_state_in_the_run_and_forgets_unsaved_epochs(tmp_path):
    run_dir = tmp_path / "run"
    x, y = _data()
    kwargs = dict(epochs=3, batch_size=16, monitor=None, verbose=0)
    with TrainingRun(run_dir, OPTIONS, files=("progress.json",)) as run:
        budget = run.time_budget(60, 1e-2, 1e-4, warmup_steps=2, total_steps=12)
        assert (budget.state_path, budget.total_steps) == (run_dir / "progress.json", 12)
        with pytest.raises(ValueError, match=r"Received: name='other.json'"):
            run.time_budget(60, 1e-2, 1e-4, name="other.json")
        with pytest.raises(KeyboardInterrupt):  # killed as the third epoch begins
            run.fit(_build(), x, y, callbacks=[budget, _Interrupt(2)], **kwargs)
    assert [e["epoch"] for e in budget.state["epochs"]] == [1, 2]
    # A progress file that ran ahead of the backup (a kill between the two
    # writes): the resumed run's budget keeps only the epochs the run has.
    progress = json.loads((run_dir / "progress.json").read_text())
    progress["epochs"].append(dict(progress["epochs"][-1], epoch=3))
    (run_dir / "progress.json").write_text(json.dumps(progress))
    with TrainingRun(run_dir, OPTIONS, files=("progress.json",)) as run:
        assert run.initial_epoch == 2
        resumed = run.time_budget(60, 1e-2, 1e-4)
        assert [e["epoch"] for e in resumed.state["epochs"]] == [1, 2]
        run.fit(_build(), x, y, callbacks=[resumed], **kwargs)
    assert [e["epoch"] for e in resumed.state["epochs"]] == [1, 2, 3]
    with pytest.raises(RuntimeError, match="not entered"):
        TrainingRun(run_dir, OPTIONS, files=("progress.json",)).time_budget(1, 1e-2, 1e-4)


def test_load_of_an_untrained_folder_names_the_missing_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UntrainedRunError, match=r"missing .*model\.keras, .*vocab\.json\); train"):
        TrainingRun.load(tmp_path, files=("vocab.json",))


def test_client_json_is_written_once_and_read_back_on_resume(tmp_path):
    run_dir = tmp_path / "run"
    with TrainingRun(run_dir, OPTIONS, files=("vocab.json",)) as run:
        assert run.client_json("vocab.json", {"ids": [1, 2]}) == {"ids": [1, 2]}
        with pytest.raises(ValueError, match=r"`files` \('vocab.json',\). Received: name='x.json'"):
            run.client_json("x.json", {})
    assert json.loads((run_dir / "vocab.json").read_text()) == {"ids": [1, 2]}
    with TrainingRun(run_dir, OPTIONS, files=("vocab.json",)) as run:
        assert run.client_json("vocab.json", {"ids": [3]}) == {"ids": [1, 2]}
    with pytest.raises(RuntimeError, match="not entered"):
        run.client_json("vocab.json", {})


def test_training_arguments_take_the_trainers_defaults_and_refuse_bad_values(capsys):
    parser = argparse.ArgumentParser(prog="trainer")
    add_training_arguments(
        parser, batch_size=64, learning_rate=1e-3, epochs=5, max_minutes=30.0, batch_size_note="-"
    )
    args = parser.parse_args(["--run-dir", "r"])
    assert (args.batch_size, args.learning_rate, args.epochs, args.max_minutes) == (64, 1e-3, 5, 30)
    assert (args.overwrite, args.steps_per_epoch, args.intra_op_threads) == (False, None, 0)
    assert (args.mixed_precision, args.distribution, args.seed) == (None, None, 0)
    for flag, value in [("--batch-size", "0"), ("--intra-op-threads", "-1")]:
        with pytest.raises(SystemExit):
            parser.parse_args(["--run-dir", "r", flag, value])
        assert f"argument {flag}: expected" in capsys.readouterr().err


class _Interrupt(keras.callbacks.Callback):
    """Raises at the start of an epoch: a trainer that died there."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt


def test_an_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, capsys):
    whole = _fit(tmp_path / "whole")
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        _fit(run_dir, callbacks=[_Interrupt(2)])
    status = run_status(run_dir)
    assert status.state == run_folder.UNFINISHED and status.epoch == 2
    assert not (run_dir / run_folder.LOCK_FILE).exists()
    capsys.readouterr()
    resumed = _fit(run_dir)
    # The closing line counts the epochs of the whole run, not this process's one.
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("training took ") and "min in this process, 3 epochs in all" in last
    assert last.endswith(f"model: {run_dir / 'model.keras'}")
    for a, b in zip(whole.weights, resumed.weights, strict=True):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), rtol=1e-6, atol=1e-7
        )
    assert [r["epoch"] for r in _history(run_dir)] == ["0", "1", "2"]


def test_resume_with_other_options_names_them_and_changes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        _fit(run_dir, callbacks=[_Interrupt(1)])
    before = _snapshot(run_dir)
    with pytest.raises(RunOptionsError, match=r"units 16 \(the run has 8\)") as info:
        _fit(run_dir, options=dict(OPTIONS, units=16))
    assert info.value.differences == {"units": (8, 16)}
    assert _snapshot(run_dir) == before
    # A session option may change; `overwrite` starts the run over.
    _fit(run_dir, options=dict(OPTIONS, max_minutes=5), session_options=("max_minutes",))
    assert run_status(run_dir).state == run_folder.FINISHED


def test_a_folder_of_the_users_files_is_refused_and_untouched(tmp_path):
    folder = tmp_path / "project"
    (folder / "backup").mkdir(parents=True)
    (folder / "epochs").mkdir()
    (folder / "model.keras").write_bytes(b"the user's model")
    (folder / "history.csv").write_text("epoch,loss\n")
    (folder / "backup" / "thesis.txt").write_text("chapter 1\n")
    (folder / "epochs" / "notes.txt").write_text("notes\n")
    (folder / "config.json").write_text(json.dumps(OPTIONS))
    before = _snapshot(folder)
    for overwrite in (False, True):
        with pytest.raises(NotARunError, match="not a run folder.*Nothing was changed"):
            _fit(folder, overwrite=overwrite)
    assert _snapshot(folder) == before
    assert not (folder / run_folder.LOCK_FILE).exists()


def test_a_second_trainer_is_refused_naming_the_holder(tmp_path):
    run_dir = tmp_path / "run"
    with RunLock(run_dir):
        with pytest.raises(RunInUseError, match=f"in use by process {os.getpid()}"):
            _fit(run_dir)
    assert not (run_dir / run_folder.MARK_FILE).exists()


def test_a_full_disk_names_the_file_and_the_run_resumes(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    save_weights = keras.Model.save_weights

    def disk_full(self, path, *args, **kwargs):
        with open(path, "wb") as f:
            f.write(b"x" * 1000)  # what got written before the disk filled up
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(keras.Model, "save_weights", disk_full)
    with pytest.raises(DiskFullError) as info:
        _fit(run_dir)
    message = str(info.value)
    assert str(run_dir / "backup" / "epoch_001.weights.h5") in message
    assert "needs at least 1,000 bytes" in message and "free" in message
    assert info.value.errno == errno.ENOSPC
    # The failed write left no temporary file; the run is unfinished.
    assert not list(run_dir.rglob(".tmp-*"))
    assert run_status(run_dir).state == run_folder.UNFINISHED
    monkeypatch.setattr(keras.Model, "save_weights", save_weights)
    _fit(run_dir)
    assert run_status(run_dir).state == run_folder.FINISHED


def test_the_setup_hook_is_entered_while_the_model_is_built(tmp_path):
    events = []

    class Setup:
        def __enter__(self):
            events.append("enter")

        def __exit__(self, *exc_info):
            events.append("exit")

    x, y = _data()
    run = TrainingRun(tmp_path / "run", OPTIONS, setup=Setup)

    def build():
        events.append("build")
        return _build()()

    run.fit(build, x, y, validation_data=(x, y), epochs=1, verbose=0)
    assert events == ["enter", "build", "exit"]


def _weights(model):
    return [keras.ops.convert_to_numpy(w).astype("float64") for w in model.weights]


def test_keep_epochs_saves_every_epoch_and_averaging_gives_their_mean(tmp_path):
    run_dir = tmp_path / "run"
    x, y = _data()
    trained = TrainingRun(run_dir, OPTIONS).fit(
        _build(),
        x,
        y,
        epochs=EPOCHS,
        batch_size=16,
        shuffle=False,
        keep_epochs=True,
        monitor=None,
        verbose=0,
    )
    assert averaging.saved_epochs(run_dir) == [1, 2, 3]
    paths = [averaging.epoch_weight_path(run_dir, e) for e in averaging.last_epochs(run_dir, 2)]
    assert [p.name for p in paths] == ["epoch_002.weights.h5", "epoch_003.weights.h5"]
    each = []
    for path in paths:  # each file alone, in a model of its own
        model = _build()()
        model.load_weights(path)
        each.append(_weights(model))
    # The last file holds the weights training ended with; the epochs differ.
    for saved, final in zip(each[1], _weights(trained), strict=True):
        np.testing.assert_array_equal(saved, final)
    assert any(np.abs(a - b).max() > 1e-4 for a, b in zip(*each, strict=True))
    averaged = averaging.average_weights(_build()(), paths)
    for got, a, b in zip(_weights(averaged), *each, strict=True):
        np.testing.assert_allclose(got, (a + b) / 2, rtol=1e-6, atol=1e-7)


class _Clock:
    """A clock in seconds that only the test moves."""

    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now


class _Spend(keras.callbacks.Callback):
    """Moves `clock` on by `seconds` when training begins or an epoch ends:
    the time a step of training took, without waiting for it."""

    def __init__(self, clock, seconds, at="on_epoch_end"):
        super().__init__()
        self.clock, self.seconds, self.at = clock, seconds, at

    def on_train_begin(self, logs=None):
        if self.at == "on_train_begin":
            self.clock.now += self.seconds

    def on_epoch_end(self, epoch, logs=None):
        if self.at == "on_epoch_end":
            self.clock.now += self.seconds


def _fit_on(run_dir, clock, callbacks, max_minutes, epochs=10):
    """`fit` of the small model with a budget, its time read on `clock`."""
    x, y = _data()
    return TrainingRun(run_dir, OPTIONS, clock=clock).fit(
        _build(),
        x,
        y,
        epochs=epochs,
        batch_size=16,
        shuffle=False,
        learning_rate=1e-2,
        max_minutes=max_minutes,
        callbacks=callbacks,
        monitor=None,
        verbose=0,
    )


def test_a_spent_time_budget_stops_after_one_epoch_at_the_lowest_rate(tmp_path):
    run_dir = tmp_path / "run"
    clock = _Clock()
    # Two minutes pass before the first epoch of a one-minute budget.
    _fit_on(run_dir, clock, [_Spend(clock, 120.0, at="on_train_begin")], 1, epochs=EPOCHS)
    # A budget spent before the first epoch begins: the cosine's floor (5 %
    # of the peak), and the run ends after that epoch, finished.
    rows = _history(run_dir)
    assert [int(r["epoch"]) for r in rows] == [0]
    np.testing.assert_allclose(float(rows[0]["learning_rate"]), 1e-2 * 0.05, rtol=1e-6)
    assert run_status(run_dir).state == run_folder.FINISHED
    assert json.loads((run_dir / "finished.json").read_text())["epochs"] == 1


def test_the_time_budget_counts_the_whole_run_across_a_resume(tmp_path):
    run_dir = tmp_path / "run"
    first = _Clock()
    # Epochs of 4 minutes in a 10-minute budget; killed as the third begins.
    with pytest.raises(KeyboardInterrupt):
        _fit_on(run_dir, first, [_Spend(first, 240.0), _Interrupt(2)], 10)
    assert run_folder.read_state(run_dir)["seconds"] == 480.0
    # A new process, its clock elsewhere: the run has 2 of its 10 minutes
    # left, so it stops after one more epoch (a budget per process would
    # train three more), and that epoch's rate goes on down the cosine from
    # 8 minutes of 10 (not from 2 epochs of 10).
    second = _Clock(now=5000.0)
    _fit_on(run_dir, second, [_Spend(second, 240.0)], 10)
    assert json.loads((run_dir / "finished.json").read_text())["epochs"] == 3
    rows = _history(run_dir)
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2]
    expected = cosine_to_budget(1e-2, 1e-2 * 0.05, 480.0 / 600.0)
    np.testing.assert_allclose(float(rows[2]["learning_rate"]), expected, rtol=1e-6)


def test_a_run_resumed_with_its_budget_spent_trains_no_more(tmp_path):
    run_dir = tmp_path / "run"
    clock = _Clock()
    with pytest.raises(KeyboardInterrupt):
        _fit_on(run_dir, clock, [_Spend(clock, 240.0), _Interrupt(2)], 10)
    # Resumed with a 5-minute budget, of which the run spent 8 minutes.
    _fit_on(run_dir, _Clock(), [_Interrupt(2)], 5)
    assert run_status(run_dir).state == run_folder.FINISHED
    assert json.loads((run_dir / "finished.json").read_text())["epochs"] == 2


@pytest.mark.parametrize("max_minutes", [0, -1, float("nan"), float("inf"), True, "5"])
def test_fit_refuses_a_budget_that_is_not_a_positive_finite_number(tmp_path, max_minutes):
    run_dir = tmp_path / "run"
    with pytest.raises(
        ValueError,
        match=r"^Invalid value for argument `max_minutes`\. Expected a finite number of "
        r"minutes above 0, or None for no time budget\. Received: max_minutes=",
    ):
        _fit_on(run_dir, _Clock(), [], max_minutes)
    assert not run_dir.exists()  # refused before anything is written


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_the_max_minutes_flag_refuses_a_budget_that_is_not_a_positive_finite_number(value, capsys):
    parser = argparse.ArgumentParser(prog="trainer")
    add_training_arguments(
        parser, batch_size=64, learning_rate=1e-3, epochs=5, max_minutes=30.0, batch_size_note="-"
    )
    with pytest.raises(SystemExit) as info:
        parser.parse_args(["--run-dir", "r", "--max-minutes", value])
    assert info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        last == f"trainer: error: argument --max-minutes: expected a positive number, got {value}"
    )


def test_mixed_precision_builds_the_model_in_the_policy_and_restores_the_global_one(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        _fit(run_dir, callbacks=[_Interrupt(1)], mixed_precision="mixed_bfloat16")
    assert keras.config.dtype_policy().name == "float32"
    config = json.loads((run_dir / "config.json").read_text())
    assert config["mixed_precision"] == "mixed_bfloat16" and config["distribution"] is None
    # Other arithmetic (and under mixed_float16 another optimizer): a resumed
    # run keeps the policy.
    before = _snapshot(run_dir)
    with pytest.raises(
        RunOptionsError, match=r"mixed_precision None \(the run has 'mixed_bfloat16'\)"
    ):
        _fit(run_dir)
    assert _snapshot(run_dir) == before
    model = _fit(run_dir, mixed_precision="mixed_bfloat16")
    assert keras.config.dtype_policy().name == "float32"
    assert {layer.dtype_policy.name for layer in model.layers} == {"mixed_bfloat16"}
    loaded = keras.saving.load_model(run_dir / "model.keras")
    assert loaded.layers[0].compute_dtype == "bfloat16"
    assert precision.reduced_precision_layers(loaded)


def test_a_mixed_float16_run_loads_with_its_loss_scale_optimizer_whole(tmp_path):
    # Loaded under the global float32 policy, the model compiled a plain Adam
    # and dropped the saved optimizer's state with a warning.
    try:
        precision.check_policy("mixed_float16")
    except PolicyError as error:
        pytest.skip(str(error))
    run_dir = tmp_path / "run"
    trained = _fit(run_dir, mixed_precision="mixed_float16").optimizer
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Skipping variable loading for optimizer"
        model, config, _ = TrainingRun.load(run_dir)
    assert keras.config.dtype_policy().name == "float32"
    assert config["mixed_precision"] == "mixed_float16"
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    # Its state is the trained one: the loss scale, the steps, Adam's moments.
    loaded, expected = model.optimizer.variables, trained.variables
    assert len(loaded) == len(expected) > 4
    for got, want in zip(loaded, expected, strict=True):
        np.testing.assert_array_equal(got, want, err_msg=want.path)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) > 0


def test_a_float32_run_records_no_policy_and_resumes_as_before(tmp_path):
    run_dir = tmp_path / "run"
    _fit(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["mixed_precision"] is None and config["devices"] is None


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"mixed_precision": "float16"}, PolicyError, r"mixed_precision='float16'"),
        ({"mixed_precision": "mixed_float8"}, PolicyError, r"mixed_precision='mixed_float8'"),
        ({"distribution": "model-parallel"}, DistributionError, r"'model-parallel'"),
        ({"devices": 2}, DistributionError, r"needs distribution=.*devices=2"),
    ],
)
def test_bad_precision_or_distribution_is_refused_before_writing(tmp_path, kwargs, error, message):
    with pytest.raises(error, match=message):
        TrainingRun(tmp_path / "run", OPTIONS, **kwargs)
    assert not (tmp_path / "run").exists()


def test_data_parallel_is_refused_off_jax_pointing_to_tf_distribute(tmp_path):
    if keras.backend.backend() == "jax":
        with pytest.raises(DistributionError, match=r"Expected a count from 1 to"):
            TrainingRun(tmp_path / "run", distribution="data-parallel", devices=10_000)
    else:
        with pytest.raises(DistributionError, match=r"needs the JAX backend.*tf\.distribute"):
            TrainingRun(tmp_path / "run", distribution="data-parallel")
    assert not (tmp_path / "run").exists()


def test_a_policy_the_runtime_cannot_take_is_refused_naming_its_error(tmp_path, monkeypatch):
    def no_bfloat16(policy):
        raise RuntimeError("no bfloat16 kernel for MatMul")

    monkeypatch.setattr(precision, "_probe", no_bfloat16)
    with pytest.raises(PolicyError, match=r"cannot train in bfloat16.*no bfloat16 kernel"):
        TrainingRun(tmp_path / "run", OPTIONS, mixed_precision="mixed_bfloat16")
    assert not (tmp_path / "run").exists()


def test_cosine_to_budget_follows_the_larger_fraction():
    clock = [0.0]
    schedule = CosineToBudget(1e-3, 10, max_minutes=2, clock=lambda: clock[0])
    clock[0] = 60.0  # half the time after 2 of 10 epochs: the time wins
    assert schedule.rate(2) == cosine_to_budget(1e-3, 5e-5, 0.5)
    assert cosine_to_budget(1.0, 0.0, 0.5) == pytest.approx(0.5, abs=1e-15)
    assert cosine_to_budget(1.0, 0.1, 2.0) == 0.1  # past the end: the floor
