"""Fixtures shared by every test module. Keep this small and generic."""

import os

# Must be set before TensorFlow is first imported (by keras) to silence its notices.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import pytest  # noqa: E402


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
