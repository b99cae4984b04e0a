"""The translator's command line, `python -m keras_attention.translation`: its
commands, its entry points, and clear answers without a run."""

import argparse
import configparser
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from keras_attention.training.training_run import add_run_arguments
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


def _flags(parser):
    """{flag: what defines it} of `parser`'s options, --help aside."""
    return {
        option: (a.dest, type(a), a.type, a.default, a.choices, a.required, a.nargs, a.help)
        for a in parser._actions
        for option in a.option_strings
        if option not in ("-h", "--help")
    }


def _train_parser():
    commands = next(
        a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    return commands.choices["train"]


def test_train_takes_the_run_flags_from_the_librarys_one_definition():
    # Each flag of a run is the library's (`add_run_arguments`), as defined
    # there: a second definition in the translator would differ here (or
    # clash with the library's in argparse).
    library = argparse.ArgumentParser()
    add_run_arguments(library, cli.BATCH_SIZE_NOTE, run_dir=cli.RUN_DIR)
    expected = _flags(library)
    assert set(expected) == {
        "--run-dir",
        "--overwrite",
        "--seed",
        "--max-minutes",
        "--mixed-precision",
        "--distribution",
    }
    train = _flags(_train_parser())
    assert {flag: train.get(flag) for flag in expected} == expected


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_train_refuses_a_time_budget_that_is_not_a_positive_finite_number(tmp_path, value, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["train", "--run-dir", str(tmp_path / "run"), "--max-minutes", value])
    assert info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.endswith(f"error: argument --max-minutes: expected a positive number, got {value}")
    assert not (tmp_path / "run").exists()


def test_export_takes_the_options_of_the_export_module(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["export", "--help"])
    assert info.value.code == 0
    help_text = capsys.readouterr().out
    for option in ("--variants", "--max-length", "--no-saved-model", "run_dir", "out_dir"):
        assert option in help_text


EXPORT_OPTIONS = [
    "--variants=int8",
    "--max-length=12",
    "--source-length=64",
    "--tflite-beam",
    "--beam-width=3",
    "--length-penalty=1.0",
    "--max-batch=8",
    "--no-saved-model",
    "--version=2",
]


@pytest.mark.parametrize("options", [[], EXPORT_OPTIONS], ids=["defaults", "every_option"])
def test_export_options_are_one_definition_for_both_commands(options):
    """`keras-attention-translate export` parses what `python -m
    keras_attention.translation.export` parses, into the same values."""
    from keras_attention.translation import export

    expected = vars(export.parse_args(["run", "out", *options]))
    args = vars(cli.parse_args(["export", "run", "out", *options]))
    assert set(args) - set(expected) == {"command", "func", "data_dir", "verbose"}
    assert {name: args[name] for name in expected} == expected
    if options:
        assert expected["variants"] == ["int8"] and expected["no_saved_model"] is True


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
    "unknown": (
        r"the model holds 'Unregistered', which no imported module registers"
        r".*import the module that registers"
    ),
}


@pytest.mark.parametrize("kind", ["lambda", "unknown"])
def test_a_model_keras_can_not_load_is_one_line_for_every_command(tmp_path, kind, capsys):
    from _tiny_run import TINY_CONFIG
    from _tiny_run import VOCAB

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


def _status_line(backend):
    """The one line of standard error of `status` under `KERAS_BACKEND=backend`,
    which must end it with status 1."""
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
    return lines[0]


@pytest.mark.parametrize("backend", ["nonsense", "openvino"])
def test_a_keras_backend_that_is_not_installed_is_one_line(backend):
    from keras_attention.backend.check import installed_backends

    if backend in installed_backends():
        pytest.skip(f"{backend} is installed here")
    line = _status_line(backend)
    assert f"KERAS_BACKEND={backend!r}" in line
    assert f"Installed: {', '.join(installed_backends())}" in line


@pytest.mark.parametrize("backend", ["numpy", "openvino"])
def test_an_unsupported_keras_backend_is_one_line(backend):
    from keras_attention.backend.check import SUPPORTED_BACKENDS
    from keras_attention.backend.check import installed_backends

    line = _status_line(backend)
    assert f"KERAS_BACKEND={backend!r} names a Keras backend that keras_attention does not" in line
    assert f"Supported: {', '.join(SUPPORTED_BACKENDS)}." in line
    assert f"Installed: {', '.join(installed_backends())};" in line


# ------------------------------------------------------ the beam's options


def test_the_search_options_default_to_search_defaults():
    from keras_attention.generation import search_defaults
    from keras_attention.translation import commands
    from keras_attention.translation import evaluation
    from keras_attention.translation import export

    defaults = {
        "beam_width": search_defaults.BEAM_WIDTH,
        "length_penalty": search_defaults.LENGTH_PENALTY,
    }
    for argv in (["translate", "a dog"], ["evaluate"]):
        args = cli.parse_args(argv)
        assert {name: getattr(args, name) for name in defaults} == defaults, argv
    args = vars(export.parse_args(["run", "out"]))
    assert {name: args[name] for name in defaults} == defaults
    for function in (
        commands.translate,
        # `evaluate`'s options and their defaults.
        commands.EvaluateOptions,
        evaluation.search_function,
        evaluation.decode_corpus,
        evaluation.decode_and_score,
        export.export_run,
    ):
        parameters = inspect.signature(function).parameters
        assert {name: parameters[name].default for name in defaults} == defaults, function


SEARCH_SETTINGS = ("beam_width", "length_penalty", "coverage_penalty")


@pytest.mark.parametrize("module", ["cli", "commands", "evaluation", "export"])
def test_no_search_default_is_written_as_a_number(module):
    """A default written `4` would equal `BEAM_WIDTH` today and drift from it
    tomorrow: the modules name the constants of `search_defaults` instead."""
    import ast

    tree = ast.parse((ROOT / f"keras_attention/translation/{module}.py").read_text())
    numbers = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            arguments = node.args.args[len(node.args.args) - len(node.args.defaults) :]
            pairs = list(zip(arguments, node.args.defaults, strict=True))
            pairs += [
                (a, d)
                for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
                if d
            ]
            numbers += [
                (node.name, a.arg)
                for a, d in pairs
                if a.arg in SEARCH_SETTINGS and isinstance(d, ast.Constant)
            ]
        # A dataclass field's default (`EvaluateOptions`).
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id in SEARCH_SETTINGS
            and isinstance(node.value, ast.Constant)
        ):
            numbers.append((node.target.id, "default"))
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            flag = str(node.args[0].value)
            if flag.lstrip("-").replace("-", "_") in SEARCH_SETTINGS:
                numbers += [
                    (flag, k.arg)
                    for k in node.keywords
                    if k.arg == "default" and isinstance(k.value, ast.Constant)
                ]
    assert not numbers, f"{module}.py writes a search default as a number: {numbers}"


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_help_shows_the_search_defaults(command, capsys):
    from keras_attention.generation import search_defaults

    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for option, default in (
        ("--beam-width BEAM_WIDTH", search_defaults.BEAM_WIDTH),
        ("--length-penalty LENGTH_PENALTY", search_defaults.LENGTH_PENALTY),
    ):
        assert re.search(rf"{option} [^-]*\(default: {default}\)", help_text), option


BAD_PENALTIES = ["-0.1", "nan", "inf", "-inf", "abc"]


@pytest.mark.parametrize("command", ["translate", "evaluate"])
@pytest.mark.parametrize("value", BAD_PENALTIES)
def test_cli_refuses_a_length_penalty_that_is_not_a_finite_number_at_least_zero(
    command, value, capsys
):
    with pytest.raises(SystemExit) as info:
        cli.main([command, "--run-dir", "unused", f"--length-penalty={value}"])
    assert info.value.code == 2
    error = capsys.readouterr().err
    assert f"--length-penalty: expected a finite number >= 0, got {value}" in error
    assert "Traceback" not in error


@pytest.mark.parametrize("value", BAD_PENALTIES)
def test_export_refuses_a_length_penalty_as_translate_and_evaluate_do(value, tmp_path, capsys):
    argv = ["export", str(tmp_path / "nowhere"), str(tmp_path / "out"), "--variants", ""]
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, f"--length-penalty={value}"])
    assert info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(f"--length-penalty: expected a finite number >= 0, got {value}")


@pytest.mark.parametrize("value", ["0", "-2"])
def test_export_refuses_a_max_length_that_is_not_a_positive_integer(value, tmp_path, capsys):
    argv = ["export", str(tmp_path / "nowhere"), str(tmp_path / "out"), "--variants", ""]
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "--max-length", value])
    assert info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith(f"--max-length: expected a positive integer, got {value}")


def test_export_checks_max_length_with_the_searchs_validator_before_loading(tmp_path, capsys):
    from keras_attention.generation.search_defaults import MAX_OUTPUT_LENGTH
    from keras_attention.generation.search_defaults import check_max_length

    with pytest.raises(ValueError) as expected:
        check_max_length(MAX_OUTPUT_LENGTH + 1)
    argv = ["export", str(tmp_path / "nowhere"), str(tmp_path / "out"), "--variants", ""]
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "--max-length", str(MAX_OUTPUT_LENGTH + 1)])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {expected.value}"]


@pytest.mark.parametrize("value", ["0", "0.6", "2"])
def test_cli_takes_a_length_penalty_at_least_zero(value):
    for argv in (["translate", "a dog"], ["evaluate"]):
        assert cli.parse_args([*argv, "--length-penalty", value]).length_penalty == float(value)


@pytest.fixture(scope="module")
def tiny_translator():
    """A translator of random weights and letter vocabularies, never saved:
    the commands get it in place of `load_run`'s."""
    import string

    import keras

    from keras_attention.translation import SubwordTokenizer
    from keras_attention.translation.model import build_translator
    from keras_attention.translation.tokenizer import RESERVED_TOKENS
    from keras_attention.translation.translator import Translator

    letters = string.ascii_lowercase
    VOCAB = [*RESERVED_TOKENS, ".", *letters, *("##" + c for c in letters)]
    keras.utils.set_random_seed(0)
    source = SubwordTokenizer(VOCAB, lower_case=True)
    target = SubwordTokenizer(VOCAB, lower_case=True)
    model = build_translator(
        source.vocab_size, target.vocab_size, embedding_dim=8, units=16, dropout=0.0, seed=0
    )
    return Translator(model, source, target)


# With these weights a penalty of 0 ends some of them after a few tokens and 3
# lets them run to the bound: the penalty changes what is printed.
SENTENCES = ["a dog runs .", "the cat sat on the mat ."]


def test_translate_searches_with_the_length_penalty_it_is_given(
    tiny_translator, monkeypatch, capsys
):
    from keras_attention.translation import commands
    from keras_attention.translation import evaluation

    monkeypatch.setattr(commands, "load_run", lambda _: (tiny_translator, {}))
    printed = {}
    for penalty in (0.0, 3.0):
        capsys.readouterr()
        argv = ["translate", "--run-dir", "unused", "--beam-width", "4"]
        cli.main([*argv, "--length-penalty", str(penalty), *SENTENCES])
        printed[penalty] = capsys.readouterr().out.splitlines()
        # The library, eagerly on the padded batch, with this penalty.
        ids = tiny_translator.tokenize_source(SENTENCES)
        tokens = tiny_translator.generator.beam(ids, beam_width=4, length_penalty=penalty)
        text = tiny_translator.detokenize(tokens["tokens"])
        assert printed[penalty] == evaluation.detokenize_output(text), penalty
    assert printed[0.0] != printed[3.0]


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_generator_beam_refuses_a_bad_length_penalty(tiny_translator, value):
    ids = tiny_translator.tokenize_source(["a dog"])
    with pytest.raises(ValueError, match=r"Expected a finite number >= 0\. Received: length_pe"):
        tiny_translator.generator.beam(ids, length_penalty=value)


@pytest.mark.parametrize("max_minutes", [0, -1, float("nan"), float("inf")])
def test_train_run_refuses_the_budget_as_training_run_fit_does(tmp_path, max_minutes):
    from keras_attention.translation import training

    with pytest.raises(ValueError, match=r"^Invalid value for argument `max_minutes`\. Expected"):
        training.train_run(tmp_path / "run", preset="tiny", max_minutes=max_minutes)
    assert not (tmp_path / "run").exists()
