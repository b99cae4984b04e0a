"""Hostile inputs: nothing read from where the masks say not to, nothing unbounded.

- A NaN or inf at a masked memory position (value, key or decoder memory), or in
  a padded query, never reaches a context, a weight, an output or a gradient.
- Luong dot and general scores beyond the float16 range (65,504) are computed in
  float32 under mixed_float16, and match the float64 softmax.
- Infinite scores take the limits of the softmax (`reference.masked_softmax`);
  a NaN among a row's unmasked scores makes that row NaN, nothing else.
- Misuse gives a clear error: `BaseAttention` used directly, `get_decode_state`
  on an unbuilt decoder, a `decode_state` without one of its keys.
"""

import keras
import numpy as np
import pytest
from autodiff import gradients
from keras import ops
from reference import ATOL
from reference import RTOL
from reference import VARIANTS
from reference import build
from reference import layer_reference
from reference import make_inputs
from reference import make_layer
from reference import masked_softmax as reference_masked_softmax

from keras_attention import BahdanauDecoder
from keras_attention import LuongDecoder
from keras_attention import MaskedSoftmax
from keras_attention import OverriddenAttention
from keras_attention import masked_softmax
from keras_attention.attention.base_attention import BaseAttention

POISONS = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}


def _dtype(tensor):
    """The dtype's name on any backend (PyTorch's dtypes are not strings)."""
    return keras.backend.standardize_dtype(tensor.dtype)


# Float16 keeps 11 significant bits (relative step 2^-11 ≈ 5e-4): a weight (at
# most 1) rounded once is within 1e-3; a context sums 5 such weights times
# values below 4 in magnitude, within 5 · 4 · 5e-4 = 1e-2.
HALF_WEIGHTS_ATOL = 1e-3
HALF_CONTEXT_ATOL = 1e-2

DECODERS = {
    "bahdanau": (BahdanauDecoder, {}),
    "conditional": (BahdanauDecoder, {"conditional": True}),
    "luong": (LuongDecoder, {"input_feeding": True}),
    "luong_no_feeding": (LuongDecoder, {"input_feeding": False}),
}
UNITS = 4  # decoder state size
D_EMB = 3  # target embedding size
D_H = 6  # memory size (a multiple of 2 heads)
T_DEC = 3  # target steps
T_ENC = 6  # source steps, != T_DEC


def _value_mask(batch=2, t_v=5):
    """Row 0 with its last two keys padded, row 1 with a hole in the middle."""
    mask = np.ones((batch, t_v), bool)
    mask[0, -2:] = False
    mask[1, 1] = False
    return mask


def _fill_masked(x, mask, fill):
    """`x` (batch, T, d) with `fill` at every position where `mask` is False."""
    x = np.array(x, copy=True)
    x[~mask] = fill
    return x


# ------------------------------------------- non-finite masked memory, layers


@pytest.mark.parametrize("poison", POISONS)
@pytest.mark.parametrize("single_step", [False, True], ids=["sequence", "step"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_non_finite_masked_memory_does_not_reach_attention_outputs(variant, single_step, poison):
    rng = np.random.default_rng(0)
    inputs = make_inputs(variant, rng, single_step=single_step)
    mask = _value_mask()
    layer = build(make_layer(variant), inputs)
    hostile = dict(inputs)
    clean = dict(inputs)
    for name in ("value", "key"):
        hostile[name] = _fill_masked(inputs[name], mask, POISONS[poison])
        clean[name] = _fill_masked(inputs[name], mask, 0.0)

    context, weights = layer(**hostile, value_mask=mask, return_attention_scores=True)

    expected_context, expected_weights = layer_reference(layer, **clean, value_mask=mask)
    np.testing.assert_allclose(weights, expected_weights, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", VARIANTS)
def test_nan_in_masked_processed_keys_does_not_reach_attend_sequence_outputs(variant):
    rng = np.random.default_rng(1)
    inputs = make_inputs(variant, rng)
    mask = _value_mask()
    layer = build(make_layer(variant), inputs)
    value = _fill_masked(inputs["value"], mask, np.nan)
    processed_keys = layer.precompute_keys(_fill_masked(inputs["key"], mask, np.nan))

    context, weights, _ = layer.attend_sequence(
        inputs["query"], value, processed_keys, value_mask=mask
    )

    clean = {name: _fill_masked(inputs[name], mask, 0.0) for name in ("value", "key")}
    expected_context, expected_weights = layer_reference(
        layer, inputs["query"], **clean, value_mask=mask
    )
    expected_weights = np.asarray(expected_weights)
    if expected_weights.ndim == 4:  # (B, H, T_q, T_v): the contract gives their average
        expected_weights = expected_weights.mean(axis=1)
    np.testing.assert_allclose(weights, expected_weights, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("variant", VARIANTS)
def test_nan_in_masked_memory_gives_finite_attention_gradients(variant):
    rng = np.random.default_rng(2)
    inputs = make_inputs(variant, rng)
    mask = _value_mask()
    layer = build(make_layer(variant), inputs)
    value = _fill_masked(inputs["value"], mask, np.nan)
    key = _fill_masked(inputs["key"], mask, np.nan)
    probe = rng.normal(size=(2, 3, inputs["value"].shape[-1])).astype("float32")

    def loss(query, value, key):
        return ops.sum(ops.multiply(layer(query, value, key, value_mask=mask), probe))

    input_grads, weight_grads = gradients(
        loss, (inputs["query"], value, key), layer.trainable_variables
    )
    for grad in input_grads + weight_grads:
        assert np.all(np.isfinite(grad))


@pytest.mark.parametrize("poison", POISONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_non_finite_padded_query_gives_zero_context_and_weights(variant, poison):
    rng = np.random.default_rng(3)
    inputs = make_inputs(variant, rng)
    query_mask = np.array([[True, True, False], [True, False, False]])
    layer = build(make_layer(variant), inputs)
    hostile = dict(inputs, query=_fill_masked(inputs["query"], query_mask, POISONS[poison]))

    context, weights = layer(**hostile, query_mask=query_mask, return_attention_scores=True)

    expected_context, expected_weights = layer_reference(layer, **inputs, query_mask=query_mask)
    np.testing.assert_allclose(weights, expected_weights, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)


# ----------------------------------------- non-finite masked memory, decoders


def _decoder(kind, attention, cell_type="gru", override=None):
    cls, options = DECODERS[kind]
    layer = make_layer(attention)
    if override is not None:
        layer = OverriddenAttention(layer, override)
    decoder = cls(UNITS, layer, cell_type=cell_type, **options)
    rng = np.random.default_rng(4)
    target = rng.normal(size=(2, T_DEC, D_EMB)).astype("float32")
    memory = rng.normal(size=(2, T_ENC, D_H)).astype("float32")
    decoder(target, memory)
    return decoder, target, memory


def _memory_mask():
    mask = np.ones((2, T_ENC), bool)
    mask[0, -2:] = False
    mask[1, 2] = False
    return mask


def _assert_same(actual, expected):
    for a, e in zip(keras.tree.flatten(actual), keras.tree.flatten(expected), strict=True):
        assert np.all(np.isfinite(np.asarray(a)))
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


# An `OverriddenAttention` replaces the weights of a single-head layer with its own.
_ATTENTION_OVERRIDES = [
    ("bahdanau", None),
    ("bahdanau", "uniform"),
    ("luong_general", None),
    ("luong_general", "uniform"),
    ("luong_general_heads", None),
]


@pytest.mark.parametrize("poison", POISONS)
@pytest.mark.parametrize("attention, override", _ATTENTION_OVERRIDES)
@pytest.mark.parametrize("kind", DECODERS)
def test_non_finite_masked_memory_does_not_reach_decoder_call(kind, attention, override, poison):
    decoder, target, memory = _decoder(kind, attention, override=override)
    mask = _memory_mask()
    hostile = _fill_masked(memory, mask, POISONS[poison])
    clean = _fill_masked(memory, mask, 0.0)

    actual = decoder(target, hostile, memory_mask=mask)

    expected = decoder(target, clean, memory_mask=mask)
    _assert_same(actual, expected)
    assert np.all(np.asarray(actual[1]).transpose(1, 0, 2)[:, ~mask] == 0.0)  # (T_dec, B, T_enc)


@pytest.mark.parametrize("cell_type", ["gru", "lstm"])
@pytest.mark.parametrize("poison", POISONS)
@pytest.mark.parametrize("kind", DECODERS)
def test_non_finite_masked_memory_does_not_reach_decoder_steps(kind, poison, cell_type):
    decoder, target, memory = _decoder(kind, "bahdanau", cell_type)
    mask = _memory_mask()
    state = decoder.get_decode_state(_fill_masked(memory, mask, POISONS[poison]), memory_mask=mask)
    clean_state = decoder.get_decode_state(_fill_masked(memory, mask, 0.0), memory_mask=mask)
    for t in range(T_DEC):
        output, weights, state = decoder.step(target[:, t], state)
        expected_output, expected_weights, clean_state = decoder.step(target[:, t], clean_state)
        _assert_same((output, weights), (expected_output, expected_weights))
        assert np.all(np.asarray(weights)[~mask] == 0.0)
    _assert_same(state, clean_state)


@pytest.mark.parametrize("kind", DECODERS)
def test_nan_in_masked_memory_gives_finite_decoder_gradients(kind):
    decoder, target, memory = _decoder(kind, "bahdanau")
    mask = _memory_mask()
    memory = _fill_masked(memory, mask, np.nan)

    def loss(target, memory):
        outputs, _, _ = decoder(target, memory, memory_mask=mask)
        return ops.sum(outputs)

    input_grads, weight_grads = gradients(loss, (target, memory), decoder.trainable_variables)
    for grad in input_grads + weight_grads:
        assert np.all(np.isfinite(grad))


# ------------------------------------------------- Luong scores beyond float16

# Query rows of either sign: the scores are ≈ ±131072 (one head) or ±65536 (two
# heads), beyond float16's largest finite value, 65504, in both directions.
_SIGNS = np.array([1.0, -1.0, 1.0])


def _large_score_inputs(rng):
    """Query (2, 3, 4), key (2, 5, 4), value (2, 5, 8) exact in float16.

    q = s·[256, a, 256, b], k = [256, x, 256, y] with a, b, x, y multiples of
    1/4 in [-2, 2]: every head's score is s·65536 plus a few units, exact in
    float32, so the float32 softmax is the float64 one rounded.
    """

    def small(*shape):
        return rng.integers(-8, 9, size=shape) / 4.0

    query = np.empty((2, 3, 4))
    query[..., 0::2] = 256.0
    query[..., 1::2] = small(2, 3, 2)
    query *= _SIGNS[None, :, None]
    key = np.empty((2, 5, 4))
    key[..., 0::2] = 256.0
    key[..., 1::2] = small(2, 5, 2)
    value = rng.uniform(-3.0, 3.0, size=(2, 5, 8))
    return query.astype("float32"), value.astype("float32"), key.astype("float32")


@pytest.mark.parametrize(
    "variant",
    ["luong_dot", "luong_dot_scale", "luong_general", "luong_dot_heads", "luong_general_heads"],
)
def test_luong_scores_beyond_float16_range_match_float64_softmax(variant, dtype_policy):
    dtype_policy("mixed_float16")
    rng = np.random.default_rng(5)
    query, value, key = _large_score_inputs(rng)
    mask = _value_mask()
    layer = make_layer(variant)
    layer(query, value, key)
    if layer.score_mode == "general":
        # W = I in every head, so that the keys stay exact in float16.
        heads, size = layer.num_heads, 4 // layer.num_heads
        layer.kernel.assign(np.broadcast_to(np.eye(size), (heads, size, size)))

    context, weights = layer(query, value, key, value_mask=mask, return_attention_scores=True)

    assert _dtype(weights) == "float16" and _dtype(context) == "float16"
    expected_context, expected_weights = layer_reference(layer, query, value, key, value_mask=mask)
    weights = np.asarray(weights).astype("float64")
    context = np.asarray(context).astype("float64")
    assert np.all(np.isfinite(weights)) and np.all(np.isfinite(context))
    np.testing.assert_allclose(weights, expected_weights, rtol=0, atol=HALF_WEIGHTS_ATOL)
    np.testing.assert_allclose(context, expected_context, rtol=0, atol=HALF_CONTEXT_ATOL)


# ------------------------------------------------------- non-finite scores

_SOFTMAXES = ("function_float32", "function_float16", "layer_float32", "layer_mixed_float16")


def _softmax(implementation, scores, mask):
    """Weights (float64) of one implementation of the masked softmax."""
    if implementation.startswith("function"):
        dtype = implementation.removeprefix("function_")
        weights = masked_softmax(scores.astype(dtype), mask)
        assert _dtype(weights) == dtype
    else:
        layer = MaskedSoftmax(dtype=implementation.removeprefix("layer_"))
        weights = layer(scores, mask=mask)
        assert _dtype(weights) == layer.compute_dtype
    return np.asarray(weights).astype("float64")


def _half_atol(implementation):
    return HALF_WEIGHTS_ATOL if "16" in implementation else ATOL


def _check(implementation, scores, mask):
    scores = np.asarray(scores, "float32")
    mask = None if mask is None else np.asarray(mask, bool)
    weights = _softmax(implementation, scores, mask)
    expected = reference_masked_softmax(scores, mask)
    np.testing.assert_allclose(weights, expected, rtol=0, atol=_half_atol(implementation))
    return weights


@pytest.mark.parametrize("implementation", _SOFTMAXES)
def test_positive_inf_scores_share_their_row_equally(implementation):
    inf = np.inf
    scores = [[1.0, inf, 2.0, inf, 0.0], [inf, 1.0, 2.0, 3.0, inf], [inf, inf, inf, 5.0, 6.0]]
    mask = [[True] * 5, [False, True, True, True, True], [True] * 5]
    weights = _check(implementation, scores, mask)
    np.testing.assert_array_equal(weights[0], [0.0, 0.5, 0.0, 0.5, 0.0])
    np.testing.assert_array_equal(weights[1], [0.0, 0.0, 0.0, 0.0, 1.0])  # the masked +inf: 0


@pytest.mark.parametrize("with_mask", [False, True], ids=["no_mask", "mask"])
@pytest.mark.parametrize("implementation", _SOFTMAXES)
def test_row_of_negative_inf_scores_gives_zero_weights(implementation, with_mask):
    scores = [[-np.inf] * 4, [-np.inf, 1.0, -np.inf, 2.0]]
    mask = [[True, True, True, True], [True, False, True, False]] if with_mask else None
    weights = _check(implementation, scores, mask)
    assert np.all(weights[0] == 0.0)
    assert np.all(weights[1] == 0.0) if with_mask else weights[1, 1] > 0.0


@pytest.mark.parametrize("implementation", _SOFTMAXES)
def test_negative_inf_score_gets_exactly_zero_weight(implementation):
    scores = [[-np.inf, 1.0, 2.0, -np.inf], [0.5, -np.inf, 0.5, 3.0]]
    weights = _check(implementation, scores, None)
    assert weights[0, 0] == weights[0, 3] == weights[1, 1] == 0.0


@pytest.mark.parametrize("implementation", _SOFTMAXES)
def test_masked_non_finite_scores_are_ignored(implementation):
    scores = [[np.nan, 1.0, 2.0, np.inf], [-np.inf, 0.5, np.nan, 3.0]]
    mask = [[False, True, True, False], [False, True, False, True]]
    weights = _check(implementation, scores, mask)
    assert np.all(np.isfinite(weights))


@pytest.mark.parametrize("implementation", _SOFTMAXES)
def test_unmasked_nan_score_makes_its_row_nan(implementation):
    scores = [[1.0, np.nan, 2.0, 0.0], [1.0, 2.0, 3.0, 0.5], [np.inf, np.nan, 0.0, 1.0]]
    mask = [[True, True, True, False], [True] * 4, [True, True, True, False]]
    weights = _softmax(implementation, np.asarray(scores, "float32"), np.asarray(mask))
    assert np.all(np.isnan(weights[0, :3])) and weights[0, 3] == 0.0  # masked: still 0
    assert np.all(np.isfinite(weights[1]))  # other rows untouched
    assert np.all(np.isnan(weights[2, :3])) and weights[2, 3] == 0.0


# --------------------------------------------------------------- misuse


def test_base_attention_used_directly_names_the_layers_to_use():
    with pytest.raises(TypeError, match="BahdanauAttention or LuongAttention"):
        BaseAttention()


def test_base_attention_config_names_the_layers_to_use():
    config = keras.saving.serialize_keras_object(make_layer("luong_dot"))
    config = dict(
        config, class_name="BaseAttention", module="keras_attention.attention.base_attention"
    )
    config["registered_name"] = "keras_attention>BaseAttention"
    config["config"] = {k: config["config"][k] for k in ("name", "num_heads", "dropout", "seed")}
    with pytest.raises(TypeError, match="BahdanauAttention or LuongAttention"):
        keras.saving.deserialize_keras_object(config)


def test_incomplete_attention_subclass_names_the_missing_method():
    class Unscored(BaseAttention):
        pass

    with pytest.raises(NotImplementedError, match="Unscored.*build_score"):
        Unscored()(np.zeros((1, 4), "float32"), np.zeros((1, 3, 4), "float32"))


@pytest.mark.parametrize("kind", DECODERS)
def test_get_decode_state_on_unbuilt_decoder_says_to_build_it(kind):
    cls, options = DECODERS[kind]
    decoder = cls(UNITS, make_layer("bahdanau"), **options)
    memory = np.zeros((2, T_ENC, D_H), "float32")
    with pytest.raises(ValueError, match=r"not built.*decoder\(target_embeddings, memory\)"):
        decoder.get_decode_state(memory)


def _decode_state_cases():
    cases = []
    for kind in DECODERS:
        for cell_type in ("gru", "lstm"):
            missing = ["h", "memory", "processed_keys", "memory_mask"]
            if cell_type == "lstm":
                missing.append("c")
            if kind == "luong":
                missing.append("attentional")
            cases += [(kind, cell_type, key) for key in missing]
    return cases


@pytest.mark.parametrize("kind, cell_type, missing", _decode_state_cases())
def test_step_without_a_decode_state_key_names_it(kind, cell_type, missing):
    decoder, target, memory = _decoder(kind, "bahdanau", cell_type)
    state = decoder.get_decode_state(memory)
    expected = sorted(state)
    del state[missing]
    with pytest.raises(ValueError, match=r"`decode_state`") as error:
        decoder.step(target[:, 0], state)
    message = str(error.value)
    assert f"Missing: ['{missing}']" in message
    assert f"{expected}" in message  # every key get_decode_state gives
