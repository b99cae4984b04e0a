"""The additive ("concat") score shared by Bahdanau's and Luong's attention.

Bahdanau's additive score and Luong's "concat" score are the same formula,

    e_{t,i} = v_aᵀ tanh(W_a q_t + U_a k_i + b)

with U_a k computed once per source sentence ("processed keys") and b absent
from the plain forms. These functions create its weights on the layer that
uses it, project the keys, and score a sequence of queries or one step.
"""

import math

import keras
from keras import ops

from keras_attention.attention.masking import project


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
        hidden = ops.expand_dims(query, 1) + keys  # (B, T_v, units)
    else:
        # expand_dims, not `x[:, None]`: TFLite turns the indexing into a
        # strided slice that copies the keys element by element at each step.
        hidden = ops.expand_dims(query, 2) + ops.expand_dims(keys, 1)  # (B, T_q, T_v, units)
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


def add_projections(layer, query_dim, key_dim, units):
    """Creates `layer.query_kernel` (d_q, units) and `layer.key_kernel` (d_k, units).

    W_aᵀ and U_aᵀ of the additive score, initialized by `layer.kernel_initializer`.
    """
    layer.query_kernel = layer.add_weight(
        name="query_kernel",  # W_aᵀ
        shape=(query_dim, units),
        initializer=layer.kernel_initializer,
    )
    layer.key_kernel = layer.add_weight(
        name="key_kernel",  # U_aᵀ
        shape=(key_dim, units),
        initializer=layer.kernel_initializer,
    )


def build_additive_score(layer, query_dim, key_dim, units, normalize=False):
    """Creates the weights of the additive score on `layer`, in this order.

    W_aᵀ and U_aᵀ (`add_projections`), v_a (`score_vector`) and, with
    `normalize`, the scalar g (`score_scale`, initialized to sqrt(1 / units))
    and the bias b (`score_bias`, zeros): TensorFlow Addons' `normalize=True`.
    """
    add_projections(layer, query_dim, key_dim, units)
    layer.score_vector = layer.add_weight(
        name="score_vector",  # v_a
        shape=(units,),
        initializer=layer.kernel_initializer,
    )
    if normalize:
        layer.score_scale = layer.add_weight(
            name="score_scale",  # g
            shape=(),
            initializer=keras.initializers.Constant(math.sqrt(1.0 / units)),
        )
        layer.score_bias = layer.add_weight(
            name="score_bias",  # b
            shape=(units,),
            initializer="zeros",
        )


def project_keys(layer, key):
    """U_a k for every key, in the compute dtype: (batch, T_v, d_k) → (batch, T_v, units)."""
    dtype = layer.compute_dtype
    return project(ops.cast(key, dtype), ops.cast(layer.key_kernel, dtype))


def layer_additive_score(layer, query, processed_keys, normalize=False):
    """The additive score of `layer`'s weights (from `build_additive_score`).

    Args:
        layer: the layer that holds the weights.
        query: (batch, T_q, d_q), or (batch, d_q) for one step, in the
            layer's compute dtype.
        processed_keys: `project_keys(layer, key)`, (batch, T_v, units).
        normalize: whether the weights include g and b.

    Returns:
        The scores, (batch, T_q, T_v), or (batch, T_v) for one step.
    """
    dtype = layer.compute_dtype
    projected = project(query, ops.cast(layer.query_kernel, dtype))  # (B, [T_q,] units)
    if normalize:
        v = normalized_score_vector(layer.score_vector, layer.score_scale, dtype)
        bias = ops.cast(layer.score_bias, dtype)
    else:
        v, bias = ops.cast(layer.score_vector, dtype), None
    return additive_score(projected, processed_keys, v, bias)
