"""A mechanism with its own state in the whole package: `GMMAttention`.

`GMMAttention` (Graves 2013) fills the attention contract the way a user's
mechanism does (docs/custom_attention.md): its state is not the previous
weights but the windows' centres, (batch, K). Its formulas are checked in
float64 in `test_gmm_attention.py`; here it runs through everything around
it, on every backend: both decoders with the built-in cells and with cells
given by `cell=`, teacher forcing against step-by-step decoding, `model.fit`,
the `.keras` file, `Seq2SeqGenerator` greedy (against an argmax loop written
here over the decoder's `step`) and beam (against the model's own
log-probabilities), mixed precision, and, on TensorFlow, the builtin-only
TFLite export against Keras' tokens. The two classes that the page writes are
run here too, on the backend of the run.
"""

import re
from pathlib import Path

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention
from keras_attention import BahdanauDecoder
from keras_attention import GMMAttention
from keras_attention import LuongDecoder
from keras_attention import Seq2SeqGenerator
from keras_attention.attention.step_guard import RandomDrawInStepError

BATCH = 3
T_DEC = 4  # != T_ENC
T_ENC = 6
D_EMB = 3
D_H = 5
UNITS = 4
K = 2  # Gaussian windows
PAD, START = 0, 1
VOCAB = 9
STEP_TOL = 1e-5
PAGE = Path(__file__).resolve().parents[1] / "docs" / "custom_attention.md"


def dtype_of(tensor):
    """The dtype as Keras names it, on every backend ("float16", not torch.float16)."""
    return keras.backend.standardize_dtype(tensor.dtype)


def make_decoder(kind, attention=None):
    """A decoder of `kind` around a fresh (or the given) GMMAttention."""
    attention = GMMAttention(num_mixtures=K) if attention is None else attention
    if kind == "bahdanau":
        return BahdanauDecoder(UNITS, attention)  # built-in GRU
    if kind == "luong":
        return LuongDecoder(UNITS, attention, cell_type="lstm")  # input feeding
    if kind == "bahdanau_stacked":
        # The last layer of the stack queries: flat states [h_1 (5), h_2, c_2].
        cell = keras.layers.StackedRNNCells([keras.layers.GRUCell(5), keras.layers.LSTMCell(UNITS)])
        return BahdanauDecoder(None, attention, cell=cell)
    if kind == "luong_stacked":
        cell = keras.layers.StackedRNNCells([keras.layers.LSTMCell(5), keras.layers.GRUCell(UNITS)])
        return LuongDecoder(None, attention, cell=cell)
    if kind == "luong_no_feeding":
        # The attention runs after the recurrence, through its own sequence form.
        return LuongDecoder(None, attention, cell=keras.layers.GRUCell(UNITS), input_feeding=False)
    raise AssertionError(kind)


KINDS = ("bahdanau", "luong", "bahdanau_stacked", "luong_stacked", "luong_no_feeding")
# The model-level tests: one built-in cell, one stack given with `cell=`.
MODEL_KINDS = ("bahdanau", "luong_stacked")


def randomize(layer, seed):
    """Weights from numpy, the same on every backend: the windows move about
    half a position per step and stay inside the source."""
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        values = rng.uniform(-0.6, 0.6, size=weight.shape)
        weight.assign(values.astype(weight.dtype))
    for attention in _gmm_layers(layer):
        # (α̂, β̂, κ̂) biases: importance ~1, width ~1 position, step ~0.6.
        attention.bias.assign(np.repeat([0.0, -0.5, -0.5], K).astype("float32"))
    return layer


def _gmm_layers(layer):
    if isinstance(layer, GMMAttention):
        return [layer]
    if isinstance(layer, keras.Model):
        return [a for sub in layer.layers for a in _gmm_layers(sub)]
    attention = getattr(layer, "attention", None)
    return [attention] if isinstance(attention, GMMAttention) else []


def decoder_inputs(seed=0):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(BATCH, T_DEC, D_EMB)).astype("float32")
    memory = rng.normal(size=(BATCH, T_ENC, D_H)).astype("float32")
    # A full row, a padded one and a fully masked one: (B, T_ENC).
    memory_mask = np.arange(T_ENC)[None, :] < np.array([[T_ENC], [4], [0]])
    return y, memory, memory_mask


def built_decoder(kind, seed=0):
    y, memory, _ = decoder_inputs()
    decoder = make_decoder(kind)
    decoder(y, memory)  # builds it
    return randomize(decoder, seed)


# ------------------------------------------------- decoder: call and step


@pytest.mark.parametrize("kind", KINDS)
def test_teacher_forced_call_equals_step_by_step_decoding(kind):
    y, memory, memory_mask = decoder_inputs()
    decoder = built_decoder(kind)
    outputs, weights, _ = decoder(y, memory, memory_mask=memory_mask)
    state = decoder.get_decode_state(memory, memory_mask=memory_mask)
    assert tuple(state["attention_position"].shape) == (BATCH, K)
    step_outputs, step_weights = [], []
    for t in range(T_DEC):
        output, weight, state = decoder.step(y[:, t], state)
        step_outputs.append(np.asarray(output))
        step_weights.append(np.asarray(weight))
    np.testing.assert_allclose(np.stack(step_outputs, 1), np.asarray(outputs), atol=STEP_TOL)
    np.testing.assert_allclose(np.stack(step_weights, 1), np.asarray(weights), atol=STEP_TOL)
    weights = np.asarray(weights)
    # Not a comparison of zeros: the windows weigh the real source positions.
    assert weights.max() > 0.1
    assert np.all(weights[1, :, 4:] == 0.0) and np.all(weights[2] == 0.0)
    assert np.all(np.isfinite(np.asarray(outputs)))


@pytest.mark.parametrize("kind", ("bahdanau", "luong_no_feeding"))
def test_the_windows_move_forward_at_every_step(kind):
    y, memory, memory_mask = decoder_inputs()
    decoder = built_decoder(kind)
    state = decoder.get_decode_state(memory, memory_mask=memory_mask)
    previous = np.asarray(state["attention_position"])
    np.testing.assert_array_equal(previous, 0.0)
    for t in range(T_DEC):
        _, _, state = decoder.step(y[:, t], state)
        position = np.asarray(state["attention_position"])
        assert np.all(position > previous)
        previous = position


@pytest.mark.parametrize("kind", ("bahdanau", "luong_stacked"))
def test_mixed_float16_decoder_keeps_a_float32_position_and_matches_float32(kind, dtype_policy):
    y, memory, memory_mask = decoder_inputs()
    reference = built_decoder(kind)
    expected, expected_weights, _ = reference(y, memory, memory_mask=memory_mask)
    dtype_policy("mixed_float16")
    decoder = make_decoder(kind)
    decoder(y, memory)
    decoder.set_weights(reference.get_weights())
    outputs, weights, _ = decoder(y, memory, memory_mask=memory_mask)
    assert dtype_of(outputs) == "float16"
    state = decoder.get_decode_state(memory, memory_mask=memory_mask)
    assert dtype_of(state["attention_position"]) == "float32"
    output, _, state = decoder.step(y[:, 0], state)
    assert dtype_of(output) == "float16" and dtype_of(state["attention_position"]) == "float32"
    np.testing.assert_allclose(
        np.asarray(outputs, "float32"), np.asarray(expected), rtol=2e-2, atol=2e-2
    )
    np.testing.assert_allclose(
        np.asarray(weights, "float32"), np.asarray(expected_weights), rtol=2e-2, atol=2e-2
    )


# ------------------------------------------------------------ a whole model


def build_model(kind, seed=0, attention=None, randomized=True):
    """`[source, target_in] → logits`, and its parts for an oracle of our own.

    `randomized`: weights from `randomize` (the same on every backend), the
    padding id never predicted; else Keras' initializers, as for training.
    """
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    source_embedding = keras.layers.Embedding(VOCAB, D_EMB, mask_zero=True)
    memory = keras.layers.GRU(D_H, return_sequences=True)(source_embedding(source))
    target_embedding = keras.layers.Embedding(VOCAB, D_EMB, mask_zero=True)
    decoder = make_decoder(kind, attention)
    outputs, _, _ = decoder(target_embedding(target_in), memory)
    readout = keras.layers.Dense(VOCAB)
    model = keras.Model([source, target_in], readout(outputs))
    if randomized:
        randomize(model, seed)
        bias = readout.bias.numpy().copy()  # a backend may give a read-only view
        bias[PAD] = -10.0  # the padding id is never a prediction
        readout.bias.assign(bias)
    parts = {
        "encoder": keras.Model(source, memory),
        "target_embedding": target_embedding,
        "decoder": decoder,
        "readout": readout,
    }
    return model, parts


def padded_sources(seed=1, lengths=(6, 4, 3)):
    rng = np.random.default_rng(seed)
    source = np.zeros((len(lengths), max(lengths)), "int32")
    for row, length in enumerate(lengths):
        source[row, :length] = rng.integers(2, VOCAB, length)
    return source


def argmax_tokens(parts, source, steps):
    """Greedy tokens (B, steps) by a loop of our own over the decoder's `step`.

    The tokens are not stopped at END: the END id is chosen afterwards.
    """
    memory = parts["encoder"](source)
    mask = source != PAD
    state = parts["decoder"].get_decode_state(memory, memory_mask=mask)
    tokens = np.full((len(source),), START, "int32")
    out = []
    for _ in range(steps):
        output, _, state = parts["decoder"].step(parts["target_embedding"](tokens), state)
        logits = np.asarray(parts["readout"](output), np.float64)  # (B, V)
        top = np.sort(logits, axis=-1)
        assert np.all(top[:, -1] - top[:, -2] > 1e-4), "a near tie: change the seed"
        tokens = logits.argmax(-1).astype("int32")
        out.append(tokens)
    return np.stack(out, 1)


def cut_at(tokens, end_id):
    """Rows cut after their first `end_id`, then PAD."""
    out = np.zeros_like(tokens)
    for row, values in enumerate(tokens):
        hits = np.flatnonzero(values == end_id)
        n = int(hits[0]) + 1 if hits.size else len(values)
        out[row, :n] = values[:n]
    return out


def end_id_for(tokens):
    """The most frequent predicted id but START: some rows end early."""
    counts = np.bincount(tokens.ravel(), minlength=VOCAB)
    counts[[PAD, START]] = -1
    return int(counts.argmax())


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_greedy_equals_an_argmax_loop_over_the_decoder_step(kind):
    model, parts = build_model(kind)
    source = padded_sources()
    max_length = 7
    raw = argmax_tokens(parts, source, max_length)
    end_id = end_id_for(raw)
    expected = cut_at(raw, end_id)
    generator = Seq2SeqGenerator.from_model(model, start_id=START, end_id=end_id)
    tokens = np.asarray(generator.greedy(source, max_length=max_length)["tokens"])
    np.testing.assert_array_equal(tokens, expected)
    assert len({int(n) for n in (expected != PAD).sum(1)}) > 1, "rows end at one step"


def teacher_forced_log_probs(model, source, tokens, lengths):
    """log P(tokens | source) from the model's own logits, in float64."""
    target_in = np.concatenate([np.full((len(tokens), 1), START), tokens[:, :-1]], 1)
    logits = np.asarray(model([source, target_in.astype("int32")]), np.float64)
    logits -= logits.max(-1, keepdims=True)
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_softmax, tokens[:, :, None], -1)[:, :, 0]
    steps = np.arange(tokens.shape[1])[None, :] < lengths[:, None]
    return np.where(steps, picked, 0.0).sum(1)


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_beam_hypotheses_score_their_tokens_as_the_model_does(kind):
    model, parts = build_model(kind)
    source = padded_sources()
    end_id = end_id_for(argmax_tokens(parts, source, 7))
    generator = Seq2SeqGenerator.from_model(model, start_id=START, end_id=end_id)
    beam = generator.beam(source, beam_width=3, max_length=7)
    tokens = np.asarray(beam["tokens"])
    lengths = np.asarray(beam["lengths"])
    expected = teacher_forced_log_probs(model, source, tokens, lengths)
    np.testing.assert_allclose(np.asarray(beam["log_probs"]), expected, atol=1e-4)
    # Width 1 without penalties is greedy search.
    narrow = generator.beam(source, beam_width=1, length_penalty=0.0, max_length=7)
    greedy = generator.greedy(source, max_length=7)
    np.testing.assert_array_equal(np.asarray(narrow["tokens"]), np.asarray(greedy["tokens"]))


def copy_task(n, seed=0):
    """Source: 3 or 4 ids from 3 .. VOCAB-1; target: the source then END (2)."""
    rng = np.random.default_rng(seed)
    source = np.zeros((n, 4), "int32")
    target = np.zeros((n, 5), "int32")
    for row in range(n):
        length = int(rng.integers(3, 5))
        source[row, :length] = rng.integers(3, VOCAB, length)
        target[row, :length] = source[row, :length]
        target[row, length] = 2
    target_in = np.concatenate([np.full((n, 1), START), target[:, :-1]], 1).astype("int32")
    return [source, target_in], target


def copy_loss(model, inputs, target):
    """The mean cross-entropy of the real target steps, in float64, from the
    model's logits (the steps whose input is not padding)."""
    logits = np.asarray(model(inputs), np.float64)  # (B, T, V)
    logits -= logits.max(-1, keepdims=True)
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_softmax, target[:, :, None], -1)[:, :, 0]
    real = inputs[1] != PAD
    return float(-picked[real].mean())


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_fit_reduces_the_loss_on_a_copy_task(kind):
    keras.utils.set_random_seed(0)
    model, _ = build_model(kind, randomized=False)
    model.compile(
        keras.optimizers.Adam(0.02),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    inputs, target = copy_task(64)
    before = copy_loss(model, inputs, target)
    model.fit(inputs, target, batch_size=16, epochs=5, verbose=0, shuffle=False)
    after = copy_loss(model, inputs, target)
    assert np.isfinite(after) and after < 0.8 * before, (before, after)


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_keras_file_round_trip_gives_identical_outputs(kind, tmp_path):
    model, _ = build_model(kind)
    inputs, _ = copy_task(5, seed=2)
    expected = np.asarray(model.predict(inputs, verbose=0))
    path = tmp_path / "gmm.keras"
    model.save(path)
    keras.backend.clear_session()
    loaded = keras.saving.load_model(path)
    attention = [layer for layer in loaded.layers if hasattr(layer, "attention")][0].attention
    assert type(attention) is GMMAttention and attention.num_mixtures == K
    np.testing.assert_array_equal(np.asarray(loaded.predict(inputs, verbose=0)), expected)


# ------------------------------------------------------------- the TFLite model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A Bahdanau decoder's model (docs/custom_attention.md exports a Luong
    decoder with a stack of cells), with greedy and beam search."""
    from keras_attention.export import export_tflite

    model, parts = build_model("bahdanau")
    source = padded_sources()
    end_id = end_id_for(argmax_tokens(parts, source, 7))
    generator = Seq2SeqGenerator.from_model(model, start_id=START, end_id=end_id)
    path = tmp_path_factory.mktemp("tflite") / "gmm.tflite"
    export_tflite(generator, path, beam_width=3)
    # Single sources of their real lengths, as an app feeds them.
    singles = [row[row != PAD][None, :] for row in source]
    return generator, path, singles


def _runner(path, signature):
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_path=str(path)).get_signature_runner(signature)


@pytest.mark.tensorflow
def test_tflite_model_has_builtin_operators_only(exported):
    from keras_attention.export import non_builtin_operators
    from keras_attention.export import tflite_operators

    _, path, _ = exported
    assert non_builtin_operators(path) == {}
    assert {"WHILE", "EXP"} <= set(tflite_operators(path))


@pytest.mark.tensorflow
def test_tflite_generate_equals_keras_greedy(exported):
    generator, path, singles = exported
    generate = _runner(path, "generate")
    for one in singles:
        lite = generate(source=one)
        keras_result = generator.greedy(one)
        np.testing.assert_array_equal(lite["tokens"], np.asarray(keras_result["tokens"]))
        np.testing.assert_allclose(
            lite["attention"], np.asarray(keras_result["attention"]), atol=1e-4
        )


@pytest.mark.tensorflow
def test_tflite_generate_beam_equals_keras_beam(exported):
    generator, path, singles = exported
    generate_beam = _runner(path, "generate_beam")
    for one in singles:
        lite = generate_beam(source=one)
        keras_result = generator.beam(one, beam_width=3)
        np.testing.assert_array_equal(lite["tokens"], np.asarray(keras_result["tokens"]))


# ------------------------------------------------ the classes of the page


def page_namespace():
    """The page's class definitions, run as the docs tests run them."""
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    namespace = {"__name__": "custom_attention_page"}
    for name in ("class MyGMMAttention(", "class MyNoisyGMMAttention("):
        (block,) = [b for b in blocks if name in b]
        exec(compile(block, f"{PAGE.name}: {name}", "exec"), namespace)
    return namespace


def test_the_pages_mechanism_equals_gmm_attention():
    mine = page_namespace()["MyGMMAttention"](num_mixtures=K)
    shipped = GMMAttention(num_mixtures=K)
    rng = np.random.default_rng(4)
    queries = rng.normal(size=(BATCH, T_DEC, UNITS)).astype("float32")
    _, memory, memory_mask = decoder_inputs()
    shipped(queries, memory)
    randomize(shipped, 3)
    mine(queries, memory)
    mine.set_weights(shipped.get_weights())
    expected = shipped(queries, memory, value_mask=memory_mask, return_attention_scores=True)
    got = mine(queries, memory, value_mask=memory_mask, return_attention_scores=True)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)


def test_the_pages_noisy_mechanism_draws_before_the_loop_and_trains():
    noisy = page_namespace()["MyNoisyGMMAttention"](num_mixtures=K, stddev=0.1, seed=3)
    model, _ = build_model("luong_stacked", attention=noisy)
    assert noisy.step_noise((T_DEC, BATCH, T_ENC), training=False) is None
    draws = noisy.step_noise((T_DEC, BATCH, T_ENC), training=True)
    assert tuple(draws.shape) == (T_DEC, BATCH, UNITS)  # (T_dec, batch, d_q)
    model.compile(
        keras.optimizers.Adam(0.02),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    inputs, target = copy_task(16)
    # Compiled (XLA on JAX), the draws happen before the loop or not at all.
    history = model.fit(inputs, target, batch_size=16, epochs=1, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    # Inference draws nothing: two calls give the same outputs.
    first = np.asarray(model(inputs, training=False))
    np.testing.assert_array_equal(np.asarray(model(inputs, training=False)), first)


# ------------------------------- no silent breach of the contract at run time


@keras.saving.register_keras_serializable(package="test_custom_attention")
class ForgetfulAttention(keras_attention.BaseAttention):
    """A dot score and a softmax over every key: `step_weights` forgets the mask."""

    def build_score(self, query_dim, key_dim):
        self.kernel = self.add_weight(name="kernel", shape=(query_dim, key_dim))

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        projected = ops.matmul(query, ops.cast(self.kernel, query.dtype))  # (B, d_k)
        scores = ops.einsum("bd,bvd->bv", projected, processed_keys)  # (B, T_v)
        return ops.softmax(scores, axis=-1), {}  # no value_mask: weight on padding


@pytest.mark.parametrize("kind", ("bahdanau", "luong"))
def test_a_mechanism_that_forgets_the_mask_puts_no_weight_on_padding(kind):
    y, memory, memory_mask = decoder_inputs()
    decoder = make_decoder(kind, ForgetfulAttention())
    outputs, weights, _ = decoder(y, memory, memory_mask=memory_mask)
    weights = np.asarray(weights)  # (B, T_dec, T_enc)
    # Its softmax puts weight on every key: the base zeroes the padded ones.
    assert np.all(weights[1, :, 4:] == 0.0) and np.all(weights[2] == 0.0)
    assert np.all(weights[0] > 0.0) and np.all(weights[1, :, :4] > 0.0)
    # What the padding holds reaches nothing: NaN, inf and large values there.
    hostile = memory.copy()
    hostile[1, 4:] = np.array([np.nan, np.inf])[:, None]  # (T_enc - 4, D_H)
    hostile[2] = 1e30
    again, again_weights, _ = decoder(y, hostile, memory_mask=memory_mask)
    np.testing.assert_array_equal(np.asarray(again), np.asarray(outputs))
    np.testing.assert_array_equal(np.asarray(again_weights), weights)
    # Step by step, as the generator decodes, the same zeros.
    state = decoder.get_decode_state(hostile, memory_mask=memory_mask)
    for t in range(T_DEC):
        _, step_weights, state = decoder.step(y[:, t], state)
        assert np.all(np.asarray(step_weights)[1, 4:] == 0.0)
        assert np.all(np.asarray(step_weights)[2] == 0.0)


@keras.saving.register_keras_serializable(package="test_custom_attention")
class DrawingAttention(GMMAttention):
    """GMM attention whose `step_weights` draws, by `draw`: "seed_generator"
    (`keras.random.uniform` with the layer's SeedGenerator), "dropout" (a
    seeded Dropout layer), "unseeded_dropout" (a Dropout layer without a
    seed: on PyTorch, torch's own generator) or "global" (`seed=None`: Keras'
    global SeedGenerator); when `in_training_only`, only with training=True.
    `drawing` switches the draw on and off."""

    def __init__(self, draw="seed_generator", in_training_only=False, **kwargs):
        super().__init__(**kwargs)
        self.draw = draw
        self.in_training_only = in_training_only
        self.drawing = True
        self.seed_generator = keras.random.SeedGenerator(1)
        self.noise_dropout = keras.layers.Dropout(0.5, seed=2)
        self.unseeded_dropout = keras.layers.Dropout(0.5)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        if self.drawing and (training or not self.in_training_only):
            if self.draw == "seed_generator":
                query = query + keras.random.uniform(ops.shape(query), seed=self.seed_generator)
            elif self.draw == "global":
                query = query + keras.random.uniform(ops.shape(query))
            elif self.draw == "dropout":
                query = self.noise_dropout(query, training=True)
            else:
                query = self.unseeded_dropout(query, training=True)
        return super().step_weights(query, processed_keys, state, value_mask, training, noise)


DRAWS = ("seed_generator", "dropout", "unseeded_dropout", "global")
# In a loop traced by JAX (a call's scan, `fit`), Keras itself refuses a draw
# with seed=None, before the probe sees it.
TRACED_DRAWS = ("seed_generator", "dropout", "unseeded_dropout")
DRAW_ERROR = r"DrawingAttention\.step_weights drew random numbers.*step_noise"


@pytest.mark.parametrize("draw", DRAWS)
def test_a_random_draw_in_step_weights_is_an_error_when_the_layer_is_built(draw):
    y, memory, memory_mask = decoder_inputs()
    decoder = make_decoder("bahdanau", DrawingAttention(draw, num_mixtures=K))
    with pytest.raises(RandomDrawInStepError, match=DRAW_ERROR):
        decoder(y, memory, memory_mask=memory_mask)


@pytest.mark.parametrize("draw", TRACED_DRAWS)
def test_a_random_draw_in_step_weights_is_an_error_in_a_layer_call(draw):
    y, memory, memory_mask = decoder_inputs()
    attention = DrawingAttention(draw, num_mixtures=K)
    attention.drawing = False  # built without a draw...
    decoder = make_decoder("bahdanau", attention)
    decoder.build(y.shape, memory.shape)
    attention.drawing = True  # ...then called with one
    with pytest.raises(RandomDrawInStepError, match=DRAW_ERROR):
        decoder(y, memory, memory_mask=memory_mask)


@pytest.mark.parametrize("draw", TRACED_DRAWS)
def test_a_random_draw_in_step_weights_in_training_is_an_error_in_fit(draw):
    attention = DrawingAttention(draw, in_training_only=True, num_mixtures=K)
    model, _ = build_model("bahdanau", attention=attention, randomized=False)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    inputs, target = copy_task(8)
    with pytest.raises(RandomDrawInStepError, match=DRAW_ERROR):
        model.fit(inputs, target, batch_size=8, epochs=1, verbose=0)


@pytest.mark.tensorflow
@pytest.mark.parametrize("draw", ("seed_generator", "dropout"))
def test_a_random_draw_in_step_weights_is_an_error_at_export(tmp_path, draw):
    from keras_attention.export import export_tflite

    attention = DrawingAttention(draw, num_mixtures=K)
    attention.drawing = False  # built and run without a draw...
    model, _ = build_model("bahdanau", attention=attention)
    generator = Seq2SeqGenerator.from_model(model, start_id=START, end_id=2)
    generator.greedy(copy_task(2)[0][0], max_length=3)
    attention.drawing = True  # ...then exported with one
    with pytest.raises(RandomDrawInStepError, match=DRAW_ERROR):
        export_tflite(generator, tmp_path / "drawing.tflite")


@keras.saving.register_keras_serializable(package="test_custom_attention")
class MisshapenGMMAttention(GMMAttention):
    """GMM attention whose kernel has one row too many for the query."""

    def build_score(self, query_dim, key_dim):
        super().build_score(query_dim + 1, key_dim)


def test_a_weight_of_the_wrong_shape_names_build_score_and_the_expected_size():
    y, memory, memory_mask = decoder_inputs()
    decoder = make_decoder("bahdanau", MisshapenGMMAttention(num_mixtures=K))
    expected = (
        rf"MisshapenGMMAttention\.build_score\(query_dim={UNITS}, key_dim={D_H}\).*"
        rf"expects d_q={UNITS}.*kernel \({UNITS + 1}, {3 * K}\)"
    )
    with pytest.raises(ValueError, match=expected):
        decoder(y, memory, memory_mask=memory_mask)
