"""Training on several devices with Keras 3's own distribution API (JAX).

`data_parallel()` gives a `keras.distribution.DataParallel` over the devices
JAX sees (GPUs, TPU cores, or host CPU devices made with
`XLA_FLAGS=--xla_force_host_platform_device_count=N`). Under it, Keras shards
every batch along its first axis, one part per device, and JAX's compiler
inserts the all-reduce of the gradients: a step computes the loss of the
whole global batch, as one device does.

A batch must then divide by the number of devices: the last batch of an epoch
(or an evaluation, or a generation request) that does not stops with JAX's
`IndivisibleError` (keras-team/keras#21167). The helpers here pad such a batch
with rows that carry no loss instead of dropping them: every row is trained on
and evaluated, and the losses equal one device's.

- `pad_arrays(x, y, sample_weight, multiple)`: NumPy inputs for `fit` and
  `evaluate` with a `batch_size` that divides by the device count;
- `pad_dataset(dataset, multiple)`: a batched `tf.data.Dataset`, each batch
  padded to a multiple;
- `pad_rows(array, multiple)` and `unpad`: generation (pad the sources,
  generate, slice the outputs back).

A padded row is all zeros (id 0 is the padding id everywhere in the package,
so its source is empty and its target is padding), with sample weight 0.
Weight 0 takes a row out of a loss's sum, not out of its divisor: Keras'
default reduction, "sum_over_batch_size", divides by every row of the batch,
padded ones included, and unweighted `metrics` count them. So the padding
changes nothing only for losses that sum ("sum"), divide by the weights
("mean_with_sample_weight"), or mask the padded rows (`ignore_class=0`, or an
output mask such as the decoders' that hides an all-zero row), and for
`weighted_metrics` (or unweighted ones that read such a mask).
`check_padding_exact(model, x)` says which of a model's losses and metrics
are not of these kinds; `pad_arrays` and `pad_dataset` run it when given the
model. Keras' epoch-level `loss` still averages steps by the rows they held,
padded ones included; compare the losses of single steps.

On TensorFlow use `tf.distribute` (`keras_attention.translation.distribute`,
docs/distributed.md): Keras 3's distribution API runs on JAX only.
"""

import numbers

import keras
import numpy as np
from keras import ops

from keras_attention.training.losses import SmoothedSparseCrossentropy

PADDING = 0
# Reductions under which a row of sample weight 0 changes neither a loss nor
# its gradient: its weighted values are 0, and the loss divides by nothing
# ("sum") or by the sum of the weights ("mean_with_sample_weight"). Keras'
# default, "sum_over_batch_size" (and its alias "mean"), divides by every
# value of the batch, padded rows' included.
EXACT_REDUCTIONS = ("sum", "mean_with_sample_weight")


class DistributionError(ValueError):
    """A distribution asked for on the wrong backend, or on devices that are
    not there."""


def check_jax_backend(what="keras.distribution"):
    """Raises `DistributionError` unless Keras runs on JAX."""
    backend = keras.backend.backend()
    if backend != "jax":
        raise DistributionError(
            f"{what} needs the JAX backend (KERAS_BACKEND=jax); the current backend is "
            f"{backend!r}. On TensorFlow, train on several devices with tf.distribute: "
            "`keras_attention.translation.distribute.make_strategy('mirrored')` (one "
            "machine) or 'multi-worker' (docs/distributed.md)."
        )


def data_parallel(devices=None):
    """A `keras.distribution.DataParallel` over `devices`.

    Set it for the whole program with `keras.distribution.set_distribution`,
    or for a block with `with distribution.scope():`; build and compile the
    model under it, then `fit` as usual with global batches that divide by
    the device count (`pad_arrays`, `pad_dataset`).

    Args:
        devices: None for every device JAX sees; an int N for the first N of
            them; or a list of device names (`"cpu:0"`, `"gpu:1"`, as
            `keras.distribution.list_devices()` gives them).

    Raises:
        DistributionError: not the JAX backend, or more devices (or a device)
            than JAX sees.
    """
    check_jax_backend("keras.distribution.DataParallel")
    available = keras.distribution.list_devices()
    if devices is None:
        chosen = available
    elif isinstance(devices, numbers.Integral) and not isinstance(devices, bool):
        if not 1 <= devices <= len(available):
            raise DistributionError(
                f"Invalid value for argument `devices`. Expected a count from 1 to "
                f"{len(available)}, the devices JAX sees ({', '.join(available)}). For "
                "N devices on a CPU, start Python with "
                "XLA_FLAGS=--xla_force_host_platform_device_count=N. "
                f"Received: devices={devices}"
            )
        chosen = available[: int(devices)]
    elif isinstance(devices, list | tuple) and devices:
        chosen = [str(d) for d in devices]
        unknown = [d for d in chosen if d.lower() not in {a.lower() for a in available}]
        if unknown or len(set(chosen)) != len(chosen):
            raise DistributionError(
                "Invalid value for argument `devices`. Expected distinct names among "
                f"{available}. Received: devices={list(devices)!r}"
            )
    else:
        raise DistributionError(
            "Invalid value for argument `devices`. Expected None, a positive count or "
            f"a list of device names. Received: devices={devices!r}"
        )
    return keras.distribution.DataParallel(devices=chosen)


def device_count(distribution=None):
    """How many devices a batch is split across: those of `distribution`
    (default: the one set with `keras.distribution.set_distribution`), 1
    without one."""
    distribution = distribution or keras.distribution.distribution()
    if distribution is None:
        return 1
    return int(np.prod(distribution.device_mesh.shape))


def _check_multiple(multiple):
    if isinstance(multiple, bool) or not isinstance(multiple, numbers.Integral) or multiple < 1:
        raise DistributionError(
            f"Invalid value for argument `multiple`. Expected a positive integer, the "
            f"device count. Received: multiple={multiple!r}"
        )
    return int(multiple)


def padded_size(rows, multiple):
    """The smallest multiple of `multiple` that holds `rows` rows."""
    multiple = _check_multiple(multiple)
    return -(-int(rows) // multiple) * multiple


def pad_rows(array, multiple):
    """`array` with zero rows appended up to a multiple of `multiple` rows.

    Returns:
        `(padded, rows)`: the padded array and the number of real rows, for
        `unpad`. For generation: a zero source row is empty, and gives an
        empty output.
    """
    array = np.asarray(array)
    rows = array.shape[0]
    extra = padded_size(rows, multiple) - rows
    if extra == 0:
        return array, rows
    return np.concatenate([array, np.zeros((extra, *array.shape[1:]), array.dtype)]), rows


def unpad(result, rows):
    """The first `rows` rows of every array of `result` (an array or a dict of
    them, as `Seq2SeqGenerator.greedy` and `beam` return)."""
    if isinstance(result, dict):
        return {k: np.asarray(v)[:rows] for k, v in result.items()}
    return np.asarray(result)[:rows]


def pad_arrays(x, y, sample_weight=None, multiple=None, batch_size=None, model=None):
    """Pads NumPy inputs so that every batch of `fit` or `evaluate` divides
    by the device count.

    Keras cuts the rows into batches of `batch_size` and a last, smaller one;
    with `batch_size` a multiple of the device count, padding the rows to a
    multiple of it makes the last batch divide too. The appended rows are
    zeros (empty sources, padding targets) with sample weight 0.

    Args:
        x: an array, or a list, tuple or dict of arrays (the model's inputs).
        y: the targets, an array.
        sample_weight: None (every real row weighs 1), or weights of the shape
            of `y` or of its first axes ((rows,) for token targets (rows, T)).
        multiple: the device count; None for `device_count()`.
        batch_size: if given, checked to be a multiple of `multiple`.
        model: if given, compiled: `check_padding_exact(model, x)` first.

    Returns:
        `(x, y, sample_weight)`, padded; 1 on real rows unless given, 0 on
        the padding rows. `sample_weight` has the shape of the values a
        Keras loss gives before its reduction (`weight_shape`): one weight
        per target for integer targets (class ids; for token targets
        (rows, T) the form a sequence loss with `ignore_class` takes), one
        per row of the last axis for float targets (a regression's (rows, D),
        a one-hot (rows, T, V)), which such losses average.

    Raises:
        DistributionError: a bad `multiple`, a `batch_size` that does not
            divide by it, inputs with different numbers of rows, or a model
            whose losses or metrics the padding would change.
    """
    multiple = _check_multiple(device_count() if multiple is None else multiple)
    if batch_size is not None and int(batch_size) % multiple:
        raise DistributionError(
            f"Invalid value for argument `batch_size`. Expected a multiple of the "
            f"{multiple} devices, so that every batch splits evenly. "
            f"Received: batch_size={batch_size}"
        )
    y = np.asarray(y)
    rows = y.shape[0]
    for name, array in _named_arrays(x):
        if np.shape(array)[0] != rows:
            raise DistributionError(
                f"Invalid inputs: `{name}` has {np.shape(array)[0]} rows where `y` has {rows}."
            )
    if model is not None:
        check_padding_exact(model, x)
    shape = weight_shape(y.shape, np.issubdtype(y.dtype, np.integer))
    if sample_weight is None:
        sample_weight = np.ones(shape, "float32")
    sample_weight = np.asarray(sample_weight, "float32")
    if sample_weight.shape != y.shape[: sample_weight.ndim]:
        raise DistributionError(
            f"Invalid value for argument `sample_weight`. Expected the shape of `y`, "
            f"{y.shape}, or its first axes. Received: shape {sample_weight.shape}"
        )
    if sample_weight.ndim < len(shape):
        # One weight per value of the loss: a sequence loss with
        # `ignore_class` takes no (rows,) weights in Keras 3.15.
        extra_axes = (1,) * (len(shape) - sample_weight.ndim)
        sample_weight = np.broadcast_to(
            sample_weight.reshape(*sample_weight.shape, *extra_axes), shape
        )
    x = _map_arrays(x, lambda a: pad_rows(a, multiple)[0])
    return x, pad_rows(y, multiple)[0], pad_rows(sample_weight, multiple)[0]


def weight_shape(y_shape, integer):
    """The shape of a Keras loss's values before its reduction, for targets
    of shape `y_shape`: the shape itself for integer targets (the sparse
    losses, one value per class id), without its last axis for float ones
    (mean squared error, cross-entropy over one-hot rows: one value per row
    of the last axis), `(rows,)` for float targets of one axis."""
    y_shape = tuple(y_shape)
    if integer or len(y_shape) < 2:
        return y_shape
    return y_shape[:-1]


class _MaskedPositions(keras.losses.Loss):
    """How many positions of `y_pred` its Keras mask leaves in: Keras'
    `Loss.__call__` multiplies the values by the mask of `y_pred` before
    this "sum" reduction, as it does for every loss and mean metric."""

    def __init__(self):
        super().__init__(name="masked_positions", reduction="sum")

    def call(self, y_true, y_pred):
        return ops.ones(ops.shape(y_pred)[:-1])  # one per position a mask covers


def padding_rows_are_masked(model, x):
    """Whether every output of `model` on an all-zero row (a padding row) is
    hidden by its Keras mask, as the decoders' outputs are when the target
    Embedding has `mask_zero=True`. `x` gives the structure, dtypes and
    trailing shapes of the inputs (arrays, or `tf.TensorSpec`s)."""

    def zero_row(array):
        shape = [2 if d is None else int(d) for d in tuple(array.shape)[1:]]
        dtype = getattr(array.dtype, "as_numpy_dtype", array.dtype)
        return np.zeros((1, *shape), dtype)

    outputs = model(_map_arrays(x, zero_row), training=False)
    counter = _MaskedPositions()
    return all(float(counter(0.0, output)) == 0.0 for output in keras.tree.flatten(outputs))


def check_padding_exact(model, x=None):
    """Raises `DistributionError` unless rows of sample weight 0 (the padding
    of `pad_arrays` and `pad_dataset`) change none of the losses, metrics and
    gradients of the compiled `model`.

    A loss is kept exact when its reduction is "sum" or
    "mean_with_sample_weight" (the same loss as Keras' default when every
    real row weighs 1), or when it leaves the padded rows out itself: a
    sparse cross-entropy with `ignore_class=0` (the padding target), a
    `SmoothedSparseCrossentropy` with `ignore_class=0`, or any mean loss of a
    model whose outputs carry a mask that hides an all-zero row (given `x`,
    checked on one). A loss with the default "sum_over_batch_size" (or
    "mean") otherwise divides by the padded rows too, and one with reduction
    None returns their values. `weighted_metrics` are kept exact; unweighted
    `metrics` count the padded rows unless they are mean metrics (accuracy,
    a loss as a metric) of a model whose outputs mask them. An activity
    regularizer adds up every row's activations, padded ones included.

    Args:
        model: a compiled Keras model.
        x: None, or the model's inputs (arrays, `tf.TensorSpec`s, or a list,
            tuple or dict of them) to check its output mask on a zero row.

    Raises:
        DistributionError: naming each loss, metric or layer the padding
            would change, and what to do instead.
    """
    if not getattr(model, "compiled", False):
        raise DistributionError(
            "Invalid value for argument `model`. Expected a compiled model, whose "
            "losses and metrics can be checked. Received: a model not compiled "
            f"({getattr(model, 'name', type(model).__name__)!r}); call `compile` first."
        )
    masked = x is not None and padding_rows_are_masked(model, x)
    problems = [p for loss in _leaves(model.loss) if (p := _loss_problem(loss, masked))]
    config = model.get_compile_config() or {}
    for metric in _leaves(config.get("metrics")):
        if not (masked and _is_mean_metric(metric)):
            problems.append(
                f"the unweighted metric `{_metric_name(metric)}` counts the padded rows: "
                "pass it in `weighted_metrics` instead of `metrics`"
            )
    for layer in _layers(model):
        if getattr(layer, "activity_regularizer", None) is not None:
            problems.append(
                f"layer `{layer.name}` has an activity regularizer, which adds up the "
                "activations of every row, padded ones included"
            )
    if problems:
        raise DistributionError(
            "Invalid value for argument `model`. Expected losses and metrics that rows "
            "of sample weight 0 leave unchanged, so that padding a batch to a multiple "
            f"of the devices changes nothing. Received: model {model.name!r}, where "
            + "; ".join(problems)
            + " (docs/distributed.md)."
        )


def _leaves(value):
    """The losses or metrics of each output in a `compile` argument, a
    serialized object (a dict with a "class_name") counting as one."""
    if value is None:
        return []
    if isinstance(value, dict) and "class_name" not in value:
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _loss_problem(loss, masked):
    """Why rows of weight 0 change `loss`, or None."""
    if isinstance(loss, keras.losses.Loss):
        name, reduction = loss.name, loss.reduction
        ignores_padding = loss.get_config().get("ignore_class") == PADDING
    else:  # a name or a function: `compile` wraps it with Keras' default
        name = loss if isinstance(loss, str) else getattr(loss, "__name__", repr(loss))
        reduction, ignores_padding = "sum_over_batch_size", False
    if isinstance(loss, SmoothedSparseCrossentropy):
        # It averages over the tokens it does not ignore in `call`.
        if loss.ignore_class == PADDING:
            return None
        return (
            f"the loss `{name}` (SmoothedSparseCrossentropy, "
            f"ignore_class={loss.ignore_class!r}) divides by every target token, the "
            f"padded rows' included: give it ignore_class={PADDING}, the padding target"
        )
    if reduction in EXACT_REDUCTIONS:
        return None
    if reduction in ("sum_over_batch_size", "mean"):
        if ignores_padding or masked:
            return None
        return (
            f"the loss `{name}` (reduction={reduction!r}) divides by every row of the "
            "batch, padded ones included: give it reduction='mean_with_sample_weight' "
            "(the same loss when every real row weighs 1) or 'sum'"
        )
    return (
        f"the loss `{name}` (reduction={reduction!r}) gives a value for every row, "
        "padded ones included: give it reduction='mean_with_sample_weight' or 'sum'"
    )


def _is_mean_metric(metric):
    """Whether a compiled metric is a mean over values that reads the mask of
    `y_pred` (Keras' `MeanMetricWrapper`: accuracies, losses as metrics)."""
    try:
        if isinstance(metric, dict):
            metric = keras.metrics.deserialize(metric)
        elif isinstance(metric, str):
            metric = keras.metrics.get(metric)
    except (TypeError, ValueError):
        return False
    if isinstance(metric, keras.metrics.Metric):
        return isinstance(metric, keras.metrics.MeanMetricWrapper)
    return callable(metric)  # a function: `compile` wraps it in a MeanMetricWrapper


def _metric_name(metric):
    if isinstance(metric, dict):
        return metric.get("config", {}).get("name") or metric.get("class_name")
    return metric if isinstance(metric, str) else getattr(metric, "__name__", repr(metric))


def _layers(model):
    for layer in getattr(model, "layers", []):
        yield layer
        yield from _layers(layer)


def _named_arrays(x):
    if isinstance(x, dict):
        return list(x.items())
    if isinstance(x, list | tuple):
        return [(f"x[{i}]", a) for i, a in enumerate(x)]
    return [("x", x)]


def _map_arrays(x, fn):
    if isinstance(x, dict):
        return {k: fn(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(fn(v) for v in x)
    return fn(x)


def pad_dataset(dataset, multiple=None, model=None):
    """Pads every batch of a batched `tf.data.Dataset` to a multiple of
    `multiple` rows, with rows of zeros that carry sample weight 0.

    Args:
        dataset: batches of `(x, y)` or `(x, y, sample_weight)`, `x` a tensor
            or a tuple or dict of tensors.
        multiple: the device count; None for `device_count()`.
        model: if given, compiled: `check_padding_exact(model, x)` first,
            `x` from the dataset's element spec.

    Returns:
        A dataset of `(x, y, sample_weight)`, sample weights of the shape of
        the loss's values as in `pad_arrays` (1 on real rows unless given, 0
        on padding rows). Only a batch that does not divide (the last) gets
        rows.
    """
    import tensorflow as tf

    multiple = _check_multiple(device_count() if multiple is None else multiple)
    if model is not None:
        check_padding_exact(model, dataset.element_spec[0])

    def pad(tensor, extra):
        paddings = [[0, extra]] + [[0, 0]] * (len(tensor.shape) - 1)
        return tf.pad(tensor, paddings)

    def padded(*batch):
        if len(batch) not in (2, 3):
            raise DistributionError(
                "Invalid value for argument `dataset`. Expected batches of (x, y) or "
                f"(x, y, sample_weight). Received: batches of {len(batch)} elements"
            )
        x, y = batch[0], batch[1]
        rank = len(weight_shape(y.shape, y.dtype.is_integer))
        weight = tf.ones(tf.shape(y)[:rank], tf.float32)
        if len(batch) == 3:  # broadcast (rows,) weights over the tokens, as pad_arrays
            given = tf.cast(batch[2], tf.float32)
            extra_axes = rank - len(given.shape)
            if extra_axes < 0:
                weight = given
            else:
                shape = tf.concat([tf.shape(given), [1] * extra_axes], 0)
                weight = weight * tf.reshape(given, shape)
        rows = tf.shape(y)[0]
        extra = (multiple - rows % multiple) % multiple
        x = tf.nest.map_structure(lambda t: pad(t, extra), x)
        return x, pad(y, extra), pad(tf.cast(weight, tf.float32), extra)

    return dataset.map(padded)
