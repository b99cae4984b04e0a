"""What the package's commands print on standard error: their own lines and
real warnings, not TensorFlow's and Keras' notes for their developers; those
come back with --verbose (the translator) or KERAS_ATTENTION_QUIET_NATIVE_LOG=0.

Every command of the translator, `python -m keras_attention.export` and the
G2P example runs once on a tiny run, as a user runs it (neither
TF_CPP_MIN_LOG_LEVEL nor the filter's variable set), and any line of its
standard error that is not of `OWN_LINES` or a warning fails the test.
"""

import logging
import os
import re
import subprocess
import sys

import pytest
from _data_paths import multi30k_dir
from _data_paths import require_cmudict
from _scripts import ROOT
from test_native_log import ABSL_LINE
from test_strict_json import strict_loads

from keras_attention.backend import native_log
from keras_attention.translation import cli

CLI = [sys.executable, "-m", "keras_attention.translation"]
EXPORT = [sys.executable, "-m", "keras_attention.export"]
G2P = [sys.executable, str(ROOT / "examples" / "g2p_cmudict.py")]
# The lines the package itself writes on standard error in a run that
# succeeds (its logging.info calls, in the translator's `LEVEL message`
# form), written out here: a line of another form fails the tests.
OWN_LINES = (
    re.compile(r"^INFO Multi30k \w+: read \d+ pairs, used \d+, skipped \d+ \(.*\)$"),
    re.compile(r"^INFO Learning the WordPiece vocabularies from \d+ pairs$"),
    re.compile(r"^INFO skipped \d+ training pairs longer than \d+ words$"),
)
# A real warning: Python's (`file:line: SomeWarning: text`, then the line of
# source, indented) or a logger's at WARNING level (`WARNING text`,
# `WARNING:tensorflow:text`); absl's "WARNING: All log messages before
# absl::InitializeLog() ..." is not one.
PYTHON_WARNING = re.compile(r"^\S.*:\d+: \w*Warning: ")
LOGGED_WARNING = re.compile(r"^WARNING(:\w+:| )\S")


def unexpected_lines(stderr):
    """The lines of `stderr` that are neither the package's nor warnings."""
    unexpected, in_warning = [], False
    for line in stderr.splitlines():
        if in_warning and line.startswith("  "):
            continue  # the source line Python prints under a warning
        in_warning = bool(PYTHON_WARNING.match(line))
        if not (in_warning or LOGGED_WARNING.match(line) or any(p.match(line) for p in OWN_LINES)):
            unexpected.append(line)
    return unexpected


@pytest.mark.parametrize(
    "line",
    [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1796659522.244892   16803 port.cc:153] oneDNN custom operations are on.",
        "INFO Assets written to: /tmp/x/assets",
        "Epoch 1/2",
        "",
    ],
)
def test_a_line_of_another_form_is_unexpected(line):
    assert unexpected_lines(line + "\n") == [line]


def test_own_lines_and_warnings_are_expected():
    stderr = (
        "INFO Learning the WordPiece vocabularies from 40 pairs\n"
        "/x/y.py:3: UserWarning: a real warning\n"
        '  warnings.warn("a real warning")\n'
        "WARNING:tensorflow:a real warning\n"
        "WARNING another logger's warning\n"
    )
    assert unexpected_lines(stderr) == []


def _run(command, arguments, env_update=None):
    """One command as a user runs it; (stdout, stderr)."""
    # No variable that quiets TensorFlow.
    quiet = ("TF_CPP_MIN_LOG_LEVEL", native_log.ENV_VAR)
    env = {key: value for key, value in os.environ.items() if key not in quiet}
    env.update(env_update or {})
    result = subprocess.run(
        command + arguments, env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result.stdout, result.stderr


@pytest.fixture(scope="module")
def main_job(tmp_path_factory):
    """Every command of the translator on a tiny run (40 training pairs, 2
    epochs, 4 test sentences, one TFLite file): {command: (stdout, stderr)}."""
    data_dir = multi30k_dir()
    if not (data_dir / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {data_dir} (see tests/_data_paths.py)")
    folder = tmp_path_factory.mktemp("quiet")
    run_dir = folder / "run"
    data = ["--data-dir", str(data_dir)]
    run = ["--run-dir", str(run_dir)]
    outputs = {
        "train": _run(
            CLI,
            data
            + ["train", "--preset", "tiny", "--max-train-examples", "40", "--epochs", "2"]
            + ["--keep-epochs"]
            + run,
        ),
        "status": _run(CLI, ["status"] + run),
        "evaluate": _run(
            CLI,
            data
            + ["evaluate", "--splits", "test_2016_flickr", "--methods", "greedy"]
            + ["--max-sentences", "4", "--heatmaps", "0"]
            + run,
        ),
        "translate": _run(CLI, ["translate", "A man reads a book."] + run),
        "explain": _run(CLI, data + ["explain", "--max-sentences", "2"] + run),
        "average": _run(CLI, ["average", "--last", "2", "--out-dir", str(folder / "avg")] + run),
        "export": _run(
            CLI,
            ["export", str(run_dir), str(run_dir / "export"), "--variants", "float32"]
            + ["--max-length", "12"],
        ),
    }
    return run_dir, outputs


@pytest.fixture(scope="module")
def g2p_job(tmp_path_factory):
    """The G2P example's commands on a tiny run, and `python -m
    keras_attention.export` of its model: {command: (stdout, stderr)}."""
    data_dir = require_cmudict()
    folder = tmp_path_factory.mktemp("quiet_g2p")
    run = ["--run-dir", str(folder / "run")]
    small = ["--variants", "float32", "--max-length", "12"]
    return {
        "g2p train": _run(
            G2P,
            ["train", "--quick", "--steps-per-epoch", "2", "--verbose", "0"]
            + ["--data-dir", str(data_dir)]
            + run,
        ),
        "g2p evaluate": _run(G2P, ["evaluate", "--limit", "8", "--verbose", "0"] + run),
        "g2p pronounce": _run(G2P, ["pronounce", "KERAS"] + run),
        "g2p export": _run(G2P, ["export", str(folder / "export")] + small + run),
        "python -m keras_attention.export": _run(
            EXPORT,
            [str(folder / "run" / "model.keras"), str(folder / "export_module")]
            + ["--start-id", "1", "--end-id", "2"]
            + small,
        ),
    }


TRANSLATOR_COMMANDS = ("train", "status", "evaluate", "translate", "explain", "average", "export")
G2P_COMMANDS = (
    "g2p train",
    "g2p evaluate",
    "g2p pronounce",
    "g2p export",
    "python -m keras_attention.export",
)


@pytest.mark.tensorflow
@pytest.mark.parametrize("command", TRANSLATOR_COMMANDS)
def test_translator_command_prints_only_its_own_lines_and_warnings(main_job, command):
    _, outputs = main_job
    assert unexpected_lines(outputs[command][1]) == []


@pytest.mark.tensorflow
@pytest.mark.parametrize("command", G2P_COMMANDS)
def test_g2p_and_export_command_prints_only_its_own_lines_and_warnings(g2p_job, command):
    assert unexpected_lines(g2p_job[command][1]) == []


@pytest.mark.tensorflow
def test_main_job_still_prints_its_own_progress_and_results(main_job):
    run_dir, outputs = main_job
    assert "training took" in "".join(outputs["train"])
    assert "results:" in "".join(outputs["evaluate"])
    assert (run_dir / "export" / "export.json").exists()


@pytest.mark.tensorflow
def test_every_json_file_of_the_main_job_parses_strictly(main_job):
    # Four test sentences leave most length buckets empty: their BLEU is
    # not a number, written as null (JSON has no NaN).
    run_dir, _ = main_job
    files = sorted(run_dir.rglob("*.json"))
    assert run_dir / "eval" / "results.json" in files
    for path in files:
        strict_loads(path.read_text(encoding="utf-8"))


@pytest.mark.tensorflow
@pytest.mark.parametrize(
    "command, env_update",
    [
        (CLI + ["--verbose", "status", "--help"], {}),
        (G2P + ["pronounce", "--help"], {native_log.ENV_VAR: "0"}),
    ],
    ids=["translator --verbose", "g2p with the variable at 0"],
)
def test_the_rest_is_shown_on_request(command, env_update):
    # TensorFlow's C++ start-up log is back (on this machine: its oneDNN and
    # CUDA notices).
    _, stderr = _run(command, [], env_update)
    assert [line for line in stderr.splitlines() if ABSL_LINE.match(line)], stderr


def _records_reaching_the_root(verbose, own_handler):
    """The lines a library's INFO record prints inside `library_logging`."""
    printed = []

    class Collect(logging.Handler):
        def emit(self, record):
            printed.append(record.getMessage())

    root, library = logging.getLogger(), logging.getLogger("tensorflow")
    root_handler, library_handler = Collect(), Collect()
    saved = library.level, library.handlers[:], library.propagate
    root.addHandler(root_handler)
    library.handlers = [library_handler] if own_handler else []
    library.propagate = True
    library.setLevel(logging.INFO)
    try:
        with cli.library_logging(verbose):
            library.info("Assets written to: /tmp/x/assets")
            library.warning("a real warning")
    finally:
        root.removeHandler(root_handler)
        library.level, library.handlers, library.propagate = saved
    return printed


@pytest.mark.parametrize("own_handler", [False, True])
def test_library_info_lines_only_with_verbose_warnings_always_each_once(own_handler):
    # With a handler of its own (TensorFlow adds one), the library's line is
    # printed by it and not a second time by the root logger's.
    assert _records_reaching_the_root(False, own_handler) == ["a real warning"]
    assert _records_reaching_the_root(True, own_handler) == [
        "Assets written to: /tmp/x/assets",
        "a real warning",
    ]


def test_verbose_flag_is_parsed_before_the_command():
    assert cli.parse_args(["--verbose", "status"]).verbose
    assert not cli.parse_args(["status"]).verbose
