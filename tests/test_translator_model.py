"""`build_translator`'s encoder size (`encoder_units`) against float64 NumPy."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.translation import model as model_lib
from keras_attention.translation.model import build_translator
from keras_attention.translation.translator import Translator

SMALL = dict(embedding_dim=8, units=16, dropout=0.0, seed=3)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gru_reference(x, kernel, recurrent_kernel, bias, backwards=False):
    """Keras's GRU (reset_after=True, gates z, r, h), one sequence, float64."""
    x, kernel, recurrent_kernel, bias = (
        np.asarray(a, "float64") for a in (x, kernel, recurrent_kernel, bias)
    )
    units = recurrent_kernel.shape[0]
    h = np.zeros(units)
    steps = range(len(x) - 1, -1, -1) if backwards else range(len(x))
    outputs = np.zeros((len(x), units))
    for t in steps:
        xz, xr, xh = np.split(x[t] @ kernel + bias[0], 3)
        hz, hr, hh = np.split(h @ recurrent_kernel + bias[1], 3)
        z = _sigmoid(xz + hz)
        r = _sigmoid(xr + hr)
        candidate = np.tanh(xh + r * hh)
        h = z * h + (1 - z) * candidate
        outputs[t] = h
    return outputs


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general", "luong-concat", "none"])
def test_encoder_units_sets_the_memory_and_matches_a_bidirectional_gru(attention):
    model = build_translator(30, 40, attention=attention, encoder_units=12, **SMALL)
    encoder = model.get_layer(model_lib.ENCODER)
    source = np.array([[3, 4, 5, 6], [7, 8, 9, 10]])  # no padding: every step counts
    target = np.array([[1, 2, 3], [1, 5, 6]])
    logits = model([source, target])
    assert tuple(logits.shape) == (2, 3, 40)

    embedded = model.get_layer(model_lib.SOURCE_EMBEDDING)(source)
    memory, forward, backward = encoder(embedded)
    assert tuple(memory.shape) == (2, 4, 24)  # 2 · encoder_units
    assert tuple(forward.shape) == tuple(backward.shape) == (2, 12)
    forward_weights = [w.numpy() for w in encoder.forward_layer.weights]
    backward_weights = [w.numpy() for w in encoder.backward_layer.weights]
    assert forward_weights[1].shape == (12, 36)  # recurrent kernel: 12 units, 3 gates
    for b in range(2):
        x = np.asarray(embedded[b])
        want = np.concatenate(
            [
                _gru_reference(x, *forward_weights),
                _gru_reference(x, *backward_weights, backwards=True),
            ],
            axis=-1,
        )
        np.testing.assert_allclose(np.asarray(memory[b]), want, rtol=1e-5, atol=1e-5)
    # The bridge reads both final states (24 features) into s_0 (16).
    assert tuple(model.get_layer(model_lib.BRIDGE).kernel.shape) == (24, 16)

    if attention != "none":
        # Inference reads the same memory; its first step gives the model's logits.
        translator = Translator(model, None, None)
        step_logits, _, _ = translator.step(tf.constant([1, 1]), translator.encode(source))
        np.testing.assert_allclose(
            np.asarray(step_logits), np.asarray(logits[:, 0]), rtol=1e-5, atol=1e-5
        )


def test_default_encoder_is_half_the_units_per_direction():
    model = build_translator(30, 40, attention="luong-dot", **SMALL)
    assert tuple(model.get_layer(model_lib.ENCODER).output[0].shape) == (None, None, 16)
    explicit = build_translator(30, 40, attention="luong-dot", encoder_units=8, **SMALL)
    assert explicit.count_params() == model.count_params()


def test_odd_units_are_allowed_with_an_explicit_encoder_size():
    with pytest.raises(ValueError, match=r"Expected an even number.*units=15"):
        build_translator(30, 40, attention="bahdanau", embedding_dim=8, units=15)
    model = build_translator(
        30, 40, attention="bahdanau", embedding_dim=8, units=15, encoder_units=10
    )
    logits = model([np.array([[3, 4, 0]]), np.array([[1, 2]])])
    assert tuple(logits.shape) == (1, 2, 40)


def test_luong_dot_needs_a_memory_the_size_of_the_state():
    with pytest.raises(ValueError) as info:
        build_translator(30, 40, attention="luong-dot", encoder_units=12, **SMALL)
    message = str(info.value)
    assert "memory (2 · encoder_units = 24 features)" in message
    assert "(units = 16)" in message and "luong-general" in message


@pytest.mark.parametrize("bad", [0, -4, 2.5, True, "12"])
def test_bad_encoder_units_are_named(bad):
    with pytest.raises(ValueError, match=r"`encoder_units`.*Received: encoder_units="):
        build_translator(30, 40, encoder_units=bad, **SMALL)


def test_wider_encoder_survives_a_keras_file_round_trip(tmp_path):
    model = build_translator(
        30, 40, attention="bahdanau", encoder_units=20, tie_embeddings=True, **SMALL
    )
    inputs = [np.array([[3, 4, 5, 0]]), np.array([[1, 2, 0]])]
    path = tmp_path / "wide.keras"
    model.save(path)
    restored = keras.saving.load_model(path, compile=False)
    assert tuple(restored.get_layer(model_lib.ENCODER).output[0].shape) == (None, None, 40)
    np.testing.assert_allclose(
        np.asarray(restored(inputs)), np.asarray(model(inputs)), rtol=1e-6, atol=1e-6
    )


def test_conditional_translator_decodes_step_by_step_like_teacher_forcing(tmp_path):
    model = build_translator(
        30, 40, attention="bahdanau", conditional=True, tie_embeddings=True, **SMALL
    )
    decoder = model.get_layer(model_lib.DECODER)
    assert decoder.conditional
    assert tuple(decoder.attended_cell.kernel.shape) == (16, 48)  # memory 16 → 3 · 16
    source = np.array([[3, 4, 5, 6], [7, 8, 0, 0]])
    target = np.array([[1, 2, 3, 4], [1, 5, 6, 0]])
    logits = np.asarray(model([source, target]))
    # Inference runs the same recurrence one token at a time.
    translator = Translator(model, None, None)
    state = translator.encode(source)
    for t in range(3):
        step_logits, _, state = translator.step(tf.constant(target[:, t]), state)
        keep = target[:, t] != 0
        np.testing.assert_allclose(
            np.asarray(step_logits)[keep], logits[keep, t], rtol=1e-5, atol=1e-5
        )
    path = tmp_path / "conditional.keras"
    model.save(path)
    restored = keras.saving.load_model(path, compile=False)
    assert restored.get_layer(model_lib.DECODER).conditional
    np.testing.assert_allclose(np.asarray(restored([source, target])), logits, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("attention", ["luong-general", "none"])
def test_conditional_needs_the_bahdanau_decoder(attention):
    with pytest.raises(ValueError, match=r"`conditional`.*attention='bahdanau'"):
        build_translator(30, 40, attention=attention, conditional=True, **SMALL)


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general", "none"])
def test_mean_init_reads_the_mean_of_the_real_source_states(attention, tmp_path):
    model = build_translator(
        30,
        40,
        attention=attention,
        conditional=attention == "bahdanau",
        decoder_init="mean",
        **SMALL,
    )
    source = np.array([[3, 4, 5, 6], [7, 8, 0, 0]])  # the second row is padded
    target = np.array([[1, 2, 3], [1, 5, 6]])
    mask = source != 0
    embedded = model.get_layer(model_lib.SOURCE_EMBEDDING)(source)
    memory, _, _ = model.get_layer(model_lib.ENCODER)(embedded, mask=tf.constant(mask))
    memory = np.asarray(memory, "float64")  # (B, S, 16)
    bridge = model.get_layer(model_lib.BRIDGE)
    assert tuple(bridge.kernel.shape) == (16, 16)  # reads the memory's 16 features
    kernel, bias = (np.asarray(w, "float64") for w in (bridge.kernel, bridge.bias))
    # s_0 = tanh(W · mean of the memory over the real tokens + b), in float64.
    want = np.stack([np.tanh(memory[b, mask[b]].mean(axis=0) @ kernel + bias) for b in range(2)])
    padded_in = np.tanh(memory[1].mean(axis=0) @ kernel + bias)
    assert np.abs(padded_in - want[1]).max() > 1e-4  # the padding would change it

    translator = Translator(model, None, None)
    state = translator.encode(source)
    np.testing.assert_allclose(np.asarray(state["h"]), want, rtol=1e-5, atol=1e-6)

    # The model's logits agree with inference from that state, and with a
    # reloaded model.
    logits = np.asarray(model([source, target]))
    if attention != "none":
        step_logits, _, _ = translator.step(tf.constant(target[:, 0]), state)
        np.testing.assert_allclose(np.asarray(step_logits), logits[:, 0], rtol=1e-5, atol=1e-5)
    path = tmp_path / "mean.keras"
    model.save(path)
    restored = keras.saving.load_model(path, compile=False)
    assert model_lib.ENCODER_MEAN in {layer.name for layer in restored.layers}
    np.testing.assert_allclose(np.asarray(restored([source, target])), logits, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "mixed_float16"])
def test_mean_of_an_empty_source_is_zero_not_nan(dtype):
    layer = model_lib.MaskedMean(dtype=dtype)
    values = np.arange(12, dtype="float32").reshape(2, 3, 2)
    mask = np.array([[True, True, False], [False, False, False]])
    out = np.asarray(layer(values, mask=mask), "float64")
    np.testing.assert_allclose(out, [[1.0, 2.0], [0.0, 0.0]])
    np.testing.assert_allclose(np.asarray(layer(values), "float64"), values.mean(axis=1))
    # A translator started from the mean gives a finite s_0 for an empty source.
    model = build_translator(30, 40, decoder_init="mean", **SMALL)
    state = Translator(model, None, None).encode(np.array([[0, 0, 0], [3, 4, 0]]))
    assert np.isfinite(np.asarray(state["h"])).all()


def test_final_init_is_the_default_and_has_no_mean_layer():
    model = build_translator(30, 40, attention="bahdanau", **SMALL)
    assert model_lib.ENCODER_MEAN not in {layer.name for layer in model.layers}
    assert tuple(model.get_layer(model_lib.BRIDGE).kernel.shape) == (16, 16)  # 2 × 8
    encoder = Translator(model, None, None).generator.encoder_model
    assert model_lib.ENCODER_MEAN not in {layer.name for layer in encoder.layers}


@pytest.mark.parametrize("bad", ["average", None, "Mean"])
def test_bad_decoder_init_is_named(bad):
    with pytest.raises(ValueError, match=r"`decoder_init`.*\('final', 'mean'\)"):
        build_translator(30, 40, decoder_init=bad, **SMALL)
