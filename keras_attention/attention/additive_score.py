"""The additive ("concat") score shared by Bahdanau's and Luong's attention.

Bahdanau's additive score and Luong's "concat" score are the same formula,

    e_{t,i} = v_aᵀ tanh(W_a q_t + U_a k_i + b)

with U_a k computed once per source sentence ("processed keys") and b absent
from the plain forms. The layers project the query and the keys themselves;
these functions hold the rest, for a sequence of queries and for one step.
"""

from keras import ops


def additive_score(query, keys, score_vector, bias=None):
    """v_aᵀ tanh(q + k + b) for every projected query q and projected key k.

    Args:
        query: the projected queries W_a q, (batch, T_q, units), or
            (batch, units) for one decoder step.
        keys: the projected keys U_a k, (batch, T_v, units).
        score_vector: v_a, (units,), in the dtype of `query`.
        bias: optional term added inside the tanh, (units,), in that dtype.

    Returns:
        The scores, (batch, T_q, T_v), or (batch, T_v) for one step.
    """
    if len(query.shape) == 2:
        hidden = query[:, None, :] + keys  # (B, T_v, units)
    else:
        hidden = query[:, :, None, :] + keys[:, None, :, :]  # (B, T_q, T_v, units)
    if bias is not None:
        hidden = hidden + bias
    return ops.sum(ops.tanh(hidden) * score_vector, axis=-1)  # (B, T_q, T_v) or (B, T_v)


def normalized_score_vector(score_vector, score_scale, dtype):
    """g · v_a / ‖v_a‖, the weight-normalized v_a of TensorFlow Addons' `normalize=True`.

    Computed in float32, whatever `dtype`: the sum of squares overflows float16
    easily. Returned in `dtype`.
    """
    v32 = ops.cast(score_vector, "float32")
    g32 = ops.cast(score_scale, "float32")
    return ops.cast(g32 * v32 / ops.sqrt(ops.sum(v32 * v32)), dtype)
