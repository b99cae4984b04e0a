"""One command line for every export: `python -m keras_attention.export`, the
translator's `export` (and `python -m keras_attention.translation.export`)
and the G2P example's `export` take the library's options
(`keras_attention.export.add_export_arguments`), read and refuse the same
values with the same one-line messages, and spell the TFLite variants one
way; the commands that README.md and docs/ show still parse."""

import argparse
import importlib
import re
import shlex
from pathlib import Path

import pytest
from _scripts import load_script

from keras_attention.export import VARIANTS
from keras_attention.export import add_export_arguments
from keras_attention.export import arguments
from keras_attention.export import folder
from keras_attention.export.tflite import check_quantization
from keras_attention.translation import cli
from keras_attention.translation import export as translation_export
from keras_attention.translation import lite

pytestmark = pytest.mark.tensorflow

ROOT = Path(__file__).resolve().parents[1]
generic = importlib.import_module("keras_attention.export.__main__")


@pytest.fixture(scope="module")
def g2p():
    return load_script("examples/g2p_cmudict.py")


def _subparser(parser, command):
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return subparsers.choices[command]


def _export_parsers(g2p):
    """{command: its export parser}."""
    return {
        "python -m keras_attention.export": generic.build_parser(),
        "python -m keras_attention.translation.export": translation_export.build_parser(),
        "keras-attention-translate export": _subparser(cli.build_parser(), "export"),
        "g2p_cmudict.py export": _subparser(g2p.build_parser(), "export"),
    }


def _parse(g2p):
    """{command: a function of the export options that parses them with the
    command's required arguments}."""
    return {
        "python -m keras_attention.export": lambda options: generic.parse_args(
            ["model.keras", "out", "--start-id", "1", "--end-id", "2", *options]
        ),
        "python -m keras_attention.translation.export": lambda options: (
            translation_export.parse_args(["run", "out", *options])
        ),
        "keras-attention-translate export": lambda options: cli.parse_args(
            ["export", "run", "out", *options]
        ),
        "g2p_cmudict.py export": lambda options: g2p.parse_args(
            ["export", "--run-dir", "run", "out", *options]
        ),
    }


def _definition(action):
    return (
        action.dest,
        action.type,
        action.default,
        action.choices,
        action.nargs,
        action.help,
        action.required,
        action.metavar,
    )


def test_every_export_command_takes_the_librarys_options_as_defined_there(g2p):
    library = add_export_arguments(argparse.ArgumentParser())
    shared = [a for a in library._actions if a.option_strings != ["-h", "--help"]]
    assert sorted(a.dest for a in shared) == sorted(arguments.EXPORT_OPTIONS)
    for command, parser in _export_parsers(g2p).items():
        actions = {option: a for a in parser._actions for option in a.option_strings}
        for expected in shared:
            (option,) = expected.option_strings
            assert option in actions, f"{command} lacks {option}"
            # A command that defines the option itself fails here, even with
            # the same spelling: another type, default or help.
            assert _definition(actions[option]) == _definition(expected), (command, option)


@pytest.mark.parametrize("value", ["0", "-1", "65", "1000000", "2.5", "four", ""])
def test_every_export_command_refuses_a_bad_beam_width_in_the_same_line(g2p, value, capsys):
    errors = {}
    for command, parse in _parse(g2p).items():
        with pytest.raises(SystemExit) as info:
            parse(["--beam-width", value])
        assert info.value.code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert "Traceback" not in "\n".join(lines)
        errors[command] = lines[-1].split(" error: ", 1)[1]
    assert len(set(errors.values())) == 1, errors
    assert errors["g2p_cmudict.py export"].startswith("argument --beam-width: expected ")


def test_every_beam_width_option_that_names_a_width_has_the_one_type(g2p):
    translator = cli.build_parser()
    for command in ("translate", "evaluate", "export"):
        actions = _subparser(translator, command)._actions
        (action,) = [a for a in actions if "--beam-width" in a.option_strings]
        assert action.type is arguments.beam_width, command
        assert action.default == 4, command
    actions = _subparser(g2p.build_parser(), "pronounce")._actions
    (action,) = [a for a in actions if "--beam-width" in a.option_strings]
    assert action.type is arguments.beam_width


def test_the_defaults_of_the_export_options_are_one_set(g2p):
    values = {}
    for command, parse in _parse(g2p).items():
        args = vars(parse([]))
        values[command] = {name: args[name] for name in arguments.EXPORT_OPTIONS}
    expected = {
        "variants": ["float32", "float16", "int8"],
        "beam_width": 4,
        "length_penalty": 0.6,
        "max_length": None,
        "source_length": None,
    }
    assert all(found == expected for found in values.values()), values


# ------------------------------------------------------------ the variants


def test_the_variants_are_spelled_one_way_everywhere():
    assert VARIANTS == ("float32", "float16", "int8")
    assert folder.VARIANTS is VARIANTS and lite.VARIANTS is VARIANTS
    assert set(lite.tflite_files()) >= {lite.tflite_filename(v) for v in VARIANTS}
    assert set(generic.MODEL_FILES) == set(VARIANTS)
    assert [check_quantization(v) for v in VARIANTS] == list(VARIANTS)
    assert check_quantization(None) == "float32"  # the default of earlier releases


@pytest.mark.parametrize("value", ["none", "dynamic", "fp16", "float64"])
def test_another_spelling_is_refused_naming_the_accepted_ones(g2p, value, capsys):
    with pytest.raises(ValueError, match=re.escape(f"Expected one of {VARIANTS}")):
        check_quantization(value)
    with pytest.raises(ValueError, match=re.escape(f"Expected a subset of {VARIANTS}")):
        folder.check_variants([value])
    for command, parse in _parse(g2p).items():
        with pytest.raises(SystemExit):
            parse(["--variants", f"float32,{value}"])
        error = capsys.readouterr().err.strip().splitlines()[-1]
        expected = f"argument --variants: unknown {value}; choose among float32, float16, int8"
        assert error.endswith(expected), command


@pytest.mark.parametrize(
    "options, variants",
    [
        (["--variants", "float32,int8"], ["float32", "int8"]),
        (["--variants", ""], []),
        # The spelling docs/export.md showed before `--variants`.
        (["--quantization", "none", "float16", "int8"], ["float32", "float16", "int8"]),
    ],
)
def test_the_generic_command_reads_the_variants(options, variants):
    argv = ["model.keras", "out", "--start-id", "1", "--end-id", "2", *options]
    assert generic.parse_args(argv).variants == variants


def test_the_generic_command_refuses_both_spellings_at_once(capsys):
    argv = ["m.keras", "out", "--start-id", "1", "--end-id", "2", "--variants", "int8"]
    with pytest.raises(SystemExit):
        generic.parse_args([*argv, "--quantization", "int8"])
    assert "--quantization is the earlier spelling of --variants" in capsys.readouterr().err


# ------------------------------------------------- the documented commands


def _documented_commands():
    """Every export command line of README.md, docs/, the examples' headers
    and run_translator.sh."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "examples").glob("*.py")) + [ROOT / "examples" / "run_translator.sh"]
    pattern = re.compile(
        r"^\s*(python -m keras_attention\.export |python -m keras_attention\.translation"
        r"(?:\.export| export) |python examples/g2p_cmudict\.py export )(.*)$"
    )
    found = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            match = pattern.match(line)
            if match:
                found.append((match[1].strip(), shlex.split(match[2])))
    return found


def test_the_documented_export_commands_parse(g2p, capsys):
    commands = _documented_commands()
    assert len(commands) >= 8
    parsers = {
        "python -m keras_attention.export": generic.parse_args,
        "python -m keras_attention.translation.export": translation_export.parse_args,
        "python -m keras_attention.translation export": lambda a: cli.parse_args(["export", *a]),
        "python examples/g2p_cmudict.py export": lambda a: g2p.parse_args(["export", *a]),
    }
    for program, argv in commands:
        if argv == ["--help"]:
            with pytest.raises(SystemExit) as info:
                parsers[program](argv)
            assert info.value.code == 0
            continue
        args = parsers[program](argv)
        assert set(args.variants) <= set(VARIANTS), (program, argv)
    capsys.readouterr()
