"""`BahdanauDecoder` and `LuongDecoder` against float64 numpy references.

The decoder oracle below is written from the papers' equations and Keras' cell
equations, one batch element and one step at a time; the attention inside it is
`reference.layer_reference`, the numpy oracle of the attention layers. Weights
are read from the built layers and set to random values first, so that a bias
initialized to 0 cannot hide a missing term.

    GRU (reset_after)  x̂ = x K + b_in, ĥ = h R + b_rec, columns [z, r, h̃]
                       z = σ(x̂_z + ĥ_z), r = σ(x̂_r + ĥ_r)
                       h̃ = tanh(x̂_h + r ⊙ ĥ_h), h' = z ⊙ h + (1 - z) ⊙ h̃
    LSTM               g = x K + h R + b, columns [i, f, c, o]
                       c' = σ(g_f) ⊙ c + σ(g_i) ⊙ tanh(g_c), h' = σ(g_o) ⊙ tanh(c')
    Bahdanau           c_t, a_t = attend(s_{t-1}); s_t = cell([y_{t-1}; c_t], s_{t-1})
                       o_t = tanh(W_o [s_t; c_t; y_{t-1}] + b_o)
    conditional        s'_t = cell(y_{t-1}, s_{t-1}); c_t, a_t = attend(s'_t)
                       s_t = attended_cell(c_t, s'_t); o_t as Bahdanau
    Luong              s_t = cell([y_{t-1}; h̃_{t-1}], s_{t-1})  (h̃ with input feeding)
                       c_t, a_t = attend(s_t); h̃_t = tanh(W_c [c_t; s_t])
    padded target step zero output and weights; state (and h̃) carried over
"""

import re

import keras
import numpy as np
import pytest
from autodiff import gradients
from keras import ops
from reference import ATOL
from reference import RTOL
from reference import layer_reference
from reference import make_layer

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import LuongDecoder
from keras_attention import OverriddenAttention
from keras_attention.decoders.overridden_decoder import overridden_decoder

BATCH = 2
T_DEC = 4  # target steps, != T_ENC
T_ENC = 6  # source steps
D_EMB = 3  # target embedding size
D_H = 5  # memory (encoder output) size
UNITS = 4  # decoder state size
OUT = 7  # output_units, != UNITS so a swapped size fails to build

# A few float32 steps through the recurrence accumulate a little more rounding
# than one attention call: the oracle's tolerances, with some room for that.
REC_RTOL = 2 * RTOL
REC_ATOL = 5 * ATOL

DECODERS = {
    "bahdanau": (BahdanauDecoder, {}),
    "conditional": (BahdanauDecoder, {"conditional": True}),
    "luong": (LuongDecoder, {"input_feeding": True}),
    "luong_no_feeding": (LuongDecoder, {"input_feeding": False}),
}
ATTENTIONS = ("bahdanau", "luong_general")  # variants of `reference.VARIANTS`
CELLS = ("gru", "lstm")


def make_decoder(kind, cell_type="gru", attention="bahdanau", **kwargs):
    cls, options = DECODERS[kind]
    return cls(
        UNITS,
        make_layer(attention),
        cell_type=cell_type,
        output_units=OUT,
        **{**options, **kwargs},
    )


def randomize(layer, rng):
    """Gives every weight of `layer` random values of either sign."""
    for weight in layer.weights:
        values = rng.uniform(0.2, 0.8, size=weight.shape)
        values *= rng.choice([-1.0, 1.0], size=weight.shape)
        weight.assign(values.astype(weight.dtype))
    return layer


def make_inputs(rng, t_dec=T_DEC, t_enc=T_ENC, batch=BATCH):
    return {
        "target_embeddings": rng.normal(size=(batch, t_dec, D_EMB)).astype("float32"),
        "memory": rng.normal(size=(batch, t_enc, D_H)).astype("float32"),
    }


def make_state(cell_type, rng, batch=BATCH):
    states = [
        (0.5 * rng.normal(size=(batch, UNITS))).astype("float32")
        for _ in range(1 if cell_type == "gru" else 2)
    ]
    return states[0] if cell_type == "gru" else states


def memory_mask(batch=BATCH, t_enc=T_ENC):
    """Row 0 complete, row 1 with its last two source positions padded."""
    mask = np.ones((batch, t_enc), bool)
    mask[1, -2:] = False
    return mask


def built_decoder(kind, cell_type="gru", attention="bahdanau", rng=None, **kwargs):
    rng = np.random.default_rng(0) if rng is None else rng
    decoder = make_decoder(kind, cell_type, attention, **kwargs)
    decoder(**make_inputs(rng))
    return randomize(decoder, rng)


def as_tuple(state):
    return tuple(state) if isinstance(state, (list, tuple)) else (state,)


# ------------------------------------------------------------ numpy oracle


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_cell(cell_type, x, state, kernel, recurrent_kernel, bias):
    """One Keras GRUCell(reset_after=True) / LSTMCell step on vectors."""
    u = recurrent_kernel.shape[0]
    if cell_type == "gru":
        (h,) = state
        x_hat = x @ kernel + bias[0]  # (3u,) input part, input bias
        h_hat = h @ recurrent_kernel + bias[1]  # (3u,) recurrent part, its bias
        z = _sigmoid(x_hat[:u] + h_hat[:u])
        r = _sigmoid(x_hat[u : 2 * u] + h_hat[u : 2 * u])
        candidate = np.tanh(x_hat[2 * u :] + r * h_hat[2 * u :])
        return (z * h + (1.0 - z) * candidate,)
    h, c = state
    g = x @ kernel + h @ recurrent_kernel + bias  # (4u,)
    i = _sigmoid(g[:u])
    f = _sigmoid(g[u : 2 * u])
    c = f * c + i * np.tanh(g[2 * u : 3 * u])
    h = _sigmoid(g[3 * u :]) * np.tanh(c)
    return (h, c)


def np_attend(attention, query, memory, mask, override=None):
    """(context (d_h,), weights (T_enc,)) for one query vector.

    `override`: None, or the weights to use instead of the attention's.
    """
    if override is not None:
        weights = np.asarray(override, np.float64)
        return weights @ memory, weights
    context, weights = layer_reference(attention, query[None], memory[None], value_mask=mask[None])
    return context[0], weights[0]


def decoder_reference(
    decoder,
    target_embeddings,
    memory,
    initial_state=None,
    target_mask=None,
    memory_mask=None,
    override=None,
    query="paper",
):
    """The float64 oracle of `decoder(...)`: (outputs, weights, final state tuple).

    override: None, or "uniform" (the weights of
        `OverriddenAttention(attention, "uniform")`).
    query: "paper" for each paper's convention; "swapped" queries the other
        state (s_t for Bahdanau, s_{t-1} for Luong and for the conditional
        decoder, whose paper queries s'_t), to show the oracle tells them apart.
    """
    y = np.asarray(target_embeddings, np.float64)
    memory = np.asarray(memory, np.float64)
    batch, steps, _ = y.shape
    t_enc = memory.shape[1]
    cell_type = decoder.cell_type
    n_states = 1 if cell_type == "gru" else 2
    if initial_state is None:
        initial = [np.zeros((batch, decoder.units))] * n_states
    else:
        initial = [np.asarray(s, np.float64) for s in as_tuple(initial_state)]
    if target_mask is None:
        target_mask = np.ones((batch, steps), bool)
    if memory_mask is None:
        memory_mask = np.ones((batch, t_enc), bool)
    cell = [
        np.asarray(w.numpy(), np.float64)
        for w in (decoder.cell.kernel, decoder.cell.recurrent_kernel, decoder.cell.bias)
    ]
    bahdanau = isinstance(decoder, BahdanauDecoder)
    conditional = bahdanau and decoder.conditional
    if conditional:
        attended_cell = [
            np.asarray(w.numpy(), np.float64)
            for w in (
                decoder.attended_cell.kernel,
                decoder.attended_cell.recurrent_kernel,
                decoder.attended_cell.bias,
            )
        ]
    if bahdanau:
        w_out = np.asarray(decoder.deep_output.kernel.numpy(), np.float64)
        b_out = np.asarray(decoder.deep_output.bias.numpy(), np.float64)
    else:
        w_out = np.asarray(decoder.attentional.kernel.numpy(), np.float64)
    out_units = w_out.shape[1]
    outputs = np.zeros((batch, steps, out_units))
    weights = np.zeros((batch, steps, t_enc))
    finals = [np.zeros((batch, decoder.units)) for _ in range(n_states)]
    for b in range(batch):
        state = tuple(s[b] for s in initial)
        feed = np.zeros(out_units)  # h̃_0 (Luong input feeding)
        previous_context = np.zeros(memory.shape[-1])  # c_0 ("swapped" Bahdanau)
        mask = memory_mask[b]
        for t in range(steps):
            if not target_mask[b, t]:
                continue  # zero output and weights; state and h̃ carried over
            # "uniform": 1 / n on the n unmasked keys.
            fixed = None if override is None else mask / max(mask.sum(), 1)

            def attend(q, fixed=fixed, mask=mask, b=b):
                return np_attend(decoder.attention, q, memory[b], mask, fixed)

            if conditional:
                if query == "paper":
                    middle = np_cell(cell_type, y[b, t], state, *cell)  # s'_t
                    context, a = attend(middle[0])  # query s'_t
                else:
                    context, a = attend(state[0])  # query s_{t-1}
                    middle = np_cell(cell_type, y[b, t], state, *cell)
                state = np_cell(cell_type, context, middle, *attended_cell)
                deep = np.concatenate([state[0], context, y[b, t]])
                out = np.tanh(deep @ w_out + b_out)
            elif bahdanau:
                if query == "paper":
                    context, a = attend(state[0])  # query s_{t-1}
                    state = np_cell(cell_type, np.concatenate([y[b, t], context]), state, *cell)
                else:
                    state = np_cell(
                        cell_type,
                        np.concatenate([y[b, t], previous_context]),
                        state,
                        *cell,
                    )
                    context, a = attend(state[0])  # query s_t
                    previous_context = context
                deep = np.concatenate([state[0], context, y[b, t]])
                out = np.tanh(deep @ w_out + b_out)
            else:
                x = np.concatenate([y[b, t], feed]) if decoder.input_feeding else y[b, t]
                if query == "paper":
                    state = np_cell(cell_type, x, state, *cell)
                    context, a = attend(state[0])  # query s_t
                else:
                    context, a = attend(state[0])  # query s_{t-1}
                    state = np_cell(cell_type, x, state, *cell)
                out = np.tanh(np.concatenate([context, state[0]]) @ w_out)
                feed = out
            outputs[b, t] = out
            weights[b, t] = a
        for final, s in zip(finals, state, strict=True):
            final[b] = s
    return outputs, weights, tuple(finals)


def assert_matches(result, expected, rtol=REC_RTOL, atol=REC_ATOL):
    outputs, weights, state = result
    np.testing.assert_allclose(outputs, expected[0], rtol=rtol, atol=atol)
    np.testing.assert_allclose(weights, expected[1], rtol=rtol, atol=atol)
    for got, want in zip(as_tuple(state), expected[2], strict=True):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ oracle


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("cell_type", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_decoder_matches_numpy_reference(kind, cell_type, attention):
    rng = np.random.default_rng(1)
    decoder = built_decoder(kind, cell_type, attention, rng)
    inputs = make_inputs(rng)
    initial_state = make_state(cell_type, rng)
    target_mask = np.ones((BATCH, T_DEC), bool)
    target_mask[1, 1] = target_mask[1, -1] = False  # a hole and a padded tail
    mask = memory_mask()
    result = decoder(
        **inputs,
        initial_state=initial_state,
        target_embeddings_mask=target_mask,
        memory_mask=mask,
    )
    expected = decoder_reference(
        decoder,
        **inputs,
        initial_state=initial_state,
        target_mask=target_mask,
        memory_mask=mask,
    )
    assert result[0].shape == (BATCH, T_DEC, OUT)
    assert result[1].shape == (BATCH, T_DEC, T_ENC)
    assert_matches(result, expected)


@pytest.mark.parametrize("kind", list(DECODERS))
def test_decoder_follows_its_papers_query_convention(kind):
    # Bahdanau queries s_{t-1}, Luong s_t: the decoder must match its paper's
    # oracle and differ clearly from the oracle that queries the other state.
    rng = np.random.default_rng(2)
    decoder = built_decoder(kind, "gru", "bahdanau", rng)
    inputs = make_inputs(rng)
    initial_state = make_state("gru", rng)
    result = decoder(**inputs, initial_state=initial_state)
    paper = decoder_reference(decoder, **inputs, initial_state=initial_state)
    swapped = decoder_reference(decoder, **inputs, initial_state=initial_state, query="swapped")
    assert_matches(result, paper)
    gap = np.abs(np.asarray(result[1]) - swapped[1]).max()
    assert gap > 100 * REC_ATOL, "the weights also match the other convention"
    with pytest.raises(AssertionError):
        assert_matches(result, swapped)


# ---------------------------------------------------------- step by step


@pytest.mark.parametrize("cell_type", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_step_by_step_decoding_equals_teacher_forced_call(kind, cell_type):
    rng = np.random.default_rng(3)
    decoder = built_decoder(kind, cell_type, "luong_general", rng)
    inputs = make_inputs(rng)
    initial_state = make_state(cell_type, rng)
    mask = memory_mask()
    outputs, weights, state = decoder(**inputs, initial_state=initial_state, memory_mask=mask)
    decode_state = decoder.get_decode_state(
        inputs["memory"], initial_state=initial_state, memory_mask=mask
    )
    for t in range(T_DEC):
        output, step_weights, decode_state = decoder.step(
            inputs["target_embeddings"][:, t], decode_state
        )
        np.testing.assert_allclose(output, outputs[:, t], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(step_weights, weights[:, t], rtol=1e-5, atol=1e-5)
    final = (
        (decode_state["h"],)
        if cell_type == "gru"
        else (
            decode_state["h"],
            decode_state["c"],
        )
    )
    for got, want in zip(final, as_tuple(state), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", list(DECODERS))
def test_single_step_call_equals_step(kind):
    rng = np.random.default_rng(4)
    decoder = built_decoder(kind, "lstm", "bahdanau", rng)
    inputs = make_inputs(rng, t_dec=1)
    outputs, weights, _ = decoder(**inputs)
    output, step_weights, _ = decoder.step(
        inputs["target_embeddings"][:, 0], decoder.get_decode_state(inputs["memory"])
    )
    np.testing.assert_allclose(output, outputs[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(step_weights, weights[:, 0], rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------- the cell


@pytest.mark.parametrize("cell_type", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_cell_update_equals_keras_cell(kind, cell_type):
    rng = np.random.default_rng(5)
    decoder = built_decoder(kind, cell_type, "bahdanau", rng)
    cell_input_dim = decoder.cell.kernel.shape[0]
    x = rng.normal(size=(BATCH, cell_input_dim)).astype("float32")
    state = as_tuple(make_state(cell_type, rng))
    cells = decoder._cells  # the decoder's CellRunner
    projected = cells.input_projection(x[:, :D_EMB])
    if cell_input_dim > D_EMB:
        projected = projected + cells.extra_projection(x[:, D_EMB:])
    got = cells.update(projected, state)
    _, want = decoder.cell(x, list(state))
    assert len(got) == len(want) == len(state)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------- masks


def encoder_decoder(kind, cell_type="gru", vocab=11, embed=D_EMB):
    """Token ids → embeddings (mask_zero) → BiGRU → decoder → vocabulary logits.

    Returns the model (logits and weights) and its layers by name.
    """
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    source_embedding = keras.layers.Embedding(vocab, embed, mask_zero=True)
    encoder = keras.layers.Bidirectional(
        keras.layers.GRU(3, return_sequences=True), name="encoder"
    )  # memory size 2·3 = 6
    target_embedding = keras.layers.Embedding(vocab, embed, mask_zero=True)
    decoder = make_decoder(kind, cell_type, "bahdanau")
    projection = keras.layers.Dense(vocab, name="logits")
    memory = encoder(source_embedding(source))
    outputs, weights, _ = decoder(target_embedding(target), memory)
    model = keras.Model([source, target], [projection(outputs), weights])
    layers = {
        "source_embedding": source_embedding,
        "encoder": encoder,
        "target_embedding": target_embedding,
        "decoder": decoder,
    }
    return model, layers


def token_batch(rng, vocab=11):
    source = rng.integers(1, vocab, size=(3, 7)).astype("int32")
    source[1, 5:] = 0
    source[2, 3:] = 0
    target = rng.integers(1, vocab, size=(3, 5)).astype("int32")
    target[1, 4:] = 0
    target[2, 2:] = 0
    return source, target


@pytest.mark.parametrize("kind", list(DECODERS))
def test_memory_mask_from_encoder_equals_explicit_mask(kind):
    rng = np.random.default_rng(6)
    model, layers = encoder_decoder(kind)
    source, target = token_batch(rng)
    _, weights = model([source, target])
    source_mask = source != 0
    target_mask = target != 0
    memory = np.asarray(layers["encoder"](layers["source_embedding"](source), mask=source_mask))
    embeddings = np.asarray(layers["target_embedding"](target))
    decoder = layers["decoder"]
    explicit = decoder(
        embeddings,
        memory,
        target_embeddings_mask=target_mask,
        memory_mask=source_mask,
    )
    unmasked = decoder(embeddings, memory, target_embeddings_mask=target_mask)
    np.testing.assert_allclose(weights, explicit[1], rtol=1e-5, atol=1e-6)
    # The mask matters: without it padded source positions get weight.
    assert np.abs(np.asarray(unmasked[1]) - np.asarray(explicit[1])).max() > 1e-3
    padded = ~source_mask[:, None, :] & target_mask[:, :, None]
    assert np.all(np.asarray(weights)[np.broadcast_to(padded, weights.shape)] == 0)


@pytest.mark.parametrize("cell_type", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_masked_memory_gets_zero_weight(kind, cell_type):
    rng = np.random.default_rng(7)
    decoder = built_decoder(kind, cell_type, "luong_general", rng)
    mask = memory_mask()
    _, weights, _ = decoder(**make_inputs(rng), memory_mask=mask)
    weights = np.asarray(weights)
    assert np.all(weights[1, :, ~mask[1]] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("kind", list(DECODERS))
def test_fully_masked_memory_row_gives_zero_weights_and_finite_outputs(kind):
    rng = np.random.default_rng(8)
    decoder = built_decoder(kind, "gru", "bahdanau", rng)
    mask = memory_mask()
    mask[1] = False
    inputs = make_inputs(rng)
    outputs, weights, state = decoder(**inputs, memory_mask=mask)
    assert np.all(np.asarray(weights)[1] == 0.0)
    assert np.all(np.isfinite(np.asarray(outputs))) and np.all(np.isfinite(np.asarray(state)))
    # The empty memory row contributes a zero context.
    assert_matches(
        (outputs, weights, state),
        decoder_reference(decoder, **inputs, memory_mask=mask),
    )


@pytest.mark.parametrize("cell_type", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_padded_target_steps_give_zeros_and_carry_the_state(kind, cell_type):
    rng = np.random.default_rng(9)
    decoder = built_decoder(kind, cell_type, "bahdanau", rng)
    inputs = make_inputs(rng)
    initial_state = make_state(cell_type, rng)
    target_mask = np.ones((BATCH, T_DEC), bool)
    target_mask[0, 1] = False  # a hole
    target_mask[1, 2:] = False  # a padded tail
    outputs, weights, state = decoder(
        **inputs, initial_state=initial_state, target_embeddings_mask=target_mask
    )
    outputs, weights = np.asarray(outputs), np.asarray(weights)
    assert np.all(outputs[~target_mask] == 0.0)
    assert np.all(weights[~target_mask] == 0.0)
    # Every row equals the same row decoded without its padded steps.
    for b in range(BATCH):
        keep = target_mask[b]
        row_state = [s[b : b + 1] for s in as_tuple(initial_state)]
        short = decoder(
            inputs["target_embeddings"][b : b + 1, keep],
            inputs["memory"][b : b + 1],
            initial_state=row_state if cell_type == "lstm" else row_state[0],
        )
        np.testing.assert_allclose(outputs[b, keep], short[0][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(weights[b, keep], short[1][0], rtol=1e-5, atol=1e-6)
        for got, want in zip(as_tuple(state), as_tuple(short[2]), strict=True):
            np.testing.assert_allclose(got[b], want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", list(DECODERS))
def test_target_mask_from_embedding_reaches_outputs(kind):
    rng = np.random.default_rng(10)
    model, _ = encoder_decoder(kind)
    source, target = token_batch(rng)
    logits, weights = model([source, target])
    # The target mask travels on to the logits, where the loss ignores the padding.
    np.testing.assert_array_equal(getattr(logits, "_keras_mask", None), target != 0)
    logits = np.asarray(logits)
    padded = target == 0
    assert np.all(np.asarray(weights)[padded] == 0.0)
    # The logits of padded steps are the projection's bias alone.
    bias = model.get_layer("logits").bias.numpy()
    np.testing.assert_allclose(logits[padded], np.broadcast_to(bias, logits[padded].shape))


# -------------------------------------------------------------- training


# Each fit traces a training step through the encoder and the decoder's loop
# (and XLA compiles it): CI runs one XLA and one graph fit, both loops with the
# attention inside; the other combinations are marked slow.
TRAINING_CASES = [
    pytest.param("bahdanau", True, id="bahdanau-xla"),
    pytest.param("luong", False, id="luong-graph"),
    pytest.param("bahdanau", False, id="bahdanau-graph", marks=pytest.mark.slow),
    pytest.param("luong", True, id="luong-xla", marks=pytest.mark.slow),
    pytest.param("luong_no_feeding", False, id="luong_no_feeding-graph", marks=pytest.mark.slow),
    pytest.param("luong_no_feeding", True, id="luong_no_feeding-xla", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("kind, jit_compile", TRAINING_CASES)
def test_model_trains_and_loss_decreases(kind, jit_compile):
    if jit_compile and keras.backend.backend() == "torch":
        pytest.skip("jit_compile on PyTorch is torch.compile (minutes on a CPU), not XLA")
    if not jit_compile and keras.backend.backend() == "jax":
        pytest.skip("jit_compile=False on JAX runs eagerly, not as a graph")
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(11)
    model, _ = encoder_decoder(kind, "lstm" if kind == "luong" else "gru")
    source, target = token_batch(rng)
    labels = np.roll(target, -1, axis=1)
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True), None],
        jit_compile=jit_compile,
    )
    # Built here, the optimizer creates no variable inside the training step,
    # which TensorFlow would otherwise trace twice.
    model.optimizer.build(model.trainable_variables)
    history = model.fit([source, target], labels, batch_size=3, epochs=5, verbose=0, shuffle=False)
    losses = np.array(history.history["loss"])
    assert np.all(np.isfinite(losses)), losses
    assert np.all(np.diff(losses) < 0), losses
    assert losses[-1] < 0.9 * losses[0], losses


@pytest.mark.parametrize("kind", list(DECODERS))
def test_gradients_reach_the_attention_weights(kind):
    rng = np.random.default_rng(12)
    model, layers = encoder_decoder(kind)
    source, target = token_batch(rng)
    labels = np.roll(target, -1, axis=1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    attention = layers["decoder"].attention.trainable_weights
    assert attention

    def loss():
        logits, _ = model([source, target], training=True)
        return loss_fn(labels, logits)

    _, grads = gradients(loss, variables=attention)
    for weight, grad in zip(attention, grads, strict=True):
        assert grad is not None, weight.path
        assert np.all(np.isfinite(grad)), weight.path
        assert np.abs(np.asarray(grad)).max() > 0.0, weight.path


# On JAX and PyTorch, Keras computes some float64 ops in float32 (`ops.tanh`:
# `keras.backend.result_type` maps float64 to float32 there), too coarse for
# these differences.
@pytest.mark.tensorflow
@pytest.mark.parametrize("kind", list(DECODERS))
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_gradients_match_finite_differences(kind, attention, dtype_policy):
    # In float64, central differences are accurate to ~1e-9: a term dropped
    # from the backward pass (a stop_gradient, a state or h̃ not carried, a
    # mask applied on one side only) shows up far above that.
    dtype_policy("float64")
    rng = np.random.default_rng(21)
    decoder = built_decoder(kind, attention=attention, rng=rng)
    inputs = {k: v.astype("float64") for k, v in make_inputs(rng).items()}
    state = make_state("gru", rng).astype("float64")
    target_mask = np.ones((BATCH, T_DEC), bool)
    target_mask[1, -1] = False
    probes = [
        rng.normal(size=shape)
        for shape in ((BATCH, T_DEC, OUT), (BATCH, T_DEC, T_ENC), (BATCH, UNITS))
    ]

    def loss():
        outputs = decoder(
            **inputs,
            initial_state=state,
            target_embeddings_mask=target_mask,
            memory_mask=memory_mask(),
        )
        return sum(ops.sum(x * p) for x, p in zip(outputs, probes, strict=True))

    _, grads = gradients(loss, variables=decoder.trainable_weights)
    step = 1e-6
    for weight, grad in zip(decoder.trainable_weights, grads, strict=True):
        assert grad is not None, weight.path
        grad = grad.ravel()
        values = np.asarray(weight.numpy()).ravel()
        for i in rng.choice(values.size, size=min(3, values.size), replace=False):
            changed = values.copy()
            changed[i] += step
            weight.assign(changed.reshape(weight.shape))
            up = float(loss())
            changed[i] -= 2 * step
            weight.assign(changed.reshape(weight.shape))
            down = float(loss())
            weight.assign(values.reshape(weight.shape))
            numeric = (up - down) / (2 * step)
            np.testing.assert_allclose(
                grad[i], numeric, rtol=1e-5, atol=1e-7, err_msg=f"{weight.path}[{i}]"
            )


# ------------------------------------------------------------- compiled loop


@pytest.mark.tensorflow
@pytest.mark.parametrize("kind", list(DECODERS))
def test_loop_is_a_while_op_traced_once_for_any_length(kind, monkeypatch):
    import tensorflow as tf

    rng = np.random.default_rng(13)
    decoder = built_decoder(kind, "gru", "bahdanau", rng)
    cell_update = decoder._cells.update
    calls = []

    def counting_cell_update(*args):
        calls.append(1)
        return cell_update(*args)

    monkeypatch.setattr(decoder._cells, "update", counting_cell_update)

    @tf.function(
        input_signature=[
            tf.TensorSpec((None, None, D_EMB), tf.float32),
            tf.TensorSpec((None, None, D_H), tf.float32),
        ]
    )
    def decode(target_embeddings, memory):
        return decoder(target_embeddings, memory)

    concrete = decode.get_concrete_function()
    traced_calls = len(calls)
    assert 1 <= traced_calls <= 2  # the step function, not one copy per step
    graph_ops = {node.op for node in concrete.graph.as_graph_def().node}
    assert graph_ops & {"While", "StatelessWhile"}, sorted(graph_ops)
    runs = {}
    for t_dec in (3, 40):
        inputs = make_inputs(rng, t_dec=t_dec)
        runs[t_dec] = inputs, decode(**inputs)
    assert len(calls) == traced_calls  # no retracing for a new length
    assert decode.experimental_get_tracing_count() == 1
    for t_dec, (inputs, (outputs, weights, _)) in runs.items():
        assert outputs.shape == (BATCH, t_dec, OUT)
        eager = decoder(**inputs)
        np.testing.assert_allclose(outputs, eager[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(weights, eager[1], rtol=1e-5, atol=1e-6)


# ------------------------------------------- attention overridden (ablation)

# `overridden_decoder` copies a decoder with its attention wrapped in
# `OverriddenAttention`; the decoder's loop is unchanged.


@pytest.mark.parametrize("cell_type", CELLS)
@pytest.mark.parametrize("kind", list(DECODERS))
def test_uniform_override_gives_equal_weights_over_unmasked_keys(kind, cell_type):
    rng = np.random.default_rng(14)
    decoder = built_decoder(kind, cell_type, "bahdanau", rng)
    inputs = make_inputs(rng)
    mask = memory_mask()
    plain = decoder(**inputs, memory_mask=mask)
    result = overridden_decoder(decoder, "uniform")(**inputs, memory_mask=mask)
    weights = np.asarray(result[1])
    expected = np.broadcast_to((mask / mask.sum(-1, keepdims=True))[:, None, :], weights.shape)
    np.testing.assert_allclose(weights, expected, rtol=1e-6, atol=0)
    assert_matches(
        result,
        decoder_reference(decoder, **inputs, memory_mask=mask, override="uniform"),
    )
    assert np.abs(np.asarray(result[0]) - np.asarray(plain[0])).max() > 1e-3


@pytest.mark.parametrize("kind", list(DECODERS))
def test_uniform_override_step_by_step_equals_the_call(kind):
    rng = np.random.default_rng(17)
    decoder = overridden_decoder(built_decoder(kind, "lstm", "bahdanau", rng), "uniform")
    inputs = make_inputs(rng)
    mask = memory_mask()
    outputs, weights, _ = decoder(**inputs, memory_mask=mask)
    decode_state = decoder.get_decode_state(inputs["memory"], memory_mask=mask)
    for t in range(T_DEC):
        output, step_weights, decode_state = decoder.step(
            inputs["target_embeddings"][:, t], decode_state
        )
        np.testing.assert_allclose(step_weights, weights[:, t], rtol=1e-6, atol=0)
        np.testing.assert_allclose(output, outputs[:, t], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", list(DECODERS))
def test_permute_override_permutes_weights_among_unmasked_keys(kind):
    # One step from the same state: the weights the model computes are those
    # of the plain call, so the permuted ones must be a rearrangement of them.
    rng = np.random.default_rng(15)
    decoder = built_decoder(kind, "gru", "luong_general", rng)
    permuting = overridden_decoder(decoder, "permute")
    inputs = make_inputs(rng, t_dec=1, batch=4)
    inputs["initial_state"] = make_state("gru", rng, batch=4)  # s_0 = 0 is uniform
    mask = memory_mask(batch=4)
    mask[3, 1] = False  # a masked key inside the row
    _, weights, _ = decoder(**inputs, memory_mask=mask)
    _, permuted, _ = permuting(**inputs, memory_mask=mask)
    weights, permuted = np.asarray(weights)[:, 0], np.asarray(permuted)[:, 0]
    assert np.all(permuted[~mask] == 0.0)
    for b in range(4):
        np.testing.assert_allclose(
            np.sort(permuted[b, mask[b]]), np.sort(weights[b, mask[b]]), rtol=1e-6
        )
    assert np.abs(permuted - weights).max() > 1e-3, "no row was permuted"
    # Step-by-step decoding permutes too.
    decode_state = permuting.get_decode_state(
        inputs["memory"], inputs["initial_state"], memory_mask=mask
    )
    _, stepped, _ = permuting.step(inputs["target_embeddings"][:, 0], decode_state)
    stepped = np.asarray(stepped)
    assert np.all(stepped[~mask] == 0.0)
    for b in range(4):
        np.testing.assert_allclose(
            np.sort(stepped[b, mask[b]]), np.sort(weights[b, mask[b]]), rtol=1e-5
        )


def test_permute_override_over_a_sequence_keeps_the_weights_multiset():
    # Without input feeding the states do not depend on the attention, so every
    # step's permuted weights rearrange the plain call's weights.
    rng = np.random.default_rng(16)
    decoder = built_decoder("luong_no_feeding", "lstm", "bahdanau", rng)
    inputs = make_inputs(rng)
    mask = memory_mask()
    _, weights, _ = decoder(**inputs, memory_mask=mask)
    _, permuted, _ = overridden_decoder(decoder, "permute")(**inputs, memory_mask=mask)
    weights, permuted = np.asarray(weights), np.asarray(permuted)
    for b in range(BATCH):
        keys = mask[b]
        assert np.all(permuted[b][:, ~keys] == 0.0)
        np.testing.assert_allclose(
            np.sort(permuted[b][:, keys], -1),
            np.sort(weights[b][:, keys], -1),
            rtol=1e-6,
        )
    assert np.abs(permuted - weights).max() > 1e-3


@pytest.mark.parametrize("kind", list(DECODERS))
def test_overridden_decoder_leaves_the_decoder_unchanged(kind):
    rng = np.random.default_rng(18)
    decoder = built_decoder(kind, "gru", "bahdanau", rng)
    inputs = make_inputs(rng)
    before = decoder(**inputs)
    overridden = overridden_decoder(decoder, "uniform")
    overridden(**inputs)
    assert not isinstance(decoder.attention, OverriddenAttention)
    assert overridden.attention.attention is decoder.attention  # its weights, shared
    for a, b in zip(decoder(**inputs), before, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert_matches(decoder(**inputs), decoder_reference(decoder, **inputs))


# ---------------------------------------------------------------- errors


def _raises(*fragments):
    pattern = ".*".join(re.escape(f) for f in fragments)
    return pytest.raises(ValueError, match=re.compile(pattern, re.DOTALL))


@pytest.mark.parametrize("kind", list(DECODERS))
def test_batch_mismatch_is_an_error(kind):
    decoder = make_decoder(kind)
    y = np.zeros((2, T_DEC, D_EMB), "float32")
    memory = np.zeros((3, T_ENC, D_H), "float32")
    with _raises("`memory`", "(batch, T_enc, d_h) with batch=2", "(3, 6, 5)"):
        decoder(y, memory)


@pytest.mark.parametrize("kind", list(DECODERS))
def test_target_embeddings_of_wrong_rank_is_an_error(kind):
    decoder = make_decoder(kind)
    y = np.zeros((2, D_EMB), "float32")
    memory = np.zeros((2, T_ENC, D_H), "float32")
    with _raises("`target_embeddings`", "(batch, T_dec, d_emb)", "(2, 3)"):
        decoder(y, memory)


@pytest.mark.parametrize("kind", list(DECODERS))
def test_memory_of_wrong_rank_is_an_error(kind):
    decoder = make_decoder(kind)
    y = np.zeros((2, T_DEC, D_EMB), "float32")
    memory = np.zeros((2, T_ENC, D_H, 1), "float32")
    with _raises("`memory`", "(batch, T_enc, d_h)", "(2, 6, 5, 1)"):
        decoder(y, memory)


@pytest.mark.parametrize("cell_type", CELLS)
def test_initial_state_of_wrong_size_is_an_error(cell_type):
    decoder = make_decoder("bahdanau", cell_type)
    inputs = make_inputs(np.random.default_rng(19))
    state = [np.zeros((BATCH, UNITS + 1), "float32")] * (1 if cell_type == "gru" else 2)
    state = state[0] if cell_type == "gru" else state
    with _raises("`initial_state`", f"(batch, units)=(2, {UNITS})", "(2, 5)"):
        decoder(**inputs, initial_state=state)
    decoder(**inputs)  # built: the step API checks too
    with _raises("`initial_state`", f"(batch, units)=(2, {UNITS})", "(2, 5)"):
        decoder.get_decode_state(inputs["memory"], initial_state=state)


def test_wrong_number_of_lstm_states_is_an_error():
    decoder = make_decoder("luong", "lstm")
    inputs = make_inputs(np.random.default_rng(20))
    h = np.zeros((BATCH, UNITS), "float32")
    with _raises("`initial_state`", "2 tensor(s) of shape (batch, units)", "1 tensor"):
        decoder(**inputs, initial_state=h)
    with _raises("`initial_state`", "2 tensor(s)", "3 tensor"):
        decoder(**inputs, initial_state=[h, h, h])


@pytest.mark.parametrize("cls", [BahdanauDecoder, LuongDecoder])
def test_attention_that_is_not_a_keras_attention_layer_is_an_error(cls):
    with _raises("`attention`", "BahdanauAttention or LuongAttention", "Attention"):
        cls(UNITS, keras.layers.Attention())


@pytest.mark.parametrize("cls", [BahdanauDecoder, LuongDecoder])
def test_unknown_cell_type_is_an_error(cls):
    with _raises("`cell_type`", "('gru', 'lstm')", "'rnn'"):
        cls(UNITS, BahdanauAttention(5), cell_type="rnn")


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_conditional_that_is_not_a_bool_is_an_error(value):
    with pytest.raises(ValueError, match=r"`conditional`. Expected True or False.*conditional="):
        BahdanauDecoder(UNITS, make_layer("bahdanau"), conditional=value)


def test_conditional_decoder_has_a_second_cell_on_the_context():
    decoder = built_decoder("conditional")
    # The first cell reads y_{t-1} alone, the second the context (memory size).
    assert tuple(decoder.cell.kernel.shape) == (D_EMB, 3 * UNITS)
    assert tuple(decoder.attended_cell.kernel.shape) == (D_H, 3 * UNITS)
    assert tuple(built_decoder("bahdanau").cell.kernel.shape) == (D_EMB + D_H, 3 * UNITS)


def test_memory_of_another_size_than_built_is_an_error():
    decoder = built_decoder("bahdanau")
    y = np.zeros((BATCH, T_DEC, D_EMB), "float32")
    memory = np.zeros((BATCH, T_ENC, D_H + 1), "float32")
    with _raises("`memory`", f"d_h={D_H}", "(2, 6, 6)"):
        decoder(y, memory)


# ------------------------------------------------- attention of another dtype


def test_float32_attention_inside_a_mixed_precision_decoder():
    # The attention layer keeps its own (float32) policy; the loop must still
    # run in the decoder's compute dtype.
    rng = np.random.default_rng(21)
    decoder = BahdanauDecoder(UNITS, BahdanauAttention(5), cell_type="gru", dtype="mixed_float16")
    outputs, weights, state = decoder(**make_inputs(rng))
    assert decoder.attention.compute_dtype == "float32"
    dtypes = {keras.backend.standardize_dtype(x.dtype) for x in (outputs, weights, state)}
    assert dtypes == {"float16"}
    assert np.all(np.isfinite(np.asarray(outputs, "float32")))


# ------------------------------------------------------- attention dropout

# The decoders draw the attention's dropout masks for all steps before their
# loop (as Keras' RNN draws its dropout masks): one draw per step and per
# weight, the same on every backend, and nothing drawn inside a JAX scan.
RATE = 0.25


def dropout_decoder(kind, rate=RATE, rng=None):
    """A built decoder whose attention drops weights at `rate` (batch 32, T_enc 16)."""
    rng = np.random.default_rng(0) if rng is None else rng
    cls, options = DECODERS[kind]
    attention = make_layer("bahdanau", dropout=rate, seed=7)
    decoder = cls(UNITS, attention, output_units=OUT, **options)
    decoder(**make_inputs(rng, batch=32, t_dec=8, t_enc=16))
    return randomize(decoder, rng)


def dropout_memory_mask():
    mask = np.ones((32, 16), bool)
    mask[::2, -5:] = False  # every other source sentence 5 tokens shorter
    return mask


@pytest.mark.parametrize("kind", list(DECODERS))
def test_attention_dropout_in_training_drops_weights_at_its_rate(kind, seed):
    rng = np.random.default_rng(seed)
    decoder = dropout_decoder(kind, rng=rng)
    inputs = make_inputs(rng, batch=32, t_dec=8, t_enc=16)
    mask = dropout_memory_mask()
    _, dropped, _ = decoder(**inputs, memory_mask=mask, training=True)
    _, expected, _ = decoder(**inputs, memory_mask=mask, training=False)
    dropped, expected = np.asarray(dropped), np.asarray(expected)  # (B, T_dec, T_enc)
    unmasked = np.broadcast_to(mask[:, None, :], dropped.shape)
    zeroed = dropped == 0.0
    assert np.all(dropped[~unmasked] == 0.0)  # masked keys stay exactly 0
    # About 3,300 unmasked weights: the rate within 4 standard deviations.
    fraction = zeroed[unmasked].mean()
    assert abs(fraction - RATE) < 4 * np.sqrt(RATE * (1 - RATE) / unmasked.sum()), fraction
    # A new mask at every step and for every sentence, not one broadcast.
    assert np.any(zeroed[:, 0] != zeroed[:, 1])
    assert np.any(zeroed[0] != zeroed[2])
    # The first step's query does not depend on earlier dropout: its kept
    # weights are the inference weights scaled by 1 / (1 - rate).
    first = ~zeroed[:, 0] & unmasked[:, 0]
    np.testing.assert_allclose(
        dropped[:, 0][first], expected[:, 0][first] / (1 - RATE), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("kind", list(DECODERS))
def test_attention_dropout_is_off_at_inference(kind):
    rng = np.random.default_rng(31)
    decoder = dropout_decoder(kind, rng=rng)
    plain = make_decoder(kind)  # the same, without dropout
    inputs = make_inputs(rng, batch=32, t_dec=8, t_enc=16)
    plain(**inputs)
    plain.set_weights(decoder.get_weights())
    mask = dropout_memory_mask()
    expected = plain(**inputs, memory_mask=mask)
    for training in (False, None):
        got = decoder(**inputs, memory_mask=mask, training=training)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# The four decoders fit with attention dropout; the one whose attention is
# overridden with "permute" also draws its random keys in the training step,
# before the loop.
DROPOUT_FITS = [
    pytest.param("bahdanau", None, id="bahdanau"),
    pytest.param("conditional", None, id="conditional", marks=pytest.mark.slow),
    pytest.param("luong", None, id="luong"),
    pytest.param("luong_no_feeding", None, id="luong_no_feeding", marks=pytest.mark.slow),
    pytest.param("bahdanau", "permute", id="bahdanau-permute"),
]


def fit_with_attention_dropout(kind, override=None, jit_compile="auto"):
    """Fits a token model whose decoder's attention has dropout; returns the losses."""
    keras.utils.set_random_seed(0)
    vocab = 11
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    memory = keras.layers.Embedding(vocab, D_H, mask_zero=True)(source)
    y = keras.layers.Embedding(vocab, D_EMB, mask_zero=True)(target_in)
    cls, options = DECODERS[kind]
    attention = make_layer("bahdanau", dropout=0.3, seed=1)
    if override is not None:
        attention = OverriddenAttention(attention, override, seed=2)
    decoder = cls(UNITS, attention, **options)
    outputs, _, _ = decoder(y, memory)
    model = keras.Model([source, target_in], keras.layers.Dense(vocab)(outputs))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile("adam", loss, jit_compile=jit_compile)
    source_ids, target_ids = token_batch(np.random.default_rng(32), vocab)
    history = model.fit([source_ids, target_ids], target_ids, epochs=2, verbose=0)
    return history.history["loss"]


@pytest.mark.parametrize("kind, override", DROPOUT_FITS)
def test_decoder_with_attention_dropout_fits(kind, override):
    # "auto": XLA on JAX; plain graphs on TensorFlow's CPU and eager PyTorch.
    assert np.all(np.isfinite(fit_with_attention_dropout(kind, override)))


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_attention_dropout_trains_compiled_with_xla(policy, dtype_policy):
    if keras.backend.backend() == "torch":
        pytest.skip("jit_compile on PyTorch is torch.compile (minutes on a CPU), not XLA")
    dtype_policy(policy)
    losses = fit_with_attention_dropout("bahdanau", jit_compile=True)
    assert np.all(np.isfinite(losses))
