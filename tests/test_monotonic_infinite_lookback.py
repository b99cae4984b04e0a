"""`MonotonicInfiniteLookbackAttention` (MILk, Arivazhagan et al. 2019).

The oracle runs the layer's formulas in float64 numpy, one batch element and
one step at a time: the monotonic energy and choosing probabilities as
`reference.alignment_step` reads them, α from `reference.MONOTONIC_REFERENCES`,
then the weights β from `reference.milk_weights` (soft modes, the paper's sum
written as a double loop) or `reference.milk_hard_weights` (hard mode: the
softmax over the prefix up to the endpoint). Then the read/write question, the
decoders' step-by-step decoding, the contract checker, saving, mixed precision
and bad arguments.
"""

import keras
import numpy as np
import pytest
from _doctests import assert_docstring_examples_run
from autodiff import gradients
from reference import MONOTONIC_REFERENCES
from reference import bahdanau_scores
from reference import initial_alignment_state
from reference import milk_hard_weights
from reference import milk_weights
from test_decoders import randomize

from keras_attention import BahdanauDecoder
from keras_attention import LuongDecoder
from keras_attention import MonotonicInfiniteLookbackAttention
from keras_attention.attention.monotonic_infinite_lookback_attention import (
    infinite_lookback_weights,
)
from keras_attention.testing import PROMISES
from keras_attention.testing import check_attention

D_Q, D_K, D_V = 3, 4, 5
TOL = 1e-5


def weights_of(layer):
    return {
        weight.path.split("/")[-1]: np.asarray(weight.numpy(), np.float64)
        for weight in layer.weights
    }


def milk_reference(layer, query, value, key=None, value_mask=None):
    """The float64 oracle of a call over a sequence of queries from the initial state.

    query (B, T_q, d_q), value (B, T_v, d_v) → context (B, T_q, d_v),
    weights (B, T_q, T_v), last α (B, T_v).
    """
    query = np.asarray(query, np.float64)
    value = np.asarray(value, np.float64)
    key = value if key is None else np.asarray(key, np.float64)
    batch, t_q, t_v = query.shape[0], query.shape[1], value.shape[1]
    keep_all = np.ones((batch, t_v), bool) if value_mask is None else np.asarray(value_mask)
    config = layer.get_config()
    w = weights_of(layer)
    g = float(w["score_scale"]) if config["normalize"] else None
    b = w["score_bias"] if config["normalize"] else None
    alpha = initial_alignment_state(layer, batch, t_v, keep_all)["alignment"]
    context = np.zeros((batch, t_q, value.shape[-1]))
    weights = np.zeros((batch, t_q, t_v))
    for n in range(batch):
        keep = keep_all[n]
        k = np.where(keep[:, None], key[n], 0.0)
        v = np.where(keep[:, None], value[n], 0.0)
        for t in range(t_q):
            q = query[n, t][None]
            energy = bahdanau_scores(
                q, k, w["query_kernel"], w["key_kernel"], w["score_vector"], g, b
            )[0] + float(w["energy_bias"])
            if config["mode"] == "hard":
                p = np.where(keep & (energy > 0.0), 1.0, 0.0)
            else:
                p = np.where(keep, 1.0 / (1.0 + np.exp(-energy)), 0.0)
            alpha[n] = MONOTONIC_REFERENCES[config["mode"]](p, alpha[n])
            u = bahdanau_scores(
                q, k, w["chunk_query_kernel"], w["chunk_key_kernel"], w["chunk_score_vector"]
            )[0]
            if config["mode"] == "hard":
                weights[n, t] = milk_hard_weights(u, alpha[n], keep)
            else:
                weights[n, t] = milk_weights(u, alpha[n], keep)
            context[n, t] = weights[n, t] @ v
    return context, weights, alpha


def make_layer(mode, t_v, score_bias=0.0, normalize=False, seed=0):
    layer = MonotonicInfiniteLookbackAttention(3, mode=mode, normalize=normalize)
    layer.build((None, None, D_Q), (None, t_v, D_V), (None, t_v, D_K))
    randomize(layer, np.random.default_rng(seed))
    layer.energy_bias.assign(score_bias)
    return layer


def make_inputs(rng, batch, t_q, t_v):
    return (
        rng.normal(size=(batch, t_q, D_Q)).astype("float32"),
        rng.normal(size=(batch, t_v, D_V)).astype("float32"),
        rng.normal(size=(batch, t_v, D_K)).astype("float32"),
    )


def padded_mask(batch, t_v):
    """Row 0 full, row 1 with its last two keys masked, the last row fully masked."""
    mask = np.ones((batch, t_v), bool)
    mask[1, t_v - 2 :] = False
    mask[-1] = False
    return mask


def call(layer, query, value, key, mask):
    return [
        np.asarray(keras.ops.convert_to_numpy(x))
        for x in keras.tree.flatten(
            layer(
                query,
                value,
                key=key,
                value_mask=mask,
                return_attention_scores=True,
                return_attention_state=True,
            )
        )
    ]


# ------------------------------------------------------------ the weights


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("mode", ["parallel", "recursive"])
@pytest.mark.parametrize("batch, t_q, t_v", [(3, 4, 6), (3, 1, 3), (4, 6, 2)])
def test_soft_weights_equal_the_papers_sum(mode, normalize, batch, t_q, t_v):
    rng = np.random.default_rng(batch * 10 + t_v)
    layer = make_layer(mode, t_v, score_bias=-0.5, normalize=normalize)
    query, value, key = make_inputs(rng, batch, t_q, t_v)
    mask = padded_mask(batch, t_v)
    context, weights, alpha = call(layer, query, value, key, mask)
    want_context, want_weights, want_alpha = milk_reference(layer, query, value, key, mask)
    np.testing.assert_allclose(weights, want_weights, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(context, want_context, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(alpha, want_alpha, rtol=TOL, atol=TOL)
    assert np.all(weights[-1] == 0.0) and np.all(context[-1] == 0.0)  # fully masked
    assert np.all(weights[1, :, t_v - 2 :] == 0.0)  # exactly 0 at masked keys
    assert weights[0].max() > 0.05, "nothing compared"


def test_soft_weights_sum_to_the_alignments_sum():
    # β moves each α_k back over the prefix ≤ k: a step's weights sum to its α's.
    rng = np.random.default_rng(1)
    layer = make_layer("parallel", 6, score_bias=-1.0)
    query, value, key = make_inputs(rng, 3, 4, 6)
    mask = padded_mask(3, 6)
    keys = layer.precompute_keys(key)
    state = layer.initial_attention_state(value, mask)
    for t in range(4):
        _, weights, state = layer.attend_step(query[:, t], value, keys, state, mask)
        alpha_sum = np.asarray(state["alignment"]).sum(-1)
        np.testing.assert_allclose(np.asarray(weights).sum(-1), alpha_sum, rtol=TOL, atol=TOL)
    assert np.all(alpha_sum[:2] < 1.0 - 1e-3), "no mass lost: the sums would be 1 either way"


def test_soft_weights_are_stable_for_large_energies():
    # Energies ±300: exp overflows float32 without the row maximum, and the
    # prefix sums before the largest energy underflow without the clip.
    rng = np.random.default_rng(2)
    u = rng.uniform(-300.0, 300.0, size=(3, 7))
    alpha = rng.uniform(0.0, 0.3, size=(3, 7))
    keep = np.ones((3, 7), bool)
    keep[1, 5:] = False
    keep[2, :2] = False
    alpha = np.where(keep, alpha, 0.0)
    got = np.asarray(
        infinite_lookback_weights(
            keras.ops.convert_to_tensor(u.astype("float32")),
            keras.ops.convert_to_tensor(alpha.astype("float32")),
            keras.ops.convert_to_tensor(keep),
        )
    )
    # The reference in log space: exp(u_j - logsumexp(u_{≤k})) cannot overflow.
    want = np.zeros_like(u)
    for n in range(3):
        for j in np.flatnonzero(keep[n]):
            for k in range(j, 7):
                prefix = u[n, : k + 1][keep[n, : k + 1]]
                top = prefix.max()
                log_divisor = top + np.log(np.exp(prefix - top).sum())
                want[n, j] += alpha[n, k] * np.exp(u[n, j] - log_divisor)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(milk_weights(u[0] / 100, alpha[0], keep[0]).sum(), alpha[0].sum())


def test_soft_weights_have_the_gradient_of_the_papers_sum():
    # Central differences of the float64 oracle, a fully masked row and
    # energies 60 apart included: the training signal of u and α is exact
    # and finite.
    rng = np.random.default_rng(12)
    u = rng.normal(size=(3, 5)) * np.array([[1.0], [30.0], [1.0]])
    alpha = rng.uniform(0.0, 0.3, size=(3, 5))
    keep = np.ones((3, 5), bool)
    keep[1, 4] = False
    keep[2] = False
    alpha = np.where(keep, alpha, 0.0)
    cotangent = rng.normal(size=(3, 5))

    def loss(u_, alpha_):
        beta = infinite_lookback_weights(u_, alpha_, keras.ops.convert_to_tensor(keep))
        return keras.ops.sum(beta * keras.ops.convert_to_tensor(cotangent))

    (grad_u, grad_alpha), _ = gradients(loss, (u, alpha))

    def oracle(u_, alpha_):
        return sum(cotangent[n] @ milk_weights(u_[n], alpha_[n], keep[n]) for n in range(len(u_)))

    for got, x in ((grad_u, u), (grad_alpha, alpha)):
        assert np.all(np.isfinite(got))
        want = np.zeros_like(x)
        for index in np.ndindex(*x.shape):
            step = np.zeros_like(x)
            step[index] = 1e-6
            if x is u:
                want[index] = (oracle(u + step, alpha) - oracle(u - step, alpha)) / 2e-6
            else:
                want[index] = (oracle(u, alpha + step) - oracle(u, alpha - step)) / 2e-6
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert np.all(grad_u[2] == 0.0) and np.all(grad_alpha[2] == 0.0)


@pytest.mark.parametrize("batch, t_q, t_v", [(4, 5, 6), (3, 1, 4)])
def test_hard_weights_are_the_softmax_up_to_the_endpoint(batch, t_q, t_v):
    rng = np.random.default_rng(3)
    layer = make_layer("hard", t_v, score_bias=-0.3, seed=4)
    query, value, key = make_inputs(rng, batch, t_q, t_v)
    mask = padded_mask(batch, t_v)
    context, weights, alpha = call(layer, query, value, key, mask)
    want_context, want_weights, want_alpha = milk_reference(layer, query, value, key, mask)
    np.testing.assert_allclose(weights, want_weights, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(context, want_context, rtol=TOL, atol=TOL)
    np.testing.assert_array_equal(alpha, want_alpha)
    assert np.all(weights[-1] == 0.0)  # fully masked
    sums = weights[:-1].sum(-1)
    np.testing.assert_allclose(sums, np.ones_like(sums), rtol=TOL)


def test_hard_weights_with_no_endpoint_cover_the_whole_source():
    rng = np.random.default_rng(5)
    t_v = 6
    layer = make_layer("hard", t_v, seed=6)
    query, value, key = make_inputs(rng, 3, 4, t_v)
    mask = padded_mask(3, t_v)
    # r = -100: no position is ever chosen, every α is all zeros.
    layer.energy_bias.assign(-100.0)
    _, weights, alpha = call(layer, query, value, key, mask)
    assert np.all(alpha == 0.0)
    _, want, _ = milk_reference(layer, query, value, key, mask)
    np.testing.assert_allclose(weights, want, rtol=TOL, atol=TOL)
    assert np.all(weights[0] > 0.0)  # every key of the full row
    assert np.all(weights[1, :, : t_v - 2] > 0.0) and np.all(weights[1, :, t_v - 2 :] == 0.0)
    # r = +100: the first step chooses the first key, and the weights are one-hot there.
    layer.energy_bias.assign(100.0)
    _, weights, alpha = call(layer, query, value, key, mask)
    np.testing.assert_array_equal(weights[:2, :, 0], 1.0)


def test_hard_steps_mix_chosen_and_unchosen_endpoints():
    # The hard test above compares something in both branches.
    rng = np.random.default_rng(3)
    layer = make_layer("hard", 6, score_bias=-0.3, seed=4)
    query, value, key = make_inputs(rng, 4, 5, 6)
    stepped = []
    state = layer.initial_attention_state(value, padded_mask(4, 6))
    keys = layer.precompute_keys(key)
    for t in range(5):
        _, _, state = layer.attend_step(query[:, t], value, keys, state, padded_mask(4, 6))
        stepped.append(np.asarray(state["alignment"]))
    stepped = np.stack(stepped, 1)[:-1]  # (B - 1, T_q, T_v), without the fully masked row
    chosen = stepped.sum(-1) > 0
    assert chosen.any() and not chosen.all(), chosen


# ------------------------------------------------------------ read or write


def test_needs_unread_source_answers_from_the_alignment():
    layer = MonotonicInfiniteLookbackAttention(3, mode="hard")
    alignment = np.array(
        [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1], [0.2, 0.1, 0.1, 0], [0.3, 0.3, 0, 0]],
        "float32",
    )
    read = np.array([2, 2, 4, 3, 2], "int32")
    got = np.asarray(layer.needs_unread_source({"alignment": alignment}, read))
    assert got.dtype == bool
    np.testing.assert_array_equal(got, [False, True, False, True, False])


def test_a_step_over_the_tokens_read_writes_only_at_an_endpoint_among_them():
    # The simultaneous protocol: a hard step with the memory masked after r
    # tokens chooses the endpoint the full source gives when it is among the
    # r tokens (write), and none otherwise (read on).
    rng = np.random.default_rng(7)
    t_v, batch = 6, 8
    layer = make_layer("hard", t_v, score_bias=-0.2, seed=8)
    query, value, key = make_inputs(rng, batch, 1, t_v)
    keys = layer.precompute_keys(key)
    start = {"alignment": np.eye(t_v, dtype="float32")[[0, 1, 2, 0, 1, 2, 0, 1]]}
    _, _, full = layer.attend_step(query[:, 0], value, keys, start)
    endpoint = np.where(
        np.asarray(full["alignment"]).sum(-1) > 0, np.asarray(full["alignment"]).argmax(-1), t_v
    )
    seen = set()
    for r in range(1, t_v + 1):
        read = np.full((batch,), r, "int32")
        mask = np.arange(t_v)[None, :] < read[:, None]
        _, weights, state = layer.attend_step(query[:, 0], value, keys, start, value_mask=mask)
        needs = np.asarray(layer.needs_unread_source(state, read))
        # Rows whose previous endpoint is not read yet cannot choose either.
        expected = endpoint >= r
        np.testing.assert_array_equal(needs, expected)
        writes = ~needs
        np.testing.assert_array_equal(
            np.asarray(state["alignment"])[writes], np.asarray(full["alignment"])[writes]
        )
        assert np.all(np.asarray(weights)[:, r:] == 0.0)  # nothing unread is attended
        seen |= set(needs.tolist())
    assert seen == {True, False}


# ------------------------------------------------------------ decoders

DECODERS = {
    "bahdanau": (BahdanauDecoder, {}),
    "luong": (LuongDecoder, {"input_feeding": True}),
}


@pytest.mark.parametrize("mode", ["parallel", "hard"])
@pytest.mark.parametrize("kind", list(DECODERS))
def test_step_by_step_decoding_equals_the_teacher_forced_call(kind, mode):
    rng = np.random.default_rng(9)
    cls, options = DECODERS[kind]
    attention = MonotonicInfiniteLookbackAttention(4, mode=mode)
    decoder = cls(4, attention, output_units=7, **options)
    embeddings = rng.normal(size=(2, 5, 3)).astype("float32")
    memory = rng.normal(size=(2, 4, 5)).astype("float32")
    mask = np.ones((2, 4), bool)
    mask[1, 3:] = False
    decoder(target_embeddings=embeddings, memory=memory)
    randomize(decoder, rng)
    attention.energy_bias.assign(-0.2)
    outputs, weights, state = decoder(target_embeddings=embeddings, memory=memory, memory_mask=mask)
    decode_state = decoder.get_decode_state(memory, memory_mask=mask)
    for t in range(5):
        output, step_weights, decode_state = decoder.step(embeddings[:, t], decode_state)
        np.testing.assert_allclose(output, outputs[:, t], rtol=TOL, atol=TOL)
        np.testing.assert_allclose(step_weights, weights[:, t], rtol=TOL, atol=TOL)
    np.testing.assert_allclose(decode_state["h"], state, rtol=TOL, atol=TOL)
    assert np.all(np.asarray(weights)[1, :, 3:] == 0.0)
    assert np.abs(np.asarray(weights)).max() > 0.1, "nothing compared"


# ------------------------------------------------------------ contract


@pytest.mark.parametrize("mode", ["parallel", "recursive", "hard"])
def test_the_contract_checker_passes(mode):
    report = check_attention(
        lambda: MonotonicInfiniteLookbackAttention(4, mode=mode, sigmoid_noise=1.0, seed=1),
        tflite=False,
        decoders=("bahdanau",),
    )
    assert all(report[p] == "passed" for p in PROMISES[:-1]), report


@pytest.mark.tensorflow
def test_the_contract_checker_passes_with_the_tflite_export():
    report = check_attention(
        lambda: MonotonicInfiniteLookbackAttention(4, mode="hard", normalize=True),
        tflite=True,
        decoders=("luong",),
    )
    assert report == dict.fromkeys(PROMISES, "passed")


# ------------------------------------------------------------ saving, dtypes, errors


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
@pytest.mark.parametrize("mode", ["parallel", "hard"])
def test_keras_file_round_trip_gives_identical_outputs(mode, tmp_path):
    rng = np.random.default_rng(10)
    query_in = keras.Input((None, D_Q))
    value_in = keras.Input((4, D_V))
    layer = MonotonicInfiniteLookbackAttention(
        3, mode=mode, sigmoid_noise=0.5, score_bias_init=-1.0, normalize=True, seed=3
    )
    model = keras.Model(
        [query_in, value_in], layer(query_in, value_in, return_attention_scores=True)
    )
    randomize(model, rng)
    query = rng.normal(size=(2, 3, D_Q)).astype("float32")
    value = rng.normal(size=(2, 4, D_V)).astype("float32")
    expected = [keras.ops.convert_to_numpy(x) for x in model([query, value])]
    config = layer.get_config()
    model.save(tmp_path / "milk.keras")
    keras.backend.clear_session()
    loaded = keras.saving.load_model(tmp_path / "milk.keras")
    (loaded_layer,) = [
        x for x in loaded.layers if isinstance(x, MonotonicInfiniteLookbackAttention)
    ]
    assert loaded_layer.get_config() == config
    for got, want in zip(loaded([query, value]), expected, strict=True):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode", ["parallel", "hard"])
def test_mixed_float16_is_finite_and_near_float32(mode, dtype_policy):
    rng = np.random.default_rng(11)
    query, value, key = make_inputs(rng, 3, 4, 6)
    mask = padded_mask(3, 6)
    reference = make_layer(mode, 6, score_bias=-0.5)
    _, want, want_alpha = call(reference, query, value, key, mask)
    dtype_policy("mixed_float16")
    layer = MonotonicInfiniteLookbackAttention(3, mode=mode)
    layer.build((None, None, D_Q), (None, 6, D_V), (None, 6, D_K))
    layer.set_weights(reference.get_weights())
    context, weights, alpha = call(layer, query, value, key, mask)
    assert context.dtype == weights.dtype == np.float16
    assert alpha.dtype == np.float32  # the state stays float32
    assert np.all(np.isfinite(weights.astype("float32")))
    np.testing.assert_allclose(weights, want, atol=1e-2)
    assert np.all(weights[-1] == 0.0)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"units": 3, "sigmoid_noise": -1.0}, "sigmoid_noise"),
        ({"units": 0}, "units"),
        ({"units": 3, "mode": "soft"}, "mode"),
    ],
)
def test_a_bad_argument_is_named(kwargs, name):
    with pytest.raises(ValueError, match=f"Invalid value for argument `{name}`"):
        MonotonicInfiniteLookbackAttention(**kwargs)


def test_docstring_example_runs():
    assert_docstring_examples_run(MonotonicInfiniteLookbackAttention)
