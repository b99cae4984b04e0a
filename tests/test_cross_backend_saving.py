"""A `.keras` file saved on one Keras backend loads on the others, same outputs.

Each backend runs in its own fresh process (`_cross_backend_worker.py`): one
process per backend saves a Bahdanau (GRU) and a Luong (LSTM) decoder model,
one per backend loads the other backends' files; for each pair the logits and
attention weights must agree within 1e-5. Backends that are not installed are
skipped.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import keras_attention

BACKENDS = ("tensorflow", "jax", "torch")
WORKER = Path(__file__).resolve().parent / "_cross_backend_worker.py"
# Float32 through a few recurrent steps, with each backend's own kernels.
ATOL = 1e-5


def _installed(backend):
    return importlib.util.find_spec(backend) is not None


def _worker(backend, *arguments):
    """Runs the worker with KERAS_BACKEND=backend; returns its stdout."""
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=package_root)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    completed = subprocess.run(
        [sys.executable, str(WORKER), *map(str, arguments)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed.stdout


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """{backend: (folder with the models it saved and their outputs, stdout)}."""
    folders = {}
    for backend in filter(_installed, BACKENDS):
        folder = tmp_path_factory.mktemp(f"saved_on_{backend}")
        folders[backend] = folder, _worker(backend, "save", folder)
    return folders


@pytest.fixture(scope="module")
def loaded(saved, tmp_path_factory):
    """{(saved on, loaded on): outputs}: each backend loads the others' files."""
    results = {}
    for backend in filter(_installed, BACKENDS):
        out = tmp_path_factory.mktemp(f"loaded_on_{backend}")
        sources = [source for source in saved if source != backend]
        paths = [path for s in sources for path in (saved[s][0], out / f"{s}.npz")]
        _worker(backend, "load", *paths)
        for source in sources:
            results[source, backend] = np.load(out / f"{source}.npz")
    return results


PAIRS = [(a, b) for a in BACKENDS for b in BACKENDS if a != b]


@pytest.mark.parametrize("saved_on, loaded_on", PAIRS)
def test_keras_file_gives_the_same_outputs_on_another_backend(saved, loaded, saved_on, loaded_on):
    for backend in (saved_on, loaded_on):
        if not _installed(backend):
            pytest.skip(f"{backend} is not installed")
    expected = np.load(saved[saved_on][0] / "outputs.npz")
    got = loaded[saved_on, loaded_on]
    assert sorted(got.files) == sorted(expected.files)
    for key in expected.files:
        assert np.any(expected[key] != 0), key
        np.testing.assert_allclose(got[key], expected[key], rtol=0, atol=ATOL, err_msg=key)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_importing_on_another_backend_imports_no_tensorflow(saved, backend):
    if not _installed(backend):
        pytest.skip(f"{backend} is not installed")
    stdout = saved[backend][1]
    assert stdout.split()[-2:] == [backend, "False"], stdout


@pytest.mark.parametrize("module", ["keras_attention.export", "keras_attention.translation"])
def test_tensorflow_only_modules_name_the_extra_when_tensorflow_is_missing(module):
    if not _installed("jax"):
        pytest.skip("jax is not installed")
    # TensorFlow made unimportable: the layers still import, the TF-only
    # modules raise an ImportError that says what to install.
    code = (
        "import sys\n"
        "sys.modules['tensorflow'] = None\n"
        "import keras_attention\n"
        "from keras_attention import BahdanauDecoder, Seq2SeqGenerator\n"
        "try:\n"
        f"    import {module}\n"
        "except ImportError as error:\n"
        "    print('ImportError:', error)\n"
    )
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=package_root)
    completed = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "ImportError:" in completed.stdout, completed.stdout
    assert f"{module} needs TensorFlow" in completed.stdout
    assert "pip install keras-seq2seq-attention[tensorflow]" in completed.stdout
