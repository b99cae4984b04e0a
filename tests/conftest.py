"""Fixtures shared by every test module. Keep this small and generic."""

import os
import sys
from pathlib import Path

# Must be set before TensorFlow is first imported (by keras) to silence its notices.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Read by JAX when first imported, here and in the processes the tests start:
# float64 for the float64 oracles and finite differences (JAX truncates it to
# float32 unless x64 is on). JAX's compilation cache on disk stays off: with
# it, JAX 0.10 crashed (a segmentation fault in its cache's write) in the
# middle of tests/test_seq2seq_generator.py.
os.environ.setdefault("JAX_ENABLE_X64", "1")

import keras  # noqa: E402
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# Set by README's test command (and so by CI): the tests import the installed
# wheel, never the repository's keras_attention/, so that a module or file the
# wheel lacks fails them.
INSTALLED_ENV = "KERAS_ATTENTION_TEST_INSTALLED"


def _import_the_installed_package():
    """Imports keras_attention from site-packages; refuses the source tree.

    `python -m pytest` puts the working directory, the repository, first on
    sys.path, where keras_attention/ would shadow the installed copy. The
    package is imported once without the repository on the path; its
    submodules then come from the installed copy's `__path__`, and the
    repository goes back on the path for `tests.*` and the scripts.
    """
    repository = [p for p in sys.path if Path(p or os.getcwd()).resolve() == ROOT]
    for path in repository:
        sys.path.remove(path)
    try:
        import keras_attention
    finally:
        sys.path[:0] = repository
    location = Path(keras_attention.__file__).resolve()
    # The source folder, or an editable install's path to it; a virtual
    # environment inside the repository (README's .venv) is not the source.
    if location.parent == ROOT / "keras_attention":
        raise RuntimeError(
            f"{INSTALLED_ENV}=1 but keras_attention was imported from the repository "
            f"({location}), not from an installed wheel: install it with "
            '`python -m build && pip install "$(echo dist/*.whl)[dev]"`, not `pip install -e`.'
        )
    _check_the_installed_copy_is_this_source(location.parent)
    # The processes the tests start (`python -m keras_attention.translation`,
    # `python -c ...`, often in the repository) do not put their working
    # directory on sys.path either (Python 3.11 and later read this).
    os.environ["PYTHONSAFEPATH"] = "1"


def _check_the_installed_copy_is_this_source(installed):
    """Refuses an installed copy built from other sources than this checkout's.

    `pip install dist/*.whl` keeps an installed copy of the same version, so
    in an environment that ran the tests before, the tests would exercise
    old code. Every module of the source tree must be in the installed copy,
    byte for byte; a module the wheel lacks still fails the tests that import
    it (this names it first).
    """
    source = ROOT / "keras_attention"
    missing, differ = [], []
    for path in sorted(source.rglob("*.py")):
        relative = path.relative_to(source)
        copy = installed / relative
        if not copy.is_file():
            missing.append(str(relative))
        elif copy.read_bytes() != path.read_bytes():
            differ.append(str(relative))
    if missing or differ:
        raise RuntimeError(
            f"{INSTALLED_ENV}=1 but the installed keras_attention ({installed}) is not "
            f"built from this checkout: missing {missing or 'none'}, different "
            f"{differ or 'none'}. Build the wheel again and reinstall it: "
            "`rm -rf dist && python -m build && pip install --force-reinstall --no-deps "
            "dist/*.whl`."
        )


if os.environ.get(INSTALLED_ENV) == "1":
    _import_the_installed_package()

if keras.backend.backend() == "torch":
    import ml_dtypes  # noqa: E402
    import torch  # noqa: E402

    _tensor_array = torch.Tensor.__array__

    def _numpy_array(self, dtype=None, copy=None):
        # The tests read outputs with `np.asarray`, as on the other backends;
        # PyTorch refuses a tensor that requires grad, and has no numpy
        # bfloat16. Read as `keras.ops.convert_to_numpy` reads them.
        x = self.detach().cpu()
        if x.dtype == torch.bfloat16:
            value = _tensor_array(x.to(torch.float32)).astype(ml_dtypes.bfloat16)
        else:
            value = _tensor_array(x)
        return value if dtype is None else value.astype(dtype, copy=False)

    torch.Tensor.__array__ = _numpy_array

if keras.backend.backend() == "jax":
    import jax  # noqa: E402

    @pytest.fixture(autouse=True, scope="module")
    def _release_jax_executables():
        """Frees what JAX compiled for a test module once the module is done.

        Called eagerly, every decoder or search loop is a new function, so JAX
        compiles it again at each call and keeps every executable. Each holds
        memory mappings; a process may have 65,530 (`vm.max_map_count`), and
        one process running the JAX modules reached that limit and aborted in
        XLA's compiler. One module alone stays under half of it.
        """
        yield
        jax.clear_caches()


def pytest_collection_modifyitems(config, items):
    """Skips the tests marked `tensorflow` on the other Keras backends."""
    if keras.backend.backend() == "tensorflow":
        return
    skip = pytest.mark.skip(
        reason=f"needs TensorFlow itself; the Keras backend is {keras.backend.backend()}"
    )
    for item in items:
        if item.get_closest_marker("tensorflow") is not None:
            item.add_marker(skip)


@pytest.fixture
def dtype_policy():
    """Sets the global dtype policy for one test; restores "float32" afterwards.

    Usage: `dtype_policy("mixed_float16")`.
    """
    yield keras.config.set_dtype_policy
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def seed():
    """Seeds Python, NumPy and the backend; returns the seed for numpy generators."""
    value = 1337
    keras.utils.set_random_seed(value)
    return value
