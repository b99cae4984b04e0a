"""`GMMAttention` against Graves' formulas in float64 (tests/reference.py)."""

import keras
import numpy as np
import pytest

from keras_attention import GMMAttention
from tests.reference import gmm_reference

B, T_Q, T_V, D_Q, D_V, K = 3, 4, 7, 6, 5, 2


def dtype_of(tensor):
    """The dtype as Keras names it, on every backend ("float16", not torch.float16)."""
    return keras.backend.standardize_dtype(tensor.dtype)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    queries = rng.normal(size=(B, T_Q, D_Q)).astype("float32") * 0.5
    value = rng.normal(size=(B, T_V, D_V)).astype("float32")
    value_mask = np.ones((B, T_V), bool)
    value_mask[1, 5:] = False
    value_mask[2, :] = False  # a fully masked row
    query_mask = np.ones((B, T_Q), bool)
    query_mask[0, 2] = False  # a padded step between real ones
    return queries, value, value_mask, query_mask


def _layer(queries, value):
    layer = GMMAttention(num_mixtures=K)
    layer.build(queries.shape, value.shape)
    rng = np.random.default_rng(1)
    layer.kernel.assign(rng.normal(size=(D_Q, 3 * K)).astype("float32") * 0.3)
    layer.bias.assign(np.array([0.1, -0.2, -0.5, 0.3, 0.2, -0.1], "float32"))
    return layer


@pytest.mark.parametrize("masks", [False, True])
def test_sequence_matches_float64_reference(masks):
    queries, value, value_mask, query_mask = _inputs()
    layer = _layer(queries, value)
    kwargs = {"value_mask": value_mask, "query_mask": query_mask} if masks else {}
    context, weights = layer(queries, value, return_attention_scores=True, **kwargs)
    ref_context, ref_weights, _ = gmm_reference(
        layer.kernel.numpy(), layer.bias.numpy(), queries, value, **kwargs
    )
    np.testing.assert_allclose(np.asarray(weights), ref_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(context), ref_context, rtol=1e-5, atol=1e-5)
    if masks:
        assert np.all(np.asarray(weights)[2] == 0.0)
        assert np.all(np.asarray(weights)[1, :, 5:] == 0.0)
        assert np.all(np.asarray(weights)[0, 2] == 0.0)


def test_steps_carry_the_position_and_match_the_sequence():
    queries, value, value_mask, _ = _inputs()
    layer = _layer(queries, value)
    keys = layer.precompute_keys(value)
    state = layer.initial_attention_state(value, value_mask)
    assert tuple(state["position"].shape) == (B, K)
    steps = []
    for t in range(T_Q):
        _, weights, state = layer.attend_step(
            queries[:, t], value, keys, state, value_mask=value_mask
        )
        steps.append(np.asarray(weights))
    _, ref_weights, ref_kappa = gmm_reference(
        layer.kernel.numpy(), layer.bias.numpy(), queries, value, value_mask=value_mask
    )
    np.testing.assert_allclose(np.stack(steps, 1), ref_weights, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(state["position"]), ref_kappa, rtol=1e-5)


def test_the_windows_only_move_forward():
    queries, value, _, _ = _inputs(3)
    layer = _layer(queries, value)
    keys = layer.precompute_keys(value)
    state = layer.initial_attention_state(value)
    previous = np.asarray(state["position"])
    for t in range(T_Q):
        _, _, state = layer.attend_step(queries[:, t], value, keys, state)
        position = np.asarray(state["position"])
        assert np.all(position > previous)
        previous = position


def test_mixed_float16_keeps_a_float32_state_and_matches():
    queries, value, value_mask, _ = _inputs()
    reference = _layer(queries, value)
    layer = GMMAttention(num_mixtures=K, dtype="mixed_float16")
    layer.build(queries.shape, value.shape)
    layer.set_weights(reference.get_weights())
    context, weights = layer(queries, value, value_mask=value_mask, return_attention_scores=True)
    assert dtype_of(context) == "float16"
    state = layer.initial_attention_state(value, value_mask)
    assert dtype_of(state["position"]) == "float32"
    _, ref_weights, _ = gmm_reference(
        reference.kernel.numpy(), reference.bias.numpy(), queries, value, value_mask=value_mask
    )
    np.testing.assert_allclose(np.asarray(weights, "float32"), ref_weights, rtol=2e-2, atol=2e-3)


def test_a_state_of_the_wrong_batch_names_the_entry():
    queries, value, _, _ = _inputs()
    layer = _layer(queries, value)
    keys = layer.precompute_keys(value)
    with pytest.raises(ValueError, match=r"attention_state\['position'\]"):
        layer.attend_step(queries[:, 0], value, keys, {"position": np.zeros((B + 1, K))})
    with pytest.raises(ValueError, match="keys \\['position'\\]"):
        layer.attend_step(queries[:, 0], value, keys, {})


def test_config_round_trip_gives_identical_outputs():
    queries, value, value_mask, _ = _inputs()
    layer = _layer(queries, value)
    config = keras.saving.serialize_keras_object(layer)
    copy = keras.saving.deserialize_keras_object(config)
    if not copy.built:
        copy.build(queries.shape, value.shape)
    copy.set_weights(layer.get_weights())
    assert copy.num_mixtures == K
    np.testing.assert_array_equal(
        np.asarray(copy(queries, value, value_mask=value_mask)),
        np.asarray(layer(queries, value, value_mask=value_mask)),
    )


def test_num_mixtures_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="num_mixtures"):
        GMMAttention(num_mixtures=0)


def test_an_empty_memory_gives_zero_context_and_no_weights():
    queries, _, _, _ = _inputs()
    value = np.zeros((B, 0, D_V), "float32")  # T_v = 0
    layer = GMMAttention(num_mixtures=K)
    context, weights = layer(queries, value, return_attention_scores=True)
    assert tuple(weights.shape) == (B, T_Q, 0)
    np.testing.assert_array_equal(np.asarray(context), np.zeros((B, T_Q, D_V)))
    state = layer.initial_attention_state((B, 0))
    assert tuple(state["position"].shape) == (B, K)


def test_a_single_step_query_equals_the_first_step_of_the_sequence():
    queries, value, value_mask, _ = _inputs()
    layer = _layer(queries, value)
    context, weights = layer(
        queries[:, 0], value, value_mask=value_mask, return_attention_scores=True
    )
    ref_context, ref_weights, _ = gmm_reference(
        layer.kernel.numpy(), layer.bias.numpy(), queries[:, :1], value, value_mask=value_mask
    )
    assert tuple(weights.shape) == (B, T_V)
    np.testing.assert_allclose(np.asarray(weights), ref_weights[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(context), ref_context[:, 0], rtol=1e-5, atol=1e-5)


def test_appending_masked_padding_changes_nothing():
    queries, value, value_mask, _ = _inputs()
    layer = _layer(queries, value)
    context, weights = layer(queries, value, value_mask=value_mask, return_attention_scores=True)
    # Three more positions, masked, holding values that must never be read.
    padding = np.full((B, 3, D_V), np.nan, "float32")
    longer = np.concatenate([value, padding], axis=1)
    longer_mask = np.concatenate([value_mask, np.zeros((B, 3), bool)], axis=1)
    padded_context, padded_weights = layer(
        queries, longer, value_mask=longer_mask, return_attention_scores=True
    )
    padded_weights = np.asarray(padded_weights)
    np.testing.assert_array_equal(padded_weights[:, :, T_V:], 0.0)
    np.testing.assert_allclose(padded_weights[:, :, :T_V], np.asarray(weights), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(padded_context), np.asarray(context), rtol=1e-6)


class _OnlyWeights(GMMAttention):
    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        return super().step_weights(query, processed_keys, state, value_mask, training, noise)[0]


class _StateWithoutPosition(GMMAttention):
    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        weights, _ = super().step_weights(query, processed_keys, state, value_mask, training, noise)
        return weights, {"kappa": state["position"]}


class _StateOfAnotherShape(GMMAttention):
    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        weights, new = super().step_weights(
            query, processed_keys, state, value_mask, training, noise
        )
        return weights, {"position": new["position"][:, :, None]}


@pytest.mark.parametrize(
    "cls, message",
    [
        (_OnlyWeights, r"_OnlyWeights.step_weights must return a pair `\(weights, new_state\)`"),
        (_StateWithoutPosition, r"keys \['position'\].*Received: \['kappa'\]"),
        (_StateOfAnotherShape, r"new state entry 'position'.*\(2, 2, 1\)"),
    ],
)
def test_a_step_weights_that_breaks_the_contract_is_named(cls, message):
    queries = np.ones((2, 3, 4), "float32")
    memory = np.ones((2, 5, 6), "float32")
    with pytest.raises(ValueError, match=message):
        cls(2)(queries, memory)
