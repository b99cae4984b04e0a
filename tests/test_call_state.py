"""One `call` for every attention layer: it starts from a given
`attention_state` and returns the state after the last query, for content-only
layers (an empty state), the alignment layers and a state of one's own (GMM).

The reference is the layer itself run another way: one call over all queries
against two calls, the second starting from the state the first returned.
"""

import keras
import numpy as np
import pytest

from keras_attention import BahdanauAttention
from keras_attention import BahdanauMonotonicAttention
from keras_attention import GMMAttention
from keras_attention import LocationSensitiveAttention
from keras_attention import LuongAttention

B, T_Q, T_V, D = 2, 5, 6, 4

LAYERS = {
    "bahdanau": lambda: BahdanauAttention(units=3),
    "luong_general": lambda: LuongAttention(score_mode="general"),
    "location_cumulative": lambda: LocationSensitiveAttention(
        units=3, filters=2, kernel_size=3, cumulative=True
    ),
    "monotonic": lambda: BahdanauMonotonicAttention(units=3),
    "gmm": lambda: GMMAttention(num_mixtures=2),
}


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(B, T_Q, D)).astype("float32")
    value = rng.normal(size=(B, T_V, D)).astype("float32")
    value_mask = np.ones((B, T_V), bool)
    value_mask[1, 4:] = False
    return query, value, value_mask


def _built(kind):
    query, value, value_mask = _inputs()
    layer = LAYERS[kind]()
    layer(query, value, value_mask=value_mask)  # builds
    rng = np.random.default_rng(7)
    for weight in layer.weights:  # away from the initializers' symmetries
        weight.assign(0.5 * rng.normal(size=weight.shape).astype("float32"))
    return layer, query, value, value_mask


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_two_calls_threading_the_state_equal_one_call(kind):
    layer, query, value, value_mask = _built(kind)
    common = {"value_mask": value_mask, "return_attention_scores": True}
    context, weights, last = layer(query, value, return_attention_state=True, **common)
    head_context, head_weights, middle = layer(
        query[:, :2], value, return_attention_state=True, **common
    )
    tail_context, tail_weights, tail_last = layer(
        query[:, 2:], value, attention_state=middle, return_attention_state=True, **common
    )
    np.testing.assert_allclose(
        np.concatenate([head_context, tail_context], axis=1), context, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        np.concatenate([head_weights, tail_weights], axis=-2), weights, rtol=1e-5, atol=1e-6
    )
    assert sorted(last) == sorted(layer.attention_state_keys) == sorted(tail_last)
    for name in last:
        np.testing.assert_allclose(tail_last[name], last[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_one_step_from_a_state_equals_attend_step(kind):
    layer, query, value, value_mask = _built(kind)
    state = layer.initial_attention_state(value, value_mask)
    keys = layer.precompute_keys(value)
    _, _, state = layer.attend_step(query[:, 0], value, keys, state, value_mask=value_mask)
    expected = layer.attend_step(query[:, 1], value, keys, state, value_mask=value_mask)
    got = layer(
        query[:, 1],
        value,
        value_mask=value_mask,
        attention_state=state,
        return_attention_scores=True,
        return_attention_state=True,
    )
    for g, e in zip(got[:2], expected[:2], strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    for name in expected[2]:
        np.testing.assert_allclose(got[2][name], expected[2][name], rtol=1e-5, atol=1e-6)


def test_a_content_only_layer_has_an_empty_state():
    layer, query, value, value_mask = _built("bahdanau")
    context, state = layer(query, value, attention_state={}, return_attention_state=True)
    assert state == {}
    np.testing.assert_allclose(context, layer(query, value), rtol=1e-6)


def test_previous_alignment_gives_the_same_state_as_attention_state():
    layer, query, value, value_mask = _built("location_cumulative")
    _, middle = layer(query[:, :2], value, value_mask=value_mask, return_attention_state=True)
    by_state = layer(query[:, 2:], value, value_mask=value_mask, attention_state=middle)
    by_name = layer(
        query[:, 2:],
        value,
        value_mask=value_mask,
        previous_alignment=middle["alignment"],
        previous_cumulative=middle["cumulative"],
    )
    np.testing.assert_allclose(by_state, by_name, rtol=1e-6)


def test_bad_state_arguments_are_named():
    layer, query, value, _ = _built("gmm")
    with pytest.raises(TypeError, match="unexpected keyword arguments: previous_alignment"):
        layer(query, value, previous_alignment=np.zeros((B, T_V), "float32"))
    with pytest.raises(ValueError, match=r"`attention_state`.*\['position'\]"):
        layer(query, value, attention_state={"alignment": np.zeros((B, T_V), "float32")})
    location, query, value, _ = _built("location_cumulative")
    state = location.initial_attention_state(value)
    with pytest.raises(ValueError, match="not both"):
        location(
            query,
            value,
            attention_state=state,
            previous_alignment=state["alignment"],
            previous_cumulative=state["cumulative"],
        )
    with pytest.raises(TypeError, match="unexpected keyword arguments: previous_weights"):
        location(query, value, previous_weights=state["alignment"])


@pytest.mark.parametrize("kind", ["location_cumulative", "gmm", "bahdanau"])
def test_a_functional_model_returns_the_state_with_its_shapes(kind):
    layer, query, value, value_mask = _built(kind)
    q = keras.Input((T_Q, D))
    v = keras.Input((T_V, D))
    context, state = layer(q, v, return_attention_state=True)
    model = keras.Model([q, v], [context, state])
    got_context, got_state = model([query, value])
    expected_context, expected_state = layer(query, value, return_attention_state=True)
    np.testing.assert_allclose(got_context, expected_context, rtol=1e-5, atol=1e-6)
    assert sorted(got_state) == sorted(expected_state)
    for name, tensor in state.items():
        assert tuple(tensor.shape)[1:] == tuple(expected_state[name].shape)[1:]
        np.testing.assert_allclose(got_state[name], expected_state[name], rtol=1e-5, atol=1e-6)
