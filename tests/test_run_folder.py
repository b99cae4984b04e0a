"""A run folder's errors say what is wrong with which file, and its files are
written whole or not at all (keras_attention.translation.runs).

The folders here are built in a second, without training: tokenizers from a
short vocabulary and an untrained `build_translator` model. Killing a real
training at many points is tests/test_kill_resume.py.
"""

import gzip
import json
import os
import shutil

import keras
import pytest
from _data_paths import multi30k_dir

from keras_attention.files import atomic
from keras_attention.training import run_folder
from keras_attention.training.run_folder import write_mark
from keras_attention.translation import SubwordTokenizer
from keras_attention.translation import cli
from keras_attention.translation import evaluation
from keras_attention.translation import read_parallel
from keras_attention.translation import training
from keras_attention.translation.model import build_translator
from keras_attention.translation.translator import load_run

VOCAB = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "dog", "runs", "un", "chien", "court", "."]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A complete run folder as `train` leaves it, with random weights."""
    folder = tmp_path_factory.mktemp("runs") / "finished"
    folder.mkdir()
    source = SubwordTokenizer(VOCAB, lower_case=True)
    target = SubwordTokenizer(VOCAB, lower_case=True)
    source.save(folder / "source_vocab")
    target.save(folder / "target_vocab")
    model = build_translator(
        source.vocab_size, target.vocab_size, embedding_dim=8, units=8, dropout=0.0, seed=0
    )
    model.save(folder / "model.keras")
    config = {"attention": "bahdanau", "embedding_dim": 8, "units": 8}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "finished.json").write_text(json.dumps({"epochs": 1}))
    write_mark(folder)
    return folder


@pytest.fixture
def run_copy(finished_run, tmp_path):
    """A copy of `finished_run` that a test may damage."""
    return shutil.copytree(finished_run, tmp_path / "run")


# ------------------------------------------------- misleading errors


@pytest.mark.parametrize("kept", [0.0, 0.5, 0.99], ids=["empty", "half", "last_bytes_lost"])
def test_truncated_model_file_is_reported_as_corrupt_not_missing(run_copy, kept):
    path = run_copy / "model.keras"
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * kept)])
    with pytest.raises(ValueError) as info:
        load_run(run_copy)
    message = str(info.value)
    assert str(path) in message and "corrupt" in message
    assert "not found" not in message.lower()


def test_model_file_with_a_damaged_byte_is_reported_as_corrupt(run_copy):
    from keras_attention.translation import runs

    path = run_copy / "model.keras"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the weights, whose checksum then fails
    path.write_bytes(bytes(data))
    with pytest.raises(runs.CorruptRunError, match="corrupt") as info:
        load_run(run_copy)
    assert str(path) in str(info.value)


def test_run_folder_that_is_a_file_is_reported_as_not_a_folder(tmp_path):
    path = tmp_path / "run"
    path.write_text("not a folder\n")
    with pytest.raises(NotADirectoryError, match="is a file, not a run folder") as info:
        load_run(path)
    assert "incomplete" not in str(info.value)
    argv = ["--data-dir", str(tmp_path / "nowhere"), "train", "--run-dir", str(path)]
    # The command line says a file error in one line (its message, as SystemExit).
    with pytest.raises(SystemExit, match="train: .* is a file, not a run folder"):
        cli.main(argv)


def test_config_missing_a_key_fails_before_decoding(run_copy, monkeypatch):
    config = json.loads((run_copy / "config.json").read_text())
    del config["attention"]
    (run_copy / "config.json").write_text(json.dumps(config))

    def decode_and_score(*args, **kwargs):
        raise AssertionError("evaluate decoded a split before checking config.json")

    monkeypatch.setattr(evaluation, "decode_and_score", decode_and_score)
    argv = ["--data-dir", str(multi30k_dir()), "evaluate", "--run-dir", str(run_copy)]
    argv += ["--splits", "test_2016_flickr", "--max-sentences", "2", "--methods", "greedy"]
    with pytest.raises(ValueError, match=r"config\.json.*'attention'"):
        cli.main(argv)


def test_truncated_gzip_data_file_names_the_file(tmp_path):
    whole = gzip.compress(b"".join(b"A dog runs number %d.\n" % i for i in range(200)))
    broken = tmp_path / "train.en.gz"
    broken.write_bytes(whole[: len(whole) // 2])
    other = tmp_path / "train.fr.gz"
    other.write_bytes(whole)
    with pytest.raises(ValueError, match="truncated") as info:
        read_parallel(broken, other)
    assert str(broken) in str(info.value)
    assert str(other) not in str(info.value)


# ------------------------------------------------------ the run folder


def test_interrupted_atomic_write_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "config.json"
    atomic.write_text(path, "old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic.atomic_path(path) as temporary:
            temporary.write_text("half of the new")
            raise KeyboardInterrupt
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["config.json"]


def test_model_written_atomically_loads_and_replaces_the_old_one(tmp_path):
    from keras_attention.translation import runs

    path = tmp_path / "model.keras"
    path.write_bytes(b"")  # a damaged file from an older version
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    runs.save_model(model, path)
    runs.check_model_file(path)
    assert keras.saving.load_model(path).count_params() == 8
    assert sorted(os.listdir(tmp_path)) == ["model.keras"]


def test_a_partial_run_is_never_reported_as_finished(run_copy):
    from keras_attention.translation import runs

    assert runs.translator_run_status(run_copy).state == run_folder.FINISHED
    (run_copy / "finished.json").unlink()
    # A run of this version (the mark): without the finished marker, not
    # finished, even with every other file whole and the backup deleted by hand.
    status = runs.translator_run_status(run_copy)
    assert status.state == run_folder.UNFINISHED and status.epoch == 0


def test_a_finished_run_of_an_older_version_is_read_only(run_copy, tmp_path):
    from keras_attention.translation import runs

    # Older versions wrote neither the mark nor the finished marker.
    (run_copy / run_folder.MARK_FILE).unlink()
    (run_copy / "finished.json").unlink()
    status = runs.translator_run_status(run_copy)
    assert status.state == run_folder.FINISHED and status.legacy
    load_run(run_copy)  # it loads (read only)
    before = {p: p.read_bytes() for p in run_copy.rglob("*") if p.is_file()}
    for overwrite in (False, True):
        # Never trained into, started over or replaced.
        with pytest.raises(run_folder.NotARunError, match="older version.*Nothing was changed"):
            training.prepare_run_dir(run_copy, overwrite=overwrite)
        with pytest.raises(run_folder.NotARunError, match="older version"):
            runs.check_writable(run_copy, overwrite=overwrite)
    assert {p: p.read_bytes() for p in run_copy.rglob("*") if p.is_file()} == before
    (run_copy / "model.keras").write_bytes(b"")  # killed while writing its checkpoint
    with pytest.raises(run_folder.NotARunError, match="not a run folder"):
        runs.translator_run_status(run_copy)


def test_damaged_backup_state_is_reported_as_corrupt_naming_the_file(run_copy):
    from keras_attention.translation import runs

    (run_copy / "finished.json").unlink()
    (run_copy / "backup").mkdir()
    (run_copy / "backup" / "state.json").write_text('{"epoch": 2, "weig')
    with pytest.raises(ValueError, match=r"backup/state\.json is corrupt"):
        runs.translator_run_status(run_copy)


def test_train_refuses_a_damaged_backup_unless_overwrite_starts_over(run_copy, tmp_path):
    from keras_attention.translation import runs

    (run_copy / "finished.json").unlink()
    (run_copy / "backup").mkdir()
    (run_copy / "backup" / "state.json").write_text("")
    # The library raises its error; the command line says it with the flag.
    with pytest.raises(runs.CorruptRunError, match=r"state\.json is corrupt.*overwrite=True"):
        training.prepare_run_dir(run_copy, overwrite=False)
    argv = ["--data-dir", str(tmp_path / "nowhere"), "train", "--run-dir", str(run_copy)]
    with pytest.raises(SystemExit, match=r"^train: .*state\.json is corrupt.*--overwrite"):
        cli.main(argv)
    assert training.prepare_run_dir(run_copy, overwrite=True) is None
    assert sorted(os.listdir(run_copy)) == [run_folder.MARK_FILE]  # still a run of ours


def test_config_that_is_not_json_is_reported_as_corrupt(run_copy):
    (run_copy / "config.json").write_text('{"attention": "bahdan')
    with pytest.raises(ValueError, match=r"config\.json is corrupt"):
        load_run(run_copy)
