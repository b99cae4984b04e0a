"""Training on several devices gives the same losses as one device: under
`tf.distribute` (two mirrored replicas, two workers) on TensorFlow, and under
`keras.distribution.DataParallel` on 2 and 4 JAX host devices, with the last
batch, indivisible, padded by `keras_attention.training.distribution`
(tests/_data_parallel_worker.py, at the end of this module).

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
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _data_paths import multi30k_dir
from _distributed_worker import CLIPNORM
from _host_devices import host_devices_flags
from ai_edge_litert.interpreter import Interpreter

import keras_attention
from keras_attention.training import distribution
from keras_attention.translation import cli
from keras_attention.translation import distribute
from keras_attention.translation.runs import RUN_FILES

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


# --------------------------------------- keras.distribution on JAX host devices

DATA_PARALLEL_WORKER = Path(__file__).resolve().with_name("_data_parallel_worker.py")
HOST_DEVICES = (2, 4)
# Float32: JAX sums the per-device gradients where one device sums the batch
# at once (measured: 1e-7 relative); a padding row that counted would move
# the loss of the last step by about 1e-1.
DATA_PARALLEL_RTOL = 1e-5


@pytest.fixture(scope="module")
def data_parallel_runs(tmp_path_factory):
    """{device count: (result, folder)}, the two processes started at once."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    started = {}
    for count in HOST_DEVICES:
        folder = tmp_path_factory.mktemp(f"data_parallel_{count}")
        env = dict(_environment(), KERAS_BACKEND="jax", PYTHONPATH=package_root)
        env["XLA_FLAGS"] = host_devices_flags(count)
        command = [sys.executable, str(DATA_PARALLEL_WORKER), str(folder)]
        process = subprocess.Popen(
            command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        started[count] = process, folder
    deadline = time.monotonic() + TIMEOUT
    results = _wait([process for process, _ in started.values()], deadline)
    return {
        count: (_result(*result), folder)
        for (count, (_, folder)), result in zip(started.items(), results, strict=True)
    }


def _step_losses(result):
    """Each step's loss from `fit`'s running means (steps weighted by their
    rows: 8, 8, 8 and the padded last batch)."""
    sizes = [8, 8, 8, result["padded_rows"] - 24]
    means, losses, seen = result["data_parallel_running_means"], [], 0.0
    for index, (mean, rows) in enumerate(zip(means, sizes, strict=True)):
        before = means[index - 1] * seen if index else 0.0
        losses.append((mean * (seen + rows) - before) / rows)
        seen += rows
    return losses


@pytest.mark.parametrize("count", HOST_DEVICES)
def test_data_parallel_losses_match_one_device_with_the_last_batch_padded(
    data_parallel_runs, count
):
    result, _ = data_parallel_runs[count]
    assert result["backend"] == "jax" and result["devices"] == count
    assert result["padded_rows"] == {2: 30, 4: 32}[count]  # 29 rows padded
    one = result["one_device_steps"]
    assert np.all(np.diff(one) < 0), one  # the compared runs train
    np.testing.assert_allclose(_step_losses(result), one, rtol=DATA_PARALLEL_RTOL)
    assert result["weight_difference"] < DATA_PARALLEL_RTOL
    # `pad_dataset` over tf.data batches trains the very same steps.
    assert result["dataset_weight_difference"] == 0.0


@pytest.mark.parametrize("count", HOST_DEVICES)
def test_unpadded_indivisible_batch_stops_under_data_parallel(data_parallel_runs, count):
    # What the padding is for: JAX refuses a batch of 5 rows on 2 or 4 devices.
    assert data_parallel_runs[count][0]["unpadded_error"] == "IndivisibleError"


@pytest.mark.parametrize("count", HOST_DEVICES)
def test_padded_evaluation_equals_one_device(data_parallel_runs, count):
    # The loss and the weighted accuracy; a padding row of weight 1 (its
    # target, class 0, scored) would move both.
    result, _ = data_parallel_runs[count]
    for name in ("loss", "accuracy"):
        np.testing.assert_allclose(
            result["evaluate"][name], result["one_device_evaluate"][name], rtol=DATA_PARALLEL_RTOL
        )


@pytest.mark.parametrize("count", HOST_DEVICES)
def test_padded_generation_equals_one_device(data_parallel_runs, count):
    result, _ = data_parallel_runs[count]
    assert result["greedy_equal"] and result["beam_equal"]
    assert result["distinct_tokens"] > 3  # not one token everywhere


def test_data_parallel_names_the_devices_there_are(data_parallel_runs):
    message = data_parallel_runs[4][0]["too_many_devices"]
    assert "Expected a count from 1 to 4" in message
    assert "xla_force_host_platform_device_count" in message
    assert "Received: devices=5" in message


def test_model_parallel_shards_the_vocabulary_and_matches_one_device(data_parallel_runs):
    result = data_parallel_runs[2][0]["model_parallel"]
    assert result["specs"] == {
        "target_embedding/embeddings": ["model", None],  # (V, E): rows split
        "logits/kernel": [None, "model"],  # (units, V): columns split
        "logits/bias": ["model"],
    }
    np.testing.assert_allclose(result["losses"], result["one_device"], rtol=DATA_PARALLEL_RTOL)
    assert result["greedy_equal"]


def test_model_trained_on_two_devices_exports_to_tflite_on_tensorflow(data_parallel_runs):
    import keras

    from keras_attention import Seq2SeqGenerator
    from keras_attention.export import export_tflite
    from keras_attention.export import non_builtin_operators

    assert keras.backend.backend() == "tensorflow"
    _, folder = data_parallel_runs[2]
    model = keras.saving.load_model(folder / "model.keras")
    generator = Seq2SeqGenerator.from_model(model, 1, 23)
    sources = np.load(folder / "sources.npy")
    on_jax = np.load(folder / "greedy.npy")
    on_tensorflow = generator.greedy(sources, max_length=6)["tokens"]
    np.testing.assert_array_equal(on_tensorflow, on_jax)
    path = folder / "model.tflite"
    export_tflite(generator, path, max_length=6)
    assert non_builtin_operators(path) == {}
    run = Interpreter(model_path=str(path)).get_signature_runner("generate")
    for row, source in enumerate(sources):
        one = source[: max(int(np.max(np.nonzero(source))) + 1, 1)][None]
        np.testing.assert_array_equal(run(source=one)["tokens"][0], on_jax[row])


def test_data_parallel_on_tensorflow_points_to_tf_distribute():
    import keras

    assert keras.backend.backend() == "tensorflow"
    with pytest.raises(distribution.DistributionError, match=r"tf\.distribute.*mirrored"):
        distribution.data_parallel()


# ------------------------------------------ padding helpers, no devices needed


def test_pad_arrays_appends_zero_rows_of_zero_weight():
    source = np.arange(1, 1 + 5 * 3).reshape(5, 3).astype("int32")
    target = np.arange(1, 1 + 5 * 2).reshape(5, 2).astype("int32")
    x, y, weight = distribution.pad_arrays([source, source], target, multiple=4, batch_size=8)
    assert [a.shape for a in x] == [(8, 3), (8, 3)] and y.shape == (8, 2)
    np.testing.assert_array_equal(x[0][:5], source)
    np.testing.assert_array_equal(y[:5], target)
    assert not x[0][5:].any() and not y[5:].any()
    np.testing.assert_array_equal(weight, np.repeat([1, 1, 1, 1, 1, 0, 0, 0], 2).reshape(8, 2))


def test_pad_arrays_keeps_given_weights_per_row():
    target = np.ones((3, 4), "int32")
    _, _, weight = distribution.pad_arrays(target, target, np.array([0.5, 2.0, 1.0]), multiple=2)
    np.testing.assert_array_equal(weight[:, 0], [0.5, 2.0, 1.0, 0.0])
    assert weight.shape == (4, 4)


def test_pad_arrays_refuses_a_batch_size_that_does_not_split():
    target = np.ones((3, 4), "int32")
    with pytest.raises(distribution.DistributionError, match=r"batch_size=6"):
        distribution.pad_arrays(target, target, multiple=4, batch_size=6)


def test_pad_arrays_refuses_inputs_of_different_rows():
    with pytest.raises(
        distribution.DistributionError, match=r"`x\[1\]` has 2 rows where `y` has 3"
    ):
        distribution.pad_arrays([np.ones((3, 2)), np.ones((2, 2))], np.ones(3), multiple=2)


def test_pad_rows_and_unpad_round_trip():
    array = np.arange(10).reshape(5, 2)
    padded, rows = distribution.pad_rows(array, 4)
    assert padded.shape == (8, 2) and rows == 5 and not padded[5:].any()
    result = distribution.unpad({"tokens": padded, "lengths": np.arange(8)}, rows)
    np.testing.assert_array_equal(result["tokens"], array)
    assert result["lengths"].tolist() == [0, 1, 2, 3, 4]


def test_pad_dataset_pads_only_the_last_batch():
    import tensorflow as tf

    x = np.arange(1, 11).reshape(5, 2).astype("int32")
    dataset = tf.data.Dataset.from_tensor_slices(((x, x), x)).batch(2)  # 2, 2, 1 rows
    batches = list(distribution.pad_dataset(dataset, multiple=2).as_numpy_iterator())
    assert [b[1].shape[0] for b in batches] == [2, 2, 2]
    (last_x, _), last_y, last_weight = batches[-1]
    np.testing.assert_array_equal(last_y, [[9, 10], [0, 0]])
    np.testing.assert_array_equal(last_x, [[9, 10], [0, 0]])
    np.testing.assert_array_equal(last_weight, [[1, 1], [0, 0]])
    np.testing.assert_array_equal(batches[0][2], np.ones((2, 2)))


@pytest.mark.parametrize("multiple", [0, -2, 1.5, True, None])
def test_padding_refuses_a_bad_multiple(multiple):
    with pytest.raises(distribution.DistributionError, match="multiple"):
        distribution.pad_rows(np.ones((3, 2)), multiple)


def test_the_docs_data_parallel_block_runs_and_exports(tmp_path):
    """The ```bash block of docs/distributed.md: 2 host devices on JAX, then
    the export command on its .keras file."""
    from keras_attention.export import non_builtin_operators

    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    page = (ROOT / "docs" / "distributed.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)^```", page, re.S | re.M)
    (block,) = [b for b in blocks if "KERAS_BACKEND=jax" in b and "set_distribution" in b]
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    env = dict(_environment(), PYTHONPATH=package_root)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    completed = subprocess.run(
        ["bash", "-e", "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert completed.returncode == 0, _tail(completed.stderr)
    assert "30 rows, 29 of them real" in completed.stdout
    assert "(5, 8)" in completed.stdout
    for name in ("model.tflite", "model_int8.tflite"):
        assert non_builtin_operators(tmp_path / "exported" / name) == {}


# ------------------------------------ TrainingRun(distribution="data-parallel")

TRAINING_RUN_WORKER = Path(__file__).resolve().with_name("_training_run_data_parallel_worker.py")


def test_training_run_data_parallel_equals_one_device_on_indivisible_rows(tmp_path):
    """A user's own model through `TrainingRun(distribution="data-parallel")`
    on 2 JAX host devices, 7 rows in batches of 4 (the last, 3 rows, padded
    to 4): trained as on one device. A padding row that counted in the loss
    moves the result by 3 % (measured with a mean over the batch size)."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    env = dict(_environment(), KERAS_BACKEND="jax", PYTHONPATH=package_root)
    env["XLA_FLAGS"] = host_devices_flags(2)
    process = subprocess.Popen(
        [sys.executable, str(TRAINING_RUN_WORKER), str(tmp_path)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    result = _result(*_wait([process], time.monotonic() + TIMEOUT)[0])
    one, two = result["one_device"], result["data_parallel"]
    assert two["keras_devices"] == 2 and two["devices"] == 2 and one["devices"] is None
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=DATA_PARALLEL_RTOL)
    config = json.loads((tmp_path / "data_parallel" / "config.json").read_text())
    assert config["distribution"] == "data-parallel" and config["devices"] == 2
    # The same model with Keras' default reduction: refused before a step,
    # since it divides by the padded rows too.
    assert "`mean_squared_error` (reduction='sum_over_batch_size')" in result["refused"]
    assert "reduction='mean_with_sample_weight'" in result["refused"]


# ------------------------------- the translator on JAX, --distribution data-parallel

TRANSLATOR_WORKER = Path(__file__).resolve().with_name("_translator_data_parallel_worker.py")


@pytest.fixture(scope="module")
def translator_runs(tmp_path_factory):
    """(result, folder) of tests/_translator_data_parallel_worker.py: the tiny
    translator trained by its command line on 2 JAX host devices and on one.
    XLA's CPU optimization level 0 compiles the training step about twice as
    fast (measured: 6.5 s against 13 to 18 s a shape on a busy 2-core
    machine); both runs take it."""
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed")
    data_dir = multi30k_dir()
    if not (data_dir / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {data_dir} (see tests/_data_paths.py)")
    folder = tmp_path_factory.mktemp("translator_data_parallel")
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    env = dict(_environment(), KERAS_BACKEND="jax", PYTHONPATH=package_root)
    env["XLA_FLAGS"] = host_devices_flags(2) + " --xla_backend_optimization_level=0"
    process = subprocess.Popen(
        [sys.executable, str(TRANSLATOR_WORKER), str(data_dir), str(folder)],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return _result(*_wait([process], time.monotonic() + TIMEOUT)[0]), folder


def _history(run_dir):
    with open(run_dir / "history.csv") as f:
        rows = list(csv.DictReader(f))
    return {key: [float(row[key]) for row in rows] for key in ("loss", "val_loss")}


def test_translator_on_two_jax_devices_has_one_devices_losses(translator_runs):
    """`train --distribution data-parallel --batch-size 8` on 2 devices and
    `train --batch-size 16` on one: the same global batches, the same
    losses, epoch by epoch (dropout included: the same draws)."""
    result, folder = translator_runs
    assert result["backend"] == "jax" and result["devices"] == 2
    two, one = folder / "data_parallel", folder / "one_device"
    two_config = json.loads((two / "config.json").read_text())
    one_config = json.loads((one / "config.json").read_text())
    assert (two_config["distribution"], two_config["devices"], two_config["batch_size"]) == (
        "data-parallel",
        2,
        8,
    )
    assert (one_config["distribution"], one_config["devices"], one_config["batch_size"]) == (
        None,
        None,
        16,
    )
    two_history, one_history = _history(two), _history(one)
    assert len(one_history["loss"]) == 2
    assert one_history["loss"][1] < one_history["loss"][0]  # the compared runs train
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(two_history[key], one_history[key], rtol=DATA_PARALLEL_RTOL)


def test_translator_batches_on_jax_come_in_fixed_shapes(translator_runs):
    """On JAX, `train` pads its batches to fixed shapes (`make_dataset(...,
    fixed_shapes=True)`): the global batch's rows, the bucket's width; the
    last training batch, 8 pairs, gets 8 empty rows."""
    result, _ = translator_runs
    for run in ("data_parallel", "one_device"):
        # (rows, width) of the source, the decoder input and the target.
        assert result[run]["train_shapes"] == [[16, 127] * 3]
        assert result[run]["val_shapes"] == [[16, 127] * 3]


def test_translator_trained_on_jax_loads_and_evaluates_on_tensorflow(translator_runs):
    import keras

    assert keras.backend.backend() == "tensorflow"
    _, folder = translator_runs
    run_dir = folder / "data_parallel"
    model = keras.saving.load_model(run_dir / "model.keras")
    inputs = np.load(folder / "inputs.npz")
    logits = model.predict([inputs["source"], inputs["decoder_input"]], verbose=0)
    np.testing.assert_allclose(logits, np.load(folder / "logits.npy"), rtol=1e-5, atol=1e-5)
    cli.main(
        ["--data-dir", str(multi30k_dir()), "evaluate", "--run-dir", str(run_dir)]
        + ["--splits", "val", "--methods", "greedy", "--max-sentences", "4"]
    )
    assert list((run_dir / "eval").iterdir())


def test_translator_trained_on_jax_exports_on_tensorflow(translator_runs):
    from keras_attention.export import non_builtin_operators

    _, folder = translator_runs
    out = folder / "export"
    cli.main(
        ["export", str(folder / "data_parallel"), str(out)]
        + ["--variants", "float32", "--max-length", "12", "--no-saved-model"]
    )
    (path,) = (out / "tflite").glob("*float32.tflite")
    assert non_builtin_operators(path) == {}
