"""`SmoothedSparseCrossentropy` against a float64 NumPy oracle."""

import keras
import numpy as np
import pytest

from keras_attention import SmoothedSparseCrossentropy

V = 7  # vocabulary


def _reference(y_true, logits, epsilon, ignore_class=0):
    """Mean over non-ignored tokens of the cross-entropy against the smoothed
    target (1 − ε)·one_hot + ε/V, one token at a time in float64."""
    total, count = 0.0, 0
    for b in range(y_true.shape[0]):
        for t in range(y_true.shape[1]):
            if ignore_class is not None and y_true[b, t] == ignore_class:
                continue
            z = logits[b, t].astype("float64")
            log_p = z - z.max() - np.log(np.sum(np.exp(z - z.max())))
            target = np.full(V, epsilon / V)
            target[y_true[b, t]] += 1.0 - epsilon
            total += -np.sum(target * log_p)
            count += 1
    return total / count


def _batch(seed, batch=3, steps=5):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(1, V, size=(batch, steps))
    y_true[0, 3:] = 0  # padding at the end of a row
    y_true[2, 1:] = 0
    logits = rng.normal(scale=2.0, size=(batch, steps, V)).astype("float32")
    return y_true, logits


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_matches_reference_with_padding(epsilon):
    y_true, logits = _batch(0)
    loss = SmoothedSparseCrossentropy(epsilon)(y_true, logits)
    np.testing.assert_allclose(float(loss), _reference(y_true, logits, epsilon), rtol=1e-5)


def test_without_smoothing_equals_keras_sparse_crossentropy():
    y_true, logits = _batch(1)
    ours = SmoothedSparseCrossentropy(0.0)(y_true, logits)
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    np.testing.assert_allclose(float(ours), float(keras_loss(y_true, logits)), rtol=1e-6)


def test_padding_changes_nothing():
    y_true, logits = _batch(2)
    padded_true = np.concatenate([y_true, np.zeros((3, 4), y_true.dtype)], axis=1)
    # Padded positions get large, arbitrary logits: they must weigh nothing.
    noise = np.random.default_rng(3).normal(scale=50.0, size=(3, 4, V)).astype("float32")
    padded_logits = np.concatenate([logits, noise], axis=1)
    loss = SmoothedSparseCrossentropy(0.1)
    np.testing.assert_allclose(
        float(loss(padded_true, padded_logits)), float(loss(y_true, logits)), rtol=1e-6
    )


def test_probabilities_input_matches_logits_input():
    y_true, logits = _batch(4)
    probs = np.asarray(keras.ops.softmax(logits, axis=-1))
    from_logits = SmoothedSparseCrossentropy(0.1)(y_true, logits)
    from_probs = SmoothedSparseCrossentropy(0.1, from_logits=False)(y_true, probs)
    np.testing.assert_allclose(float(from_probs), float(from_logits), rtol=1e-5)


def test_no_ignored_class_counts_every_token():
    y_true, logits = _batch(5)
    loss = SmoothedSparseCrossentropy(0.1, ignore_class=None)(y_true, logits)
    expected = _reference(y_true, logits, 0.1, ignore_class=None)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)


def test_all_padding_gives_zero_not_nan():
    logits = np.random.default_rng(6).normal(size=(2, 3, V)).astype("float32")
    loss = SmoothedSparseCrossentropy(0.1)(np.zeros((2, 3), "int64"), logits)
    assert float(loss) == 0.0


def test_float16_logits_give_a_float32_loss_close_to_reference():
    y_true, logits = _batch(7)
    loss = SmoothedSparseCrossentropy(0.1)(y_true, logits.astype("float16"))
    assert keras.backend.standardize_dtype(loss.dtype) == "float32"
    # The logits are rounded to float16 (relative step 2^-11) before the loss.
    expected = _reference(y_true, logits.astype("float16").astype("float32"), 0.1)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)


def test_smoothing_is_what_the_gradient_sees():
    # At ε > 0 the loss is smallest at the smoothed distribution, not one-hot.
    y_true = np.array([[2]])
    confident = np.full((1, 1, V), -20.0, "float32")
    confident[0, 0, 2] = 20.0
    smoothed = np.full((1, 1, V), 0.0, "float32")
    smoothed[0, 0, 2] = np.log((0.9 + 0.1 / V) / (0.1 / V))
    loss = SmoothedSparseCrossentropy(0.1)
    assert float(loss(y_true, smoothed)) < float(loss(y_true, confident))
    no_smoothing = SmoothedSparseCrossentropy(0.0)
    assert float(no_smoothing(y_true, confident)) < float(no_smoothing(y_true, smoothed))


@pytest.mark.parametrize("epsilon", [-0.1, 1.0, 2.0])
def test_bad_smoothing_is_named(epsilon):
    with pytest.raises(ValueError, match="`label_smoothing`.*Received: label_smoothing="):
        SmoothedSparseCrossentropy(epsilon)


def test_mismatched_ranks_name_both_shapes():
    y_true, logits = _batch(8)
    with pytest.raises(ValueError, match=r"y_true.shape=\(3, 5, 7\), y_pred.shape=\(3, 5, 7\)"):
        SmoothedSparseCrossentropy(0.1)(logits.argmax(-1)[..., None].repeat(V, -1), logits)


def test_config_round_trip_and_serialization():
    loss = SmoothedSparseCrossentropy(0.2, ignore_class=3, from_logits=False, name="ls")
    config = loss.get_config()
    assert config["label_smoothing"] == 0.2 and config["ignore_class"] == 3
    assert config["from_logits"] is False and config["name"] == "ls"
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(restored, SmoothedSparseCrossentropy)
    assert restored.get_config() == config


def test_trains_a_model_with_fit():
    y_true, _ = _batch(9)
    inputs = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(V, 8, mask_zero=True)(inputs)
    model = keras.Model(inputs, keras.layers.Dense(V)(x))
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=SmoothedSparseCrossentropy(0.1))
    history = model.fit(y_true, y_true, epochs=20, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
