"""The one door through an attention layer: `prepare_memory` once per batch,
then `attend_step` / `attend_sequence` with `memory_prepared=True`; and the one
recipe of a mechanism, `step_weights`, which `ContentAttention` defines from
its public `score`."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import BahdanauAttention
from keras_attention import ContentAttention
from keras_attention import GMMAttention
from keras_attention import LocationSensitiveAttention
from keras_attention import LuongAttention
from keras_attention import OverriddenAttention

BATCH, T_V, T_Q, D = 3, 5, 4, 4
# A full row, a padded one and a fully masked one: (B, T_v).
MASK = np.arange(T_V)[None, :] < np.array([[T_V], [3], [0]])

LAYERS = {
    "bahdanau": lambda: BahdanauAttention(4),
    "bahdanau_2_heads_dropout": lambda: BahdanauAttention(4, num_heads=2, dropout=0.5, seed=1),
    "luong_dot_2_heads": lambda: LuongAttention("dot", num_heads=2),
    "luong_concat": lambda: LuongAttention("concat", units=4),
    "location_sensitive": lambda: LocationSensitiveAttention(4, filters=2, kernel_size=3),
    "gmm": lambda: GMMAttention(2),
    "overridden_uniform": lambda: OverriddenAttention(BahdanauAttention(4), "uniform"),
}


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(BATCH, T_Q, D)).astype("float32")  # (B, T_q, d_q)
    value = rng.normal(size=(BATCH, T_V, D)).astype("float32")  # (B, T_v, d_v)
    return query, value


def _built(make):
    layer = make()
    query, value = _inputs()
    layer(query, value)
    return layer


def _np(x):
    return np.asarray(ops.convert_to_numpy(x))


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_prepared_memory_steps_equal_the_unprepared_ones(name):
    layer = _built(LAYERS[name])
    query, value = _inputs(1)
    value[~MASK] = np.nan  # never read: prepare_memory zeroes it
    clean = np.where(MASK[:, :, None], value, 0.0).astype("float32")
    prepared, keys = layer.prepare_memory(value, MASK)
    np.testing.assert_array_equal(_np(prepared), clean)
    state = layer.initial_attention_state(prepared, MASK)
    raw_keys = layer.precompute_keys(clean)
    raw_state = layer.initial_attention_state(clean, MASK)
    for t in range(T_Q):
        got = layer.attend_step(
            query[:, t], prepared, keys, state, value_mask=MASK, memory_prepared=True
        )
        expected = layer.attend_step(query[:, t], clean, raw_keys, raw_state, value_mask=MASK)
        for a, b in zip(got[:2], expected[:2], strict=True):
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6, atol=1e-6)
        state, raw_state = got[2], expected[2]
    sequence = layer.attend_sequence(query, prepared, keys, value_mask=MASK, memory_prepared=True)
    whole = layer.attend_sequence(query, clean, raw_keys, value_mask=MASK)
    for a, b in zip(sequence[:2], whole[:2], strict=True):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_step_weights_are_the_weights_of_attend_step(name):
    # Every mechanism is one recipe: `step_weights` is what a step computes,
    # for a content-only layer too (its parallel path gives the same weights).
    layer = _built(LAYERS[name])
    query, value = _inputs(2)
    prepared, keys = layer.prepare_memory(value, MASK)
    state = layer.initial_attention_state(prepared, MASK)
    noise = layer.step_noise((T_Q, BATCH, T_V), training=True)
    for t in range(T_Q):
        this = None if noise is None else keras.tree.map_structure(lambda x, t=t: x[t], noise)
        query_t = ops.convert_to_tensor(query[:, t])
        weights, new_state = layer.step_weights(query_t, keys, state, MASK, True, this)
        _, stepped, stepped_state = layer.attend_step(
            query_t,
            prepared,
            keys,
            state,
            value_mask=MASK,
            training=True,
            noise=this,
            memory_prepared=True,
        )
        np.testing.assert_allclose(_np(weights), _np(stepped), rtol=1e-6, atol=1e-6)
        assert np.all(_np(weights)[~MASK] == 0.0)
        assert sorted(new_state) == sorted(stepped_state)
        state = stepped_state


def test_content_only_step_weights_go_through_score():
    layer = _built(lambda: LuongAttention("dot"))
    query, value = _inputs(3)
    scores = _np(layer.score(ops.convert_to_tensor(query[:, :1]), ops.convert_to_tensor(value)))
    assert scores.shape == (BATCH, 1, 1, T_V)  # (B, H, T_q, T_v)
    weights, state = layer.step_weights(
        ops.convert_to_tensor(query[:, 0]), value, {}, None, False, None
    )
    expected = np.exp(scores[:, 0, 0] - scores[:, 0, 0].max(-1, keepdims=True))
    np.testing.assert_allclose(_np(weights), expected / expected.sum(-1, keepdims=True), rtol=1e-5)
    assert state == {}


def test_a_subclass_with_the_private_score_of_earlier_versions_is_refused_naming_score():
    with pytest.raises(TypeError, match=r"OldRecipe defines `_score.*Rename it `score\("):

        class OldRecipe(ContentAttention):
            def build_score(self, query_dim, key_dim):
                pass

            def precompute_keys(self, key):
                return key

            def _score(self, query, processed_keys):
                return ops.einsum("bqd,bvd->bqv", query, processed_keys)[:, None]


def test_a_private_helper_beside_score_is_allowed():
    class Helped(LuongAttention):
        def score(self, query, processed_keys):
            return self._score(query, processed_keys)

        def _score(self, query, processed_keys):
            return super().score(query, processed_keys)

    layer = Helped("dot")
    query, value = _inputs(4)
    expected = _built(lambda: LuongAttention("dot"))
    layer(query, value)
    np.testing.assert_allclose(_np(layer(query, value)), _np(expected(query, value)), rtol=1e-6)
