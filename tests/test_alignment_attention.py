"""Location-sensitive and monotonic attention against their float64 oracles.

The layers carry an attention state from step to step; every test runs them over
a sequence of queries (T_q != T_v) or a single step, and compares with
`reference.alignment_layer_reference`, which loops over batch, steps and keys.
"""

import keras
import numpy as np
import pytest
from _doctests import assert_docstring_examples_run
from autodiff import gradients
from reference import ATOL
from reference import D_K
from reference import D_Q
from reference import D_V
from reference import MONOTONIC_REFERENCES
from reference import RTOL
from reference import alignment_layer_reference
from reference import initial_alignment_state
from reference import monotonic_energy

from keras_attention import BahdanauAttention
from keras_attention import BahdanauMonotonicAttention
from keras_attention import BaseAlignmentAttention
from keras_attention import BaseMonotonicAttention
from keras_attention import LocationSensitiveAttention
from keras_attention import LuongAttention
from keras_attention import LuongMonotonicAttention
from keras_attention import monotonic_alignment

VARIANTS = {
    "location": (LocationSensitiveAttention, {"units": 5, "filters": 3, "kernel_size": 3}),
    # An even width: the "same" padding puts the extra tap on the right.
    "location_last": (
        LocationSensitiveAttention,
        {"units": 5, "filters": 2, "kernel_size": 4, "cumulative": False},
    ),
    "bahdanau_parallel": (BahdanauMonotonicAttention, {"units": 5}),
    "bahdanau_recursive_normalize": (
        BahdanauMonotonicAttention,
        {"units": 5, "mode": "recursive", "normalize": True},
    ),
    "bahdanau_hard": (BahdanauMonotonicAttention, {"units": 5, "mode": "hard"}),
    "luong_parallel_scale": (LuongMonotonicAttention, {"scale": True}),
    "luong_recursive": (LuongMonotonicAttention, {"units": D_Q, "mode": "recursive"}),
    "luong_hard": (LuongMonotonicAttention, {"mode": "hard", "scale": True}),
}
MONOTONIC = [n for n, (cls, _) in VARIANTS.items() if cls is not LocationSensitiveAttention]
T_Q = 4
T_V = 6
VALUE_MASK = np.array([[True] * 4 + [False] * 2, [True] * T_V])


def make_layer(variant, **overrides):
    cls, kwargs = VARIANTS[variant]
    return cls(**{**kwargs, **overrides})


def make_inputs(rng, batch=2, t_q=T_Q, t_v=T_V, single_step=False):
    query_shape = (batch, D_Q) if single_step else (batch, t_q, D_Q)
    return {
        "query": rng.normal(size=query_shape).astype("float32"),
        "value": rng.normal(size=(batch, t_v, D_V)).astype("float32"),
        "key": rng.normal(size=(batch, t_v, D_K)).astype("float32"),
    }


def randomize(layer, inputs):
    """Builds `layer` for `inputs` (without calling it) and gives every weight
    random values, so that a bias at 0 or a scale at 1 cannot hide a term."""
    key = inputs.get("key", inputs["value"])
    layer.build(inputs["query"].shape, inputs["value"].shape, key.shape)
    rng = np.random.default_rng(0)
    for weight in layer.weights:
        values = rng.uniform(0.3, 1.0, size=weight.shape) * rng.choice([-1.0, 1.0], weight.shape)
        weight.assign(values.astype(weight.dtype))
    return layer


def built(variant, rng, **overrides):
    """A layer with random weights, and its inputs."""
    inputs = make_inputs(rng)
    return randomize(make_layer(variant, **overrides), inputs), inputs


def random_state(layer, rng, batch=2, t_v=T_V):
    """A previous state: one-hot for hard mode, random weights otherwise."""
    if getattr(layer, "mode", None) == "hard":
        alignment = np.eye(t_v)[rng.integers(0, 3, size=batch)]
    else:
        alignment = rng.uniform(0.0, 1.0, size=(batch, t_v))
        alignment /= alignment.sum(-1, keepdims=True)
    state = {"alignment": alignment.astype("float32")}
    if "cumulative" in layer.attention_state_keys:
        state["cumulative"] = (alignment + rng.uniform(0, 2, size=(batch, t_v))).astype("float32")
    return state


def _numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x), np.float64)


def run(layer, inputs, state=None, scan=False, **kwargs):
    """The layer's (context, weights, state) as float64 numpy arrays.

    A sequence of queries runs through `call` (its scan) with `scan=True`, and
    otherwise through `attend_step` in a Python loop, as a decoder runs it
    (`test_attend_step_loop_equals_sequence_call` shows they agree). The loop
    keeps the tests fast on JAX, which compiles every new scan.
    """
    if scan or inputs["query"].ndim == 2:
        previous = {}
        if state is not None:
            previous["previous_alignment"] = state["alignment"]
            if "cumulative" in state:
                previous["previous_cumulative"] = state["cumulative"]
        context, weights, new_state = layer(
            **inputs,
            **previous,
            **kwargs,
            return_attention_scores=True,
            return_attention_state=True,
        )
        return _numpy(context), _numpy(weights), {k: _numpy(v) for k, v in new_state.items()}
    value_mask = kwargs.pop("value_mask", None)
    query_mask = kwargs.pop("query_mask", None)
    noise = kwargs.pop("noise", None)
    keys = layer.precompute_keys(inputs.get("key", inputs["value"]))
    if state is None:
        state = layer.initial_attention_state(inputs["value"], value_mask)
    contexts, weights = [], []
    for t in range(inputs["query"].shape[1]):
        context, weight, state = layer.attend_step(
            inputs["query"][:, t],
            inputs["value"],
            keys,
            state,
            value_mask=value_mask,
            query_mask=None if query_mask is None else query_mask[:, t],
            noise=None if noise is None else noise[t],
            **kwargs,
        )
        contexts.append(_numpy(context))
        weights.append(_numpy(weight))
    state = {k: _numpy(v) for k, v in state.items()}
    return np.stack(contexts, 1), np.stack(weights, 1), state


def assert_matches(actual, expected, rtol=RTOL, atol=ATOL):
    context, weights, state = actual
    np.testing.assert_allclose(weights, expected[1], rtol=rtol, atol=atol)
    np.testing.assert_allclose(context, expected[0], rtol=rtol, atol=atol)
    assert sorted(state) == sorted(expected[2])
    for key in state:
        np.testing.assert_allclose(state[key], expected[2][key], rtol=rtol, atol=atol)


# ------------------------------------------------------------ the formulas


@pytest.mark.parametrize("variant", VARIANTS)
def test_sequence_matches_reference(variant):
    """T_q != T_v, d_q != d_k != d_v, a key distinct from the value, a value mask."""
    layer, inputs = built(variant, np.random.default_rng(1))
    actual = run(layer, inputs, value_mask=VALUE_MASK)
    expected = alignment_layer_reference(layer, **inputs, value_mask=VALUE_MASK)
    assert_matches(actual, expected)
    assert actual[0].shape == (2, T_Q, D_V)
    assert actual[1].shape == (2, T_Q, T_V)


@pytest.mark.parametrize("variant", VARIANTS)
def test_single_step_from_previous_state_matches_reference(variant):
    rng = np.random.default_rng(2)
    layer, _ = built(variant, rng)
    inputs = make_inputs(rng, single_step=True)
    state = random_state(layer, rng)
    actual = run(layer, inputs, state, value_mask=VALUE_MASK)
    expected = alignment_layer_reference(layer, **inputs, value_mask=VALUE_MASK, state=state)
    assert_matches(actual, expected)
    assert actual[0].shape == (2, D_V)
    assert actual[1].shape == (2, T_V)


@pytest.mark.parametrize("variant", VARIANTS)
def test_attend_step_loop_equals_sequence_call(variant):
    """What a decoder does (keys once, the state carried) is the sequence call."""
    layer, inputs = built(variant, np.random.default_rng(3))
    query_mask = np.array([[True, False, True, True], [True, True, True, False]])
    masks = {"value_mask": VALUE_MASK, "query_mask": query_mask}
    for name in ("value", "key"):
        inputs[name][~VALUE_MASK] = np.nan  # never read
    steps = run(layer, inputs, **masks)
    sequence = run(layer, inputs, scan=True, **masks)
    assert_matches(sequence, steps, rtol=1e-6, atol=1e-6)
    assert sequence[0].shape == (2, T_Q, D_V)
    assert sequence[1].shape == (2, T_Q, T_V)


@pytest.mark.parametrize("variant", VARIANTS)
def test_mixed_float16_matches_reference(variant, dtype_policy):
    dtype_policy("mixed_float16")
    rng = np.random.default_rng(4)
    layer, inputs = built(variant, rng)
    assert layer.compute_dtype == "float16"
    state = random_state(layer, rng)
    keys = layer.precompute_keys(inputs["key"])
    context, weights, new_state = layer.attend_step(
        inputs["query"][:, 0], inputs["value"], keys, state, value_mask=VALUE_MASK
    )
    assert keras.backend.standardize_dtype(context.dtype) == "float16"
    assert keras.backend.standardize_dtype(weights.dtype) == "float16"
    for value in new_state.values():
        # The state accumulates over steps: float32 under mixed precision.
        assert keras.backend.standardize_dtype(value.dtype) == "float32"
    # The oracle sees the inputs the layer sees: rounded to float16.
    rounded = {k: v.astype("float16").astype("float64") for k, v in inputs.items()}
    expected = alignment_layer_reference(layer, **rounded, value_mask=VALUE_MASK, state=state)
    actual = run(layer, inputs, state, value_mask=VALUE_MASK)
    # float16 (11-bit) intermediate values over 4 steps.
    np.testing.assert_allclose(actual[1], expected[1], atol=5e-3)
    np.testing.assert_allclose(actual[0], expected[0], atol=2e-2)
    for key in expected[2]:
        np.testing.assert_allclose(actual[2][key], expected[2][key], atol=5e-3)


@pytest.mark.parametrize("variant", ["location", "bahdanau_recursive_normalize", "luong_hard"])
def test_mixed_float16_sequence_call_equals_steps(variant, dtype_policy):
    dtype_policy("mixed_float16")
    layer, inputs = built(variant, np.random.default_rng(4))
    context, weights, state = layer(
        **inputs, value_mask=VALUE_MASK, return_attention_scores=True, return_attention_state=True
    )
    assert keras.backend.standardize_dtype(context.dtype) == "float16"
    assert keras.backend.standardize_dtype(weights.dtype) == "float16"
    assert all(keras.backend.standardize_dtype(s.dtype) == "float32" for s in state.values())
    sequence = (_numpy(context), _numpy(weights), {k: _numpy(v) for k, v in state.items()})
    assert_matches(sequence, run(layer, inputs, value_mask=VALUE_MASK), rtol=0, atol=1e-3)


def test_location_weights_sum_to_one_over_unmasked_keys():
    layer, inputs = built("location", np.random.default_rng(5))
    _, weights, _ = run(layer, inputs, value_mask=VALUE_MASK)
    np.testing.assert_allclose(weights.sum(-1), np.ones((2, T_Q)), rtol=1e-6)
    assert np.all(weights[0, :, 4:] == 0.0)


@pytest.mark.parametrize("variant", MONOTONIC)
def test_monotonic_weights_sum_to_at_most_one(variant):
    layer, inputs = built(variant, np.random.default_rng(6))
    _, weights, _ = run(layer, inputs, value_mask=VALUE_MASK)
    assert np.all(weights >= 0.0)
    assert np.all(weights.sum(-1) <= 1.0 + 1e-6)
    assert np.all(weights[0, :, 4:] == 0.0)


# ----------------------------------------------------------------- masks


@pytest.mark.parametrize("variant", VARIANTS)
def test_fully_masked_row_gives_zero_weights_and_context(variant):
    layer, inputs = built(variant, np.random.default_rng(7))
    mask = VALUE_MASK.copy()
    mask[0] = False
    # What a mask removes is never read: NaN and inf there change nothing.
    for name in ("value", "key"):
        inputs[name][0] = np.nan
        inputs[name][1, 5:] = np.inf
    mask[1, 5:] = False
    context, weights, state = run(layer, inputs, value_mask=mask)
    for array in (context, weights, *state.values()):
        assert not np.isnan(array).any()
    np.testing.assert_array_equal(weights[0], 0.0)
    np.testing.assert_array_equal(context[0], 0.0)
    for value in state.values():
        np.testing.assert_array_equal(value[0], 0.0)
    expected = alignment_layer_reference(
        layer,
        query=inputs["query"][1:],
        value=np.nan_to_num(inputs["value"][1:], posinf=0.0),
        key=np.nan_to_num(inputs["key"][1:], posinf=0.0),
        value_mask=mask[1:],
    )
    np.testing.assert_allclose(weights[1:], expected[1], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(context[1:], expected[0], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "variant",
    [
        "location",
        "location_last",
        "bahdanau_parallel",
        "bahdanau_recursive_normalize",
        "luong_hard",
    ],
)
def test_appending_masked_padding_changes_nothing(variant):
    layer, inputs = built(variant, np.random.default_rng(8))
    short = run(layer, inputs, value_mask=VALUE_MASK)
    padded = {
        "query": inputs["query"],
        "value": np.concatenate([inputs["value"], np.ones((2, 3, D_V), "float32")], 1),
        "key": np.concatenate([inputs["key"], np.ones((2, 3, D_K), "float32")], 1),
    }
    mask = np.concatenate([VALUE_MASK, np.zeros((2, 3), bool)], 1)
    long = run(layer, padded, value_mask=mask)
    np.testing.assert_allclose(long[0], short[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(long[1][:, :, :T_V], short[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(long[1][:, :, T_V:], 0.0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_padded_query_gives_zero_output_and_keeps_state(variant):
    layer, inputs = built(variant, np.random.default_rng(9))
    query_mask = np.array([[True, False, True, True], [True, True, True, False]])
    actual = run(layer, inputs, value_mask=VALUE_MASK, query_mask=query_mask)
    np.testing.assert_array_equal(actual[1][0, 1], 0.0)
    np.testing.assert_array_equal(actual[0][1, 3], 0.0)
    expected = alignment_layer_reference(
        layer, **inputs, value_mask=VALUE_MASK, query_mask=query_mask
    )
    assert_matches(actual, expected)


def test_masks_come_from_upstream_masking_layers():
    layer, inputs = built("bahdanau_parallel", np.random.default_rng(10))
    ids = np.array([[3, 1, 2, 4, 0, 0], [1, 2, 3, 4, 5, 6]])
    embedding = keras.layers.Embedding(8, D_V, mask_zero=True)
    value = embedding(ids)
    key = inputs["key"]
    query = inputs["query"][:, 0]
    automatic = layer(query, value, key=key, return_attention_scores=True)
    explicit = layer(query, value, key=key, value_mask=ids != 0, return_attention_scores=True)
    np.testing.assert_array_equal(np.asarray(automatic[1]), np.asarray(explicit[1]))
    np.testing.assert_array_equal(np.asarray(automatic[1])[0, 4:], 0.0)


@pytest.mark.parametrize("variant", ["location", "bahdanau_parallel"])
def test_gradients_are_finite_with_nan_padding_and_a_fully_masked_row(variant):
    """One step from a random previous state (the scan repeats the same step)."""
    rng = np.random.default_rng(11)
    layer, inputs = built(variant, rng)
    state = random_state(layer, rng)
    mask = VALUE_MASK.copy()
    mask[0] = False
    inputs["value"][0] = np.nan
    inputs["key"][0] = np.nan
    # Row 0 is also a padded query, NaN too: never read.
    query_mask = np.array([False, True])
    inputs["query"][0] = np.nan

    def loss(query, value, key):
        context, weights = layer(
            query,
            value,
            key=key,
            previous_alignment=state["alignment"],
            previous_cumulative=state.get("cumulative"),
            query_mask=query_mask,
            value_mask=mask,
            return_attention_scores=True,
        )
        return keras.ops.sum(context) + keras.ops.sum(weights)

    input_grads, variable_grads = gradients(
        loss, (inputs["query"][:, 0], inputs["value"], inputs["key"]), layer.trainable_weights
    )
    for grad in input_grads + variable_grads:
        assert grad is not None
        assert np.isfinite(grad).all()


# ------------------------------------------------------------- the modes


def skip_float64_on_torch():
    if keras.backend.backend() == "torch":
        # Keras' torch backend computes `ops.cumsum` and `ops.cumprod` of
        # float64 in float32 (its `result_type("float64")` is float32).
        pytest.skip("keras.ops.cumsum of float64 returns float32 on the torch backend")


@pytest.mark.parametrize("mode", sorted(MONOTONIC_REFERENCES))
def test_monotonic_alignment_function_matches_reference(mode):
    if mode != "recursive":
        skip_float64_on_torch()
    rng = np.random.default_rng(12)
    p = rng.uniform(0.05, 0.95, size=(3, 7))
    if mode == "hard":
        previous = np.eye(7)[[0, 2, 6]]
        p_in = (p > 0.5).astype("float64")
    else:
        previous = rng.dirichlet(np.ones(7), size=3)
        p_in = p
    actual = monotonic_alignment(
        keras.ops.convert_to_tensor(p_in, "float64"),
        keras.ops.convert_to_tensor(previous, "float64"),
        mode,
    )
    expected = np.stack([MONOTONIC_REFERENCES[mode](p[n], previous[n]) for n in range(3)])
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-12, atol=1e-14)


def test_parallel_form_equals_recursive_form_in_float64():
    skip_float64_on_torch()
    rng = np.random.default_rng(13)
    p = keras.ops.convert_to_tensor(rng.uniform(0.05, 0.95, size=(3, 9)), "float64")
    previous = keras.ops.convert_to_tensor(rng.dirichlet(np.ones(9), size=3), "float64")
    parallel = monotonic_alignment(p, previous, "parallel")
    recursive = monotonic_alignment(p, previous, "recursive")
    assert np.asarray(recursive).max() > 0.1  # the alignment has not vanished
    np.testing.assert_allclose(np.asarray(parallel), np.asarray(recursive), rtol=0, atol=1e-12)


@pytest.mark.parametrize("cls", [BahdanauMonotonicAttention, LuongMonotonicAttention])
def test_parallel_layer_equals_recursive_layer_in_float32(cls):
    """Over 6 steps from the initial state, with a value mask."""
    rng = np.random.default_rng(13)
    inputs = make_inputs(rng, t_q=6)
    kwargs = {"units": 5} if cls is BahdanauMonotonicAttention else {}
    parallel = randomize(cls(mode="parallel", **kwargs), inputs)
    recursive = randomize(cls(mode="recursive", **kwargs), inputs)
    a = run(parallel, inputs, value_mask=VALUE_MASK)
    b = run(recursive, inputs, value_mask=VALUE_MASK)
    assert b[1].max() > 0.1  # the alignment has not vanished
    for x, y in zip(a[:2], b[:2], strict=True):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-5)


def _saturated(mode):
    """A Bahdanau monotonic layer whose energies are ±40·(odd count): |energy| ≥ 40."""
    # Seed 3: a path that stays, moves, jumps and runs off the end.
    rng = np.random.default_rng(3)
    inputs = make_inputs(rng, t_q=6)
    layer = randomize(make_layer("bahdanau_parallel", mode=mode), inputs)
    layer.energy_bias.assign(0.0)
    # tanh saturates at ±1 (hidden values in the hundreds), and 5 terms of ±40
    # never cancel.
    layer.query_kernel.assign(rng.choice([-100.0, 100.0], size=(D_Q, 5)).astype("float32"))
    layer.key_kernel.assign(rng.choice([-100.0, 100.0], size=(D_K, 5)).astype("float32"))
    layer.score_vector.assign(rng.choice([-40.0, 40.0], size=5).astype("float32"))
    return layer, inputs


def test_hard_mode_equals_argmax_of_saturated_soft_mode():
    hard, inputs = _saturated("hard")
    soft, _ = _saturated("recursive")
    _, hard_weights, _ = run(hard, inputs, value_mask=VALUE_MASK)
    _, soft_weights, _ = run(soft, inputs, value_mask=VALUE_MASK)
    weights = {w.path.split("/")[-1]: w.numpy() for w in hard.weights}
    for n in range(2):
        for t in range(6):
            energy = monotonic_energy(hard, inputs["query"][n, t], inputs["key"][n], weights)
            # The precondition: every p is 0 or 1 to 2e-9 (sigmoid(-20) = 2e-9).
            assert np.abs(energy).min() > 20.0
    np.testing.assert_allclose(soft_weights, hard_weights, atol=1e-6)
    moved = hard_weights.sum(-1) > 0
    assert moved.any() and not moved.all()  # it attends, and runs off the end
    assert len(np.unique(hard_weights[moved].argmax(-1))) > 2  # it moves
    argmax = np.eye(T_V)[soft_weights.argmax(-1)] * moved[..., None]
    np.testing.assert_array_equal(hard_weights, argmax)


@pytest.mark.parametrize("variant", ["bahdanau_hard", "luong_hard"])
def test_hard_mode_weights_never_move_backwards(variant):
    rng = np.random.default_rng(15)
    inputs = make_inputs(rng, t_q=10, t_v=8)
    layer = randomize(make_layer(variant), inputs)
    _, weights, _ = run(layer, inputs)
    assert set(np.unique(weights)) <= {0.0, 1.0}
    for n in range(2):
        attended = weights[n].sum(-1) > 0
        # Once nothing is chosen, nothing ever is again.
        assert not np.any(attended[1:] & ~attended[:-1])
        positions = weights[n][attended].argmax(-1)
        # The check means something only if the row attends and moves.
        assert attended.sum() > 1 and len(np.unique(positions)) > 1
        assert np.all(np.diff(positions) >= 0)


# ------------------------------------------------------------ state, noise


@pytest.mark.parametrize("variant", VARIANTS)
def test_initial_attention_state(variant):
    layer, inputs = built(variant, np.random.default_rng(16))
    mask = np.array([[False, False, True, True, False, False], [False] * T_V])
    state = layer.initial_attention_state(inputs["value"], mask)
    expected = initial_alignment_state(layer, 2, T_V, mask)
    assert sorted(state) == sorted(expected) == sorted(layer.attention_state_keys)
    for key in state:
        np.testing.assert_array_equal(np.asarray(state[key]), expected[key])
    unmasked = layer.initial_attention_state((2, T_V))
    first = 0.0 if variant.startswith("location") else 1.0
    np.testing.assert_array_equal(np.asarray(unmasked["alignment"])[:, 0], first)


def test_layers_are_marked_stateful():
    for cls, kwargs in VARIANTS.values():
        assert cls(**kwargs).stateful_attention is True
    for layer in (BahdanauAttention(4), LuongAttention()):
        assert getattr(layer, "stateful_attention", False) is False


@pytest.mark.parametrize("variant", ["bahdanau_parallel", "luong_hard"])
def test_sigmoid_noise_only_in_training(variant):
    rng = np.random.default_rng(17)
    layer, inputs = built(variant, rng, sigmoid_noise=2.0, seed=3)
    assert layer.step_noise((T_Q, 2, T_V), training=False) is None
    inference = run(layer, inputs, scan=True, value_mask=VALUE_MASK, training=False)
    noiseless = alignment_layer_reference(layer, **inputs, value_mask=VALUE_MASK)
    assert_matches(inference, noiseless)
    trained = run(layer, inputs, scan=True, value_mask=VALUE_MASK, training=True)
    assert not np.allclose(trained[1], inference[1], atol=1e-3)
    # Outside training the steps draw nothing; in training, without noise
    # drawn before the loop, a step draws its own.
    assert_matches(run(layer, inputs, value_mask=VALUE_MASK), noiseless)
    stepped = run(layer, inputs, value_mask=VALUE_MASK, training=True)
    assert not np.allclose(stepped[1], inference[1], atol=1e-3)
    # The noise a decoder draws before its loop, one slice per step.
    noise = np.asarray(layer.step_noise((T_Q, 2, T_V), training=True))
    actual = run(layer, inputs, value_mask=VALUE_MASK, training=True, noise=noise)
    expected = alignment_layer_reference(layer, **inputs, value_mask=VALUE_MASK, noise=noise)
    assert_matches(actual, expected)


def test_score_bias_starts_at_score_bias_init():
    layer = BahdanauMonotonicAttention(4, score_bias_init=-4.0)
    layer.build((2, D_Q), (2, T_V, D_V))
    assert float(layer.energy_bias.numpy()) == -4.0


# ---------------------------------------------------------------- errors


def _bad_calls():
    q3 = np.zeros((2, T_Q, D_Q), "float32")
    v = np.zeros((2, T_V, D_V), "float32")
    short_mask = np.ones((2, 5), bool)
    return {
        "query": ({"query": np.zeros((2, 1, T_Q, D_Q), "float32"), "value": v}, "query"),
        "value": ({"query": q3, "value": np.zeros((2, D_V), "float32")}, "value"),
        "key": ({"query": q3, "value": v, "key": np.zeros((2, T_V + 1, D_K), "float32")}, "key"),
        "batch": ({"query": q3, "value": np.zeros((3, T_V, D_V), "float32")}, "value"),
        "value_mask": (
            {"query": q3, "value": v, "value_mask": short_mask},
            "value_mask",
        ),
        "query_mask": (
            {"query": q3, "value": v, "query_mask": short_mask[:, :3]},
            "query_mask",
        ),
        "previous_alignment": (
            {"query": q3, "value": v, "previous_alignment": np.zeros((2, 5), "float32")},
            "previous_alignment",
        ),
    }


@pytest.mark.parametrize("variant", ["location", "bahdanau_parallel", "luong_hard"])
@pytest.mark.parametrize("case", list(_bad_calls()))
def test_shape_errors_name_the_tensor(variant, case):
    kwargs, name = _bad_calls()[case]
    layer = make_layer(variant)
    with pytest.raises(ValueError, match=rf"`{name}`\. Expected shape .*{name}\.shape="):
        layer(**kwargs)


def test_shape_error_when_built_with_another_query_size():
    layer, inputs = built("location", np.random.default_rng(19))
    with pytest.raises(ValueError, match=r"`query`.*d_q=4.*query\.shape=\(2, 3, 7\)"):
        layer(np.zeros((2, 3, 7), "float32"), inputs["value"])


def test_luong_units_must_equal_query_size():
    with pytest.raises(ValueError, match=r"`query`.*d_q=units=3.*query\.shape=\(2, 4, 4\)"):
        LuongMonotonicAttention(3).build((2, T_Q, D_Q), (2, T_V, D_V))


def test_attend_step_checks_processed_keys_and_state():
    layer, inputs = built("location", np.random.default_rng(21))
    keys = layer.precompute_keys(inputs["key"])
    state = layer.initial_attention_state(inputs["value"])
    query = inputs["query"][:, 0]
    with pytest.raises(ValueError, match=r"`processed_keys`.*processed_keys\.shape=\(2, 5, 5\)"):
        layer.attend_step(query, inputs["value"], keys[:, :5], state)
    with pytest.raises(ValueError, match=r"`attention_state`.*'alignment', 'cumulative'"):
        layer.attend_step(query, inputs["value"], keys, {"alignment": state["alignment"]})
    bad = {**state, "cumulative": state["cumulative"][:, :5]}
    with pytest.raises(ValueError, match=r"`attention_state\['cumulative'\]`"):
        layer.attend_step(query, inputs["value"], keys, bad)
    with pytest.raises(ValueError, match=r"`query`.*\(batch, d_q\)"):
        layer.attend_step(inputs["query"], inputs["value"], keys, state)


def test_previous_cumulative_goes_with_cumulative_layers():
    rng = np.random.default_rng(22)
    inputs = make_inputs(rng)
    weights = np.full((2, T_V), 1.0 / T_V, "float32")
    with pytest.raises(ValueError, match="`previous_cumulative`.*previous_cumulative=None"):
        make_layer("location")(**inputs, previous_alignment=weights)
    with pytest.raises(ValueError, match="`previous_cumulative`. Only a layer"):
        make_layer("bahdanau_parallel")(
            **inputs, previous_alignment=weights, previous_cumulative=weights
        )


@pytest.mark.parametrize(
    "cls,kwargs,name",
    [
        (BahdanauMonotonicAttention, {"units": 4, "mode": "soft"}, "mode"),
        (LuongMonotonicAttention, {"mode": "argmax"}, "mode"),
        (BahdanauMonotonicAttention, {"units": 0}, "units"),
        (LuongMonotonicAttention, {"units": -1}, "units"),
        (BahdanauMonotonicAttention, {"units": 4, "sigmoid_noise": -1.0}, "sigmoid_noise"),
        (LocationSensitiveAttention, {"units": 4, "filters": 0}, "filters"),
        (LocationSensitiveAttention, {"units": 4, "kernel_size": 2.5}, "kernel_size"),
        (LocationSensitiveAttention, {"units": None}, "units"),
    ],
)
def test_invalid_arguments_are_rejected(cls, kwargs, name):
    with pytest.raises(ValueError, match=rf"Invalid value for argument `{name}`"):
        cls(**kwargs)


@pytest.mark.parametrize(
    "cls", [LocationSensitiveAttention, BahdanauMonotonicAttention, LuongMonotonicAttention]
)
def test_docstring_example_runs(cls):
    assert_docstring_examples_run(cls)


@pytest.mark.parametrize("cls", [BaseAlignmentAttention, BaseMonotonicAttention])
def test_base_classes_cannot_be_used_directly(cls):
    with pytest.raises(TypeError, match="cannot be used directly"):
        cls()


# ----------------------------------------------------------------- saving


NON_DEFAULT = {
    # The shapes of "location_last": JAX reuses what it compiled for them.
    "location": {"filters": 2, "kernel_size": 4, "cumulative": False},
    "bahdanau_parallel": {
        "sigmoid_noise": 0.5,
        "score_bias_init": -2.0,
        "mode": "recursive",
        "normalize": True,
        "seed": 4,
    },
    "luong_hard": {"units": 4, "sigmoid_noise": 1.0, "score_bias_init": 1.5, "seed": 2},
}


@pytest.mark.parametrize("variant", list(NON_DEFAULT))
def test_config_round_trip_keeps_every_argument(variant):
    layer = make_layer(variant, **NON_DEFAULT[variant], name="attention")
    config = layer.get_config()
    for name, value in {**VARIANTS[variant][1], **NON_DEFAULT[variant]}.items():
        assert config[name] == value
    restored = type(layer).from_config(config)
    assert restored.get_config() == config
    inputs = make_inputs(np.random.default_rng(23))
    randomize(layer, inputs)
    restored.build(inputs["query"].shape, inputs["value"].shape, inputs["key"].shape)
    restored.set_weights(layer.get_weights())
    a = run(layer, inputs, value_mask=VALUE_MASK)
    b = run(restored, inputs, value_mask=VALUE_MASK)
    for x, y in zip(a[:2], b[:2], strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("variant", ["location", "bahdanau_recursive_normalize", "luong_hard"])
def test_keras_file_round_trip_after_clear_session(variant, tmp_path):
    """A functional model over a sequence of queries, masks from an Embedding."""
    query = keras.Input((T_Q, D_Q), name="query")
    value_ids = keras.Input((T_V,), dtype="int32", name="value_ids")
    value = keras.layers.Embedding(9, D_V, mask_zero=True)(value_ids)
    layer = make_layer(variant, name="attention")
    context, weights = layer(query, value, return_attention_scores=True)
    model = keras.Model([query, value_ids], [context, weights])
    rng = np.random.default_rng(24)
    for weight in model.weights:
        weight.assign(rng.normal(scale=0.7, size=weight.shape).astype(weight.dtype))
    inputs = [
        rng.normal(size=(2, T_Q, D_Q)).astype("float32"),
        np.array([[3, 1, 4, 1, 0, 0], [5, 2, 6, 5, 3, 5]], "int32"),
    ]
    expected = [np.asarray(x) for x in model(inputs)]  # eager
    np.testing.assert_array_equal(expected[1][0, :, 4:], 0.0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    keras.backend.clear_session()
    loaded = keras.saving.load_model(path)
    restored = loaded.get_layer("attention")
    assert type(restored) is VARIANTS[variant][0]
    assert restored.get_config() == layer.get_config()
    # Through the compiled path (tf.function, jax.jit): the same to rounding.
    for actual, wanted in zip(loaded.predict(inputs, verbose=0), expected, strict=True):
        np.testing.assert_allclose(actual, wanted, rtol=1e-5, atol=1e-6)
