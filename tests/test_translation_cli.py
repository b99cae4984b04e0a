"""The translator's command line, `python -m keras_attention.translation`: its
commands, its entry points, and clear answers without a run."""

import configparser
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from keras_attention.translation import cli
from keras_attention.translation import runs

ROOT = Path(__file__).resolve().parents[1]


def test_module_help_lists_the_seven_commands():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-m", "keras_attention.translation", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("usage: python -m keras_attention.translation")
    commands = "{train,status,evaluate,average,translate,explain,export}"
    assert commands in result.stdout
    assert set(cli.COMMANDS) == set(commands.strip("{}").split(","))


def test_console_script_names_the_cli():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    scripts = dict(
        line.split(" = ")
        for line in config["options.entry_points"]["console_scripts"].strip().splitlines()
    )
    module, function = scripts["keras-attention-translate"].split(":")
    assert getattr(importlib.import_module(module), function) is cli.console_main


def test_status_of_a_missing_folder_says_it_is_new(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    found = cli.main(["status", "--run-dir", str(missing)])
    assert found.state == runs.NEW
    assert capsys.readouterr().out == f"new: {missing} does not exist\n"
    assert not missing.exists()


def test_status_of_a_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "run"
    path.write_text("not a folder\n")
    with pytest.raises(SystemExit, match=f"status: {path} is a file, not a run folder"):
        cli.main(["status", "--run-dir", str(path)])


def test_status_of_a_damaged_run_is_reported_as_corrupt(tmp_path):
    runs.write_mark(tmp_path)  # a run of this package
    (tmp_path / runs.FINISHED_FILE).write_text('{"epochs": ')
    with pytest.raises(SystemExit, match="corrupt: .*finished.json"):
        cli.main(["status", "--run-dir", str(tmp_path)])


def test_unknown_options_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["status", "--run-dir", str(tmp_path), "--bogus"])
    assert info.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_export_takes_the_options_of_the_export_module(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["export", "--help"])
    assert info.value.code == 0
    help_text = capsys.readouterr().out
    for option in ("--variants", "--max-length", "--no-saved-model", "run_dir", "out_dir"):
        assert option in help_text


def test_export_of_a_missing_run_exits_with_the_export_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["export", str(tmp_path / "nowhere"), str(tmp_path / "out"), "--variants", ""])
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


# ------------------------------------------------- one line, not a traceback


def _unloadable_model(kind):
    """A `.keras` model that safe mode refuses (a `Lambda`) or whose class is
    not registered in this process."""
    import keras

    inputs = keras.Input((3,))
    if kind == "lambda":
        return keras.Model(inputs, keras.layers.Lambda(lambda x: 2 * x)(inputs))

    @keras.saving.register_keras_serializable(package="test_translation_cli")
    class Unregistered(keras.layers.Layer):
        def call(self, x):
            return x

    model = keras.Model(inputs, Unregistered()(inputs))
    keras.saving.get_custom_objects().pop("test_translation_cli>Unregistered")
    return model


EXPECTED = {
    "lambda": r"Requested the deserialization of a `Lambda` layer.*registered layer class",
    "unknown": r"Could not locate class 'Unregistered'.*import the module that registers",
}


@pytest.mark.parametrize("kind", ["lambda", "unknown"])
def test_a_model_keras_can_not_load_is_one_line_for_every_command(tmp_path, kind, capsys):
    from test_nothing_lost import TINY_CONFIG
    from test_nothing_lost import VOCAB

    from keras_attention.translation import SubwordTokenizer

    run = tmp_path / "run"
    run.mkdir()
    for name in (runs.SOURCE_VOCAB, runs.TARGET_VOCAB):
        SubwordTokenizer(VOCAB, lower_case=True).save(run / name)
    runs.write_json(run / runs.CONFIG_FILE, TINY_CONFIG)
    runs.write_json(run / runs.FINISHED_FILE, {"epochs": 1})
    _unloadable_model(kind).save(run / runs.MODEL_FILE)
    message = rf"{run / runs.MODEL_FILE} cannot be loaded: {EXPECTED[kind]}"
    for argv in (
        ["translate", "--run-dir", str(run), "a dog"],
        ["evaluate", "--run-dir", str(run)],
    ):
        with pytest.raises(SystemExit, match=message) as info:
            cli.console_main(argv)
        assert "\n" not in str(info.value)
    # `export` prints its error itself and exits with status 2.
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        cli.console_main(["export", str(run), str(tmp_path / "export")])
    assert info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), lines


@pytest.mark.parametrize("kind", ["lambda", "unknown"])
def test_the_g2p_example_says_a_model_it_can_not_load_in_one_line(tmp_path, kind):
    from _scripts import load_script

    g2p = load_script("examples/g2p_cmudict.py")
    for name in ("vocab.json", "config.json"):
        (tmp_path / name).write_text("{}")
    _unloadable_model(kind).save(tmp_path / "model.keras")
    with pytest.raises(SystemExit, match=f"model.keras cannot be loaded: {EXPECTED[kind]}") as info:
        g2p.load_run(str(tmp_path))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("backend", ["nonsense", "openvino"])
def test_a_keras_backend_that_is_not_installed_is_one_line(backend):
    from keras_attention.keras_backend_check import installed_backends

    if backend in installed_backends():
        pytest.skip(f"{backend} is installed here")
    result = subprocess.run(
        [sys.executable, "-m", "keras_attention.translation", "status", "--run-dir", "x"],
        env=dict(os.environ, KERAS_BACKEND=backend),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"KERAS_BACKEND={backend!r}" in lines[0]
    assert f"Installed: {', '.join(installed_backends())}" in lines[0]
