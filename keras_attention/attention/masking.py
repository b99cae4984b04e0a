"""Masking math shared by every layer: fill values, masked softmax, shape checks.

A masked position gets exactly zero weight and a fully masked row gets all-zero
weights (never NaN, never a uniform distribution). Scores are filled through
`where`, not by subtracting a constant, so no large number ever meets a real
score in half precision. What a mask removes is never read: `zero_masked`
replaces it (a NaN or inf in the padding included) before any product.
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


def shapes_compatible(shape, expected):
    """Whether `shape` has the rank of `expected` and sizes that can equal its."""
    shape, expected = tuple(shape), tuple(expected)
    return len(shape) == len(expected) and all(
        dims_compatible(a, b) for a, b in zip(shape, expected, strict=True)
    )


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
        Weights with the dtype of `scores`. Under float16/bfloat16 the softmax
        itself runs in float32. For each row along `axis`:

        - masked positions are exactly 0, whatever their score (NaN, inf);
        - the unmasked positions sum to 1, unless there is none or their
          scores are all -inf: then the row is all zeros;
        - infinite scores take the softmax's limits: a -inf score gets
          exactly 0, and the +inf scores of a row share it equally;
        - a NaN among the unmasked scores makes every unmasked weight of the
          row NaN (an upstream error shows instead of being hidden); this is
          the only way to get a NaN.
    """
    scores = ops.convert_to_tensor(scores)
    out_dtype = keras.backend.standardize_dtype(scores.dtype)
    work_dtype = softmax_dtype(out_dtype)
    x = ops.cast(scores, work_dtype)
    # Comparisons, not isinf/isnan: they are TFLite builtins. NaN != -inf, so a
    # NaN score stays in, and shows.
    keep = ops.not_equal(x, float("-inf"))
    if mask is not None:
        mask = ops.convert_to_tensor(mask)
        check_mask_shape(mask, scores.shape)
        # `logical_and` broadcasts the mask (its shape was checked above): no
        # broadcast_to, whose shape argument is computed at run time and would
        # make every later tensor dynamically shaped in a TFLite loop body.
        keep = ops.logical_and(keep, ops.cast(mask, "bool"))
    # Straight to `work_dtype`: a Python float would pass through float32,
    # where the float64 fill value does not fit.
    fill = ops.convert_to_tensor(large_negative(work_dtype), dtype=work_dtype)
    zero = ops.zeros((), dtype=work_dtype)
    x = ops.where(keep, x, fill)
    # After the fill, only a kept score can be NaN (NaN != NaN).
    nan = ops.not_equal(x, x)
    # A row with +inf scores: inf - inf would be NaN inside the softmax. Its
    # limit is equal shares among the +inf positions, which scores of 0 there
    # and the fill elsewhere give exactly (a NaN elsewhere is kept, and shows).
    top = ops.equal(x, float("inf"))
    top_row = ops.any(top, axis=axis, keepdims=True)
    x = ops.where(top_row, ops.where(top, zero, ops.where(nan, x, fill)), x)
    weights = ops.softmax(x, axis=axis)
    # A NaN among the kept scores makes its row NaN whatever the softmax
    # kernel does with it: TensorFlow's CPU kernel returns NaN at that
    # position only, and 0 elsewhere, on some CPUs.
    nan_row = ops.any(nan, axis=axis, keepdims=True)
    weights = ops.where(nan_row, ops.convert_to_tensor(float("nan"), dtype=work_dtype), weights)
    # A row without a kept position was filled uniformly; `where` zeroes it
    # and keeps the gradient of those positions at exactly 0 (no 0 * inf).
    weights = ops.where(keep, weights, zero)
    return ops.cast(weights, out_dtype)


def zero_masked(x, mask):
    """`x` with every position that `mask` removes replaced by exactly 0.

    Args:
        x: (batch, T, ...) values, keys or queries.
        mask: optional bool (batch, T); `False` removes a position.

    Returns:
        `x`, zero where `mask` is False. Through `where`, not a product: a NaN
        or inf in the padding would survive `x * mask` (0 · NaN is NaN), and
        its gradient would be NaN too.
    """
    if mask is None:
        return x
    mask = ops.cast(mask, "bool")
    for _ in range(len(x.shape) - len(mask.shape)):
        mask = ops.expand_dims(mask, -1)  # (B, T, 1, ...)
    return ops.where(mask, x, ops.zeros((), dtype=x.dtype))


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
