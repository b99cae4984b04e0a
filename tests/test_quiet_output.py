"""What the main job (examples/run_translator.sh) prints: the package's own
progress and results, not TensorFlow's and Keras' notes for their developers;
those come back with --verbose."""

import logging
import os
import re
import subprocess
import sys

import pytest
from _data_paths import multi30k_dir
from test_native_log import ABSL_LINE
from test_strict_json import strict_loads

from keras_attention.backend import native_log
from keras_attention.translation import cli

CLI = [sys.executable, "-m", "keras_attention.translation"]
# Lines every run of the main job printed before (each SavedModel line twice,
# through TensorFlow's handler and the root logger's).
NOISE = (
    re.compile(r"Assets written to: .*assets"),
    re.compile(r"contains input name\(s\) .* with unsupported characters"),
    re.compile(r"shuffle=True` was passed, but will be ignored"),
)


def _run(arguments):
    """One command of the main job, as the script runs it; its whole output."""
    # As a user runs it: no variable that quiets TensorFlow.
    quiet = ("TF_CPP_MIN_LOG_LEVEL", native_log.ENV_VAR)
    env = {key: value for key, value in os.environ.items() if key not in quiet}
    result = subprocess.run(CLI + arguments, env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    return output


def _noise(output):
    return [
        line
        for line in output.splitlines()
        if any(p.search(line) for p in NOISE) or ABSL_LINE.match(line) or "absl::" in line
    ]


@pytest.fixture(scope="module")
def main_job(tmp_path_factory):
    """train, evaluate and export of the main job on a tiny run (about 40
    training pairs, 4 test sentences, the SavedModel and one TFLite file)."""
    data_dir = multi30k_dir()
    if not (data_dir / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {data_dir} (see tests/_data_paths.py)")
    run_dir = tmp_path_factory.mktemp("quiet") / "run"
    data = ["--data-dir", str(data_dir)]
    outputs = {
        "train": _run(
            data
            + ["train", "--preset", "tiny", "--max-train-examples", "40", "--epochs", "1"]
            + ["--run-dir", str(run_dir)]
        ),
        "evaluate": _run(
            data
            + ["evaluate", "--run-dir", str(run_dir), "--splits", "test_2016_flickr"]
            + ["--methods", "greedy", "--max-sentences", "4", "--heatmaps", "0"]
        ),
        "export": _run(
            ["export", str(run_dir), str(run_dir / "export"), "--variants", "float32"]
            + ["--max-length", "12"]
        ),
    }
    return run_dir, outputs


@pytest.mark.tensorflow
@pytest.mark.parametrize("command", ["train", "evaluate", "export"])
def test_main_job_prints_no_library_notes(main_job, command):
    _, outputs = main_job
    assert not _noise(outputs[command])


@pytest.mark.tensorflow
def test_main_job_still_prints_its_own_progress_and_results(main_job):
    run_dir, outputs = main_job
    assert "training took" in outputs["train"]
    assert "results:" in outputs["evaluate"]
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
