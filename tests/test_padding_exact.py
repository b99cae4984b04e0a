"""Rows padded so that a batch divides by the devices (sample weight 0,
`keras_attention.training.distribution.pad_arrays`) change no loss, metric or
gradient, or `check_padding_exact` refuses the model and says which loss or
metric they would change.

References: the loss of the 3 real rows in float64 NumPy, and the same model
trained one step (SGD, learning rate 1) on the unpadded rows; the padded batch
has 4 rows (`multiple=4`), the last of weight 0. Tolerance: float32 sums of a
handful of terms, 1e-5 relative; a padding row that counted would move the
loss by about a quarter (one row in four) and the weights as much.
"""

import keras
import numpy as np
import pytest

from keras_attention.training import distribution
from keras_attention.training.losses import SmoothedSparseCrossentropy

ROWS, MULTIPLE, STEPS, CLASSES, FEATURES = 3, 4, 4, 5, 3
RTOL = 1e-5


def _data(kind):
    """(x, y) for 3 rows: float targets (3, 2) for the regression, class ids
    (3, STEPS) with some 0s (the padding id, a class of its own unless
    ignored) for the sequence."""
    rng = np.random.default_rng(7)
    if kind == "regression":
        x = rng.normal(size=(ROWS, FEATURES)).astype("float32")
        return x, rng.normal(size=(ROWS, 2)).astype("float32") * 3
    x = rng.normal(size=(ROWS, STEPS, FEATURES)).astype("float32")
    y = rng.integers(1, CLASSES, size=(ROWS, STEPS)).astype("int32")
    y[0, 2:] = 0
    y[2, 3] = 0
    return x, y


def _model(kind, loss, **compile_kwargs):
    shape = (FEATURES,) if kind == "regression" else (STEPS, FEATURES)
    inputs = keras.Input(shape)
    outputs = keras.layers.Dense(2 if kind == "regression" else CLASSES)(inputs)
    model = keras.Model(inputs, outputs)
    rng = np.random.default_rng(0)
    model.set_weights([rng.uniform(-1, 1, w.shape).astype("float32") for w in model.weights])
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss=loss, **compile_kwargs)
    return model


def _values64(kind, model, x, y, ignore_class):
    """(values, kept): each value of the loss before its reduction, float64,
    and whether it counts (0 for an ignored target)."""
    w, b = (np.asarray(v, "float64") for v in model.get_weights())
    out = x.astype("float64") @ w + b
    if kind == "regression":
        return np.mean((out - y) ** 2, axis=-1), np.ones(ROWS)
    log_probs = out - np.log(np.sum(np.exp(out), axis=-1, keepdims=True))
    values = -np.take_along_axis(log_probs, y[..., None], axis=-1)[..., 0]
    kept = np.ones(y.shape) if ignore_class is None else (y != ignore_class).astype("float64")
    return values * kept, kept


def _loss64(kind, model, x, y, reduction, ignore_class):
    values, kept = _values64(kind, model, x, y, ignore_class)
    if reduction == "sum":
        return values.sum()
    return values.sum() / kept.sum()  # "mean_with_sample_weight", or masked ignore_class


def _loss(kind, reduction, ignore_class=None):
    if kind == "regression":
        return keras.losses.MeanSquaredError(reduction=reduction, name="mse")
    return keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=ignore_class, reduction=reduction, name="scce"
    )


def _metric(kind):
    if kind == "regression":
        return keras.metrics.MeanAbsoluteError(name="metric")
    return keras.metrics.SparseCategoricalAccuracy(name="metric")


# (kind, ignore_class, reduction): every reduction the check accepts.
EXACT = [
    ("regression", None, "sum"),
    ("regression", None, "mean_with_sample_weight"),
    ("sequence", None, "sum"),
    ("sequence", None, "mean_with_sample_weight"),
    ("sequence", 0, "sum"),
    ("sequence", 0, "mean_with_sample_weight"),
    ("sequence", 0, "sum_over_batch_size"),
    ("sequence", 0, "mean"),
]
# ... and every one it refuses.
REFUSED = [
    ("regression", None, "sum_over_batch_size"),
    ("regression", None, "mean"),
    ("regression", None, None),
    ("sequence", None, "sum_over_batch_size"),
    ("sequence", None, "mean"),
    ("sequence", None, None),
    ("sequence", 0, None),
]


@pytest.mark.parametrize(("kind", "ignore_class", "reduction"), EXACT)
def test_padded_rows_change_no_loss_metric_or_gradient(kind, ignore_class, reduction):
    x, y = _data(kind)
    loss = _loss(kind, reduction, ignore_class)
    unpadded = _model(kind, loss, weighted_metrics=[_metric(kind)])
    padded = _model(kind, loss, weighted_metrics=[_metric(kind)])
    px, py, pw = distribution.pad_arrays(x, y, multiple=MULTIPLE, model=padded)
    assert len(py) == MULTIPLE and not pw[ROWS:].any()
    expected = _loss64(kind, unpadded, x, y, reduction, ignore_class)
    before = unpadded.test_on_batch(x, y, return_dict=True)
    after = padded.test_on_batch(px, py, sample_weight=pw, return_dict=True)
    np.testing.assert_allclose(after["loss"], expected, rtol=RTOL)
    np.testing.assert_allclose(before["loss"], expected, rtol=RTOL)
    np.testing.assert_allclose(after["metric"], before["metric"], rtol=RTOL)
    # One SGD step each: equal weights after it are equal gradients.
    start = [w.copy() for w in unpadded.get_weights()]
    unpadded.train_on_batch(x, y)
    padded.train_on_batch(px, py, sample_weight=pw)
    for moved, reference, first in zip(
        padded.get_weights(), unpadded.get_weights(), start, strict=True
    ):
        assert not np.allclose(reference, first)  # the step moved the weights
        np.testing.assert_allclose(moved, reference, rtol=RTOL, atol=1e-7)


@pytest.mark.parametrize(("kind", "ignore_class", "reduction"), REFUSED)
def test_losses_the_padding_would_change_are_refused(kind, ignore_class, reduction):
    x, y = _data(kind)
    model = _model(kind, _loss(kind, reduction, ignore_class))
    name = "mse" if kind == "regression" else "scce"
    with pytest.raises(
        distribution.DistributionError,
        match=rf"loss `{name}` \(reduction={reduction!r}\).*"
        r"reduction='mean_with_sample_weight'",
    ):
        distribution.pad_arrays(x, y, multiple=MULTIPLE, model=model)


def test_default_reduction_counts_padded_rows_in_its_divisor():
    # Why the refusal: MSE over 3 rows padded to 4 is 3/4 of the unpadded one.
    x, y = _data("regression")
    loss = keras.losses.MeanSquaredError()  # "sum_over_batch_size"
    model = _model("regression", loss)
    px, py, pw = distribution.pad_arrays(x, y, multiple=MULTIPLE)
    unpadded = float(loss(y, model.predict(x, verbose=0)))
    padded = float(loss(py, model.predict(px, verbose=0), sample_weight=pw))
    np.testing.assert_allclose(padded, unpadded * ROWS / MULTIPLE, rtol=RTOL)


def test_a_loss_given_by_name_is_refused_naming_the_default_reduction():
    x, y = _data("regression")
    with pytest.raises(
        distribution.DistributionError, match=r"`mse` \(reduction='sum_over_batch_size'\)"
    ):
        distribution.check_padding_exact(_model("regression", "mse"), x)


def test_unweighted_metrics_are_refused_naming_weighted_metrics():
    x, _ = _data("regression")
    model = _model("regression", _loss("regression", "sum"), metrics=["mae"])
    with pytest.raises(
        distribution.DistributionError, match=r"unweighted metric `mae`.*`weighted_metrics`"
    ):
        distribution.check_padding_exact(model, x)


def _masked_model(**compile_kwargs):
    """Token ids in, logits out, the output masked where the input is 0: a
    padding row (all 0) is hidden from every loss and mean metric."""
    inputs = keras.Input((STEPS,), dtype="int32")
    hidden = keras.layers.Embedding(CLASSES, FEATURES, mask_zero=True)(inputs)
    model = keras.Model(inputs, keras.layers.Dense(CLASSES)(hidden))
    rng = np.random.default_rng(0)
    model.set_weights([rng.uniform(-1, 1, w.shape).astype("float32") for w in model.weights])
    model.compile(optimizer=keras.optimizers.SGD(1.0), **compile_kwargs)
    return model


def test_a_mask_that_hides_padding_rows_keeps_mean_losses_and_metrics_exact():
    _, y = _data("sequence")
    x = np.where(y > 0, y, 0)  # masked where the target is padding
    x[1, 0] = 0  # and one masked step whose target counts without a mask
    kwargs = dict(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    unpadded, padded = _masked_model(**kwargs), _masked_model(**kwargs)
    px, py, pw = distribution.pad_arrays(x, y, multiple=MULTIPLE, model=padded)
    before = unpadded.test_on_batch(x, y, return_dict=True)
    after = padded.test_on_batch(px, py, sample_weight=pw, return_dict=True)
    np.testing.assert_allclose(after["loss"], before["loss"], rtol=RTOL)
    np.testing.assert_allclose(after["accuracy"], before["accuracy"], rtol=RTOL)
    # Without the mask (the same model, unmasked input) the check refuses.
    with pytest.raises(distribution.DistributionError, match="`sparse_categorical"):
        distribution.check_padding_exact(_model("sequence", kwargs["loss"]), _data("sequence")[0])


@pytest.mark.parametrize("ignore_class", [0, None])
def test_smoothed_crossentropy_is_exact_only_when_it_ignores_the_padding(ignore_class):
    x, y = _data("sequence")
    loss = SmoothedSparseCrossentropy(label_smoothing=0.1, ignore_class=ignore_class)
    unpadded, padded = _model("sequence", loss), _model("sequence", loss)
    if ignore_class is None:
        with pytest.raises(distribution.DistributionError, match=r"give it ignore_class=0"):
            distribution.pad_arrays(x, y, multiple=MULTIPLE, model=padded)
        return
    px, py, pw = distribution.pad_arrays(x, y, multiple=MULTIPLE, model=padded)
    np.testing.assert_allclose(
        padded.train_on_batch(px, py, sample_weight=pw),
        unpadded.train_on_batch(x, y),
        rtol=RTOL,
    )
    for moved, reference in zip(padded.get_weights(), unpadded.get_weights(), strict=True):
        np.testing.assert_allclose(moved, reference, rtol=RTOL, atol=1e-7)


def test_an_activity_regularizer_is_refused_naming_its_layer():
    inputs = keras.Input((FEATURES,))
    outputs = keras.layers.Dense(2, activity_regularizer="l2", name="regularized")(inputs)
    model = keras.Model(inputs, outputs)
    model.compile(loss=_loss("regression", "sum"))
    with pytest.raises(distribution.DistributionError, match=r"layer `regularized`"):
        distribution.check_padding_exact(model)


def test_a_model_not_compiled_is_refused():
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(2)])
    with pytest.raises(distribution.DistributionError, match="call `compile` first"):
        distribution.check_padding_exact(model)


def test_float_targets_get_one_weight_per_row_of_the_last_axis():
    # A loss such as MSE gives one value per row of (rows, D) targets: weights
    # of the shape of `y` would not multiply its values.
    x, y = _data("regression")
    _, _, weight = distribution.pad_arrays(x, y, multiple=MULTIPLE)
    np.testing.assert_array_equal(weight, [1, 1, 1, 0])
    import tensorflow as tf

    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(ROWS)
    (_, _, weight), *_ = distribution.pad_dataset(batches, MULTIPLE).as_numpy_iterator()
    np.testing.assert_array_equal(weight, [1, 1, 1, 0])


def test_pad_dataset_checks_the_model_it_is_given():
    import tensorflow as tf

    x, y = _data("regression")
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(ROWS)
    with pytest.raises(distribution.DistributionError, match=r"`mse`"):
        distribution.pad_dataset(batches, MULTIPLE, model=_model("regression", "mse"))
