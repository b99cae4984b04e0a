"""`OverriddenAttention` against float64 numpy references, alone and in a decoder.

    uniform    a_j = 1 / n on the n unmasked keys, 0 elsewhere (all 0 when n = 0)
    permute    the wrapped layer's weights, rearranged among the unmasked keys
    context    c = Σ_j a_j v_j; 0 (and a = 0) for a padded query

The decoders' use of it (every decoder, step and call, fit on every backend)
is tested in test_decoders.py.
"""

import keras
import numpy as np
import pytest
from reference import ATOL
from reference import RTOL
from reference import build
from reference import layer_reference
from reference import make_inputs
from reference import make_layer

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import LocationSensitiveAttention
from keras_attention import LuongAttention
from keras_attention import LuongDecoder
from keras_attention import OverriddenAttention
from keras_attention import Seq2SeqGenerator
from keras_attention.decoders.overridden_decoder import overridden_decoder

VARIANTS = ("bahdanau", "luong_general")  # single-head variants of `reference.VARIANTS`
MODES = ("uniform", "permute")
T_V = 5


def value_mask(batch=3):
    """Row 0 complete, row 1 with a hole and a padded end, row 2 fully masked."""
    mask = np.ones((batch, T_V), bool)
    mask[1, 1] = False
    mask[1, -1] = False
    mask[2] = False
    return mask


def wrapped(variant, mode, inputs, seed=None):
    """An `OverriddenAttention` around a built `variant` with random weights."""
    inner = build(make_layer(variant), inputs)
    return OverriddenAttention(inner, mode, seed=seed)


def np_context(weights, value):
    """Σ_j a_j v_j: weights (B, [T_q,] T_v), value (B, T_v, d_v)."""
    weights = np.asarray(weights, np.float64)
    spec = "bv,bvd->bd" if weights.ndim == 2 else "bqv,bvd->bqd"
    return np.einsum(spec, weights, np.asarray(value, np.float64))


# ------------------------------------------------------------------- uniform


@pytest.mark.parametrize("single_step", [False, True])
@pytest.mark.parametrize("variant", VARIANTS)
def test_uniform_weights_are_equal_over_unmasked_keys(variant, single_step):
    rng = np.random.default_rng(1)
    inputs = make_inputs(variant, rng, batch=3, t_v=T_V, single_step=single_step)
    layer = wrapped(variant, "uniform", inputs)
    mask = value_mask()
    context, weights = layer(**inputs, value_mask=mask, return_attention_scores=True)
    expected = mask / np.maximum(mask.sum(-1, keepdims=True), 1)  # (B, T_v)
    if not single_step:
        expected = np.broadcast_to(expected[:, None, :], weights.shape)
    np.testing.assert_allclose(weights, expected, rtol=RTOL, atol=0)
    assert np.all(np.asarray(weights)[2] == 0.0)  # fully masked row
    np.testing.assert_allclose(context, np_context(expected, inputs["value"]), rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------- permute


@pytest.mark.parametrize("single_step", [False, True])
@pytest.mark.parametrize("variant", VARIANTS)
def test_permute_rearranges_the_weights_among_unmasked_keys(variant, single_step):
    rng = np.random.default_rng(2)
    inputs = make_inputs(variant, rng, batch=3, t_v=T_V, single_step=single_step)
    layer = wrapped(variant, "permute", inputs, seed=4)
    mask = value_mask()
    _, weights = layer_reference(layer.attention, **inputs, value_mask=mask)
    context, permuted = layer(**inputs, value_mask=mask, return_attention_scores=True)
    permuted = np.asarray(permuted)
    rows = permuted.reshape(3, -1, T_V)  # (B, T_q, T_v), T_q = 1 for one step
    reference = np.asarray(weights).reshape(3, -1, T_V)
    for b in range(3):
        assert np.all(rows[b][:, ~mask[b]] == 0.0)
        np.testing.assert_allclose(
            np.sort(rows[b][:, mask[b]], -1), np.sort(reference[b][:, mask[b]], -1), rtol=RTOL
        )
    assert np.abs(rows - reference).max() > 1e-3, "no row was permuted"
    np.testing.assert_allclose(context, np_context(permuted, inputs["value"]), rtol=RTOL, atol=ATOL)


def test_permute_with_a_seed_repeats_its_order():
    rng = np.random.default_rng(3)
    inputs = make_inputs("bahdanau", rng, batch=3, t_v=T_V)
    inner = build(make_layer("bahdanau"), inputs)
    mask = value_mask()
    first, second = (
        OverriddenAttention(inner, "permute", seed=7)(
            **inputs, value_mask=mask, return_attention_scores=True
        )[1]
        for _ in range(2)
    )
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("mode", MODES)
def test_step_noise_draws_what_attend_step_reads(mode):
    # A decoder draws every step's random numbers before its loop; the same
    # draws give the same weights.
    rng = np.random.default_rng(5)
    inputs = make_inputs("bahdanau", rng, batch=3, t_v=T_V, single_step=True)
    layer = wrapped("bahdanau", mode, inputs)
    draws = layer.step_noise((4, 3, T_V), training=False)  # (T_dec, B, T_v)
    if mode == "uniform":
        assert draws is None
        return
    assert sorted(draws) == ["keys"] and tuple(draws["keys"].shape) == (4, 3, T_V)
    processed = layer.precompute_keys(inputs["key"])
    step = {key: value[1] for key, value in draws.items()}  # step 1: (B, T_v)
    mask = value_mask()
    first, second = (
        layer.attend_step(
            inputs["query"], inputs["value"], processed, {}, value_mask=mask, noise=step
        )
        for _ in range(2)
    )
    for a, b in zip(first[:2], second[:2], strict=True):
        np.testing.assert_array_equal(a, b)


def test_step_noise_in_training_draws_the_wrapped_layers_mask_too():
    rng = np.random.default_rng(6)
    inputs = make_inputs("bahdanau", rng, single_step=True)
    inner = build(make_layer("bahdanau", dropout=0.5, seed=1), inputs)
    draws = OverriddenAttention(inner, "permute").step_noise((4, 2, T_V), training=True)
    assert sorted(draws) == ["dropout", "keys"]
    assert tuple(draws["dropout"].shape) == (4, 2, T_V)


# --------------------------------------------------------------------- masks


@pytest.mark.parametrize("mode", MODES)
def test_padded_query_gives_zero_weights_and_context(mode):
    rng = np.random.default_rng(7)
    inputs = make_inputs("luong_general", rng, batch=2, t_q=3, t_v=T_V)
    layer = wrapped("luong_general", mode, inputs)
    query_mask = np.array([[True, True, False], [True, False, False]])
    context, weights = layer(**inputs, query_mask=query_mask, return_attention_scores=True)
    assert np.all(np.asarray(weights)[~query_mask] == 0.0)
    assert np.all(np.asarray(context)[~query_mask] == 0.0)
    np.testing.assert_allclose(np.asarray(weights)[query_mask].sum(-1), 1.0, rtol=RTOL)


@pytest.mark.parametrize("poison", [np.nan, np.inf])
@pytest.mark.parametrize("mode", MODES)
def test_non_finite_masked_values_do_not_reach_the_context(mode, poison):
    rng = np.random.default_rng(8)
    inputs = make_inputs("bahdanau", rng, batch=3, t_v=T_V)
    layer = wrapped("bahdanau", mode, inputs, seed=2)
    mask = value_mask()
    hostile = dict(inputs)
    for name in ("value", "key"):
        hostile[name] = np.where(mask[:, :, None], inputs[name], poison).astype("float32")
    context, weights = layer(**hostile, value_mask=mask, return_attention_scores=True)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    np.testing.assert_allclose(
        context,
        np_context(weights, np.where(mask[:, :, None], inputs["value"], 0.0)),
        rtol=RTOL,
        atol=ATOL,
    )


@pytest.mark.parametrize("mode", MODES)
def test_mixed_float16_weights_sum_to_one(mode, dtype_policy):
    dtype_policy("mixed_float16")
    rng = np.random.default_rng(9)
    inputs = make_inputs("bahdanau", rng, batch=3, t_v=T_V)
    layer = OverriddenAttention(make_layer("bahdanau"), mode)
    mask = value_mask()
    context, weights = layer(**inputs, value_mask=mask, return_attention_scores=True)
    assert keras.backend.standardize_dtype(weights.dtype) == "float16"
    weights = np.asarray(weights, "float32")
    np.testing.assert_allclose(weights[:2].sum(-1), 1.0, rtol=1e-3)
    assert np.all(weights[2] == 0.0) and np.all(np.isfinite(np.asarray(context, "float32")))


@pytest.mark.parametrize("mode", MODES)
def test_outputs_are_in_its_own_compute_dtype_over_a_float32_layer(mode):
    rng = np.random.default_rng(10)
    inputs = make_inputs("bahdanau", rng, batch=3, t_v=T_V)
    inner = build(make_layer("bahdanau"), inputs)  # float32
    layer = OverriddenAttention(inner, mode, dtype="mixed_float16")
    mask = value_mask()
    context, weights = layer(**inputs, value_mask=mask, return_attention_scores=True)
    step = layer.attend_step(
        inputs["query"][:, 0],
        inputs["value"],
        layer.precompute_keys(inputs["key"]),
        {},
        value_mask=mask,
    )
    dtypes = [keras.backend.standardize_dtype(t.dtype) for t in (context, weights, *step[:2])]
    assert dtypes == ["float16"] * 4


# ------------------------------------------------------------------- saving


@pytest.mark.parametrize("mode", MODES)
def test_config_round_trip(mode):
    layer = OverriddenAttention(LuongAttention("general", dropout=0.1, seed=2), mode, seed=5)
    config = layer.get_config()
    assert config["mode"] == mode and config["seed"] == 5
    assert "num_heads" not in config and "dropout" not in config
    restored = OverriddenAttention.from_config(config)
    assert isinstance(restored.attention, LuongAttention)
    assert restored.get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert restored.get_config() == config


def test_keras_file_with_an_overridden_decoder_round_trips(tmp_path):
    vocab = 9
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    memory = keras.layers.Embedding(vocab, 5, mask_zero=True)(source)
    y = keras.layers.Embedding(vocab, 3, mask_zero=True)(target_in)
    attention = OverriddenAttention(BahdanauAttention(4), "uniform", name="overridden")
    outputs, weights, _ = BahdanauDecoder(6, attention, name="decoder")(y, memory)
    model = keras.Model([source, target_in], [keras.layers.Dense(vocab)(outputs), weights])
    ids = [np.array([[3, 1, 4, 1, 5], [2, 6, 0, 0, 0]]), np.array([[1, 7, 2], [1, 8, 0]])]
    expected = [np.asarray(x) for x in model(ids)]
    np.testing.assert_allclose(expected[1][1, :2, :2], 0.5, rtol=RTOL)
    path = str(tmp_path / "model.keras")
    model.save(path)
    keras.backend.clear_session()
    loaded = keras.saving.load_model(path)
    layer = loaded.get_layer("decoder").attention
    assert isinstance(layer, OverriddenAttention)
    config, saved = layer.get_config(), attention.get_config()
    # (The wrapped layer's build shapes come back from JSON as lists.)
    assert config.pop("attention")["config"] == saved.pop("attention")["config"]
    assert config == saved
    for a, e in zip((np.asarray(x) for x in loaded(ids)), expected, strict=True):
        np.testing.assert_array_equal(a, e)


# ---------------------------------------------------------------- generation


def test_a_generator_with_an_overridden_decoder_leaves_the_original_intact():
    # The ablated generator compiles its own searches; the original's cached
    # search keeps the model's own attention.
    keras.utils.set_random_seed(0)
    vocab = 9
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    memory = keras.layers.Embedding(vocab, 5, mask_zero=True)(source)
    y = keras.layers.Embedding(vocab, 3, mask_zero=True)(target_in)
    outputs, _, _ = LuongDecoder(6, LuongAttention("general"))(y, memory)
    model = keras.Model([source, target_in], keras.layers.Dense(vocab)(outputs))
    rng = np.random.default_rng(10)
    for weight in model.weights:  # large weights: peaked attention
        weight.assign(rng.normal(scale=1.5, size=weight.shape).astype(weight.dtype))
    generator = Seq2SeqGenerator.from_model(model, start_id=1, end_id=2)
    ids = np.array([[3, 4, 5, 6], [7, 8, 0, 0]], "int32")
    before = generator.greedy(ids, max_length=5)
    ablated = generator.with_decoder(overridden_decoder(generator.decoder, "uniform"))
    uniform = ablated.greedy(ids, max_length=5)
    mask = ids != 0
    for b, length in enumerate(uniform["lengths"]):
        expected = np.broadcast_to(mask[b] / mask[b].sum(), (length, 4))
        np.testing.assert_allclose(uniform["attention"][b, :length], expected, rtol=1e-6)
    assert np.abs(before["attention"] - uniform["attention"]).max() > 1e-3
    after = generator.greedy(ids, max_length=5)
    for key, value in before.items():
        np.testing.assert_array_equal(after[key], value)


# ------------------------------------------------------------------- errors


def test_a_stateful_attention_is_refused():
    with pytest.raises(ValueError, match="`attention`.*content-only.*LocationSensitiveAttention"):
        OverriddenAttention(LocationSensitiveAttention(4), "uniform")


def test_several_heads_are_refused():
    with pytest.raises(ValueError, match="`attention`.*single-head.*num_heads=2"):
        OverriddenAttention(make_layer("luong_general_heads"), "uniform")


@pytest.mark.parametrize("mode", [None, "shuffle", np.ones((2, 3, 4))], ids=repr)
def test_an_unknown_mode_is_refused(mode):
    with pytest.raises(ValueError, match="`mode`.*Expected one of \\('uniform', 'permute'\\)"):
        OverriddenAttention(BahdanauAttention(4), mode)


def test_a_layer_that_is_not_an_attention_is_refused():
    with pytest.raises(ValueError, match="`attention`.*Expected a content-only attention"):
        OverriddenAttention(keras.layers.Dense(4), "uniform")


def test_overridden_decoder_needs_a_built_decoder():
    with pytest.raises(ValueError, match="`decoder`.*built"):
        overridden_decoder(LuongDecoder(4, LuongAttention("dot")), "uniform")
