"""`masked_softmax` and `MaskedSoftmax` against the float64 oracle."""

import keras
import numpy as np
import pytest
from autodiff import gradients
from keras import ops
from reference import ATOL
from reference import RTOL
from reference import masked_softmax as reference_masked_softmax

from keras_attention import MaskedSoftmax
from keras_attention import masked_softmax

# Half-precision outputs are the float32 softmax rounded once to the output dtype:
# float16 keeps 11 significant bits (relative step 2^-11 ≈ 5e-4), bfloat16 keeps 8
# (2^-8 ≈ 4e-3); weights are at most 1, so these bound the absolute error.
HALF_ATOL = {"float16": 1e-3, "bfloat16": 8e-3}


def _scores_and_mask(rng, shape=(2, 3, 7)):
    scores = rng.normal(scale=3.0, size=shape).astype("float32")
    mask = rng.random(shape) < 0.6
    mask[0, 1] = False  # a fully masked row
    mask[1, 2] = True  # a row with nothing masked
    return scores, mask


def test_matches_reference_with_mask():
    scores, mask = _scores_and_mask(np.random.default_rng(0))
    weights = masked_softmax(scores, mask)
    expected = reference_masked_softmax(scores, mask)
    np.testing.assert_allclose(weights, expected, rtol=RTOL, atol=ATOL)


def test_without_mask_is_plain_softmax():
    scores, _ = _scores_and_mask(np.random.default_rng(1))
    weights = masked_softmax(scores)
    np.testing.assert_allclose(weights, reference_masked_softmax(scores), rtol=RTOL, atol=ATOL)


def test_masked_positions_are_exactly_zero():
    scores, mask = _scores_and_mask(np.random.default_rng(2))
    weights = np.asarray(masked_softmax(scores, mask))
    assert np.all(weights[~mask] == 0.0)
    assert np.all(weights[mask] > 0.0)


def test_fully_masked_row_gives_zero_weights():
    scores, mask = _scores_and_mask(np.random.default_rng(3))
    weights = np.asarray(masked_softmax(scores, mask))
    np.testing.assert_array_equal(weights[0, 1], np.zeros(7))


def test_unmasked_weights_sum_to_one_per_row():
    scores, mask = _scores_and_mask(np.random.default_rng(4))
    weights = np.asarray(masked_softmax(scores, mask))
    sums = weights.sum(-1)
    expected = mask.any(-1).astype("float32")  # 1, or 0 for a fully masked row
    np.testing.assert_allclose(sums, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("axis", [0, 1, -2])
def test_other_axis_matches_reference(axis):
    scores, mask = _scores_and_mask(np.random.default_rng(5))
    weights = masked_softmax(scores, mask, axis=axis)
    expected = np.moveaxis(
        reference_masked_softmax(np.moveaxis(scores, axis, -1), np.moveaxis(mask, axis, -1)),
        -1,
        axis,
    )
    np.testing.assert_allclose(weights, expected, rtol=RTOL, atol=ATOL)


def test_mask_of_size_one_broadcasts_over_query_rows():
    scores, _ = _scores_and_mask(np.random.default_rng(6))
    key_mask = np.array([[[True, True, False, True, False, False, True]]] * 2)
    key_mask[1, 0, :] = False  # every row of the second batch element is masked
    weights = masked_softmax(scores, key_mask)  # mask (2, 1, 7), scores (2, 3, 7)
    expected = reference_masked_softmax(scores, np.broadcast_to(key_mask, scores.shape))
    np.testing.assert_allclose(weights, expected, rtol=RTOL, atol=ATOL)


def test_fully_masked_row_has_finite_zero_gradient():
    scores, mask = _scores_and_mask(np.random.default_rng(7))
    upstream = np.random.default_rng(8).normal(size=scores.shape).astype("float32")
    (grad,), _ = gradients(
        lambda s: ops.sum(ops.multiply(masked_softmax(s, mask), upstream)), (scores,)
    )
    assert np.all(np.isfinite(grad))
    np.testing.assert_array_equal(grad[0, 1], np.zeros(7))
    np.testing.assert_array_equal(grad[~mask], 0.0)
    assert np.any(grad[mask] != 0.0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("with_mask", [False, True])
def test_half_precision_scores_of_large_magnitude_stay_finite(dtype, with_mask):
    scores64 = np.array(
        [
            [60000.0, -60000.0, 0.0, 59990.0],
            [-60000.0, -60000.0, -59990.0, -60000.0],
            [1.0, 2.0, -60000.0, 60000.0],
        ]
    )
    mask = np.array([[True, True, True, True], [True, False, True, True], [False] * 4])
    scores = keras.ops.cast(scores64, dtype)
    weights = masked_softmax(scores, mask if with_mask else None)
    assert keras.backend.standardize_dtype(weights.dtype) == dtype
    weights = np.asarray(keras.ops.cast(weights, "float32"))
    assert np.all(np.isfinite(weights))
    # The oracle sees the same rounded scores the layer saw.
    rounded = np.asarray(keras.ops.cast(scores, "float32"), np.float64)
    expected = reference_masked_softmax(rounded, mask if with_mask else None)
    np.testing.assert_allclose(weights, expected, rtol=0, atol=HALF_ATOL[dtype])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_fully_masked_row_gives_zero_weights(dtype):
    scores, mask = _scores_and_mask(np.random.default_rng(9))
    weights = masked_softmax(keras.ops.cast(scores, dtype), mask)
    weights = np.asarray(keras.ops.cast(weights, "float32"))
    np.testing.assert_array_equal(weights[0, 1], np.zeros(7))
    np.testing.assert_array_equal(weights[~mask], 0.0)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_equals_function(axis):
    scores, mask = _scores_and_mask(np.random.default_rng(10))
    layer = MaskedSoftmax(axis=axis)
    np.testing.assert_array_equal(layer(scores, mask=mask), masked_softmax(scores, mask, axis=axis))
    np.testing.assert_array_equal(layer(scores), masked_softmax(scores, axis=axis))


def test_layer_config_round_trip():
    layer = MaskedSoftmax(axis=1, name="soft")
    config = layer.get_config()
    assert config["axis"] == 1
    restored = MaskedSoftmax.from_config(config)
    assert restored.axis == 1
    assert restored.get_config() == config


def test_layer_in_functional_model_uses_mask_input():
    scores_in = keras.Input((3, 7))
    mask_in = keras.Input((3, 7), dtype="bool")
    model = keras.Model([scores_in, mask_in], MaskedSoftmax()(scores_in, mask=mask_in))
    scores, mask = _scores_and_mask(np.random.default_rng(11))
    weights = model.predict([scores, mask], verbose=0)
    expected = reference_masked_softmax(scores, mask)
    np.testing.assert_allclose(weights, expected, rtol=RTOL, atol=ATOL)


def test_float64_scores_with_mask_match_reference():
    # The fill value of float64 is far outside float32's range: it must reach
    # the scores without passing through a float32 constant.
    scores, mask = _scores_and_mask(np.random.default_rng(11))
    weights = masked_softmax(scores.astype("float64"), mask)
    assert keras.backend.standardize_dtype(weights.dtype) == "float64"
    expected = reference_masked_softmax(scores.astype("float64"), mask)
    np.testing.assert_allclose(weights, expected, rtol=1e-12, atol=1e-15)
