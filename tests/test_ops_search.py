"""The search (`keras_attention.generation.search`, one `keras.ops` code for
every backend) on a step function written with `keras.ops`, against float64
NumPy searches: a greedy loop here and the hypothesis-by-hypothesis beam of
`test_decoding.py`, with a padded source and an empty one in every batch.
"""

import keras
import numpy as np
import pytest
from test_decoding import np_beam

from keras_attention.generation import search
from keras_attention.generation.search_defaults import MAX_OUTPUT_LENGTH
from keras_attention.generation.search_defaults import BeamSettings
from keras_attention.generation.search_defaults import check_max_length

VOCAB, SOURCE, UNITS, END = 9, 5, 6, 2


def _weights(seed):
    rng = np.random.default_rng(seed)
    return {
        "embed": rng.normal(size=(VOCAB, UNITS)),
        "recur": rng.normal(size=(UNITS, UNITS)) * 0.5,
        "out": rng.normal(size=(UNITS, VOCAB)) * 2.0,
        "attend": rng.normal(size=(UNITS, SOURCE)),
    }


def _step_fn(weights):
    """A tiny deterministic RNN step: logits, attention weights and a new state."""
    w = {k: keras.ops.convert_to_tensor(v.astype("float32")) for k, v in weights.items()}

    def step(tokens, state):
        h = keras.ops.tanh(
            keras.ops.take(w["embed"], tokens, axis=0) + keras.ops.matmul(state["h"], w["recur"])
        )
        logits = keras.ops.matmul(h, w["out"])
        attention = keras.ops.softmax(keras.ops.matmul(h, w["attend"]), axis=-1)
        return logits, attention, {"h": h}

    return step


def _numpy_greedy(weights, h0, start, max_length, mask):
    tokens, h = np.full(len(h0), start), h0.astype("float64")
    out = np.zeros((len(h0), max_length), int)
    finished = ~mask.any(-1)
    log_probs = np.zeros(len(h0))
    for t in range(max_length):
        h = np.tanh(weights["embed"][tokens] + h @ weights["recur"])
        logits = h @ weights["out"]
        logp = logits - logits.max(-1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
        nxt = np.where(finished, 0, logp.argmax(-1))
        log_probs += np.where(finished, 0.0, logp[np.arange(len(h0)), logp.argmax(-1)])
        out[:, t] = nxt
        finished = finished | (nxt == END)
        tokens = nxt
    return out, log_probs


@pytest.fixture(params=[0, 1, 2])
def case(request):
    rng = np.random.default_rng(request.param)
    h0 = rng.normal(size=(3, UNITS)).astype("float32")
    mask = np.ones((3, SOURCE), bool)
    mask[1, 3:] = False
    mask[2] = False  # an empty source: finished before the first step
    return _weights(request.param), h0, mask


def test_ops_greedy_equals_a_float64_numpy_greedy(case):
    weights, h0, mask = case
    result = search.greedy_search(
        _step_fn(weights), {"h": h0}, np.ones(3, "int32"), END, 7, SOURCE, source_mask=mask
    )
    want_tokens, want_log_probs = _numpy_greedy(weights, h0, 1, 7, mask)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(result["tokens"]), want_tokens)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(result["log_probs"]), want_log_probs, rtol=1e-4, atol=1e-4
    )
    assert keras.ops.convert_to_numpy(result["lengths"])[2] == 0


def _numpy_step(weights):
    """The float64 twin of `_step_fn`, one hypothesis at a time (for `np_beam`)."""
    w = {k: v.astype("float32").astype("float64") for k, v in weights.items()}

    def step(prev, h):
        h = np.tanh(w["embed"][prev] + h @ w["recur"])
        scores = h @ w["attend"]
        attention = np.exp(scores - scores.max())
        return h @ w["out"], attention / attention.sum(), h

    return step


@pytest.mark.parametrize("width, alpha, beta", [(1, 0.0, 0.0), (3, 0.6, 0.0), (4, 1.0, 0.2)])
def test_ops_beam_equals_a_float64_numpy_beam(case, width, alpha, beta):
    weights, h0, mask = case
    args = (_step_fn(weights), {"h": h0}, np.ones(3, "int32"), END, 7, SOURCE)
    kwargs = dict(beam_width=width, length_penalty=alpha, coverage_penalty=beta, source_mask=mask)
    got = {k: keras.ops.convert_to_numpy(v) for k, v in search.beam_search(*args, **kwargs).items()}
    for b in range(2):  # row 2 is the empty source, checked below
        beam, _ = np_beam(
            _numpy_step(weights), h0[b].astype("float64"), 1, 7, SOURCE, width, alpha, beta, mask[b]
        )
        np.testing.assert_array_equal(got["all_tokens"][b], [hyp["padded"] for hyp in beam])
        assert got["lengths"][b] == len(beam[0]["tokens"])
        np.testing.assert_allclose(
            got["all_scores"][b], [hyp["score"] for hyp in beam], rtol=1e-4, atol=1e-4
        )
        np.testing.assert_allclose(got["log_probs"][b], beam[0]["log_prob"], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got["attention"][b], beam[0]["padded_attention"], atol=1e-5)
    np.testing.assert_array_equal(got["tokens"][2], 0)
    assert got["lengths"][2] == 0


def test_ops_beam_of_width_one_equals_ops_greedy(case):
    weights, h0, mask = case
    args = (_step_fn(weights), {"h": h0}, np.ones(3, "int32"), END, 7, SOURCE)
    greedy = search.greedy_search(*args, source_mask=mask)
    beam = search.beam_search(*args, beam_width=1, source_mask=mask)
    for name in ("tokens", "lengths"):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(beam[name]), keras.ops.convert_to_numpy(greedy[name])
        )


BAD_PENALTIES = [-0.1, -1, float("nan"), float("inf"), -float("inf"), True, "0.6", None]


@pytest.mark.parametrize("name", ["length_penalty", "coverage_penalty"])
@pytest.mark.parametrize("value", BAD_PENALTIES, ids=repr)
def test_beam_settings_refuse_a_penalty_that_is_not_a_finite_number_at_least_zero(name, value):
    with pytest.raises(ValueError) as info:
        BeamSettings(**{name: value})
    assert str(info.value) == (
        f"Invalid value for argument `{name}`. Expected a finite number >= 0. "
        f"Received: {name}={value!r}"
    )


@pytest.mark.parametrize("name", ["length_penalty", "coverage_penalty"])
@pytest.mark.parametrize("value", [0, 0.0, 0.6, 2, np.float32(0.5), 1e6])
def test_beam_settings_take_a_finite_penalty_at_least_zero_as_a_float(name, value):
    settings = BeamSettings(**{name: value})
    assert type(getattr(settings, name)) is float
    assert getattr(settings, name) == float(value)
    assert settings.checked() == settings


def _search_arguments(case):
    weights, h0, mask = case
    return (_step_fn(weights), {"h": h0}, np.ones(3, "int32"), END, 7, SOURCE)


@pytest.mark.parametrize("name", ["length_penalty", "coverage_penalty"])
@pytest.mark.parametrize("value", BAD_PENALTIES, ids=repr)
def test_beam_search_refuses_a_penalty_as_the_generator_does(case, name, value):
    with pytest.raises(ValueError) as settings:
        BeamSettings(**{name: value})
    with pytest.raises(ValueError) as direct:
        search.beam_search(*_search_arguments(case), beam_width=2, **{name: value})
    assert str(direct.value) == str(settings.value)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, None, MAX_OUTPUT_LENGTH + 1], ids=repr)
@pytest.mark.parametrize("which", ["greedy_search", "beam_search"])
def test_every_search_refuses_a_max_length_it_cannot_use(case, which, value):
    arguments = list(_search_arguments(case))
    arguments[4] = value
    with pytest.raises(ValueError, match=r"Invalid value for argument `max_length`"):
        getattr(search, which)(*arguments)
    if value is not None:
        with pytest.raises(ValueError) as generator_rule:
            check_max_length(value)
        with pytest.raises(ValueError) as direct:
            getattr(search, which)(*arguments)
        assert str(direct.value) == str(generator_rule.value)


def test_beam_search_takes_a_penalty_tensor_made_elsewhere(case):
    arguments = _search_arguments(case)
    alpha = keras.ops.convert_to_tensor(0.6)
    with_tensor = search.beam_search(*arguments, beam_width=2, length_penalty=alpha)
    with_float = search.beam_search(*arguments, beam_width=2, length_penalty=0.6)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(with_tensor["tokens"]),
        keras.ops.convert_to_numpy(with_float["tokens"]),
    )
