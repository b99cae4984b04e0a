"""`WaitKAttention` against float64 numpy references, alone, in the decoders and generated.

schedule   target step t (0-based) reads the source positions j < k + t
weights    the wrapped layer's, over the keys read and unmasked (a masked
           softmax renormalises them there), exactly 0 elsewhere
k = None   the wrapped layer unchanged
delays     g(t) = min(k + t - 1, |x|), t = 1..|y|; AL = k for |x| = |y|
"""

import math

import keras
import numpy as np
import pytest
from _doctests import assert_docstring_examples_run
from reference import ATOL
from reference import RTOL
from reference import alignment_step
from reference import build
from reference import initial_alignment_state
from reference import layer_reference
from reference import make_inputs
from reference import make_layer

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import LocationSensitiveAttention
from keras_attention import LuongDecoder
from keras_attention import Seq2SeqGenerator
from keras_attention import WaitKAttention
from keras_attention.attention.wait_k_attention import WRITTEN
from keras_attention.attention.wait_k_attention import wait_k_delays
from keras_attention.scoring.latency import Latency
from keras_attention.scoring.latency import delays_of_trace
from keras_attention.testing import attention_checks
from keras_attention.testing import check_attention

T_V = 6
T_Q = 4  # != T_V
VOCAB = 11


def value_mask(batch=3):
    """Row 0 complete, row 1 with a hole and a padded end, row 2 fully masked."""
    mask = np.ones((batch, T_V), bool)
    mask[1, 1] = False
    mask[1, -2:] = False
    mask[2] = False
    return mask


def prefix(k, t, t_v=T_V):
    """The positions step t (0-based) of wait-k reads: j < k + t, (T_v,) bool."""
    return np.arange(t_v) < k + t


def location_layer(inputs):
    layer = LocationSensitiveAttention(units=5, filters=2, kernel_size=3)
    return build(layer, inputs)


def location_reference(layer, query, value, key, mask, k):
    """The float64 oracle of wait-k around a location-sensitive layer, step by
    step: each step's keep is the value mask and the prefix read."""
    w = {x.path.split("/")[-1]: np.asarray(x.numpy(), np.float64) for x in layer.weights}
    query, value, key = (np.asarray(x, np.float64) for x in (query, value, key))
    batch, t_q, t_v = query.shape[0], query.shape[1], value.shape[1]
    state = initial_alignment_state(layer, batch, t_v, mask)
    weights = np.zeros((batch, t_q, t_v))
    context = np.zeros((batch, t_q, value.shape[-1]))
    for n in range(batch):
        s = {name: x[n] for name, x in state.items()}
        for t in range(t_q):
            keep = mask[n] & (np.ones(t_v, bool) if k is None else prefix(k, t, t_v))
            kn = np.where(keep[:, None], key[n], 0.0)
            vn = np.where(keep[:, None], value[n], 0.0)
            context[n, t], weights[n, t], s = alignment_step(layer, query[n, t], kn, vn, s, keep, w)
    return context, weights


# ------------------------------------------------------------------ weights


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("variant", ["bahdanau", "luong_general"])
def test_weights_are_the_wrapped_layers_renormalised_over_the_prefix(variant, k):
    rng = np.random.default_rng(0)
    inputs = make_inputs(variant, rng, batch=3, t_q=T_Q, t_v=T_V)
    inner = build(make_layer(variant), inputs)
    mask = value_mask()
    layer = WaitKAttention(inner, k=k)
    context, weights = layer(**inputs, value_mask=mask, return_attention_scores=True)
    context, weights = np.asarray(context), np.asarray(weights)  # (B, T_q, ·)
    for t in range(T_Q):
        assert np.all(weights[:, t, k + t :] == 0.0)
        expected_context, expected = layer_reference(
            inner,
            inputs["query"][:, t],
            inputs["value"],
            inputs["key"],
            value_mask=mask & prefix(k, t)[None, :],
        )
        np.testing.assert_allclose(weights[:, t], expected, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(context[:, t], expected_context, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(weights[:2].sum(-1), 1.0, rtol=RTOL)
    assert np.all(weights[2] == 0.0)


@pytest.mark.parametrize("k", [1, 3])
def test_location_sensitive_weights_follow_the_reference_over_the_prefix(k):
    rng = np.random.default_rng(1)
    inputs = make_inputs("bahdanau", rng, batch=3, t_q=T_Q, t_v=T_V)
    inner = location_layer(inputs)
    mask = value_mask()
    layer = WaitKAttention(inner, k=k)
    context, weights = layer(**inputs, value_mask=mask, return_attention_scores=True)
    expected_context, expected = location_reference(
        inner, inputs["query"], inputs["value"], inputs["key"], mask, k
    )
    weights = np.asarray(weights)
    for t in range(T_Q):
        assert np.all(weights[:, t, k + t :] == 0.0)
    np.testing.assert_allclose(weights, expected, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(context), expected_context, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("wrapped", ["bahdanau", "location"])
def test_k_none_equals_the_wrapped_layer_exactly(wrapped):
    rng = np.random.default_rng(2)
    inputs = make_inputs("bahdanau", rng, batch=3, t_q=T_Q, t_v=T_V)
    inner = (
        location_layer(inputs) if wrapped == "location" else build(make_layer("bahdanau"), inputs)
    )
    mask = value_mask()
    ours = WaitKAttention(inner)(**inputs, value_mask=mask, return_attention_scores=True)
    theirs = inner(**inputs, value_mask=mask, return_attention_scores=True)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    # Step by step, as a decoder runs it: bit for bit.
    value, keys = inner.prepare_memory(inputs["value"], mask, inputs["key"])
    layer = WaitKAttention(inner)
    state, inner_state = (
        layer.initial_attention_state(value, mask),
        inner.initial_attention_state(value, mask),
    )
    for t in range(T_Q):
        options = {"value_mask": mask, "memory_prepared": True}
        c, w, state = layer.attend_step(inputs["query"][:, t], value, keys, state, **options)
        c2, w2, inner_state = inner.attend_step(
            inputs["query"][:, t], value, keys, inner_state, **options
        )
        np.testing.assert_array_equal(np.asarray(w), np.asarray(w2))
        np.testing.assert_array_equal(np.asarray(c), np.asarray(c2))


def test_a_padded_target_step_writes_nothing():
    rng = np.random.default_rng(3)
    inputs = make_inputs("bahdanau", rng, batch=2, t_q=T_Q, t_v=T_V)
    layer = WaitKAttention(build(make_layer("bahdanau"), inputs), k=1)
    step_mask = np.ones((2, T_Q), bool)
    step_mask[:, 1] = False
    _, weights, state = layer(
        **inputs, query_mask=step_mask, return_attention_scores=True, return_attention_state=True
    )
    weights = np.asarray(weights)
    assert np.all(weights[:, 1] == 0.0)
    # The steps after the padded one read one position fewer: k + (t - 1).
    reads = (weights > 0).sum(-1)  # (B, T_q)
    np.testing.assert_array_equal(reads[:, [0, 2, 3]], [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_array_equal(np.asarray(state[WRITTEN]), [3.0, 3.0])


# ----------------------------------------------------------------- decoders


def decoder_model(kind, attention, units=6, bidirectional=False):
    """source, target_in → logits, weights: a GRU encoder (unidirectional unless
    asked), the decoder `kind` with `attention`, a readout."""
    keras.utils.set_random_seed(0)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    memory = keras.layers.Embedding(VOCAB, 5, mask_zero=True)(source)
    encoder = keras.layers.GRU(7, return_sequences=True)
    memory = keras.layers.Bidirectional(encoder)(memory) if bidirectional else encoder(memory)
    embedded = keras.layers.Embedding(VOCAB, 4, mask_zero=True)(target_in)
    decoder_class = {"bahdanau": BahdanauDecoder, "luong": LuongDecoder}[kind]
    outputs, weights, _ = decoder_class(units, attention, name="decoder")(embedded, memory)
    readout = keras.layers.Dense(VOCAB)
    logits = readout(outputs)
    # Padding (0) is never predicted: a teacher-forced model reads a 0 in
    # target_in as a padded step, a search as a token.
    readout.bias.assign(np.where(np.arange(VOCAB) == 0, -30.0, 0.0).astype("float32"))
    return keras.Model([source, target_in], [logits, weights])


SOURCE = np.array([[3, 4, 5, 6, 7, 8], [9, 5, 4, 0, 0, 0]], dtype="int32")
TARGET_IN = np.array([[1, 6, 3, 9, 4], [1, 7, 7, 0, 0]], dtype="int32")


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_decoder_call_equals_its_step_loop(kind):
    rng = np.random.default_rng(4)
    batch, t_dec = 3, 5
    decoder_class = {"bahdanau": BahdanauDecoder, "luong": LuongDecoder}[kind]
    decoder = decoder_class(6, WaitKAttention(BahdanauAttention(5), k=2))
    targets = rng.normal(size=(batch, t_dec, 4)).astype("float32")
    memory = rng.normal(size=(batch, T_V, 7)).astype("float32")
    mask = value_mask(batch)
    outputs, weights, _ = decoder(targets, memory, memory_mask=mask)
    weights = np.asarray(weights)
    for t in range(t_dec):
        assert np.all(weights[:, t, 2 + t :] == 0.0)
    decode_state = decoder.get_decode_state(memory, memory_mask=mask)
    for t in range(t_dec):
        output, step_weights, decode_state = decoder.step(targets[:, t], decode_state)
        np.testing.assert_allclose(step_weights, weights[:, t], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(output, np.asarray(outputs)[:, t], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(decode_state[f"attention_{WRITTEN}"]), [5.0] * 3)


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_outputs_before_k_plus_t_ignore_later_source_tokens(kind):
    # The causality that makes streaming exact: with a unidirectional encoder,
    # the output of step t reads the source tokens j < k + t only.
    k = 2
    model = decoder_model(kind, WaitKAttention(BahdanauAttention(5), k=k))
    source, target_in = SOURCE[:1], TARGET_IN[:1]
    logits = np.asarray(model([source, target_in])[0])  # (1, T, V)
    for t in range(target_in.shape[1]):
        changed = source.copy()
        changed[0, k + t :] = 10  # another token from position k + t on
        other = np.asarray(model([changed, target_in])[0])
        np.testing.assert_allclose(other[:, : t + 1], logits[:, : t + 1], rtol=1e-6, atol=1e-6)
        if k + t < source.shape[1]:
            assert np.abs(other[:, t + 1 :] - logits[:, t + 1 :]).max() > 1e-4


def test_without_wait_k_the_first_output_reads_the_whole_source():
    # The test above has teeth: the plain layer's first step reads every token.
    model = decoder_model("bahdanau", BahdanauAttention(5))
    source, target_in = SOURCE[:1], TARGET_IN[:1]
    changed = source.copy()
    changed[0, -1] = 10
    first = [np.asarray(model([s, target_in])[0])[:, 0] for s in (source, changed)]
    assert np.abs(first[0] - first[1]).max() > 1e-4


# ------------------------------------------------------------------ training_k


def counts_read(weights):
    """The keys with a nonzero weight, (B, T_q)."""
    return (np.asarray(weights, np.float32) > 0).sum(-1)


def test_in_training_each_row_draws_its_own_k():
    batch, low, high = 32, 1, 4
    rng = np.random.default_rng(5)
    inputs = make_inputs("bahdanau", rng, batch=1, t_q=3, t_v=8)
    inputs = {name: np.repeat(x, batch, axis=0) for name, x in inputs.items()}
    layer = WaitKAttention(make_layer("bahdanau"), k=2, training_k=(low, high), seed=3)
    _, weights = layer(**inputs, return_attention_scores=True, training=True)
    reads = counts_read(weights)  # (B, T_q)
    k_rows = reads[:, 0]
    assert set(k_rows.tolist()) == set(range(low, high + 1))  # 32 draws of 4 values
    np.testing.assert_array_equal(reads, k_rows[:, None] + np.arange(3)[None, :])
    _, weights = layer(**inputs, return_attention_scores=True, training=False)
    np.testing.assert_array_equal(counts_read(weights), np.broadcast_to([2, 3, 4], (batch, 3)))


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_a_decoder_in_training_draws_k_per_row_before_its_loop(kind):
    batch = 24
    rng = np.random.default_rng(6)
    decoder_class = {"bahdanau": BahdanauDecoder, "luong": LuongDecoder}[kind]
    attention = WaitKAttention(BahdanauAttention(5), k=1, training_k=(2, 5), seed=1)
    decoder = decoder_class(6, attention)
    targets = np.repeat(rng.normal(size=(1, 3, 4)).astype("float32"), batch, axis=0)
    memory = np.repeat(rng.normal(size=(1, 9, 7)).astype("float32"), batch, axis=0)
    _, weights, _ = decoder(targets, memory, training=True)
    reads = counts_read(weights)
    assert len(set(reads[:, 0].tolist())) > 1 and reads[:, 0].min() >= 2 and reads.max() <= 7
    np.testing.assert_array_equal(reads, reads[:, :1] + np.arange(3)[None, :])
    _, weights, _ = decoder(targets, memory, training=False)
    np.testing.assert_array_equal(counts_read(weights), np.broadcast_to([1, 2, 3], (batch, 3)))


def test_step_noise_draws_one_k_per_row_for_every_step():
    layer = WaitKAttention(BahdanauAttention(4), k=2, training_k=(1, 3), seed=0)
    noise = layer.step_noise((5, 7, 6), training=True)
    k = np.asarray(noise["k"])
    assert k.shape == (5, 7) and np.all(k == k[:1]) and k.min() >= 1 and k.max() <= 3
    assert layer.step_noise((5, 7, 6), training=False) is None


def test_a_model_with_training_k_fits():
    attention = WaitKAttention(BahdanauAttention(5), k=2, training_k=(1, 3), seed=0)
    model = decoder_model("bahdanau", attention)
    training = keras.Model(model.inputs, model.outputs[0])
    training.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    target_out = np.array([[6, 3, 9, 4, 2], [7, 7, 2, 0, 0]], dtype="int32")
    history = training.fit([SOURCE, TARGET_IN], target_out, epochs=2, verbose=0)
    assert all(math.isfinite(x) for x in history.history["loss"])


# ---------------------------------------------------------------- generation


def test_greedy_search_from_model_follows_the_schedule():
    k = 2
    model = decoder_model("bahdanau", WaitKAttention(BahdanauAttention(5), k=k))
    logits_model = keras.Model(model.inputs, model.outputs[0])
    generator = Seq2SeqGenerator.from_model(logits_model, start_id=1, end_id=2)
    result = generator.greedy(SOURCE, max_length=6)
    tokens, attention = np.asarray(result["tokens"]), np.asarray(result["attention"])
    for t in range(tokens.shape[1]):
        assert np.all(attention[:, t, k + t :] == 0.0)
    # The tokens a teacher-forced model picks one at a time, for row 0.
    target_in = [1]
    for t in range(int(result["lengths"][0])):
        logits = np.asarray(model([SOURCE[:1], np.array([target_in], "int32")])[0])
        target_in.append(int(np.argmax(logits[0, t])))
    np.testing.assert_array_equal(tokens[0, : len(target_in) - 1], target_in[1:])


# ------------------------------------------------------------ the contract


@pytest.mark.parametrize(
    "mechanism",
    [
        lambda: WaitKAttention(BahdanauAttention(units=4), k=2, training_k=(1, 3), seed=0),
        lambda: WaitKAttention(LocationSensitiveAttention(units=4, filters=2, kernel_size=3), k=1),
    ],
    ids=["bahdanau", "location_sensitive"],
)
def test_check_attention_passes(mechanism):
    report = check_attention(mechanism, tflite=False)
    assert set(report.values()) == {"passed", "skipped: tflite=False"}


@pytest.mark.tensorflow
def test_builtin_only_tflite_gives_keras_tokens():
    checks = dict(attention_checks(lambda: WaitKAttention(BahdanauAttention(4), k=2), True))
    assert checks["builtin-only TFLite"]() == "passed"


@pytest.mark.tensorflow
def test_static_length_export_decodes_a_padded_source_as_keras_the_unpadded_one(tmp_path):
    # The export pads the decode state to N source positions; the schedule's
    # count of writes has no source axis and passes through unchanged.
    from ai_edge_litert.interpreter import Interpreter

    from keras_attention import export

    k, n, beam = 2, 8, 2
    model = decoder_model("bahdanau", WaitKAttention(BahdanauAttention(5), k=k))
    generator = Seq2SeqGenerator.from_model(
        keras.Model(model.inputs, model.outputs[0]), start_id=1, end_id=2
    )
    path = str(tmp_path / "model.tflite")
    export.export_tflite(generator, path, beam_width=beam, source_length=n)
    interpreter = Interpreter(model_path=path)
    for source in (SOURCE[:1], SOURCE[1:, :3]):
        padded = np.zeros((1, n), np.int32)
        padded[:, : source.shape[1]] = source
        for name, expected in (
            ("generate", generator.greedy(source)),
            ("generate_beam", generator.beam(source, beam_width=beam)),
        ):
            lite = interpreter.get_signature_runner(name)(source=padded)
            rows = expected["tokens"].shape[1]
            np.testing.assert_array_equal(lite["tokens"][:, :rows], expected["tokens"])
            attention = lite["attention"][0, :rows]  # (L, N)
            for t in range(rows):
                assert not attention[t, k + t :].any()


# --------------------------------------------------------------- saving


def test_config_round_trip():
    layer = WaitKAttention(BahdanauAttention(4), k=3, training_k=(1, 5), seed=7, name="wk")
    config = layer.get_config()
    assert (config["k"], config["training_k"], config["seed"]) == (3, [1, 5], 7)
    restored = WaitKAttention.from_config(config)
    assert isinstance(restored.attention, BahdanauAttention)
    assert (restored.k, restored.training_k) == (3, (1, 5))
    assert restored.get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert restored.get_config() == config


def test_keras_file_keeps_k_and_training_k(tmp_path):
    attention = WaitKAttention(BahdanauAttention(5), k=2, training_k=(1, 4), seed=3)
    model = decoder_model("luong", attention)
    expected = [np.asarray(x) for x in model([SOURCE, TARGET_IN])]
    path = str(tmp_path / "model.keras")
    model.save(path)
    keras.backend.clear_session()
    loaded = keras.saving.load_model(path)
    layer = loaded.get_layer("decoder").attention
    assert isinstance(layer, WaitKAttention)
    assert (layer.k, layer.training_k, layer.seed) == (2, (1, 4), 3)
    for got, want in zip(loaded([SOURCE, TARGET_IN]), expected, strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)


def test_mixed_float16_follows_the_schedule(dtype_policy):
    rng = np.random.default_rng(8)
    inputs = make_inputs("bahdanau", rng, batch=3, t_q=T_Q, t_v=T_V)
    inner = build(make_layer("bahdanau"), inputs)
    expected = np.asarray(
        WaitKAttention(inner, k=2)(**inputs, value_mask=value_mask(), return_attention_scores=True)[
            1
        ]
    )
    dtype_policy("mixed_float16")
    half = WaitKAttention(make_layer("bahdanau"), k=2)
    half(**inputs)  # builds
    half.set_weights(inner.get_weights())
    context, weights, state = half(
        **inputs, value_mask=value_mask(), return_attention_scores=True, return_attention_state=True
    )
    dtypes = [keras.backend.standardize_dtype(x.dtype) for x in (context, weights, state[WRITTEN])]
    assert dtypes == ["float16", "float16", "float32"]
    weights = np.asarray(weights, np.float32)
    assert np.all(np.isfinite(np.asarray(context, np.float32)))
    for t in range(T_Q):
        assert np.all(weights[:, t, 2 + t :] == 0.0)
    np.testing.assert_allclose(weights, expected, rtol=2e-3, atol=2e-3)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("k", [True, 0, -1, 2.0, float("nan"), "2"])
def test_a_bad_k_is_refused(k):
    with pytest.raises(ValueError, match=r"Invalid value for argument `k`.*Received: k="):
        WaitKAttention(BahdanauAttention(4), k=k)


@pytest.mark.parametrize(
    ("training_k", "named"),
    [
        ((0, 2), r"training_k\[0\]"),
        ((2, 1.5), r"training_k\[1\]"),
        ((True, 2), r"training_k\[0\]"),
        ((3, 2), "training_k"),
        ((1,), "training_k"),
        (2, "training_k"),
        ((1, float("nan")), r"training_k\[1\]"),
    ],
)
def test_a_bad_training_k_is_refused(training_k, named):
    with pytest.raises(ValueError, match=rf"Invalid value for argument `{named}`"):
        WaitKAttention(BahdanauAttention(4), k=2, training_k=training_k)


class _Policy(BahdanauAttention):
    """A layer that decides itself when to read."""

    def needs_unread_source(self, attention_state, read_count):
        return keras.ops.zeros(keras.ops.shape(read_count), dtype="bool")


@pytest.mark.parametrize(
    "attention",
    [lambda: WaitKAttention(BahdanauAttention(4), k=1), lambda: _Policy(4)],
    ids=["wait_k", "own_policy"],
)
def test_a_read_write_policy_is_not_wrapped(attention):
    with pytest.raises(ValueError, match="read/write policy and cannot wrap another"):
        WaitKAttention(attention(), k=2)


def test_a_layer_that_is_not_an_attention_is_refused():
    with pytest.raises(ValueError, match="Invalid value for argument `attention`"):
        WaitKAttention(keras.layers.Dense(3), k=2)


# ---------------------------------------------------------------- streaming


@pytest.mark.parametrize("k", [1, 3, None])
def test_needs_unread_source_answers_from_real_steps(k):
    rng = np.random.default_rng(9)
    inputs = make_inputs("bahdanau", rng, batch=1, t_q=T_Q, t_v=T_V)
    layer = WaitKAttention(build(make_layer("bahdanau"), inputs), k=k)
    value, keys = layer.prepare_memory(inputs["value"], None, inputs["key"])
    state = layer.initial_attention_state(value)
    for t in range(T_Q):
        _, _, state = layer.attend_step(inputs["query"][:, t], value, keys, state)
        for read in range(1, T_V + 3):
            wanted = layer.needs_unread_source(state, np.array([read], "int32"))
            expected = True if k is None else k + t > read
            assert bool(np.asarray(wanted)[0]) is expected, (t, read)


def test_needs_unread_source_answers_per_row():
    layer = WaitKAttention(BahdanauAttention(4), k=2)
    state = {WRITTEN: np.array([1.0, 1.0, 3.0], "float32")}  # after steps 0, 0, 2
    wanted = layer.needs_unread_source(state, np.array([1, 2, 3], "int32"))
    np.testing.assert_array_equal(np.asarray(wanted), [True, False, True])


def wait_k_trace(k, source_length, target_length):
    """Read k (or all), then write one and read one, from the papers' policy."""
    trace, read = "", 0
    for t in range(target_length):
        want = source_length if k is None else min(k + t, source_length)
        trace += "R" * (want - read) + "W"
        read = want
    return trace


@pytest.mark.parametrize(
    ("k", "source_length", "target_length"),
    [(1, 5, 5), (3, 5, 7), (2, 7, 4), (9, 4, 4), (None, 5, 3), (4, 6, 0)],
)
def test_wait_k_delays_are_those_of_the_wait_k_trace(k, source_length, target_length):
    delays = wait_k_delays(k, source_length, target_length)
    expected = delays_of_trace(wait_k_trace(k, source_length, target_length))
    assert delays == expected


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_wait_k_on_equal_lengths_lags_by_k(k):
    latency = Latency.of(wait_k_delays(k, 8, 8), 8, 8)
    assert latency.average_lagging == pytest.approx(k)


@pytest.mark.parametrize("k", [0, True, 1.0])
def test_wait_k_delays_refuses_a_bad_k(k):
    with pytest.raises(ValueError, match="argument `k`"):
        wait_k_delays(k, 5, 5)


def test_docstring_example_runs():
    assert_docstring_examples_run(WaitKAttention)
