"""Masking math shared by every layer: fill values, masked softmax, shape checks.

A masked position gets exactly zero weight and a fully masked row gets all-zero
weights (never NaN, never a uniform distribution). Scores are filled through
`where`, not by subtracting a constant, so no large number ever meets a real
score in half precision.
"""

import keras
import numpy as np
from keras import ops

# Half-precision scores are normalized in float32: a float16 softmax over a few
# hundred keys loses most of its mantissa in the normalizer.
_HALF_DTYPES = ("float16", "bfloat16")


def large_negative(dtype):
    """A finite large negative number representable in `dtype`.

    Used to fill masked scores. It is a fraction of the dtype's largest value so
    that subtracting the row maximum inside the softmax cannot overflow to -inf.
    """
    dtype = keras.backend.standardize_dtype(dtype)
    # bfloat16 has the exponent range of float32.
    finfo_dtype = "float32" if dtype == "bfloat16" else dtype
    return -0.5 * float(np.finfo(np.dtype(finfo_dtype)).max)


def softmax_dtype(dtype):
    """The dtype a softmax over scores of `dtype` is computed in."""
    dtype = keras.backend.standardize_dtype(dtype)
    return "float32" if dtype in _HALF_DTYPES else dtype


def shape_str(shape):
    """`(2, None, 8)` for a shape, as error messages print it."""
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"


def shape_error(name, expected, shape, why=""):
    """The `ValueError` of a tensor with the wrong shape, in Keras' form."""
    why = f" {why}" if why else ""
    return ValueError(
        f"Invalid value for argument `{name}`. Expected shape {expected}.{why} "
        f"Received: {name}.shape={shape_str(shape)}"
    )


def dims_compatible(a, b):
    """Whether two static dimensions can be equal (None matches anything)."""
    return a is None or b is None or a == b


def check_mask_shape(mask, scores_shape, name="mask"):
    """Raises unless `mask` has the rank of the scores and compatible sizes.

    A size of 1 in the mask is accepted (it is the documented broadcast of a
    key mask over query rows); any other difference is an error, never a
    silent broadcast.
    """
    mask_shape = tuple(mask.shape)
    scores_shape = tuple(scores_shape)
    ok = len(mask_shape) == len(scores_shape)
    if ok:
        for m, s in zip(mask_shape, scores_shape, strict=True):
            if m is not None and s is not None and m != 1 and m != s:
                ok = False
    if not ok:
        raise ValueError(
            f"Invalid value for argument `{name}`. Expected a boolean mask with "
            f"the shape of the scores {shape_str(scores_shape)} (a size of 1 "
            f"broadcasts along that axis). Received: {name}.shape="
            f"{shape_str(mask_shape)}"
        )


def masked_softmax(scores, mask=None, axis=-1):
    """Softmax of `scores` along `axis` that gives masked positions exactly 0.

    Args:
        scores: float tensor of any rank.
        mask: optional boolean tensor of the same rank as `scores` (sizes equal
            or 1); `True` keeps a position, `False` removes it.
        axis: the axis to normalize over.

    Returns:
        Weights with the dtype of `scores`. Unmasked positions of a row sum to 1;
        masked positions are exactly 0; a row with no unmasked position is all
        zeros. Under float16/bfloat16 the softmax itself runs in float32.
    """
    scores = ops.convert_to_tensor(scores)
    out_dtype = keras.backend.standardize_dtype(scores.dtype)
    work_dtype = softmax_dtype(out_dtype)
    x = ops.cast(scores, work_dtype)
    if mask is None:
        return ops.cast(ops.softmax(x, axis=axis), out_dtype)
    mask = ops.convert_to_tensor(mask)
    check_mask_shape(mask, scores.shape)
    # `where` broadcasts the mask (its shape was checked above): no
    # broadcast_to, whose shape argument is computed at run time and would
    # make every later tensor dynamically shaped in a TFLite loop body.
    mask = ops.cast(mask, "bool")
    # Straight to `work_dtype`: a Python float would pass through float32,
    # where the float64 fill value does not fit.
    fill = ops.convert_to_tensor(large_negative(work_dtype), dtype=work_dtype)
    x = ops.where(mask, x, fill)
    weights = ops.softmax(x, axis=axis)
    # A fully masked row was filled uniformly; `where` zeroes it and keeps the
    # gradient of those positions at exactly 0 (no 0 * inf).
    weights = ops.where(mask, weights, ops.zeros_like(weights))
    return ops.cast(weights, out_dtype)


def project(x, kernel):
    """`x @ kernel` over the last axis of `x`, as one 2-D matmul.

    On TensorFlow a 3-D × 2-D `ops.matmul` becomes a `Tensordot`, whose gradient
    inside a `while` loop has a dynamic transpose that XLA cannot compile; a
    flattened 2-D matmul has none.
    """
    if len(x.shape) == 2:
        return ops.matmul(x, kernel)
    leading = ops.shape(x)[:-1]
    flat = ops.reshape(x, (-1, x.shape[-1]))
    out = ops.matmul(flat, kernel)
    return ops.reshape(out, tuple(leading) + (kernel.shape[-1],))
