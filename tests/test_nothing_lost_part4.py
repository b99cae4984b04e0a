"""Nothing lost, part four: every name a run deletes or writes is inside the
run and its own, no link is followed for an `eval/` folder or an export's
files, and a run whose training diverges says so and stays loadable
(docs/reliability.md, docs/training_runs.md).

Small and in-process: a Dense model on 64 random rows for the runs, bare
folders for the refusals, stand-in writers for the export.
"""

import json
import os
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from keras_attention.files import atomic
from keras_attention.training import DivergedRunError
from keras_attention.training import NotARunError
from keras_attention.training import RunExistsError
from keras_attention.training import RunFolderError
from keras_attention.training import TrainingRun
from keras_attention.training import UntrainedRunError
from keras_attention.training import averaging
from keras_attention.training import run_folder
from keras_attention.training import run_status

OPTIONS = {"units": 8, "seed": 3}
# A process id that no process has (above Linux's largest, 2**22).
DEAD_PID = 2**22 + 12345

needs_links = pytest.mark.skipif(sys.platform == "win32", reason="symbolic links")


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32"))[:, None]
    return x, y


def _build():
    init = keras.initializers.GlorotUniform(seed=3)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, activation="tanh", kernel_initializer=init),
            keras.layers.Dense(1, kernel_initializer=init),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    return model


def _fit(run, epochs=3, callbacks=(), **kwargs):
    x, y = _data()
    return run.fit(
        _build,
        x,
        y,
        validation_data=(x[:16], y[:16]),
        epochs=epochs,
        batch_size=16,
        shuffle=False,
        callbacks=callbacks,
        verbose=0,
        **kwargs,
    )


def _snapshot(folder):
    """{relative path: bytes} of every file under `folder`."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# ------------------------------------------- 1. our temporaries carry our mark


def test_temporary_names_carry_the_package_mark_and_the_pid(tmp_path):
    name = atomic.temporary_name(tmp_path / "model.keras").name
    assert name == f".tmp-keras-attention-{os.getpid()}-model.keras"
    assert atomic.is_temporary(name)
    for users in (".tmp-notes.txt", ".tmp-1-notes.txt", ".tmp-keras-attention-x-notes"):
        assert not atomic.is_temporary(users)


def test_a_folder_holding_only_a_users_tmp_file_is_not_empty(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".tmp-notes.txt").write_text("the user's notes\n")
    with pytest.raises(NotARunError, match=r"holds \.tmp-notes\.txt but not"):
        run_status(run_dir)
    with pytest.raises(NotARunError):
        _fit(TrainingRun(run_dir, OPTIONS))
    assert sorted(os.listdir(run_dir)) == [".tmp-notes.txt"]
    assert (run_dir / ".tmp-notes.txt").read_text() == "the user's notes\n"


def test_the_translator_status_says_a_users_tmp_file_is_not_a_run(tmp_path):
    from keras_attention.translation import cli

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".tmp-notes.txt").write_text("mine\n")
    with pytest.raises(SystemExit, match=r"^status: .* is not a run folder"):
        cli.main(["status", "--run-dir", str(run_dir)])
    assert (run_dir / ".tmp-notes.txt").read_text() == "mine\n"


def test_a_run_removes_its_dead_writers_temporaries_and_keeps_the_users(tmp_path):
    run_dir = tmp_path / "run"
    with TrainingRun(run_dir, OPTIONS, files=("vocab",)):
        (run_dir / "vocab").mkdir()  # an unfinished run, with the client's folder
    users = [run_dir / ".tmp-notes.txt", run_dir / "vocab" / ".tmp-draft-1.txt"]
    for path in users:
        path.write_text("the user's\n")
    # A killed writer's leftovers: this version's and an older version's names.
    leftovers = [
        run_dir / f".tmp-keras-attention-{DEAD_PID}-model.keras",
        run_dir / "vocab" / f".tmp-keras-attention-{DEAD_PID}-vocab.json",
        run_dir / f".tmp-{DEAD_PID}-history.csv",
    ]
    for path in leftovers:
        path.write_bytes(b"half a file")
    # A live writer's temporary (this test's parent process) stays too.
    live = run_dir / f".tmp-keras-attention-{os.getppid()}-explain.json"
    live.write_bytes(b"being written")
    with TrainingRun(run_dir, OPTIONS, files=("vocab",)):
        pass
    assert all(path.read_text() == "the user's\n" for path in users)
    assert not any(path.exists() for path in leftovers)
    assert live.exists()


def test_a_killed_exports_sibling_is_recovered_but_a_users_tmp_folder_is_kept(tmp_path):
    out = tmp_path / "export"
    users = tmp_path / f".tmp-{DEAD_PID}-export"  # the user's, named like an older temporary
    users.mkdir()
    (users / "notes.txt").write_text("mine\n")
    ours = tmp_path / f".tmp-keras-attention-{DEAD_PID}-export"
    ours.mkdir()
    (ours / "half.tflite").write_bytes(b"half")
    with atomic.replaced_folder(out) as staging:
        (staging / "model.tflite").write_bytes(b"new")
    assert sorted(os.listdir(tmp_path)) == [users.name, "export"]
    assert (users / "notes.txt").read_text() == "mine\n"


# ------------------------------------------------ 2. files= names stay inside


@pytest.mark.parametrize(
    "name, why",
    [
        ("/etc/hostname", "is an absolute path"),
        ("..", "holds a '..' part"),
        ("../sibling.txt", "holds a '..' part"),
        ("vocab/../../sibling.txt", "holds a '..' part"),
        ("", "is the run folder itself"),
        (".", "is the run folder itself"),
        ("keras_attention_run.json", "is a file of the run itself"),
        ("run.lock", "is a file of the run itself"),
        (3, "is a int, not a string"),
    ],
)
def test_files_names_outside_the_run_are_refused_naming_them(tmp_path, name, why):
    run_dir = tmp_path / "run"
    with pytest.raises(ValueError, match=r"^Invalid value for argument `files`") as info:
        TrainingRun(run_dir, OPTIONS, files=("vocab.json", name), overwrite=True)
    assert repr(name) in str(info.value) and why in str(info.value)
    assert not run_dir.exists()


def test_files_as_one_string_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"Expected a tuple of names.*files='vocab.json'"):
        TrainingRun(tmp_path / "run", OPTIONS, files="vocab.json")


def test_overwrite_with_a_parent_name_leaves_the_parent_folder_whole(tmp_path):
    run_dir = tmp_path / "run"
    _fit(TrainingRun(run_dir, OPTIONS), epochs=1)
    (tmp_path / "thesis.tex").write_text("years of work\n")
    before = _snapshot(tmp_path)
    for name in ("..", str(tmp_path / "thesis.tex")):
        with pytest.raises(ValueError, match=r"argument `files`"):
            _fit(TrainingRun(run_dir, OPTIONS, files=(name,), overwrite=True), epochs=1)
    assert _snapshot(tmp_path) == before


@needs_links
def test_a_files_name_through_a_link_is_refused_and_its_target_kept(tmp_path):
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    _fit(TrainingRun(run_dir, OPTIONS), epochs=1)
    elsewhere.mkdir()
    (elsewhere / "vocab.json").write_text("the user's\n")
    (run_dir / "sub").symlink_to(elsewhere)
    with pytest.raises(ValueError, match=r"'sub/vocab.json' resolves to .*outside the run"):
        TrainingRun(run_dir, OPTIONS, files=("sub/vocab.json",), overwrite=True)
    # A link made after the run was created is never followed either.
    (run_dir / "sub").unlink()
    run = TrainingRun(run_dir, OPTIONS, files=("sub/vocab.json",), overwrite=True)
    (run_dir / "sub").symlink_to(elsewhere)
    with pytest.raises(RunFolderError, match=r"sub is a symbolic link .* never removed"):
        _fit(run, epochs=1)
    assert (elsewhere / "vocab.json").read_text() == "the user's\n"


# --------------------------------------- 3. no link followed: eval/, exports


@needs_links
@pytest.mark.parametrize("out_dir", [None, "eval"], ids=["default", "named"])
def test_a_linked_eval_folder_is_refused_and_the_users_results_kept(tmp_path, out_dir):
    from keras_attention.translation import cli

    run_dir, mine = tmp_path / "run", tmp_path / "mine"
    run_dir.mkdir()
    run_folder.write_mark(run_dir)
    mine.mkdir()
    (mine / "results.json").write_text('{"my": "results"}')
    (run_dir / "eval").symlink_to(mine)
    argv = ["--data-dir", str(tmp_path / "no-data-here"), "evaluate", "--run-dir", str(run_dir)]
    if out_dir:
        argv += ["--out-dir", str(run_dir / out_dir)]
    with pytest.raises(SystemExit, match=r"^evaluate: .*eval is a symbolic link \(to .*mine\)"):
        cli.main(argv)
    assert _snapshot(mine) == {"results.json": b'{"my": "results"}'}


@needs_links
def test_an_export_keeps_a_linked_saved_model_version_as_the_link(tmp_path):
    out, mine = tmp_path / "export", tmp_path / "mine"
    mine.mkdir()
    (mine / "saved_model.pb").write_bytes(b"the user's model")
    (out / "saved_model").mkdir(parents=True)
    (out / "saved_model" / "1").symlink_to(mine)
    with atomic.replaced_folder(out, keep=["saved_model/1"]) as staging:
        (staging / "saved_model" / "2").mkdir(parents=True)
    kept = out / "saved_model" / "1"
    assert kept.is_symlink() and os.readlink(kept) == str(mine)
    # Never hard-linked into the export: the user's file has one name still.
    assert os.stat(mine / "saved_model.pb").st_nlink == 1
    assert _snapshot(mine) == {"saved_model.pb": b"the user's model"}


@needs_links
@pytest.mark.parametrize("linked", ["folder", "saved_model", "tflite"])
def test_an_export_folder_or_entry_that_is_a_link_is_refused(tmp_path, linked):
    from keras_attention.export.folder import check_export_folder

    out, mine = tmp_path / "export", tmp_path / "mine"
    mine.mkdir()
    (mine / "1").mkdir()
    (mine / "1" / "saved_model.pb").write_bytes(b"the user's model")
    if linked == "folder":
        out.symlink_to(mine)
    else:
        out.mkdir()
        (out / linked).symlink_to(mine)
    path = out if linked == "folder" else out / linked
    with pytest.raises(ValueError, match=rf"{path} is a symbolic link \(to {mine}\); an export"):
        check_export_folder(out)
    assert _snapshot(mine) == {"1/saved_model.pb": b"the user's model"}


@needs_links
def test_a_kept_path_under_a_link_is_refused_before_writing(tmp_path):
    out, mine = tmp_path / "export", tmp_path / "mine"
    (mine / "1").mkdir(parents=True)
    (mine / "1" / "saved_model.pb").write_bytes(b"the user's model")
    out.mkdir()
    (out / "saved_model").symlink_to(mine)
    with pytest.raises(ValueError, match=r"saved_model is a symbolic link"):
        with atomic.replaced_folder(out, keep=["saved_model/1"]):
            pytest.fail("nothing is written")
    assert os.stat(mine / "1" / "saved_model.pb").st_nlink == 1
    assert sorted(os.listdir(tmp_path)) == ["export", "mine"]


# ------------------------------------------------------ 4. a diverged run


class _Poison(keras.callbacks.Callback):
    """Makes the first kernel NaN after the first batch of epoch `epoch`
    (1-based): the loss of that epoch, and every later one, is NaN."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch
        self.current = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.current = epoch + 1

    def on_train_batch_end(self, batch, logs=None):
        if self.current == self.epoch and batch == 0:
            kernel = self.model.layers[0].kernel
            kernel.assign(np.full(kernel.shape, np.nan, dtype="float32"))


def _finite(model):
    return all(np.isfinite(w).all() for w in model.get_weights())


def test_a_diverged_run_stops_says_so_and_keeps_the_last_finite_epoch(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(DivergedRunError, match=r"diverged at epoch 2 \(loss nan\).*epoch 1's"):
        _fit(TrainingRun(run_dir, OPTIONS), epochs=4, callbacks=[_Poison(2)], keep_epochs=True)
    info = json.loads((run_dir / "finished.json").read_text())
    assert info["diverged"]["epoch"] == 2 and info["best_epoch"] == 1
    assert info["diverged"]["logs"]["loss"] is None  # NaN, as strict JSON holds it
    assert averaging.saved_epochs(run_dir) == [1]  # no NaN epoch to average
    assert (run_dir / "history.csv").read_text().count("\n") == 2  # header, epoch 1
    status = run_status(run_dir)
    assert status.state == run_folder.FINISHED and status.diverged == 2
    assert "diverged at epoch 2" in status.detail
    with pytest.warns(RuntimeWarning, match=r"diverged at epoch 2.*that model is loaded"):
        model, _, _ = TrainingRun.load(run_dir)
    assert _finite(model)
    # Neither trained into again nor taken for a finished training...
    with pytest.raises(DivergedRunError, match=r"diverged at epoch 2.*Nothing was changed"):
        _fit(TrainingRun(run_dir, OPTIONS), epochs=4)
    with pytest.raises(DivergedRunError, match=r"diverged at epoch 2"):
        TrainingRun(run_dir, OPTIONS).finished()
    assert isinstance(DivergedRunError("x"), RunExistsError)
    # ...but started over with overwrite.
    model = _fit(TrainingRun(run_dir, OPTIONS, overwrite=True), epochs=2)
    assert _finite(model) and run_status(run_dir).diverged == 0


def test_a_run_diverged_in_its_first_epoch_holds_no_model_and_load_says_so(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(DivergedRunError, match=r"diverged at epoch 1 .*holds no model.keras"):
        _fit(TrainingRun(run_dir, OPTIONS), epochs=3, callbacks=[_Poison(1)])
    assert not (run_dir / "model.keras").exists()
    with pytest.raises(UntrainedRunError, match=r"diverged at epoch 1 .*Nothing to load"):
        TrainingRun.load(run_dir)


def test_without_a_monitor_the_model_is_the_last_finite_epochs(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(DivergedRunError, match=r"diverged at epoch 3"):
        _fit(TrainingRun(run_dir, OPTIONS), epochs=4, callbacks=[_Poison(3)], monitor=None)
    with pytest.warns(RuntimeWarning):
        model, _, _ = TrainingRun.load(run_dir)
    assert _finite(model)
    assert json.loads((run_dir / "finished.json").read_text())["best_epoch"] == 2


def test_the_translator_train_says_a_divergence_in_one_line(tmp_path, monkeypatch):
    from keras_attention.translation import cli
    from keras_attention.translation import training

    def diverging(run, *args, **kwargs):
        _fit(run, epochs=2, callbacks=[_Poison(1)])

    monkeypatch.setattr(training, "_train", diverging)
    run_dir = tmp_path / "run"
    argv = ["--data-dir", str(tmp_path / "no-data-here"), "train", "--run-dir", str(run_dir)]
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    message = str(info.value)
    assert message.startswith("train: Training stopped: ") and "\n" not in message
    assert "diverged at epoch 1" in message and "--overwrite" in message


def _diverged_run(run_dir, epoch, best_epoch):
    """A run folder as a run that diverged at `epoch` leaves it (no model
    when `best_epoch` is 0)."""
    run_dir.mkdir()
    run_folder.write_mark(run_dir)
    diverged = {"epoch": epoch, "reason": "loss nan", "logs": {"loss": None}}
    info = {"epochs": epoch - 1, "best_epoch": best_epoch, "diverged": diverged}
    atomic.write_json(run_dir / "finished.json", info)
    return run_dir


def test_the_translator_says_a_run_diverged_in_its_first_epoch_holds_no_model(tmp_path):
    from keras_attention.translation import cli
    from keras_attention.translation import runs

    run_dir = _diverged_run(tmp_path / "run", epoch=1, best_epoch=0)
    with pytest.raises(DivergedRunError, match=r"diverged at epoch 1 .*Nothing to load"):
        runs.check_run(run_dir)
    argv = ["--data-dir", str(tmp_path / "no-data-here"), "evaluate", "--run-dir", str(run_dir)]
    with pytest.raises(SystemExit, match=r"^error: .*diverged at epoch 1 .*--overwrite"):
        cli.console_main(argv)


def test_an_export_of_a_diverged_run_records_where_it_diverged(tmp_path):
    from keras_attention.translation import runs

    run_dir = _diverged_run(tmp_path / "run", epoch=3, best_epoch=2)
    (run_dir / "model.keras").write_bytes(b"stands for the model of epoch 2")
    found = runs.export_state(run_dir)
    assert found["state"] == "finished" and found["diverged_at_epoch"] == 3
    assert "diverged at epoch 3 (loss nan); its model.keras is epoch 2's" in found["note"]


@pytest.fixture(scope="module")
def translator_run(tmp_path_factory):
    """A finished translator run, untrained (a tiny model and vocabulary)."""
    from keras_attention.translation import SubwordTokenizer
    from keras_attention.translation import runs
    from keras_attention.translation import training
    from keras_attention.translation.model import build_translator

    vocab = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "dog", "un", "chien", "."]
    keras.utils.set_random_seed(0)
    tokenizer = SubwordTokenizer(vocab, lower_case=True)
    model = build_translator(
        tokenizer.vocab_size, tokenizer.vocab_size, embedding_dim=8, units=8, dropout=0.0
    )
    config = dict(training.PRESETS["tiny"], attention="bahdanau", seed=0, preset="tiny")
    config.update(input_feeding=True, lr_schedule="cosine")
    return runs.write_run(
        tmp_path_factory.mktemp("runs") / "run", model, tokenizer, tokenizer, config, {}
    )


@needs_links
def test_a_re_export_of_a_run_carries_a_linked_version_as_the_link(
    translator_run, tmp_path, monkeypatch
):
    from keras_attention.export import folder
    from keras_attention.translation import export

    def saved_model(translator, path, *args):
        Path(path).mkdir(parents=True)
        (Path(path) / "saved_model.pb").write_text("new")

    monkeypatch.setattr(export, "export_translator_saved_model", saved_model)
    monkeypatch.setattr(folder, "write_tflite", None)  # no TFLite variant is asked for
    out, mine = tmp_path / "export", tmp_path / "mine"
    export.export_run(translator_run, out, variants=(), version=2)
    mine.mkdir()
    (mine / "saved_model.pb").write_bytes(b"the user's model")
    (out / "saved_model" / "1").symlink_to(mine)
    export.export_run(translator_run, out, variants=(), version=2)
    assert os.readlink(out / "saved_model" / "1") == str(mine)
    assert (out / "saved_model" / "2" / "saved_model.pb").read_text() == "new"
    assert os.stat(mine / "saved_model.pb").st_nlink == 1
    # A linked saved_model/ is refused, naming it; the user's folder untouched.
    os.rename(out / "saved_model", tmp_path / "old_saved_model")
    (out / "saved_model").symlink_to(mine)
    with pytest.raises(ValueError, match=r"saved_model is a symbolic link \(to .*mine\)"):
        export.export_run(translator_run, out, variants=(), version=2)
    assert _snapshot(mine) == {"saved_model.pb": b"the user's model"}
