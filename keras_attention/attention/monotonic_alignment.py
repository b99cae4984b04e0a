"""The expected alignment of monotonic attention (Raffel et al., 2017), as functions.

Monotonic attention reads the source left to right: at decoder step t it starts
where step t-1 stopped and, at each source position j, stops there with the
"choosing" probability p_j or moves on with 1 - p_j. The expected alignment
given the previous one, α_{t-1}, is

    q_j   = (1 - p_{j-1}) q_{j-1} + α_{t-1,j}        (q_0 = α_{t-1,0})
    α_t,j = p_j q_j

computed here three ways, as TensorFlow Addons' `monotonic_attention` does:
"recursive" (the recurrence above, a scan over the source), "parallel" (its
closed form with cumulative products, one pass; the products are taken in log
space and the divisor is clipped, so it drifts from "recursive" where the
probabilities saturate near 1) and "hard" (0/1 choices: the first position at
or after the previous one whose probability is above 1/2; one-hot or, when no
position is chosen, all zeros).

The weights of a step sum to at most 1: the mass that walks past the last
source position is lost, as in the paper.
"""

import keras
import numpy as np
from keras import ops

from keras_attention.backend import loops

MONOTONIC_MODES = ("parallel", "recursive", "hard")

# Addons clips the divisor of the parallel form to [1e-10, 1]: where the
# exclusive cumulative product of 1 - p is smaller, the form is inexact anyway.
_PARALLEL_CLIP = 1e-10


def _shift_right(x, fill):
    """x[:, j-1] at position j, `fill` at position 0: (B, T) → (B, T)."""
    first = ops.full_like(x[:, :1], fill)  # (B, 1)
    return ops.concatenate([first, x[:, :-1]], axis=1)


def exclusive_cumsum(x):
    """Σ_{i<j} x_i along axis 1; exact (no `cumsum(x) - x` rounding)."""
    return ops.cumsum(_shift_right(x, 0.0), axis=1)


def safe_cumprod(x, exclusive=False):
    """Cumulative product along axis 1, in log space, with x clipped to [tiny, 1].

    As Addons' `safe_cumprod`: a product of many factors below 1 underflows
    gracefully instead of going through 0 · inf in the gradient.
    """
    dtype = keras.backend.standardize_dtype(x.dtype)
    tiny = float(np.finfo(np.dtype(dtype)).tiny)
    logs = ops.log(ops.clip(x, tiny, 1.0))  # (B, T)
    summed = exclusive_cumsum(logs) if exclusive else ops.cumsum(logs, axis=1)
    return ops.exp(summed)


def _recursive_step(q, x):
    # At module level, not a closure: JAX reuses the traced loop of an eager
    # scan only for the same function object.
    q = x["keep"] * q + x["previous"]  # (B,)
    return q, q


def monotonic_alignment(p_choose, previous_alignment, mode="parallel"):
    """The expected monotonic alignment of one step.

    Args:
        p_choose: (batch, T_v) choosing probabilities in [0, 1] (in "hard"
            mode, 0 or 1).
        previous_alignment: (batch, T_v) the alignment of the previous step,
            α_{t-1} (one-hot at position 0 for the first step).
        mode: "parallel", "recursive" or "hard" (see the module docstring).

    Returns:
        α_t, (batch, T_v), in the dtype of `p_choose`.
    """
    if mode not in MONOTONIC_MODES:
        raise ValueError(
            f"Invalid value for argument `mode`. Expected one of {MONOTONIC_MODES}. "
            f"Received: mode={mode!r}"
        )
    previous_alignment = ops.cast(previous_alignment, p_choose.dtype)
    if mode == "recursive":
        # shifted_j = 1 - p_{j-1}, and 1 at j = 0.
        shifted = _shift_right(1.0 - p_choose, 1.0)  # (B, T_v)

        xs = {
            "keep": ops.transpose(shifted, (1, 0)),  # (T_v, B)
            "previous": ops.transpose(previous_alignment, (1, 0)),  # (T_v, B)
        }
        _, q = loops.scan(_recursive_step, ops.zeros_like(p_choose[:, 0]), xs)  # (T_v, B)
        return p_choose * ops.transpose(q, (1, 0))  # (B, T_v)
    if mode == "parallel":
        cumprod = safe_cumprod(1.0 - p_choose, exclusive=True)  # (B, T_v)
        divisor = ops.clip(cumprod, _PARALLEL_CLIP, 1.0)
        return p_choose * cumprod * ops.cumsum(previous_alignment / divisor, axis=1)
    # "hard": drop the choices before the previous position, then keep the
    # first choice left: p · Π_{i<j} (1 - p_i) is 1 there and 0 elsewhere.
    # With 0/1 choices the product is 1 exactly where Σ_{i<j} p_i = 0: a
    # cumulative sum (TFLite has no builtin cumulative product).
    p_choose = p_choose * ops.cumsum(previous_alignment, axis=1)  # (B, T_v)
    not_chosen_before = ops.cast(ops.equal(exclusive_cumsum(p_choose), 0.0), p_choose.dtype)
    return p_choose * not_chosen_before
