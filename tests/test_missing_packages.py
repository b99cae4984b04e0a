"""A command that needs an optional package which is not installed stops at
its start, in one line naming the package and the extra that brings it.

The package is hidden in a process of its own by None in `sys.modules`:
its import raises ModuleNotFoundError and `importlib.util.find_spec` answers
None, as in an environment without it. What this cannot catch: a command that
imports the package before `keras_attention.backend.check.require_packages`
runs (the script refuses a package imported before the command), or a need
missing from `check.TRANSLATOR_NEEDS` (tests/test_extras.py checks that table
against the extras, not against the code's imports).
"""

import json
import os
import subprocess
import sys

import pytest

HIDE = """
import sys

HIDDEN = set()


def hide(names):
    # None in sys.modules: `import` raises ModuleNotFoundError and
    # importlib.util.find_spec answers None, as without the package.
    for name in HIDDEN - set(names):
        del sys.modules[name]
    for name in names:
        assert sys.modules.get(name) is None, f"{name} was imported before the command"
        sys.modules[name] = None
    HIDDEN.clear()
    HIDDEN.update(names)
"""
# Each translator command with the packages hidden from it, run one after
# the other in one process (TensorFlow is imported once).
TRANSLATOR = (
    HIDE
    + """
import json

cases = json.loads(sys.argv[1])
# Hidden from the start, every one: Keras imports matplotlib if it can.
hide(sorted({name for hidden, _ in cases for name in hidden}))
from keras_attention.translation.cli import console_main  # noqa: E402

results = []
for hidden, argv in cases:
    hide(hidden)
    try:
        console_main(argv)
        results.append("ran")
    except SystemExit as stop:
        results.append(str(stop.code))
    except Exception as error:
        results.append(f"{type(error).__name__}: {error}")
print(json.dumps(results))
"""
)
EXTRA = 'pip install "keras-seq2seq-attention[tensorflow]"'
CASES = (
    ("train", ["tensorboard"], "the tensorboard package, which is not installed"),
    ("evaluate", ["sacrebleu"], "the sacrebleu package, which is not installed"),
    ("evaluate", ["matplotlib"], "the matplotlib package, which is not installed"),
    ("evaluate", ["sacremoses", "sacrebleu"], "the packages sacrebleu, sacremoses, which are"),
    ("translate", ["sacremoses"], "the sacremoses package, which is not installed"),
    ("explain", ["sacrebleu"], "the sacrebleu package, which is not installed"),
)


@pytest.fixture(scope="module")
def translator_results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("missing")
    run_dir, data_dir = folder / "run", folder / "data"
    data_dir.mkdir()  # no Multi30k there: a command that went on would fail on it
    arguments = {
        "train": ["--data-dir", str(data_dir), "train", "--preset", "tiny"],
        "evaluate": ["--data-dir", str(data_dir), "evaluate"],
        "translate": ["translate", "A man reads."],
        "explain": ["--data-dir", str(data_dir), "explain"],
    }
    cases = [
        (hidden, arguments[command] + ["--run-dir", str(run_dir)]) for command, hidden, _ in CASES
    ]
    result = subprocess.run(
        [sys.executable, "-c", TRANSLATOR, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    return dict(zip([(c, tuple(h)) for c, h, _ in CASES], results, strict=True)), run_dir


@pytest.mark.tensorflow
@pytest.mark.parametrize("command, hidden, expected", CASES)
def test_translator_command_without_a_package_stops_in_one_line_naming_it_and_the_extra(
    translator_results, command, hidden, expected
):
    results, run_dir = translator_results
    message = results[command, tuple(hidden)]
    assert message.startswith(f"error: {command} needs {expected}"), message
    assert EXTRA in message
    assert "\n" not in message
    # Stopped before any work: train did not create its run folder.
    assert not run_dir.exists()


@pytest.mark.parametrize("module", ["keras_attention.export", "keras_attention.translation"])
def test_python_m_command_without_tensorflow_stops_in_one_line_naming_it_and_the_extra(module):
    # On JAX (Keras imports no TensorFlow), with TensorFlow hidden; run as
    # `python -m` runs a module.
    script = HIDE + (
        "hide(['tensorflow'])\n"
        "import runpy\n"
        "sys.argv = [sys.argv[1], '--help']\n"
        "runpy._run_module_as_main(sys.argv[0])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, module],
        env=dict(os.environ, KERAS_BACKEND="jax"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{module} needs TensorFlow" in lines[0]
    assert "pip install keras-seq2seq-attention[tensorflow]" in lines[0]


def test_every_translator_command_says_what_it_needs():
    from keras_attention.backend.check import TRANSLATOR_NEEDS
    from keras_attention.translation.cli import COMMANDS

    assert set(TRANSLATOR_NEEDS) == set(COMMANDS)
