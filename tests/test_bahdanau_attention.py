"""BahdanauAttention against the float64 oracle of its formula."""

import math

import numpy as np
import pytest
from reference import ATOL
from reference import BAHDANAU_VARIANTS
from reference import RTOL
from reference import bahdanau_scores
from reference import build
from reference import dims
from reference import layer_reference
from reference import make_inputs
from reference import make_layer
from reference import masked_softmax

from keras_attention import BahdanauAttention


@pytest.mark.parametrize("variant", BAHDANAU_VARIANTS)
def test_weights_have_documented_shapes(variant):
    layer = make_layer(variant)
    layer(**make_inputs(variant, np.random.default_rng(0)))
    d_q, d_k, _ = dims(variant)
    units = layer.units
    assert tuple(layer.query_kernel.shape) == (d_q, units)
    assert tuple(layer.key_kernel.shape) == (d_k, units)
    assert tuple(layer.score_vector.shape) == (units,)
    if layer.normalize:
        assert tuple(layer.score_scale.shape) == ()
        assert tuple(layer.score_bias.shape) == (units,)
    else:
        assert not hasattr(layer, "score_scale")
        assert not hasattr(layer, "score_bias")


def test_normalize_initializes_scale_to_sqrt_one_over_units():
    layer = BahdanauAttention(units=9, normalize=True)
    layer(**make_inputs("bahdanau", np.random.default_rng(0)))
    np.testing.assert_allclose(layer.score_scale.numpy(), math.sqrt(1.0 / 9), rtol=1e-6)
    np.testing.assert_array_equal(layer.score_bias.numpy(), np.zeros(9))


@pytest.mark.parametrize("variant", BAHDANAU_VARIANTS)
def test_scores_match_formula_with_different_query_and_key_sizes(variant):
    """T_q != T_v, d_q != d_k != d_v, key distinct from value."""
    rng = np.random.default_rng(1)
    inputs = make_inputs(variant, rng, batch=2, t_q=3, t_v=5)
    layer = build(make_layer(variant), inputs)
    context, weights = layer(**inputs, return_attention_scores=True)

    expected_context = np.zeros((2, 3, 8))
    expected_weights = np.zeros((2, 3, 5))
    g = float(layer.score_scale.numpy()) if layer.normalize else None
    b = layer.score_bias.numpy() if layer.normalize else None
    for n in range(2):
        e = bahdanau_scores(
            inputs["query"][n].astype("float64"),
            inputs["key"][n].astype("float64"),
            layer.query_kernel.numpy(),
            layer.key_kernel.numpy(),
            layer.score_vector.numpy(),
            g,
            b,
        )
        expected_weights[n] = masked_softmax(e)
        expected_context[n] = expected_weights[n] @ inputs["value"][n]
    np.testing.assert_allclose(weights, expected_weights, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", BAHDANAU_VARIANTS)
def test_key_defaults_to_value(variant):
    rng = np.random.default_rng(2)
    inputs = make_inputs(variant, rng)
    # Without `key`, the keys are the values, so d_k = d_v.
    layer = build(make_layer(variant), {"query": inputs["query"], "value": inputs["value"]})
    context, weights = layer(inputs["query"], inputs["value"], return_attention_scores=True)
    expected_context, expected_weights = layer_reference(layer, inputs["query"], inputs["value"])
    np.testing.assert_allclose(weights, expected_weights, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", BAHDANAU_VARIANTS)
def test_single_decoder_step_matches_formula(variant):
    rng = np.random.default_rng(3)
    inputs = make_inputs(variant, rng, single_step=True)
    layer = build(make_layer(variant), inputs)
    context, weights = layer(**inputs, return_attention_scores=True)
    assert tuple(context.shape) == (2, 8)
    assert tuple(weights.shape) == (2, 5)
    expected_context, expected_weights = layer_reference(layer, **inputs)
    np.testing.assert_allclose(weights, expected_weights, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", BAHDANAU_VARIANTS)
@pytest.mark.parametrize("row", [0, 2])
def test_single_decoder_step_equals_row_of_sequence(variant, row):
    rng = np.random.default_rng(4)
    inputs = make_inputs(variant, rng, t_q=3)
    layer = build(make_layer(variant), inputs)
    context, weights = layer(**inputs, return_attention_scores=True)
    step = {**inputs, "query": inputs["query"][:, row]}
    step_context, step_weights = layer(**step, return_attention_scores=True)
    np.testing.assert_allclose(step_context, context[:, row], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(step_weights, weights[:, row], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", BAHDANAU_VARIANTS)
@pytest.mark.parametrize("single_step", [False, True])
def test_precompute_keys_then_the_contracts_steps_equal_call(variant, single_step):
    rng = np.random.default_rng(5)
    inputs = make_inputs(variant, rng, single_step=single_step)
    layer = build(make_layer(variant), inputs)
    value_mask = np.array([[True, True, True, False, False], [True] * 5])
    context, weights = layer(**inputs, value_mask=value_mask, return_attention_scores=True)
    processed_keys = layer.precompute_keys(inputs["key"])
    assert tuple(processed_keys.shape) == (2, 5, layer.units)
    # The contract's door: one step, or the sequence, from the processed keys.
    if single_step:
        step_context, step_weights, state = layer.attend_step(
            inputs["query"], inputs["value"], processed_keys, {}, value_mask=value_mask
        )
    else:
        step_context, step_weights, state = layer.attend_sequence(
            inputs["query"], inputs["value"], processed_keys, value_mask=value_mask
        )
    assert state == {}
    weights = np.asarray(weights)
    if weights.ndim > len(inputs["query"].shape):  # each head's: the contract averages
        weights = weights.mean(axis=1)
    np.testing.assert_allclose(step_context, context, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(step_weights, weights, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", BAHDANAU_VARIANTS)
def test_masks_match_formula(variant):
    rng = np.random.default_rng(6)
    inputs = make_inputs(variant, rng, t_q=3, t_v=5)
    layer = build(make_layer(variant), inputs)
    query_mask = np.array([[True, True, False], [True, False, False]])
    value_mask = np.array([[True, False, True, True, False], [False] * 5])
    context, weights = layer(
        **inputs,
        query_mask=query_mask,
        value_mask=value_mask,
        return_attention_scores=True,
    )
    expected_context, expected_weights = layer_reference(
        layer, **inputs, query_mask=query_mask, value_mask=value_mask
    )
    np.testing.assert_allclose(weights, expected_weights, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)
