"""Nothing lost: folders that are not ours, concurrent runs, unbounded
requests and silent casts (docs/reliability.md).

The run folders here are built in a second, without training: tokenizers
from a short vocabulary and an untrained `build_translator` model, as in
tests/test_run_folder.py. Nothing here trains: every refusal must come before
the data is read (the data folder given to `train` does not exist).
"""

import ast
import importlib.util
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from _tiny_run import TINY_CONFIG
from _tiny_run import tiny_model_and_tokenizers
from _tiny_run import write_finished_run

from keras_attention.export.tflite import export_tflite as generic_export_tflite
from keras_attention.files.atomic import write_bytes
from keras_attention.files.atomic import write_json
from keras_attention.generation.search_defaults import MAX_BATCH
from keras_attention.generation.search_defaults import MAX_BEAM_WIDTH
from keras_attention.generation.search_defaults import BeamSettings
from keras_attention.training import averaging
from keras_attention.training import run_folder
from keras_attention.training.run_folder import write_mark
from keras_attention.translation import cli
from keras_attention.translation import commands
from keras_attention.translation import evaluation
from keras_attention.translation import export
from keras_attention.translation import runs
from keras_attention.translation import training
from keras_attention.translation.data import ParallelSplit
from keras_attention.translation.serving import ServingTranslator
from keras_attention.translation.translator import Translator
from keras_attention.translation.translator import load_run

pytestmark = pytest.mark.tensorflow

ROOT = Path(__file__).resolve().parents[1]


def _snapshot(folder):
    """{relative path: bytes} of every file under `folder`."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _train_argv(run_dir):
    # A data folder that does not exist: a refusal must come before reading it.
    return ["--data-dir", str(run_dir.parent / "no-data-here"), "train", "--run-dir", str(run_dir)]


@pytest.fixture(scope="module")
def model_and_tokenizers():
    return tiny_model_and_tokenizers()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, model_and_tokenizers):
    """A finished run with two saved epochs (`--keep-epochs`)."""
    folder = tmp_path_factory.mktemp("runs") / "finished"
    return write_finished_run(folder, *model_and_tokenizers)


@pytest.fixture
def run_copy(finished_run, tmp_path):
    return Path(shutil.copytree(finished_run, tmp_path / "run"))


@pytest.fixture(scope="module")
def translator(finished_run):
    return load_run(finished_run)[0]


# ------------------------------------------------- 1. folders not ours


def _user_project(folder, kind):
    """A folder of the user's own files, some with the names a run uses."""
    folder.mkdir()
    (folder / "model.keras").write_bytes(b"the user's own model")
    (folder / "history.csv").write_text("epoch,loss\n0,1.5\n")
    (folder / "backup").mkdir()
    (folder / "backup" / "notes.txt").write_text("do not delete\n")
    (folder / "epochs").mkdir()
    (folder / "epochs" / "epoch_001.weights.h5").write_bytes(b"the user's weights")
    if kind == "other_files":
        (folder / "train.py").write_text("print('hello')\n")
    elif kind == "foreign_config":
        (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    return folder


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
@pytest.mark.parametrize("kind", ["other_files", "only_run_names", "foreign_config"])
def test_train_refuses_a_folder_that_is_not_a_run_and_deletes_nothing(tmp_path, kind, overwrite):
    folder = _user_project(tmp_path / "project", kind)
    before = _snapshot(folder)
    argv = _train_argv(folder) + (["--overwrite"] if overwrite else [])
    with pytest.raises(SystemExit, match=r"^train: .* is not a run folder") as info:
        cli.main(argv)
    assert "Nothing was changed" in str(info.value)
    assert _snapshot(folder) == before
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        {"model.keras", "history.csv", "backup", "epochs"}
        | ({"train.py"} if kind == "other_files" else set())
        | ({"config.json"} if kind == "foreign_config" else set())
    )
    # The library raises its own error, a ValueError, never SystemExit.
    with pytest.raises(run_folder.NotARunError):
        training.train_run(folder, data_dir=tmp_path / "no-data-here", overwrite=overwrite)
    assert _snapshot(folder) == before


def test_an_empty_folder_or_a_run_of_ours_is_accepted(tmp_path, run_copy):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert training.check_run_dir(empty).state == runs.NEW
    # The workers of a multi-worker training may create their folders first.
    (tmp_path / "workers" / "worker_1").mkdir(parents=True)
    assert training.check_run_dir(tmp_path / "workers").state == runs.NEW
    # A run killed while it learned its vocabularies holds its mark and them
    # (and the folder of a multi-worker training's second worker, maybe).
    shutil.copytree(run_copy / runs.SOURCE_VOCAB, tmp_path / "partial" / runs.SOURCE_VOCAB)
    (tmp_path / "partial" / "worker_1").mkdir()
    with pytest.raises(run_folder.NotARunError, match="not a run folder"):
        training.check_run_dir(tmp_path / "partial")  # without the mark: not ours
    write_mark(tmp_path / "partial")
    assert training.check_run_dir(tmp_path / "partial").state == run_folder.UNFINISHED
    # What the commands add to a run (evaluate, explain, an export) is ours.
    for name in runs.COMMAND_OUTPUTS:
        (run_copy / name).mkdir()
    assert runs.translator_run_status(run_copy).state == run_folder.FINISHED
    # --overwrite replaces a finished run of ours.
    assert training.check_run_dir(run_copy, overwrite=True).state == run_folder.FINISHED


def test_status_reports_a_folder_that_is_not_a_run(tmp_path):
    folder = _user_project(tmp_path / "project", "other_files")
    with pytest.raises(SystemExit, match=r"^status: .* is not a run folder.*train\.py"):
        cli.main(["status", "--run-dir", str(folder)])


# ------------------------------------------------------ 2. average


def test_average_refuses_an_existing_run_unless_overwrite(finished_run, run_copy, capsys):
    target_model = run_copy / runs.MODEL_FILE
    before = _snapshot(run_copy)
    argv = ["average", "--run-dir", str(finished_run), "--last", "2", "--out-dir", str(run_copy)]
    with pytest.raises(SystemExit, match=r"^average: .*finished run.*--overwrite") as info:
        cli.main(argv)
    assert "Nothing was changed" in str(info.value)
    assert _snapshot(run_copy) == before
    cli.main(argv + ["--overwrite"])
    config = runs.read_config(run_copy)
    assert config["averaged_epochs"] == [1, 2]
    assert target_model.read_bytes() != before[runs.MODEL_FILE]
    # The replaced run's own epochs are gone with it, not averaged later.
    assert averaging.saved_epochs(run_copy) == []
    assert runs.translator_run_status(run_copy).state == run_folder.FINISHED


def test_average_never_writes_into_a_folder_that_is_not_a_run(finished_run, tmp_path):
    folder = _user_project(tmp_path / "project", "other_files")
    before = _snapshot(folder)
    argv = ["average", "--run-dir", str(finished_run), "--last", "1", "--out-dir", str(folder)]
    for extra in ([], ["--overwrite"]):
        with pytest.raises(SystemExit, match="is not a run folder"):
            cli.main(argv + extra)
    assert _snapshot(folder) == before


# ------------------------------------------------------- 3. the lock


def test_second_train_on_a_locked_run_is_refused_naming_the_holder(run_copy):
    (run_copy / runs.FINISHED_FILE).unlink()  # an unfinished run, being trained
    before = _snapshot(run_copy)
    with runs.RunLock(run_copy) as lock:
        assert (run_copy / runs.LOCK_FILE).read_text() == f"{os.getpid()}\n"
        argv = _train_argv(run_copy) + ["--preset", "tiny"]
        with pytest.raises(SystemExit, match=rf"^train: .* in use by process {os.getpid()}"):
            cli.main(argv)
        with pytest.raises(run_folder.RunInUseError):
            runs.RunLock(run_copy).__enter__()
        assert lock.stale_pid is None
    assert not (run_copy / runs.LOCK_FILE).exists()
    assert _snapshot(run_copy) == before


_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, f"{os.getpid()}\\n".encode())
print("locked", flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="flock")
def test_lock_of_another_process_refuses_and_its_stale_lock_is_taken_over(run_copy, caplog):
    (run_copy / runs.FINISHED_FILE).unlink()
    lock_file = run_copy / runs.LOCK_FILE
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(lock_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(run_folder.RunInUseError, match=f"in use by process {holder.pid}"):
            with runs.RunLock(run_copy):
                pass
    finally:
        holder.kill()  # killed: it leaves its lock file, with its pid
        holder.wait()
    assert lock_file.read_text() == f"{holder.pid}\n"
    with caplog.at_level(logging.WARNING):
        with runs.RunLock(run_copy) as lock:
            assert lock.stale_pid == holder.pid
            assert lock_file.read_text() == f"{os.getpid()}\n"
    assert f"stale lock of process {holder.pid}" in caplog.text


# ---------------------------------------------- 5. other options


def test_resume_with_other_options_names_them_and_changes_nothing(run_copy):
    (run_copy / runs.FINISHED_FILE).unlink()  # an unfinished run
    before = _snapshot(run_copy)
    argv = _train_argv(run_copy) + ["--preset", "tiny", "--units", "32", "--seed", "5"]
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    message = str(info.value)
    assert message.startswith("train: ")
    assert "units 32 (the run has 64)" in message and "seed 5 (the run has 0)" in message
    assert "--overwrite" in message and "corrupt" not in message
    assert _snapshot(run_copy) == before
    # The library's error lists them as data.
    config = dict(TINY_CONFIG, units=32)
    with pytest.raises(run_folder.RunOptionsError) as info:
        training.prepare_run_dir(run_copy, config=config)
    assert info.value.differences == {"units": (64, 32)}
    assert _snapshot(run_copy) == before
    # The same options resume; --overwrite starts over with the new ones.
    assert training.check_run_dir(run_copy, config=TINY_CONFIG).state == run_folder.UNFINISHED
    assert training.check_run_dir(run_copy, overwrite=True, config=config) is None


# ------------------------------------- issue 28: errors in their room


def test_train_run_raises_library_errors_that_the_cli_says_with_flags(run_copy, tmp_path):
    with pytest.raises(runs.RunExistsError) as info:
        training.train_run(run_copy, data_dir=tmp_path / "no-data-here")
    assert "`overwrite=True`" in str(info.value) and "--" not in str(info.value)
    with pytest.raises(SystemExit, match=r"^train: .*already holds a finished run.*--overwrite"):
        cli.main(_train_argv(run_copy))
    with pytest.raises(ValueError, match="`conditional`"):
        training.train_run(
            tmp_path / "new", attention="luong-general", conditional=True, data_dir=tmp_path
        )
    assert not (tmp_path / "new").exists()


def test_tokenizer_does_not_import_the_run_module():
    tree = ast.parse((ROOT / "keras_attention/translation/tokenizer.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "keras_attention.translation.runs" not in imported
    assert "keras_attention.files.atomic" in imported


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["translate", "--beam-width", "0", "a dog"], "expected a positive integer, got 0"),
        (["translate", "--beam-width", "100000", "a dog"], f"from 1 to {MAX_BEAM_WIDTH}"),
        (["evaluate", "--beam-width", "-3"], "expected a positive integer, got -3"),
        (["evaluate", "--max-sentences", "-1"], "expected a positive integer, got -1"),
        (["train", "--max-train-examples", "0"], "expected a positive integer, got 0"),
        (["average", "--last", "0", "--out-dir", "x"], "expected a positive integer, got 0"),
        (["evaluate", "--heatmaps", "0,x"], "comma-separated sentence numbers"),
    ],
)
def test_cli_checks_its_arguments_at_the_edge(argv, expected, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    error = capsys.readouterr().err
    assert expected in error
    assert "Traceback" not in error


# ------------------------------------------------ 6. beam width


def test_beam_width_is_bounded_at_every_entry_point(translator, finished_run, tmp_path):
    vocabulary = translator.target_tokenizer.vocab_size  # 11, below MAX_BEAM_WIDTH
    ids = np.array([[4, 5, 6]], np.int32)
    for width in (0, vocabulary + 1, MAX_BEAM_WIDTH + 1, 10**6):
        with pytest.raises(ValueError, match="beam_width"):
            translator.beam_graph(ids, BeamSettings(width))
        with pytest.raises(ValueError, match="beam_width"):
            ServingTranslator(translator, beam_width=width)
        with pytest.raises(ValueError, match="beam_width"):
            export.export_run(finished_run, tmp_path / "out", variants=(), beam_width=width)
    assert not (tmp_path / "out").exists()
    assert translator.beam_graph(ids, BeamSettings(vocabulary))["tokens"].shape[0] == 1
    with pytest.raises(SystemExit, match=rf"^translate: --beam-width 12 .*at most {vocabulary}"):
        cli.main(["translate", "--run-dir", str(finished_run), "--beam-width", "12", "a dog"])
    argv = ["evaluate", "--run-dir", str(finished_run), "--beam-width", "12"]
    with pytest.raises(SystemExit, match=rf"^evaluate: --beam-width 12 .*at most {vocabulary}"):
        cli.main(argv + ["--splits", "test_2016_flickr", "--out-dir", str(tmp_path / "eval")])
    assert not (tmp_path / "eval").exists()


# ---------------------------------------------- 7. SavedModel batch


def test_saved_model_refuses_a_batch_larger_than_max_batch(translator):
    module = ServingTranslator(translator, max_batch=3)
    for signature in (module.greedy, module.beam):
        assert signature(tf.constant(["a dog runs ."] * 3))["translation"].shape == (3,)
        with pytest.raises(tf.errors.InvalidArgumentError, match="max_batch=3: split it"):
            signature(tf.constant(["a dog runs ."] * 4))
    assert ServingTranslator(translator).max_batch == MAX_BATCH == 64
    assert "max_batch" in ServingTranslator.greedy.__doc__


# ---------------------------------------------------- 8. silent casts


@pytest.mark.parametrize(
    "ids, expected",
    [
        (np.array([[4, 2**32 + 5]], np.int64), r"4294967301 at \[0, 1\]"),
        (np.array([[2**40, 4]], np.int64), r"1099511627776 at \[0, 0\]"),
        (np.array([[4, 5.0]], np.float64), "must be integers"),
        (np.array([[4.7, 5.2]], np.float32), "must be integers"),
        (tf.constant([[4.0, 5.0]]), "must be integers"),
        (np.array([[4, -1]], np.int64), r"-1 at \[0, 1\]"),
    ],
)
def test_ids_are_checked_before_the_int32_cast(translator, ids, expected):
    generator = translator.generator
    calls = (translator.encode, translator.greedy_graph, translator.beam_graph, generator.greedy)
    for call in (*calls, generator.beam):
        with pytest.raises(ValueError, match=expected):
            call(ids)
    # An int64 id inside the vocabulary is read as itself.
    state = translator.encode(np.array([[4, 5, 6]], np.int64))
    reference = translator.encode(np.array([[4, 5, 6]], np.int32))
    for key in reference:
        np.testing.assert_array_equal(np.asarray(state[key]), np.asarray(reference[key]))


def test_ids_in_a_traced_function_are_checked_in_the_graph(translator):
    search = tf.function(lambda ids: translator.greedy_graph(ids)["tokens"])
    search(tf.constant([[4, 5]], tf.int64))  # within the vocabulary: fine
    with pytest.raises(tf.errors.InvalidArgumentError, match="source vocabulary"):
        search(tf.constant([[4, 2**32 + 5]], tf.int64))


# ------------------------------------------------------- 9. NaN weights


def test_nan_weights_fail_with_a_message_not_empty_lines(model_and_tokenizers, run_copy):
    model, source, target = model_and_tokenizers
    broken = keras.models.clone_model(model)
    broken.set_weights(model.get_weights())
    readout = [w for w in broken.weights if "kernel" in w.path][-1]
    readout.assign(np.full(readout.shape, np.nan, readout.dtype))
    translator = Translator(broken, source, target)
    for method in ("greedy", "beam"):
        with pytest.raises(evaluation.NonFiniteOutputError, match="for sentence [12]:"):
            evaluation.decode_corpus(translator, ["", "a dog runs ."], method=method)
    # A run whose model.keras holds NaN weights: the file and the weight are
    # named, in one line on the command line.
    broken.save(run_copy / runs.MODEL_FILE)
    argv = ["translate", "--run-dir", str(run_copy), "a dog runs ."]
    with pytest.raises(runs.CorruptRunError, match=r"model\.keras is corrupt: the weight .* NaN"):
        cli.main(argv)
    with pytest.raises(SystemExit, match=r"^error: .*model\.keras is corrupt: the weight logits/"):
        cli.console_main(argv)


# -------------------------------------------------- 10. positive counts


def test_counts_are_positive_integers_in_the_library(run_copy, tmp_path):
    split = ParallelSplit(en=["a", "b", "c"], fr=["x", "y", "z"], stats=None)
    assert split.head(2).en == ["a", "b"] and split.head(None).en == ["a", "b", "c"]
    for n in (0, -1):
        with pytest.raises(ValueError, match=f"Received: n={n}"):
            split.head(n)
    with pytest.raises(ValueError, match="max_sentences"):
        commands.evaluate(run_copy, max_sentences=-1)
    with pytest.raises(ValueError, match="max_train_examples"):
        training.train_run(tmp_path / "new", max_train_examples=0)
    assert not (tmp_path / "new").exists()


# ------------------------------------------------ 11. a .json model path


def test_generic_export_refuses_a_json_model_path(translator, tmp_path):
    path = tmp_path / "model.json"
    with pytest.raises(ValueError, match=r"Expected the \.tflite file.*model\.json"):
        generic_export_tflite(translator.generator, path)
    assert not path.exists()


# ----------------------------------------------- 4. a killed re-export


class _TracedStandIn:
    """Stands in for the traced TFLite functions: a manifest without them."""

    def manifest(self):
        return {"source": None, "signatures": {}}


def _fake_writers(monkeypatch, tag):
    """Stands in for the SavedModel and TFLite writers (seconds each): files
    that say which export wrote them. The vocabularies, translator.json and
    export.json are the export's own."""
    from keras_attention.export import folder

    def saved_model(translator, path, *args):
        Path(path).mkdir(parents=True)
        (Path(path) / "saved_model.pb").write_text(tag)

    def tflite(lite, path, variant):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(tag)
        if tag == "new, killed":
            raise KeyboardInterrupt  # stands for a kill after the SavedModel
        return Path(path)

    monkeypatch.setattr(export, "export_translator_saved_model", saved_model)
    monkeypatch.setattr(export, "lite_translator", lambda *args, **kwargs: _TracedStandIn())
    monkeypatch.setattr(folder, "write_tflite", tflite)


def test_killed_re_export_leaves_the_earlier_export_whole(finished_run, tmp_path, monkeypatch):
    out = tmp_path / "export"
    _fake_writers(monkeypatch, "old")
    export.export_run(finished_run, out, variants=("float32", "int8"))
    before = _snapshot(out)
    _fake_writers(monkeypatch, "new, killed")
    with pytest.raises(KeyboardInterrupt):
        export.export_run(finished_run, out, variants=("float32",), max_length=20)
    assert _snapshot(out) == before
    assert sorted(os.listdir(tmp_path)) == ["export"]  # no temporary left
    _fake_writers(monkeypatch, "new")
    manifest = export.export_run(finished_run, out, variants=("float32",), version=2)
    files = _snapshot(out)
    # The new export whole: no int8 model of the old one beside it...
    assert set(files) == {
        "export.json",
        "saved_model/1/saved_model.pb",
        "saved_model/2/saved_model.pb",
        "tflite/translator_float32.tflite",
        "tflite/translator.json",
        "tflite/source_vocab.txt",
        "tflite/target_vocab.txt",
    }
    assert files["tflite/translator_float32.tflite"] == b"new"
    assert json.loads(files["export.json"]) == manifest
    # ...and the other SavedModel version kept (TensorFlow Serving's layout).
    assert files["saved_model/1/saved_model.pb"] == b"old"


def test_export_refuses_a_folder_that_is_not_an_export(finished_run, tmp_path, monkeypatch):
    _fake_writers(monkeypatch, "new")
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine\n")
    # A run folder, or a folder of the user's: an export would replace it whole.
    for out in (finished_run, project):
        before = _snapshot(out)
        with pytest.raises(ValueError, match="which an export never writes"):
            export.export_run(finished_run, out, variants=("float32",))
        assert _snapshot(out) == before
    code = export.main([str(finished_run), str(tmp_path / "project"), "--variants", ""])
    assert code == 2


def _load_atomic():
    """`files/atomic.py` alone (standard library only), for a child process."""
    path = ROOT / "keras_attention/files/atomic.py"
    spec = importlib.util.spec_from_file_location("atomic", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_WRITER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("atomic", sys.argv[1])
atomic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(atomic)
with atomic.replaced_folder(sys.argv[2]) as staging:
    for name in ("export.json", "model_a", "model_b"):
        (staging / name).write_text("new")
    print("written", flush=True)
"""


@pytest.mark.parametrize("moment", ["inside_the_write", "after_the_first_rename"])
def test_folder_replaced_by_a_killed_process_is_old_or_new_never_mixed(tmp_path, moment):
    atomic = _load_atomic()
    folder = tmp_path / "export"
    folder.mkdir()
    for name in ("export.json", "model_a", "model_c"):
        (folder / name).write_text("old")
    old = _snapshot(folder)
    env = dict(os.environ, **{atomic.WRITE_DELAY_ENV: "60"})
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, atomic.__file__, str(folder)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout.readline().strip() == "written"  # now inside the delay
    if moment == "after_the_first_rename":
        # As if killed between the renames: the old folder set aside.
        os.replace(folder, folder.with_name(f"{atomic.TEMP_PREFIX}{writer.pid}-old-export"))
    time.sleep(0.2)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    if moment == "inside_the_write":
        assert _snapshot(folder) == old
    atomic.recover_folder(folder)
    assert _snapshot(folder) == old
    assert sorted(os.listdir(tmp_path)) == ["export"]
    with atomic.replaced_folder(folder) as staging:
        (staging / "export.json").write_text("new")
    assert _snapshot(folder) == {"export.json": b"new"}


# -------------------------------------------------- the files' modes


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_written_files_get_the_umask_mode_not_0600(tmp_path, umask, model_and_tokenizers):
    model, source, _ = model_and_tokenizers
    previous = os.umask(umask)
    try:
        write_bytes(tmp_path / "model.tflite", b"\x00" * 8)  # what the exports write through
        write_json(tmp_path / "model.json", {})
        runs.write_json(tmp_path / "config.json", {"attention": "bahdanau"})
        runs.save_model(model, tmp_path / "model.keras")
        run_folder.save_weights(model, tmp_path / "epoch.weights.h5")
        source.save(tmp_path / "vocab")
        with runs.RunLock(tmp_path / "locked"):
            lock_mode = (tmp_path / "locked" / runs.LOCK_FILE).stat().st_mode & 0o777
    finally:
        os.umask(previous)
    expected = 0o666 & ~umask
    modes = {
        str(p.relative_to(tmp_path)): p.stat().st_mode & 0o777
        for p in tmp_path.rglob("*")
        if p.is_file()
    }
    assert len(modes) == 7
    assert modes == dict.fromkeys(modes, expected)
    assert lock_mode == expected


# ------------------------------- issue 44: a run is ours by its mark alone


def test_user_files_with_an_attention_config_are_refused_untouched(tmp_path):
    # Every name a run writes, and a config.json with a key a run writes: not
    # a run without the mark. The old check took it for an unfinished run
    # and deleted the four files.
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "model.keras").write_bytes(b"the user's own model")
    (folder / "history.csv").write_text("epoch,loss\n0,1.5\n")
    (folder / "backup").mkdir()
    (folder / "backup" / "thesis.txt").write_text("chapter 1\n")
    (folder / "epochs").mkdir()
    (folder / "epochs" / "notes.txt").write_text("notes\n")
    (folder / "config.json").write_text(json.dumps({"attention": "bahdanau", "units": 8}))
    before = _snapshot(folder)
    for extra in ([], ["--overwrite"]):
        with pytest.raises(SystemExit, match=r"^train: .* is not a run folder.*Nothing was"):
            cli.main(_train_argv(folder) + extra)
    with pytest.raises(SystemExit, match=r"^status: .* is not a run folder"):
        cli.main(["status", "--run-dir", str(folder)])
    assert _snapshot(folder) == before
    assert sorted(os.listdir(folder)) == sorted(
        ["model.keras", "history.csv", "backup", "epochs", "config.json"]
    )


def test_a_mark_of_another_format_is_not_ours(tmp_path):
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / run_folder.MARK_FILE).write_text(json.dumps({"format": "someone.else", "version": 1}))
    (folder / "config.json").write_text("{}")
    before = _snapshot(folder)
    with pytest.raises(run_folder.NotARunError, match="names the format 'someone.else'"):
        training.check_run_dir(folder, overwrite=True)
    assert _snapshot(folder) == before


@pytest.mark.parametrize(
    "argv",
    [["--dropout", "1.5"], ["--dropout", "-0.1"], ["--learning-rate", "0"]],
    ids=["dropout_above_1", "dropout_negative", "zero_learning_rate"],
)
def test_train_refuses_an_option_out_of_range_before_writing(tmp_path, argv, capsys):
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        cli.main(_train_argv(run_dir) + argv)
    assert info.value.code == 2
    assert argv[0] in capsys.readouterr().err
    assert not run_dir.exists()


@pytest.mark.parametrize(
    "key, value", [("dropout", 1.5), ("label_smoothing", 1.0), ("learning_rate", -1e-3)]
)
def test_train_run_refuses_an_option_out_of_range_before_writing(tmp_path, key, value):
    run_dir = tmp_path / "run"
    with pytest.raises(ValueError, match=rf"Invalid value for argument `{key}`"):
        training.train_run(run_dir, data_dir=tmp_path / "no-data-here", **{key: value})
    assert not run_dir.exists()


def test_an_export_inside_the_run_keeps_it_a_run(run_copy):
    # `export RUN RUN/myexport`: a folder the run never wrote, in a run of ours.
    (run_copy / "myexport" / "saved_model").mkdir(parents=True)
    (run_copy / "myexport" / "export.json").write_text("{}")
    assert runs.translator_run_status(run_copy).state == run_folder.FINISHED
    assert cli.main(["status", "--run-dir", str(run_copy)]).state == run_folder.FINISHED
    # Starting it over removes what the run wrote, not the export.
    assert training.prepare_run_dir(run_copy, overwrite=True) is None
    assert (run_copy / "myexport" / "export.json").read_text() == "{}"


_LOCKER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, sys.argv[2].encode() + b"\\n")
print("locked", flush=True)
time.sleep(120)
"""


def _lock_with(lock_file, pid_written):
    """A process that holds an flock on `lock_file`, which names `pid_written`."""
    process = subprocess.Popen(
        [sys.executable, "-c", _LOCKER, str(lock_file), str(pid_written)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "locked"
    return process


def test_export_of_an_unfinished_or_running_run_says_so(run_copy, tmp_path):
    manifest = export.export_run(run_copy, tmp_path / "finished", variants=(), saved_model=False)
    assert manifest["run"] == {"state": "finished"}
    (run_copy / runs.FINISHED_FILE).unlink()
    manifest = export.export_run(run_copy, tmp_path / "unfinished", variants=(), saved_model=False)
    assert manifest["run"]["state"] == "unfinished"
    assert "best epoch so far" in manifest["run"]["note"]
    written = json.loads((tmp_path / "unfinished" / "export.json").read_text())
    assert written["run"] == manifest["run"]
    if sys.platform != "linux":
        return
    trainer = _lock_with(run_copy / runs.LOCK_FILE, 1)
    try:
        manifest = export.export_run(run_copy, tmp_path / "running", variants=(), saved_model=False)
    finally:
        trainer.kill()
        trainer.wait()
    assert manifest["run"]["state"] == "running"
    assert f"process {trainer.pid} was training it" in manifest["run"]["note"]


def test_status_refuses_a_fifo_in_place_of_config_json_at_once(run_copy):
    (run_copy / runs.CONFIG_FILE).unlink()
    os.mkfifo(run_copy / runs.CONFIG_FILE)

    def hung(signum, frame):
        raise AssertionError("status waited on the FIFO")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        with pytest.raises(SystemExit, match=r"config\.json is not a regular file: it is a FIFO"):
            cli.main(["status", "--run-dir", str(run_copy)])
        with pytest.raises(runs.CorruptRunError, match="FIFO"):
            load_run(run_copy)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_live_process_named_by_a_lock_it_does_not_hold_is_said_so(run_copy, caplog):
    (run_copy / runs.FINISHED_FILE).unlink()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (run_copy / runs.LOCK_FILE).write_text(f"{bystander.pid}\n")
        with caplog.at_level(logging.WARNING):
            with runs.RunLock(run_copy) as lock:
                assert lock.stale_pid == bystander.pid and lock.stale_alive
    finally:
        bystander.kill()
        bystander.wait()
    assert f"process {bystander.pid}, which the file names: it is running but holds no lock" in (
        caplog.text
    )
    assert "no longer running" not in caplog.text


@pytest.mark.skipif(sys.platform != "linux", reason="the holder comes from /proc/locks")
def test_a_lock_held_by_another_program_names_its_real_holder(run_copy):
    (run_copy / runs.FINISHED_FILE).unlink()
    # The file names process 1; the lock is held by another process.
    holder = _lock_with(run_copy / runs.LOCK_FILE, 1)
    try:
        with pytest.raises(run_folder.RunInUseError) as info:
            with runs.RunLock(run_copy):
                pass
    finally:
        holder.kill()
        holder.wait()
    message = str(info.value)
    assert f"in use by process {holder.pid}" in message
    assert "the file names process 1, which does not hold it" in message


def test_overwrite_removes_symbolic_links_and_never_follows_them(run_copy, tmp_path):
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "folder" / "keep.txt").write_text("keep\n")
    (outside / "file.txt").write_text("keep too\n")
    (run_copy / runs.BACKUP_DIR).symlink_to(outside / "folder", target_is_directory=True)
    shutil.rmtree(run_copy / averaging.EPOCHS_DIR)
    (run_copy / averaging.EPOCHS_DIR).mkdir()
    (run_copy / averaging.EPOCHS_DIR / "link").symlink_to(outside / "folder")
    (run_copy / runs.HISTORY_FILE).symlink_to(outside / "file.txt")
    (run_copy / runs.SOURCE_VOCAB / "dangling").symlink_to(tmp_path / "nowhere")
    before = _snapshot(outside)
    assert training.prepare_run_dir(run_copy, overwrite=True) is None
    assert sorted(os.listdir(run_copy)) == [run_folder.MARK_FILE]
    assert _snapshot(outside) == before


def test_train_on_a_read_only_file_system_is_one_line(tmp_path, monkeypatch):
    import errno

    from keras_attention.training import run_lock

    def read_only(self):
        raise OSError(errno.EROFS, "Read-only file system", str(self.path))

    monkeypatch.setattr(run_lock.RunLock, "__enter__", read_only)
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit, match=r"^train: Cannot write the run folder .*read-only"):
        cli.main(_train_argv(run_dir))
    assert not run_dir.exists()


def test_average_of_more_epochs_than_saved_is_one_line(finished_run, tmp_path):
    argv = ["average", "--run-dir", str(finished_run), "--last", "10"]
    argv += ["--out-dir", str(tmp_path / "avg")]
    with pytest.raises(SystemExit, match=r"^average: Cannot average the last 10 epochs.*holds 2"):
        cli.main(argv)
    assert not (tmp_path / "avg").exists()


def test_evaluate_never_overwrites_a_results_json_it_did_not_write(finished_run, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "results.json").write_text('{"my": "results"}')
    before = _snapshot(out)
    argv = ["--data-dir", str(tmp_path / "no-data-here"), "evaluate", "--run-dir"]
    argv += [str(finished_run), "--out-dir", str(out)]
    with pytest.raises(SystemExit, match=r"^evaluate: .*results\.json, which `evaluate` did not"):
        cli.main(argv)
    assert _snapshot(out) == before


def test_a_full_disk_while_training_is_one_line_naming_the_file(tmp_path, monkeypatch):
    import errno

    from keras_attention.files import atomic

    def full_disk(run, *args, **kwargs):
        with atomic.atomic_path(run.run_dir / runs.MODEL_FILE) as temporary:
            temporary.write_bytes(b"x" * 4096)
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(training, "_train", full_disk)
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        cli.main(_train_argv(run_dir))
    message = str(info.value)
    assert message.startswith(f"train: No space left to write {run_dir / runs.MODEL_FILE}: ")
    assert "at least 4,096 bytes" in message and "\n" not in message
    assert not list(run_dir.glob(".tmp-*"))


@pytest.mark.skipif(sys.platform == "win32", reason="flock and O_NOFOLLOW")
@pytest.mark.parametrize("kind", ["link to a file", "dangling link", "fifo"])
def test_a_lock_file_that_is_a_link_or_fifo_is_refused_and_nothing_written(tmp_path, kind):
    from keras_attention.training.run_folder import LOCK_FILE
    from keras_attention.training.run_folder import RunFolderError
    from keras_attention.training.run_lock import RunLock

    run_dir, target = tmp_path / "run", tmp_path / "notes.txt"
    run_dir.mkdir()
    target.write_text("the user's notes\n")
    lock = run_dir / LOCK_FILE
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(target if kind == "link to a file" else tmp_path / "nowhere")
    with pytest.raises(RunFolderError, match=r"lock file of the run .* is (a symbolic link|not a)"):
        with RunLock(run_dir):
            pass
    assert target.read_text() == "the user's notes\n"
    assert not (tmp_path / "nowhere").exists()
    assert lock.is_symlink() or kind == "fifo"
