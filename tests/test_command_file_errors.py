"""Nothing lost, part four, the command-line part (docs/reliability.md): a full
disk and a read-only file system end in one line and a clean exit status, a
special file is refused wherever the package reads, a closed pipe ends
quietly, an unsupported Keras backend is one line.

A full disk and a read-only file system are injected (tests/_faults.py):
root ignores file modes and `mount` needs privileges. The run folder is built
in a second, without training, as in tests/test_nothing_lost.py.
"""

import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _faults import run_command
from _tiny_run import tiny_model_and_tokenizers
from _tiny_run import write_finished_run

from keras_attention.files import file_errors
from keras_attention.files import reading
from keras_attention.files.reading import NotARegularFileError
from keras_attention.training import averaging
from keras_attention.translation import SubwordTokenizer
from keras_attention.translation import cli
from keras_attention.translation import evaluation
from keras_attention.translation import runs

pytestmark = pytest.mark.tensorflow

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run with two saved epochs (`--keep-epochs`)."""
    folder = tmp_path_factory.mktemp("runs") / "finished"
    return write_finished_run(folder, *tiny_model_and_tokenizers())


@pytest.fixture
def run_copy(finished_run, tmp_path):
    return Path(shutil.copytree(finished_run, tmp_path / "run"))


@pytest.fixture
def no_waiting():
    """Fails a test that waits (on a FIFO) instead of hanging it."""

    def waited(signum, frame):
        raise AssertionError("waited on a FIFO for 20 s")

    previous = signal.signal(signal.SIGALRM, waited)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _fifo_at(path):
    path = Path(path)
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


# ------------------------------------------------------ special files


def test_a_fifo_is_refused_without_opening_it(tmp_path, no_waiting):
    fifo = _fifo_at(tmp_path / "vocab.txt")
    for read in (reading.require_regular_file, reading.open_regular, reading.read_text):
        with pytest.raises(
            NotARegularFileError, match=rf"^{fifo} is not a regular file: it is a FIFO"
        ):
            read(fifo)


def test_a_device_or_a_folder_is_refused_and_a_regular_file_read(tmp_path):
    with pytest.raises(NotARegularFileError, match=r"/dev/null is not a regular file: it is a dev"):
        reading.read_bytes("/dev/null")
    with pytest.raises(NotARegularFileError, match="it is a folder"):
        reading.read_bytes(tmp_path)
    (tmp_path / "words.txt").write_text("été\n", encoding="utf-8")
    assert reading.read_text(tmp_path / "words.txt") == "été\n"
    with pytest.raises(FileNotFoundError):
        reading.read_text(tmp_path / "missing.txt")


def _read_tokenizer(run_dir, name):
    return SubwordTokenizer.load(run_dir / runs.SOURCE_VOCAB)


def _read_epochs(run_dir, name):
    return averaging.average_weights(None, [averaging.epoch_weight_path(run_dir, 1)])


def _read_model(run_dir, name):
    from keras_attention.files.model_file import load_model

    return load_model(run_dir / runs.MODEL_FILE)


def _read_data(run_dir, name):
    from keras_attention.translation import data

    return data._read_lines(run_dir / name)


def _read_hashed(run_dir, name):
    from keras_attention.files.file_hash import sha256_of

    return sha256_of(run_dir / name)


def _read_progress(run_dir, name):
    from keras_attention.training.time_budget import TimeBudget

    return TimeBudget(1.0, 1e-3, 1e-4, run_dir / name)


def _read_tflite(run_dir, name):
    from keras_attention.export.operators import tflite_operators

    return tflite_operators(run_dir / name)


READERS = {
    "tokenizer.json": (_read_tokenizer, f"{runs.SOURCE_VOCAB}/tokenizer.json"),
    "vocab.txt": (_read_tokenizer, f"{runs.SOURCE_VOCAB}/vocab.txt"),
    "epoch weights": (_read_epochs, "epochs/epoch_001.weights.h5"),
    "model.keras": (_read_model, runs.MODEL_FILE),
    "data file": (_read_data, "train.en.gz"),
    "hashed data file": (_read_hashed, "train.en.gz"),
    "progress.json": (_read_progress, "progress.json"),
    "TFLite model": (_read_tflite, "model.tflite"),
}


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_refuses_a_fifo_naming_it(run_copy, reader, no_waiting):
    read, name = READERS[reader]
    fifo = _fifo_at(run_copy / name)
    with pytest.raises(NotARegularFileError, match=rf"^{fifo} is not a regular file: it is a FIFO"):
        read(run_copy, name)


@pytest.mark.parametrize(
    "name, argv",
    [
        (f"{runs.SOURCE_VOCAB}/tokenizer.json", ["translate", "a dog"]),
        ("epochs/epoch_002.weights.h5", ["average", "--last", "2", "--out-dir", "AVG"]),
    ],
)
def test_a_command_refuses_a_fifo_in_one_line(run_copy, tmp_path, name, argv, no_waiting):
    fifo = _fifo_at(run_copy / name)
    argv = [a.replace("AVG", str(tmp_path / "avg")) for a in argv]
    command = argv[0]
    with pytest.raises(
        SystemExit, match=rf"^{command}: {fifo} is not a regular file: it is a FIFO"
    ):
        cli.main([*argv, "--run-dir", str(run_copy)])


def test_the_g2p_reader_refuses_a_fifo(tmp_path, no_waiting):
    from _scripts import load_script

    g2p = load_script("examples/g2p_cmudict.py", "g2p_fifo")
    fifo = _fifo_at(tmp_path / "cmudict-0.7b.test")
    for expected in (None, g2p.SHA256["cmudict-0.7b.test"]):
        with pytest.raises(NotARegularFileError, match=rf"^{fifo} is not a regular file"):
            g2p.read_cmudict(str(fifo), expected)


# ------------------------------------- a full disk, a read-only place


def test_a_file_error_is_one_line_naming_the_path_and_the_remedy():
    line = file_errors.file_error_message(
        OSError(errno.EROFS, "Read-only file system", "/data/run/eval")
    )
    assert line == (
        "/data/run/eval: Read-only file system (the file system is read-only: write the "
        "output somewhere else)"
    )
    hdf5 = RuntimeError(
        "Can't decrement id ref count (file write failed: time = Mon Dec  7\n, filename = "
        "'/data/run/backup/w.weights.h5', file descriptor = 8, errno = 28, error message = "
        "'No space left on device', buf = 0x1)"
    )
    assert file_errors.is_file_error(hdf5)
    assert file_errors.file_error_message(hdf5) == (
        "/data/run/backup/w.weights.h5: No space left on device (free some space and run "
        "the command again)"
    )
    assert not file_errors.is_file_error(BrokenPipeError(errno.EPIPE, "Broken pipe"))
    assert not file_errors.is_file_error(RuntimeError("a bug"))


def _read_only(monkeypatch, folder):
    """Creating a file under `folder` fails with EROFS (os.open, open)."""
    import builtins

    folder = str(Path(folder).resolve())
    real_open, real_builtin_open, real_mkdir = os.open, builtins.open, os.mkdir

    def inside(path):
        return not isinstance(path, int) and str(Path(path).resolve()).startswith(folder)

    def os_open(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and inside(path):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    def builtin_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and inside(file):
            raise OSError(errno.EROFS, "Read-only file system", str(file))
        return real_builtin_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", builtin_open)

    def mkdir(path, *args, **kwargs):
        if inside(path):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)


def _no_decoding(*args, **kwargs):
    raise AssertionError("decoded before checking that the output can be written")


@pytest.mark.parametrize(
    "argv, place",
    [
        (["evaluate", "--run-dir", "RUN", "--methods", "greedy"], "RUN/eval"),
        (["evaluate", "--run-dir", "RUN", "--out-dir", "OUT/scores"], "OUT/scores"),
        (["explain", "--run-dir", "RUN"], "RUN"),
        (["average", "--run-dir", "RUN", "--last", "2", "--out-dir", "OUT/avg"], "OUT/avg"),
        (["export", "RUN", "OUT/export", "--variants", "float32"], "OUT/export"),
    ],
    ids=["evaluate", "evaluate-out-dir", "explain", "average", "export"],
)
def test_a_read_only_output_is_one_line_before_the_work(
    run_copy, tmp_path, monkeypatch, argv, place
):
    out = tmp_path / "out"
    out.mkdir()
    data = ROOT.parent / "shared" / "data" / "multi30k"
    argv = [a.replace("RUN", str(run_copy)).replace("OUT", str(out)) for a in argv]
    place = place.replace("RUN", str(run_copy)).replace("OUT", str(out))
    monkeypatch.setattr(evaluation, "decode_corpus", _no_decoding)
    monkeypatch.setattr(evaluation, "decode_and_score", _no_decoding)
    monkeypatch.setattr(averaging, "average_weights", _no_decoding)
    monkeypatch.setattr("keras_attention.translation.export.export_run", _no_decoding)
    _read_only(monkeypatch, run_copy if place.startswith(str(run_copy)) else out)
    with pytest.raises(SystemExit) as info:
        cli.main(["--data-dir", str(data), *argv])
    message = str(info.value.code)
    assert message.startswith(f"{argv[0]}: {place}: cannot write "), message
    assert "Read-only file system" in message and "\n" not in message


def test_a_read_only_run_folder_ends_average_in_one_line_in_a_shell(run_copy, tmp_path):
    out = tmp_path / "avg"
    argv = ["average", "--run-dir", str(run_copy), "--last", "2", "--out-dir", str(out)]
    result = run_command(argv, tmp_path, errno.EROFS, module="keras_attention.translation")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"average: {out}: cannot write in {tmp_path}: Read-only")
    assert not out.exists()


def test_a_full_disk_while_exporting_ends_in_one_line_in_a_shell(run_copy, tmp_path):
    out = tmp_path / "export"
    argv = ["export", str(run_copy), str(out), "--variants", "float32", "--no-saved-model"]
    result = run_command(
        argv, tmp_path, errno.ENOSPC, module="keras_attention.translation", names=["tflite"]
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("export: ") and "No space left on device" in lines[0], lines
    assert not out.exists()


_HDF5_WRITER = """
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
import keras_attention
import keras
from keras_attention.files.atomic import atomic_path
from keras_attention.backend import native_log
from keras_attention.files.file_errors import end_command
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4000)])
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))

def save():
    with atomic_path(sys.argv[1]) as temporary:
        model.save_weights(temporary)

# As the package's commands do: the filter of standard error that
# KERAS_ATTENTION_QUIET_NATIVE_LOG=1 installs writes what it holds before the
# process ends without its shutdown (else the line can be lost).
sys.exit(end_command(save, "save", before_exit=(native_log.stop_filter,)))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ")
def test_a_write_that_fails_inside_hdf5_ends_in_one_line_not_a_crash(tmp_path):
    """A weight file that cannot grow (here the process' file size limit, as a
    full disk would) fails inside HDF5, at any point of the file: the command
    ends with one line and status 1. HDF5 objects of such a file crashed the
    interpreter's shutdown (a segmentation fault) after the message."""
    # The file is 155 kB: limits in its data, and in its last bytes.
    for limit in (130_000, 142_000, 154_000):
        target = tmp_path / f"w{limit}.weights.h5"
        result = subprocess.run(
            [sys.executable, "-c", _HDF5_WRITER, str(target), str(limit)],
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ, KERAS_ATTENTION_QUIET_NATIVE_LOG="1"),
        )
        lines = result.stderr.splitlines()
        assert result.returncode == 1, (limit, result.returncode, result.stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith("save: "), (limit, result.stderr)
        assert "File too large" in lines[0]
        assert not target.exists()


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ")
def test_train_whose_weights_cannot_be_written_ends_in_one_line_not_a_crash(tmp_path):
    """The real command (about a minute): `train` whose first backup of the
    weights fails inside HDF5 (a 200 kB file size limit) ended in a
    segmentation fault after a 510-line traceback."""
    import resource

    from _data_paths import multi30k_dir

    data = multi30k_dir()
    if not (data / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {data} (see tests/_data_paths.py)")
    run = tmp_path / "run"
    argv = ["--data-dir", str(data), "train", "--run-dir", str(run), "--preset", "tiny"]
    argv += ["--max-train-examples", "64", "--epochs", "1"]

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    result = subprocess.run(
        [sys.executable, "-m", "keras_attention.translation", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=limit_file_size,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 1, result.stderr[-3000:]
    ours = [line for line in result.stderr.splitlines() if not line.startswith("INFO ")]
    assert len(ours) == 1 and ours[0].startswith(f"train: {run}"), result.stderr[-3000:]
    assert "File too large" in ours[0]


# ------------------------------------------------------ a closed pipe


def test_translate_into_a_closed_pipe_ends_quietly(finished_run):
    command = [sys.executable, "-m", "keras_attention.translation", "translate"]
    process = subprocess.Popen(
        [*command, "--run-dir", str(finished_run), "--batch-size", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    process.stdin.write(b"a dog runs .\n" * 2000)
    process.stdin.close()
    first = process.stdout.readline()  # `| head -1`
    process.stdout.close()
    stderr = process.stderr.read().decode()
    status = process.wait(timeout=300)
    assert first.endswith(b"\n")
    assert status == file_errors.BROKEN_PIPE_STATUS == 141, stderr
    assert stderr.splitlines() == [], stderr


def test_end_command_turns_a_closed_pipe_into_status_141_without_a_message():
    source = textwrap.dedent(
        """
        import sys
        from keras_attention.files.file_errors import end_command

        def talk():
            for _ in range(100_000):
                print("line")

        sys.exit(end_command(talk, "talk"))
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", source], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141 and stderr == ""


# ------------------------------------- the other commands: export, G2P


def test_the_generic_export_says_a_read_only_output_before_loading(
    finished_run, tmp_path, monkeypatch, capsys
):
    from keras_attention.export import __main__ as export_main

    monkeypatch.setattr(export_main, "load_model", _no_decoding)
    _read_only(monkeypatch, tmp_path)
    model = str(finished_run / runs.MODEL_FILE)
    argv = [model, str(tmp_path / "out"), "--start-id", "2", "--end-id", "3"]
    assert export_main.main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "Read-only file system" in lines[0], lines
    assert lines[0].startswith(f"{export_main.PROG}: error: {tmp_path / 'out'}: cannot write")


def test_the_generic_export_refuses_a_fifo_model_file(tmp_path, capsys, no_waiting):
    from keras_attention.export import __main__ as export_main

    fifo = _fifo_at(tmp_path / "model.keras")
    argv = [str(fifo), str(tmp_path / "out"), "--start-id", "2", "--end-id", "3"]
    assert export_main.main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"{export_main.PROG}: error: {fifo} is not a regular file: it is a FIFO "
        "(named pipe). The model file to read must be a regular file; it was not "
        "opened."
    ]


def test_the_g2p_example_says_a_read_only_output_in_one_line_in_a_shell(tmp_path):
    scores = tmp_path / "scores"
    scores.mkdir()
    argv = [str(ROOT / "examples" / "g2p_cmudict.py"), "evaluate", "--run-dir"]
    argv += [str(tmp_path / "no-run"), "--json", str(scores / "eval.json")]
    result = run_command(argv, scores, errno.EROFS)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"evaluate: {scores / 'eval.json'}: cannot write in {scores}: Read")


def test_the_translators_export_module_says_a_read_only_output_in_one_line(run_copy, tmp_path):
    out = tmp_path / "out" / "export"
    (tmp_path / "out").mkdir()
    argv = [str(run_copy), str(out), "--variants", "float32"]
    result = run_command(
        argv, tmp_path / "out", errno.EROFS, module="keras_attention.translation.export"
    )
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {out}: cannot write in {tmp_path / 'out'}: Read-only")
