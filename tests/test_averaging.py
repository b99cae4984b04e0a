"""Checkpoint averaging: the mean of saved weights, against float64 NumPy."""

import keras
import numpy as np
import pytest

from keras_attention.training import averaging


class _Counter(keras.layers.Layer):
    """Identity with an int32 weight, which an average must not touch."""

    def build(self, input_shape):
        self.count = self.add_weight(shape=(), dtype="int32", initializer="zeros", trainable=False)

    def call(self, x):
        return x


def _model(dtype=None):
    inputs = keras.Input((5,))
    x = keras.layers.Dense(7, activation="tanh", name="hidden", dtype=dtype)(inputs)
    x = _Counter(name="counter")(x)
    outputs = keras.layers.Dense(3, name="out")(x)
    return keras.Model(inputs, outputs)


def _save_random_epochs(model, run_dir, count, seed=0):
    """Saves `count` epochs of random float weights; returns their float64 values."""
    rng = np.random.default_rng(seed)
    saved = []
    for epoch in range(1, count + 1):
        values = []
        for variable in model.weights:
            if str(variable.dtype).startswith("float"):
                value = rng.normal(size=variable.shape).astype(variable.dtype)
            else:
                value = np.array(epoch * 10, variable.dtype)
            variable.assign(value)
            values.append(np.asarray(variable.numpy(), dtype=np.float64))
        path = averaging.epoch_weight_path(run_dir, epoch)
        path.parent.mkdir(parents=True, exist_ok=True)
        model.save_weights(path)
        saved.append(values)
    return saved


@pytest.mark.parametrize("dtype", [None, "mixed_float16"])
def test_average_is_the_float64_mean_of_the_files(tmp_path, dtype):
    model = _model(dtype)
    saved = _save_random_epochs(model, tmp_path, 4)
    # Something else in the model now, so that the average must come from the files.
    for variable in model.trainable_weights:
        variable.assign(np.zeros(variable.shape, variable.dtype))
    paths = [averaging.epoch_weight_path(tmp_path, e) for e in (2, 3, 4)]
    assert averaging.average_weights(model, paths) is model
    floats = 0
    for i, variable in enumerate(model.weights):
        got = np.asarray(variable.numpy())
        if str(variable.dtype).startswith("float"):
            floats += 1
            assert variable.dtype == "float32"  # mixed precision keeps float32 weights
            expected = (saved[1][i] + saved[2][i] + saved[3][i]) / 3.0
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
            assert not np.allclose(got, saved[3][i])  # not just the last file
        else:
            # Integer weights are not averaged: they keep the last file's value.
            assert variable.dtype == "int32"
            np.testing.assert_array_equal(got, saved[3][i])
    assert floats == 4  # two kernels, two biases
    assert len(model.weights) == floats + 1  # and the counter


def test_one_file_gives_that_file(tmp_path):
    model = _model()
    saved = _save_random_epochs(model, tmp_path, 2)
    averaging.average_weights(model, [averaging.epoch_weight_path(tmp_path, 1)])
    for variable, value in zip(model.weights, saved[0], strict=True):
        np.testing.assert_array_equal(np.asarray(variable.numpy(), np.float64), value)


def test_saved_and_last_epochs(tmp_path):
    model = _model()
    assert averaging.saved_epochs(tmp_path) == []
    _save_random_epochs(model, tmp_path, 3)
    (tmp_path / "epochs" / "notes.txt").write_text("not weights")
    (tmp_path / "epochs" / "epoch_x.weights.h5").write_text("not an epoch")
    assert averaging.saved_epochs(tmp_path) == [1, 2, 3]
    assert averaging.last_epochs(tmp_path, 2) == [2, 3]
    assert averaging.last_epochs(tmp_path, 3) == [1, 2, 3]
    assert averaging.epoch_weight_path(tmp_path, 12).name == "epoch_012.weights.h5"


def test_too_few_epochs_names_the_folder_and_the_flag(tmp_path):
    _save_random_epochs(_model(), tmp_path, 2)
    with pytest.raises(ValueError) as info:
        averaging.last_epochs(tmp_path, 3)
    message = str(info.value)
    assert "last 3 epochs" in message
    assert str(tmp_path / "epochs") in message
    assert "holds 2 (1, 2)" in message
    assert "--keep-epochs" in message
    with pytest.raises(ValueError, match="holds 0 \\(none\\)"):
        averaging.last_epochs(tmp_path / "elsewhere", 1)


@pytest.mark.parametrize("count", [0, -1, 1.5, True, "2"])
def test_bad_count_is_rejected(tmp_path, count):
    with pytest.raises(ValueError, match="argument `count`. Expected a positive integer"):
        averaging.last_epochs(tmp_path, count)


def test_no_files_or_a_missing_file(tmp_path):
    model = _model()
    with pytest.raises(ValueError, match="at least one weight file"):
        averaging.average_weights(model, [])
    missing = tmp_path / "epochs" / "epoch_009.weights.h5"
    with pytest.raises(FileNotFoundError, match="epoch_009.weights.h5"):
        averaging.average_weights(model, [missing])
