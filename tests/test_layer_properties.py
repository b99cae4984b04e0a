"""Behaviour every attention layer shares: masks, mixed precision, training, laws.

Mask and mixed-precision tests run on every variant of `reference.VARIANTS`
(Bahdanau plain and normalized, Luong dot/general/concat, scale, heads); the slow
ones (XLA training, hypothesis laws) on one variant per score.
"""

import functools

import keras
import numpy as np
import pytest
from autodiff import gradients
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from keras import ops
from reference import ATOL
from reference import D_K
from reference import D_Q
from reference import D_V
from reference import RTOL
from reference import VARIANTS
from reference import build
from reference import dims
from reference import layer_reference
from reference import make_inputs
from reference import make_layer

from keras_attention import LuongAttention

ALL = list(VARIANTS)
# One variant per score (Bahdanau, dot, general, concat), with normalize, scale and
# heads among them: for the slow tests (XLA compiles, 25 hypothesis examples each).
ONE_PER_SCORE = [
    "bahdanau_normalize",
    "luong_dot_scale",
    "luong_general_heads",
    "luong_concat",
]

# Token ids with 0 as padding: the query rows of element 0 and 1 end in padding;
# element 2 has no key at all (a fully masked row for every query).
QUERY_IDS = np.array([[3, 1, 0], [2, 0, 0], [5, 6, 7]])
VALUE_IDS = np.array([[1, 2, 3, 0, 0], [4, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
VOCAB = 8


class MaskReader(keras.layers.Layer):
    """Returns the Keras mask it is given, as float32: 1 kept, 0 padded."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return -ops.ones(ops.shape(inputs)[:-1])  # never a valid mask
        return ops.cast(mask, "float32")

    def compute_mask(self, inputs, mask=None):
        return None


def _head_axes(layer, weights):
    """Weights without a heads axis, (B, ..., T_v) → (B, H, ..., T_v) always."""
    weights = np.asarray(weights)
    return weights if layer.num_heads > 1 else weights[:, None]


def _embeddings(variant):
    """Embedding layers giving masked query and value and an unmasked key."""
    d_q, d_k, d_v = dims(variant)
    init = keras.initializers.RandomNormal(seed=3)
    return (
        keras.layers.Embedding(VOCAB, d_q, mask_zero=True, embeddings_initializer=init),
        keras.layers.Embedding(VOCAB, d_v, mask_zero=True, embeddings_initializer=init),
        # The key carries no mask: the value's mask is the key mask.
        keras.layers.Embedding(VOCAB, d_k, embeddings_initializer=init),
    )


def _explicit_call(layer, embeddings, **kwargs):
    """The layer on the plain embedded arrays (no Keras mask) with explicit masks."""
    emb_q, emb_v, emb_k = embeddings
    return layer(
        np.asarray(emb_q(QUERY_IDS)),
        np.asarray(emb_v(VALUE_IDS)),
        key=np.asarray(emb_k(VALUE_IDS)),
        return_attention_scores=True,
        **kwargs,
    )


def _noise(rng, tensor):
    """Random upstream gradient shaped like `tensor`, so no output is ignored."""
    return rng.normal(size=tensor.shape).astype(keras.backend.standardize_dtype(tensor.dtype))


def _layer_and_inputs(variant):
    layer = make_layer(variant)
    inputs = make_inputs(variant, np.random.default_rng(0), batch=3, t_q=3, t_v=5)
    return build(layer, inputs), inputs


# ------------------------------------------------------------------ masks


@pytest.mark.parametrize("variant", ALL)
def test_automatic_masks_in_functional_model_equal_explicit_masks(variant):
    layer, _ = _layer_and_inputs(variant)
    embeddings = _embeddings(variant)
    emb_q, emb_v, emb_k = embeddings
    query_ids = keras.Input((None,), dtype="int32")
    value_ids = keras.Input((None,), dtype="int32")
    context, weights = layer(
        emb_q(query_ids),
        emb_v(value_ids),
        key=emb_k(value_ids),
        return_attention_scores=True,
    )
    model = keras.Model([query_ids, value_ids], [context, weights])
    auto_context, auto_weights = model([QUERY_IDS, VALUE_IDS])

    explicit_context, explicit_weights = _explicit_call(
        layer, embeddings, query_mask=QUERY_IDS != 0, value_mask=VALUE_IDS != 0
    )
    np.testing.assert_allclose(auto_context, explicit_context, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(auto_weights, explicit_weights, rtol=RTOL, atol=ATOL)
    # The masks matter: without them the outputs differ.
    unmasked_context, _ = _explicit_call(layer, embeddings)
    assert not np.allclose(unmasked_context, explicit_context, atol=1e-3)


@pytest.mark.parametrize("variant", ALL)
def test_direct_call_on_keras_masked_tensors_equals_explicit_masks(variant):
    layer, _ = _layer_and_inputs(variant)
    embeddings = _embeddings(variant)
    emb_q, emb_v, emb_k = embeddings
    auto_context, auto_weights = layer(
        emb_q(QUERY_IDS),
        emb_v(VALUE_IDS),
        key=emb_k(VALUE_IDS),
        return_attention_scores=True,
    )
    explicit_context, explicit_weights = _explicit_call(
        layer, embeddings, query_mask=QUERY_IDS != 0, value_mask=VALUE_IDS != 0
    )
    np.testing.assert_array_equal(auto_context, explicit_context)
    np.testing.assert_array_equal(auto_weights, explicit_weights)


@pytest.mark.parametrize("variant", ALL)
def test_explicit_masks_override_automatic_masks(variant):
    layer, _ = _layer_and_inputs(variant)
    embeddings = _embeddings(variant)
    emb_q, emb_v, emb_k = embeddings
    # Different from the masks the embeddings attach (ids != 0).
    query_mask = np.array([[True, False, True], [True, True, True], [True] * 3])
    value_mask = np.array([[False, True, True, True, True], [True] * 5, [True] * 5])
    context, weights = layer(
        emb_q(QUERY_IDS),
        emb_v(VALUE_IDS),
        key=emb_k(VALUE_IDS),
        query_mask=query_mask,
        value_mask=value_mask,
        return_attention_scores=True,
    )
    expected_context, expected_weights = _explicit_call(
        layer, embeddings, query_mask=query_mask, value_mask=value_mask
    )
    np.testing.assert_array_equal(context, expected_context)
    np.testing.assert_array_equal(weights, expected_weights)


@pytest.mark.parametrize("variant", ALL)
def test_masked_keys_get_exactly_zero_weight(variant):
    layer, inputs = _layer_and_inputs(variant)
    value_mask = np.array(
        [[True, False, True, False, True], [False, True] + [False] * 3, [True] * 5]
    )
    _, weights = layer(**inputs, value_mask=value_mask, return_attention_scores=True)
    weights = _head_axes(layer, weights)  # (B, H, T_q, T_v)
    masked = np.broadcast_to(~value_mask[:, None, None, :], weights.shape)
    assert np.all(weights[masked] == 0.0)
    assert np.all(weights[~masked] > 0.0)


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("single_step", [False, True])
def test_fully_masked_row_gives_zero_weights_and_context(variant, single_step):
    rng = np.random.default_rng(1)
    inputs = make_inputs(variant, rng, batch=3, single_step=single_step)
    layer = build(make_layer(variant), inputs)
    value_mask = np.array([[True] * 5, [False] * 5, [True, False, True, False, True]])
    context, weights = layer(**inputs, value_mask=value_mask, return_attention_scores=True)
    context, weights = np.asarray(context), np.asarray(weights)
    np.testing.assert_array_equal(context[1], np.zeros_like(context[1]))
    np.testing.assert_array_equal(weights[1], np.zeros_like(weights[1]))
    # The other rows are untouched by it.
    expected_context, _ = layer_reference(layer, **inputs, value_mask=value_mask)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)
    assert np.all(np.abs(context[[0, 2]]) > 0.0)


@pytest.mark.parametrize("variant", ALL)
def test_fully_masked_row_has_finite_gradients(variant):
    layer, inputs = _layer_and_inputs(variant)
    value_mask = np.array([[True] * 5, [False] * 5, [True, True, False, False, True]])
    query_mask = np.array([[True, True, False], [True] * 3, [True] * 3])
    names = list(inputs)
    rng = np.random.default_rng(2)
    probes = {}

    def loss(*tensors):
        context, weights = layer(
            **dict(zip(names, tensors, strict=True)),
            query_mask=query_mask,
            value_mask=value_mask,
            return_attention_scores=True,
        )
        if not probes:  # the same upstream gradient in every trace
            probes.update(context=_noise(rng, context), weights=_noise(rng, weights))
        return ops.sum(ops.multiply(context, probes["context"])) + ops.sum(
            ops.multiply(weights, probes["weights"])
        )

    input_grads, weight_grads = gradients(
        loss, [inputs[name] for name in names], layer.trainable_variables
    )
    for name, grad in zip(names, input_grads, strict=True):
        assert np.all(np.isfinite(grad)), name
        # Element 1 attends to nothing: its output does not depend on its inputs.
        np.testing.assert_array_equal(grad[1], 0.0)
        assert np.any(grad[[0, 2]] != 0.0), name
    for variable, grad in zip(layer.trainable_variables, weight_grads, strict=True):
        assert np.all(np.isfinite(grad)), variable.path


@pytest.mark.parametrize("variant", ALL)
def test_padded_query_rows_give_zero_context_and_weights(variant):
    layer, inputs = _layer_and_inputs(variant)
    query_mask = np.array([[True, True, False], [True, False, False], [True] * 3])
    context, weights = layer(**inputs, query_mask=query_mask, return_attention_scores=True)
    context = np.asarray(context)
    weights = _head_axes(layer, weights)  # (B, H, T_q, T_v)
    np.testing.assert_array_equal(context[~query_mask], 0.0)
    np.testing.assert_array_equal(weights.transpose(0, 2, 1, 3)[~query_mask], 0.0)
    expected_context, _ = layer_reference(layer, **inputs)
    np.testing.assert_allclose(
        context[query_mask], expected_context[query_mask], rtol=RTOL, atol=ATOL
    )


@pytest.mark.parametrize("variant", ALL)
def test_output_keeps_query_mask(variant):
    layer, _ = _layer_and_inputs(variant)
    emb_q, emb_v, emb_k = _embeddings(variant)
    query_ids = keras.Input((None,), dtype="int32")
    value_ids = keras.Input((None,), dtype="int32")
    context = layer(emb_q(query_ids), emb_v(value_ids), key=emb_k(value_ids))
    model = keras.Model([query_ids, value_ids], MaskReader()(context))
    functional_mask = model([QUERY_IDS, VALUE_IDS])
    np.testing.assert_array_equal(functional_mask, (QUERY_IDS != 0).astype("float32"))
    # Eagerly too: the next layer receives the query's mask.
    eager = layer(emb_q(QUERY_IDS), emb_v(VALUE_IDS), key=emb_k(VALUE_IDS))
    np.testing.assert_array_equal(MaskReader()(eager), (QUERY_IDS != 0).astype("float32"))


# --------------------------------------------------------- mixed precision

# Each policy against the float32 layer with the same weights. Inputs and weights
# are O(1), so differences are absolute-ish: float16 rounds each op to 2^-11 ≈ 5e-4
# relative and scores of magnitude ~5 pass through matmul, tanh, softmax (float32)
# and the context sum: ~1e-2. bfloat16 keeps 8 bits (2^-8 ≈ 4e-3): ~5e-2.
# float32 against itself must be identical.
POLICY_TOL = {"float32": 0.0, "mixed_float16": 1e-2, "mixed_bfloat16": 5e-2}
POLICY_COMPUTE = {
    "float32": "float32",
    "mixed_float16": "float16",
    "mixed_bfloat16": "bfloat16",
}


def _as_float32(x):
    return np.asarray(ops.cast(x, "float32"))


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("policy", list(POLICY_TOL))
def test_mixed_precision_close_to_float32_and_fully_masked_row_zero(variant, policy):
    layer32, inputs = _layer_and_inputs(variant)
    layer = make_layer(variant, dtype=policy)
    layer(**inputs)
    layer.set_weights(layer32.get_weights())
    query_mask = np.array([[True, True, False], [True] * 3, [True] * 3])
    value_mask = np.array([[True] * 5, [False] * 5, [True, False, True, True, False]])
    masks = {"query_mask": query_mask, "value_mask": value_mask}
    context, weights = layer(**inputs, **masks, return_attention_scores=True)
    assert keras.backend.standardize_dtype(context.dtype) == POLICY_COMPUTE[policy]
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in layer.weights)
    context, weights = _as_float32(context), _as_float32(weights)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    np.testing.assert_array_equal(context[1], 0.0)
    np.testing.assert_array_equal(weights[1], 0.0)
    np.testing.assert_array_equal(context[0, 2], 0.0)
    expected_context, expected_weights = layer32(**inputs, **masks, return_attention_scores=True)
    tol = POLICY_TOL[policy]
    np.testing.assert_allclose(context, expected_context, rtol=tol, atol=tol)
    np.testing.assert_allclose(weights, expected_weights, rtol=tol, atol=tol)


@pytest.mark.parametrize("variant", ["bahdanau_normalize", "luong_general_heads"])
def test_global_mixed_float16_policy_applies_to_layer(variant, dtype_policy):
    layer32, inputs = _layer_and_inputs(variant)
    dtype_policy("mixed_float16")
    layer = make_layer(variant)
    layer(**inputs)
    layer.set_weights(layer32.get_weights())
    value_mask = np.array([[True] * 5, [False] * 5, [True, False, True, True, False]])
    context = layer(**inputs, value_mask=value_mask)
    assert keras.backend.standardize_dtype(context.dtype) == "float16"
    context = _as_float32(context)
    np.testing.assert_array_equal(context[1], 0.0)
    expected = layer32(**inputs, value_mask=value_mask)
    tol = POLICY_TOL["mixed_float16"]
    np.testing.assert_allclose(context, expected, rtol=tol, atol=tol)


# ---------------------------------------------------------------- training


def _regression_model(variants):
    """query, value, key, value_mask → one attention layer per variant → Dense.

    One model holds all the variants, so XLA compiles once.
    """
    query = keras.Input((3, D_Q), name="query")
    value = keras.Input((5, D_V), name="value")
    key = keras.Input((5, D_K), name="key")
    value_mask = keras.Input((5,), dtype="bool", name="value_mask")
    layers = [make_layer(v) for v in variants]
    contexts = []
    for variant, layer in zip(variants, layers, strict=True):
        # "dot" needs d_k == d_q: it scores the query against the first d_q features.
        layer_key = key[..., : dims(variant)[1]]
        contexts.append(layer(query, value, key=layer_key, value_mask=value_mask))
    merged = keras.layers.Concatenate()(contexts) if len(contexts) > 1 else contexts[0]
    output = keras.layers.Dense(1)(merged)
    return keras.Model([query, value, key, value_mask], output), layers


def _regression_data(seed):
    rng = np.random.default_rng(seed)
    lengths = np.array([5, 0, 3, 4, 1, 5, 2, 5])  # element 1: every key masked
    x = [
        rng.normal(size=(8, 3, D_Q)).astype("float32"),
        rng.normal(size=(8, 5, D_V)).astype("float32"),
        rng.normal(size=(8, 5, D_K)).astype("float32"),
        np.arange(5) < lengths[:, None],
    ]
    target = rng.normal(size=(8, 3, 1)).astype("float32")
    return x, target


def _assert_all_weights_changed(layers, before):
    for layer, old_weights in zip(layers, before, strict=True):
        assert layer.trainable_weights, layer.name
        for old, new in zip(old_weights, layer.trainable_weights, strict=True):
            assert np.all(np.isfinite(new.numpy())), new.path
            assert not np.array_equal(old, new.numpy()), new.path


def test_fit_with_jit_compile_lowers_loss_and_updates_weights(seed):
    if keras.backend.backend() == "torch":
        pytest.skip("jit_compile on PyTorch is torch.compile (minutes on a CPU), not XLA")
    model, layers = _regression_model(ONE_PER_SCORE)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", jit_compile=True)
    x, y = _regression_data(seed)
    before = [[w.numpy().copy() for w in layer.trainable_weights] for layer in layers]
    history = model.fit(x, y, batch_size=8, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < losses[0]
    _assert_all_weights_changed(layers, before)


@pytest.mark.tensorflow
def test_dropout_in_training_compiles_with_xla(seed):
    import tensorflow as tf

    inputs = make_inputs("bahdanau", np.random.default_rng(seed), batch=4, t_v=9)
    plain = build(make_layer("bahdanau"), inputs)
    layer = make_layer("bahdanau", dropout=0.5, seed=seed)
    layer(**inputs)
    layer.set_weights(plain.get_weights())

    @tf.function(jit_compile=True)
    def dropped_weights(query, value, key):
        _, weights = layer(query, value, key=key, return_attention_scores=True, training=True)
        return weights

    dropped = dropped_weights(**inputs).numpy()
    _, expected = plain(**inputs, return_attention_scores=True)
    kept = dropped != 0.0
    assert kept.any() and not kept.all()
    np.testing.assert_allclose(
        dropped[kept], 2.0 * np.asarray(expected)[kept], rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("variant", ["bahdanau", "luong_dot_heads"])
def test_dropout_acts_on_weights_only_in_training(variant, seed):
    rng = np.random.default_rng(seed)
    inputs = make_inputs(variant, rng, batch=4, t_q=6, t_v=9)
    plain = build(make_layer(variant), inputs)
    layer = make_layer(variant, dropout=0.5, seed=seed)
    layer(**inputs)
    layer.set_weights(plain.get_weights())
    _, expected = plain(**inputs, return_attention_scores=True)
    _, inference = layer(**inputs, return_attention_scores=True, training=False)
    _, dropped = layer(**inputs, return_attention_scores=True, training=True)
    expected, dropped = np.asarray(expected), np.asarray(dropped)
    np.testing.assert_array_equal(inference, expected)
    zeroed = dropped == 0.0
    assert zeroed.any() and not zeroed.all()
    # Inverted dropout: kept weights are scaled by 1 / (1 - rate).
    np.testing.assert_allclose(dropped[~zeroed], expected[~zeroed] * 2.0, rtol=1e-6)


@pytest.mark.parametrize("heads", [1, 2])
def test_step_noise_drops_at_the_rate_in_training_only(heads):
    layer = LuongAttention(num_heads=heads, dropout=0.3, seed=5)
    shape = (40, 16, 10)  # (T, batch, T_v)
    assert layer.step_noise(shape, training=False) is None
    assert layer.step_noise(shape) is None
    assert LuongAttention(dropout=0.0).step_noise(shape, training=True) is None
    mask = np.asarray(layer.step_noise(shape, training=True))
    assert mask.shape == ((40, 16, 2, 10) if heads > 1 else shape)  # (T, batch, [H,] T_v)
    assert set(np.unique(mask)) <= {0.0, np.float32(1 / 0.7)}
    # 6,400 or 12,800 draws: the rate within 4 standard deviations.
    fraction = np.mean(mask == 0.0)
    assert abs(fraction - 0.3) < 4 * np.sqrt(0.3 * 0.7 / mask.size), fraction


def _context_of(weights, value, heads):
    """The context (B, [T_q,] d_v) of weights (B, [H,] [T_q,] T_v) over value (B, T_v, d_v)."""
    value = value.reshape(value.shape[:2] + (heads, -1))  # (B, T_v, H, d_v / H)
    if heads == 1:
        weights = weights[:, None]  # (B, 1, [T_q,] T_v)
    single_step = weights.ndim == 3
    if single_step:
        weights = weights[:, :, None]  # (B, H, 1, T_v)
    context = np.einsum("bhqv,bvhd->bqhd", weights, value)
    context = context.reshape(context.shape[:2] + (-1,))  # (B, T_q, d_v)
    return context[:, 0] if single_step else context


@pytest.mark.parametrize("variant", ["bahdanau", "luong_dot_heads"])
def test_attend_step_applies_the_given_noise_as_dropout_masks(variant, seed):
    rng = np.random.default_rng(seed)
    inputs = make_inputs(variant, rng, batch=4, t_v=9, single_step=True)
    layer = build(make_layer(variant, dropout=0.5, seed=seed), inputs)
    keys = layer.precompute_keys(inputs["key"])
    # Each head's weights, without dropout: (B, [H,] T_v).
    expected = np.asarray(layer(**inputs, return_attention_scores=True)[1])
    mask = rng.choice([0.0, 2.0], size=expected.shape).astype("float32")
    # The given masks, whatever `training` says: the caller drew them for training.
    context, weights, _ = layer.attend_step(
        inputs["query"], inputs["value"], keys, {}, noise=mask, training=False
    )
    dropped = expected * mask
    expected_context = _context_of(dropped, inputs["value"], layer.num_heads)
    if layer.num_heads > 1:
        dropped = dropped.mean(axis=1)  # the contract's weights: the heads' average
    np.testing.assert_allclose(weights, dropped, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(context, expected_context, rtol=RTOL, atol=ATOL)


def test_noise_of_the_wrong_shape_is_an_error():
    inputs = make_inputs("bahdanau", np.random.default_rng(0), single_step=True)
    layer = build(make_layer("bahdanau", dropout=0.5), inputs)
    keys = layer.precompute_keys(inputs["key"])
    with pytest.raises(ValueError, match=r"`noise`.*\(batch, T_v\)=\(2, 5\).*step_noise"):
        layer.attend_step(inputs["query"], inputs["value"], keys, {}, noise=np.ones((2, 4)))


# -------------------------------------------------------------------- laws

# On JAX and PyTorch every new shape is compiled or dispatched afresh (minutes
# for 25 examples each); the laws are the same keras.ops code on every backend.
PROPERTY_SETTINGS = settings(
    max_examples=25 if keras.backend.backend() == "tensorflow" else 5, deadline=None
)
# A single key (T_v = 1) is a valid case; Keras warns about any size-1 softmax axis.
SINGLE_KEY_WARNING = "ignore:You are using a softmax over axis -1"

# Two float32 evaluations of the same quantity in a different summation order.
PROPERTY_TOL = 1e-5


@functools.cache
def _law_layer(variant):
    return build(make_layer(variant), make_inputs(variant, np.random.default_rng(0)))


@st.composite
def attention_cases(draw, variant):
    """Sizes, masks and a seed from hypothesis; the float contents from the seed.

    Drawing every float through hypothesis costs as much as the layer calls; the
    laws hold for any contents, so the sizes and masks are what shrinking needs.
    """
    d_q, d_k, d_v = dims(variant)
    batch = draw(st.integers(1, 3))
    t_q = draw(st.integers(1, 4))
    t_v = draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return {
        "query": rng.uniform(-2, 2, (batch, t_q, d_q)).astype("float32"),
        "value": rng.uniform(-2, 2, (batch, t_v, d_v)).astype("float32"),
        "key": rng.uniform(-2, 2, (batch, t_v, d_k)).astype("float32"),
        "value_mask": draw(hnp.arrays(bool, (batch, t_v))),
    }


@pytest.mark.filterwarnings(SINGLE_KEY_WARNING)
@pytest.mark.parametrize("variant", ONE_PER_SCORE)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_weights_sum_to_one_over_unmasked_keys(variant, data):
    layer = _law_layer(variant)
    case = data.draw(attention_cases(variant))
    _, weights = layer(**case, return_attention_scores=True)
    weights = _head_axes(layer, weights)  # (B, H, T_q, T_v)
    keep = np.broadcast_to(case["value_mask"][:, None, None, :], weights.shape)
    assert np.all(weights[~keep] == 0.0)
    assert np.all(weights >= 0.0)
    expected_sums = np.broadcast_to(case["value_mask"].any(-1)[:, None, None], weights.shape[:-1])
    np.testing.assert_allclose(weights.sum(-1), expected_sums.astype("float32"), atol=PROPERTY_TOL)


@pytest.mark.filterwarnings(SINGLE_KEY_WARNING)
@pytest.mark.parametrize("variant", ONE_PER_SCORE)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_permuting_keys_with_values_leaves_context_unchanged(variant, data):
    layer = _law_layer(variant)
    case = data.draw(attention_cases(variant))
    t_v = case["value"].shape[1]
    order = np.array(data.draw(st.permutations(range(t_v))))
    permuted = {
        "query": case["query"],
        "value": case["value"][:, order],
        "key": case["key"][:, order],
        "value_mask": case["value_mask"][:, order],
    }
    context, weights = layer(**case, return_attention_scores=True)
    permuted_context, permuted_weights = layer(**permuted, return_attention_scores=True)
    np.testing.assert_allclose(permuted_context, context, rtol=PROPERTY_TOL, atol=PROPERTY_TOL)
    np.testing.assert_allclose(
        permuted_weights,
        np.asarray(weights)[..., order],
        rtol=PROPERTY_TOL,
        atol=PROPERTY_TOL,
    )


@pytest.mark.filterwarnings(SINGLE_KEY_WARNING)
@pytest.mark.parametrize("variant", ONE_PER_SCORE)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_appending_masked_padding_changes_nothing(variant, data):
    layer = _law_layer(variant)
    case = data.draw(attention_cases(variant))
    batch, t_v = case["value_mask"].shape
    pad = data.draw(st.integers(1, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))

    def padded(name):
        # Padding content is arbitrary, large values included.
        extra = rng.uniform(-100, 100, (batch, pad, case[name].shape[-1]))
        return np.concatenate([case[name], extra.astype("float32")], axis=1)

    padded_case = {
        "query": case["query"],
        "value": padded("value"),
        "key": padded("key"),
        "value_mask": np.concatenate([case["value_mask"], np.zeros((batch, pad), bool)], 1),
    }
    context, weights = layer(**case, return_attention_scores=True)
    padded_context, padded_weights = layer(**padded_case, return_attention_scores=True)
    padded_weights = np.asarray(padded_weights)
    np.testing.assert_allclose(padded_context, context, rtol=PROPERTY_TOL, atol=PROPERTY_TOL)
    np.testing.assert_allclose(
        padded_weights[..., :t_v], weights, rtol=PROPERTY_TOL, atol=PROPERTY_TOL
    )
    assert np.all(padded_weights[..., t_v:] == 0.0)
