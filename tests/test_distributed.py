"""Training under `tf.distribute`: the same steps give the same losses on one
device, on two mirrored replicas and on two workers.

The distributed runs happen in fresh processes (tests/_distributed_worker.py):
logical devices and the cluster must be set before TensorFlow initializes.
Those processes train a tiny translator with a `BahdanauDecoder` for 4 steps of
8 fixed-length sentences, from identical weights, with plain SGD.

Tolerance: `rtol=1e-4`. The replicas sum two half-batch gradients where one
device sums the whole batch at once: in float32 the losses then differ in the
7th digit (measured: at most 1e-7 relative over the 4 steps). The faults these
tests look for are at least 10 times larger than the tolerance: a gradient
twice too large changes the loss of step 2 by about 1e-2 relative, clipping
the summed gradient instead of each replica's by 2e-3.
"""

import csv
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _data_paths import multi30k_dir
from _distributed_worker import CLIPNORM

from keras_attention.translation import cli
from keras_attention.translation import distribute
from keras_attention.translation.translator import RUN_FILES

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).resolve().with_name("_distributed_worker.py")
# The translator's command line, as a command.
CLI = [sys.executable, "-m", "keras_attention.translation"]
RTOL = 1e-4
# A hung collective fails the test instead of blocking CI. Generous: the
# processes need well under a minute of CPU, but the CI machine may be shared.
TIMEOUT = 600


def _environment(tf_config=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _tail(text, lines=30):
    return "\n".join(text.splitlines()[-lines:])


def _start(command, cwd, tf_config=None):
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=_environment(tf_config),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _start_cluster(commands, cwd):
    """One process per worker of a localhost cluster; `commands[i]` is worker i's."""
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(len(commands))]}
    return [
        _start(command, cwd, {"cluster": cluster, "task": {"type": "worker", "index": i}})
        for i, command in enumerate(commands)
    ]


def _wait(processes, deadline):
    """[(returncode, stdout, stderr)] of each process; past `deadline`, kills them all."""
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=max(deadline - time.monotonic(), 1))
            results.append((process.returncode, out, err))
    except subprocess.TimeoutExpired:
        for process in processes:
            process.kill()
        errors = [_tail(process.communicate()[1]) for process in processes]
        pytest.fail(f"not finished after {TIMEOUT} s:\n" + "\n---\n".join(errors))
    return results


def _result(returncode, out, err):
    assert returncode == 0, _tail(err)
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """Starts the mirrored process and the two workers at once.

    Together they finish sooner than one after the other: the workers' start
    overlaps the mirrored run, and on a shared machine three processes get
    more of the CPU than one.
    """
    run_dir = tmp_path_factory.mktemp("multi_worker")
    worker = [sys.executable, str(WORKER), "worker", "--run-dir", str(run_dir)]
    processes = {
        "replicas": [_start([sys.executable, str(WORKER), "replicas"], cwd=run_dir)],
        "workers": _start_cluster([worker, worker], cwd=run_dir),
    }
    yield run_dir, processes, time.monotonic() + TIMEOUT
    for process in processes["replicas"] + processes["workers"]:
        if process.poll() is None:  # A test failed before waiting for it.
            process.kill()
            process.communicate()


@pytest.fixture(scope="module")
def replica_runs(launched):
    _, processes, deadline = launched
    return _result(*_wait(processes["replicas"], deadline)[0])


@pytest.fixture(scope="module")
def worker_runs(launched):
    run_dir, processes, deadline = launched
    return run_dir, [_result(*result) for result in _wait(processes["workers"], deadline)]


def test_mirrored_losses_match_one_device(replica_runs):
    runs = replica_runs["runs"]
    assert replica_runs["replicas"] == 2
    np.testing.assert_allclose(runs["mirrored"], runs["one-device"], rtol=RTOL)


def test_the_compared_runs_train(replica_runs):
    # Equal losses prove little if nothing moved: each step lowers the loss.
    losses = replica_runs["runs"]["one-device"]
    assert np.all(np.diff(losses) < 0), losses


def test_global_clipnorm_clips_each_replica_gradient_before_summing(replica_runs):
    # Keras 3 (TensorFlow backend) clips in each replica, before the
    # all-reduce: with global_clipnorm=c, R replicas move the weights up to
    # R * c, where one device moves them c (docs/distributed.md). If this
    # fails, Keras changed: update the docs.
    runs = replica_runs["runs"]
    assert min(replica_runs["replica_gradient_norms"]) > CLIPNORM  # Clipping acts.
    np.testing.assert_allclose(runs["mirrored-clipped"], runs["clipped-per-replica"], rtol=RTOL)


def test_multi_worker_losses_are_equal_across_workers(worker_runs):
    _, (chief, other) = worker_runs
    assert chief["replicas"] == other["replicas"] == 2
    assert (chief["task"], chief["chief"]) == (0, True)
    assert (other["task"], other["chief"]) == (1, False)
    # Both print the result of the same all-reduce.
    np.testing.assert_allclose(
        chief["runs"]["multi-worker"], other["runs"]["multi-worker"], rtol=1e-6
    )


def test_multi_worker_losses_match_one_device(worker_runs, replica_runs):
    _, (chief, _) = worker_runs
    one_device = replica_runs["runs"]["one-device"]
    np.testing.assert_allclose(chief["runs"]["multi-worker"], one_device, rtol=RTOL)


def test_multi_worker_chief_saves_into_the_run_folder(worker_runs):
    run_dir, (chief, other) = worker_runs
    assert Path(chief["saved"]) == run_dir / "model.keras"
    assert Path(other["saved"]) == run_dir / "worker_1" / "model.keras"
    assert (run_dir / "model.keras").is_file()
    assert (run_dir / "worker_1" / "model.keras").is_file()


# --------------------------------------------------- TF_CONFIG, no training


@pytest.mark.parametrize(
    ("tf_config", "chief", "folder"),
    [
        (None, True, "run"),
        (
            {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}},
            True,
            "run",
        ),
        (
            {"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}},
            False,
            "run/worker_1",
        ),
        (
            {
                "cluster": {"chief": ["a:1"], "worker": ["b:1"]},
                "task": {"type": "chief", "index": 0},
            },
            True,
            "run",
        ),
        (
            {
                "cluster": {"chief": ["a:1"], "worker": ["b:1"]},
                "task": {"type": "worker", "index": 0},
            },
            False,
            "run/worker_0",
        ),
    ],
)
def test_only_the_chief_writes_the_run_folder(monkeypatch, tf_config, chief, folder):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    if tf_config is not None:
        monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    assert distribute.is_chief() is chief
    assert distribute.worker_run_dir("run") == Path(folder)


def test_multi_worker_needs_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        distribute.make_strategy("multi-worker")


def test_max_minutes_is_refused_with_multi_worker(tmp_path):
    with pytest.raises(SystemExit, match="--max-minutes"):
        cli.main(
            [
                "train",
                "--strategy",
                "multi-worker",
                "--max-minutes",
                "5",
                "--run-dir",
                str(tmp_path),
            ]
        )
    assert not any(tmp_path.iterdir())


# ------------------------------------------------------- the script, end to end


@pytest.mark.slow
def test_script_trains_with_two_workers(tmp_path):
    folder = multi30k_dir()
    if not (folder / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {folder} (see tests/_data_paths.py)")
    run_dir = tmp_path / "run"
    command = [*CLI, "--data-dir", str(folder), "train"]
    command += ["--preset", "tiny", "--max-train-examples", "64", "--epochs", "1"]
    command += ["--batch-size", "8", "--strategy", "multi-worker", "--run-dir", str(run_dir)]
    results = _wait(_start_cluster([command, command], cwd=tmp_path), time.monotonic() + TIMEOUT)
    for returncode, _, err in results:
        assert returncode == 0, _tail(err)
    assert all((run_dir / name).exists() for name in RUN_FILES)
    assert all((run_dir / "worker_1" / name).exists() for name in RUN_FILES)
    config = json.loads((run_dir / "config.json").read_text())
    assert (config["strategy"], config["replicas"]) == ("multi-worker", 2)
    histories = []
    for folder in (run_dir, run_dir / "worker_1"):
        with open(folder / "history.csv") as f:
            histories.append([float(row["loss"]) for row in csv.DictReader(f)])
    assert len(histories[0]) == 1
    np.testing.assert_allclose(histories[0], histories[1], rtol=1e-6)
