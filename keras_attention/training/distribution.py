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
`ignore_class=0` masks its target tokens, and weight 0 removes it from the
mean of any other loss. Keras' epoch-level `loss` averages steps by the rows
they held, padded ones included; compare the losses of single steps.

On TensorFlow use `tf.distribute` (`keras_attention.translation.distribute`,
docs/distributed.md): Keras 3's distribution API runs on JAX only.
"""

import numbers

import keras
import numpy as np

PADDING = 0


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


def pad_arrays(x, y, sample_weight=None, multiple=None, batch_size=None):
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

    Returns:
        `(x, y, sample_weight)`, padded; `sample_weight` of the shape of `y`
        (for token targets, one weight per token: the form a sequence loss
        with `ignore_class` takes), 1 on real rows unless given, 0 on the
        padding rows.

    Raises:
        DistributionError: a bad `multiple`, a `batch_size` that does not
            divide by it, or inputs with different numbers of rows.
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
    if sample_weight is None:
        sample_weight = np.ones(y.shape, "float32")
    sample_weight = np.asarray(sample_weight, "float32")
    if sample_weight.shape != y.shape[: sample_weight.ndim]:
        raise DistributionError(
            f"Invalid value for argument `sample_weight`. Expected the shape of `y`, "
            f"{y.shape}, or its first axes. Received: shape {sample_weight.shape}"
        )
    # One weight per target token: a sequence loss with `ignore_class` takes
    # no (rows,) weights in Keras 3.15.
    extra_axes = (1,) * (y.ndim - sample_weight.ndim)
    sample_weight = np.broadcast_to(
        sample_weight.reshape(*sample_weight.shape, *extra_axes), y.shape
    )
    x = _map_arrays(x, lambda a: pad_rows(a, multiple)[0])
    return x, pad_rows(y, multiple)[0], pad_rows(sample_weight, multiple)[0]


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


def pad_dataset(dataset, multiple=None):
    """Pads every batch of a batched `tf.data.Dataset` to a multiple of
    `multiple` rows, with rows of zeros that carry sample weight 0.

    Args:
        dataset: batches of `(x, y)` or `(x, y, sample_weight)`, `x` a tensor
            or a tuple or dict of tensors.
        multiple: the device count; None for `device_count()`.

    Returns:
        A dataset of `(x, y, sample_weight)`, sample weights of the shape of
        `y` (1 on real rows unless given, 0 on padding rows). Only a batch
        that does not divide (the last) gets rows.
    """
    import tensorflow as tf

    multiple = _check_multiple(device_count() if multiple is None else multiple)

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
        weight = tf.ones_like(y, tf.float32)
        if len(batch) == 3:  # broadcast (rows,) weights over the tokens, as pad_arrays
            given = tf.cast(batch[2], tf.float32)
            extra_axes = len(y.shape) - len(given.shape)
            weight = weight * tf.reshape(given, tf.concat([tf.shape(given), [1] * extra_axes], 0))
        rows = tf.shape(y)[0]
        extra = (multiple - rows % multiple) % multiple
        x = tf.nest.map_structure(lambda t: pad(t, extra), x)
        return x, pad(y, extra), pad(tf.cast(weight, tf.float32), extra)

    return dataset.map(padded)
