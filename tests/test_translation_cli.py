"""The translator's command line, `python -m keras_attention.translation`: its
commands, its entry points, and clear answers without a run."""

import configparser
import importlib
import os
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
