"""LuongAttention (dot, general, concat, scale, heads) against the float64 oracle."""

import numpy as np
import pytest
from reference import ATOL
from reference import LUONG_VARIANTS
from reference import RTOL
from reference import attention
from reference import build
from reference import concat_scores
from reference import dims
from reference import dot_scores
from reference import general_scores
from reference import layer_reference
from reference import make_inputs
from reference import make_layer

from keras_attention import LuongAttention

SINGLE_HEAD = [v for v in LUONG_VARIANTS if not v.endswith("_heads")]
MULTI_HEAD = [v for v in LUONG_VARIANTS if v.endswith("_heads")]


def _single_head_scores(layer, q, k):
    """The single-head formula of each score mode, written directly."""
    mode = layer.score_mode
    if mode == "dot":
        e = dot_scores(q, k)
    elif mode == "general":
        # num_heads=1 keeps one (d_q, d_k) matrix: the plain qᵀ W k.
        assert tuple(layer.kernel.shape) == (1, q.shape[-1], k.shape[-1])
        e = general_scores(q, k, layer.kernel.numpy()[0])
    else:
        e = concat_scores(
            q,
            k,
            layer.query_kernel.numpy(),
            layer.key_kernel.numpy(),
            layer.score_vector.numpy(),
        )
    if layer.use_scale:
        e = float(layer.scale.numpy()) * e
    return e


@pytest.mark.parametrize("variant", SINGLE_HEAD)
def test_scores_match_formula_with_different_query_and_key_sizes(variant):
    """T_q != T_v; d_q != d_k except for "dot"; key distinct from value."""
    rng = np.random.default_rng(1)
    inputs = make_inputs(variant, rng, batch=2, t_q=3, t_v=5)
    layer = build(make_layer(variant), inputs)
    context, weights = layer(**inputs, return_attention_scores=True)
    assert tuple(context.shape) == (2, 3, 8)
    assert tuple(weights.shape) == (2, 3, 5)
    for n in range(2):
        e = _single_head_scores(
            layer,
            inputs["query"][n].astype("float64"),
            inputs["key"][n].astype("float64"),
        )
        expected_context, expected_weights = attention(e, inputs["value"][n])
        np.testing.assert_allclose(weights[n], expected_weights, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(context[n], expected_context, rtol=RTOL, atol=ATOL)


def test_scale_initializes_to_one_and_multiplies_scores():
    rng = np.random.default_rng(2)
    inputs = make_inputs("luong_dot", rng)
    scaled = LuongAttention(use_scale=True)
    plain = LuongAttention()
    scaled(**inputs)
    np.testing.assert_array_equal(scaled.scale.numpy(), 1.0)
    scaled.scale.assign(2.5)
    _, weights = scaled(**inputs, return_attention_scores=True)
    # scale · qᵀk is the dot score of the query multiplied by the scale.
    _, expected = plain(
        2.5 * inputs["query"],
        inputs["value"],
        key=inputs["key"],
        return_attention_scores=True,
    )
    np.testing.assert_allclose(weights, expected, rtol=RTOL, atol=ATOL)


def test_concat_units_default_to_query_size():
    layer = LuongAttention(score_mode="concat")
    layer(**make_inputs("luong_concat", np.random.default_rng(0)))
    d_q, d_k, _ = dims("luong_concat")
    assert tuple(layer.query_kernel.shape) == (d_q, d_q)
    assert tuple(layer.key_kernel.shape) == (d_k, d_q)
    assert tuple(layer.score_vector.shape) == (d_q,)


@pytest.mark.parametrize("variant", LUONG_VARIANTS)
def test_key_defaults_to_value(variant):
    rng = np.random.default_rng(3)
    d_q, _, _ = dims(variant)
    query = rng.normal(size=(2, 3, d_q)).astype("float32")
    # "dot" needs d_v == d_q when the values are the keys.
    d_v = d_q if "dot" in variant else 8
    value = rng.normal(size=(2, 5, d_v)).astype("float32")
    layer = build(make_layer(variant), {"query": query, "value": value})
    context, weights = layer(query, value, return_attention_scores=True)
    expected_context, expected_weights = layer_reference(layer, query, value)
    np.testing.assert_allclose(weights, expected_weights, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", LUONG_VARIANTS)
def test_single_decoder_step_matches_formula(variant):
    rng = np.random.default_rng(4)
    inputs = make_inputs(variant, rng, single_step=True)
    layer = build(make_layer(variant), inputs)
    context, weights = layer(**inputs, return_attention_scores=True)
    assert tuple(context.shape) == (2, 8)
    heads = layer.num_heads
    assert tuple(weights.shape) == ((2, 5) if heads == 1 else (2, heads, 5))
    expected_context, expected_weights = layer_reference(layer, **inputs)
    np.testing.assert_allclose(weights, expected_weights, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", LUONG_VARIANTS)
@pytest.mark.parametrize("row", [0, 2])
def test_single_decoder_step_equals_row_of_sequence(variant, row):
    rng = np.random.default_rng(5)
    inputs = make_inputs(variant, rng, t_q=3)
    layer = build(make_layer(variant), inputs)
    context, weights = layer(**inputs, return_attention_scores=True)
    step = {**inputs, "query": inputs["query"][:, row]}
    step_context, step_weights = layer(**step, return_attention_scores=True)
    np.testing.assert_allclose(step_context, context[:, row], rtol=RTOL, atol=ATOL)
    # The query axis is the one before the keys: (B, T_q, T_v) or (B, H, T_q, T_v).
    step_row = np.take(np.asarray(weights), row, axis=-2)  # numpy's take, not the backend's
    np.testing.assert_allclose(step_weights, step_row, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", LUONG_VARIANTS)
@pytest.mark.parametrize("single_step", [False, True])
def test_precompute_keys_then_the_contracts_steps_equal_call(variant, single_step):
    rng = np.random.default_rng(6)
    inputs = make_inputs(variant, rng, single_step=single_step)
    layer = build(make_layer(variant), inputs)
    value_mask = np.array([[True, True, True, False, False], [True] * 5])
    context, weights = layer(**inputs, value_mask=value_mask, return_attention_scores=True)
    processed_keys = layer.precompute_keys(inputs["key"])
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


@pytest.mark.parametrize("variant", LUONG_VARIANTS)
def test_masks_match_formula(variant):
    rng = np.random.default_rng(7)
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


@pytest.mark.parametrize("variant", MULTI_HEAD)
def test_each_head_attends_with_its_own_slices(variant):
    rng = np.random.default_rng(8)
    inputs = make_inputs(variant, rng, batch=2, t_q=3, t_v=5)
    layer = build(make_layer(variant), inputs)
    heads = layer.num_heads
    context, weights = layer(**inputs, return_attention_scores=True)
    assert tuple(weights.shape) == (2, heads, 3, 5)
    assert tuple(context.shape) == (2, 3, 8)
    d_q, d_k, d_v = dims(variant)
    sq, sk, sv = d_q // heads, d_k // heads, d_v // heads
    if layer.score_mode == "general":
        assert tuple(layer.kernel.shape) == (heads, sq, sk)
    for n in range(2):
        for h in range(heads):
            q = inputs["query"][n, :, h * sq : (h + 1) * sq].astype("float64")
            k = inputs["key"][n, :, h * sk : (h + 1) * sk].astype("float64")
            if layer.score_mode == "general":
                e = general_scores(q, k, layer.kernel.numpy()[h])
            else:
                e = dot_scores(q, k)
            if layer.use_scale:
                e = float(layer.scale.numpy()) * e
            expected_context, expected_weights = attention(
                e, inputs["value"][n, :, h * sv : (h + 1) * sv]
            )
            np.testing.assert_allclose(weights[n, h], expected_weights, rtol=RTOL, atol=ATOL)
            np.testing.assert_allclose(
                context[n, :, h * sv : (h + 1) * sv],
                expected_context,
                rtol=RTOL,
                atol=ATOL,
            )
