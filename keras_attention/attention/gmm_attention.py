"""`GMMAttention`: Graves' Gaussian-mixture attention, a mechanism with a position state."""

import keras
from keras import ops

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.base_attention import BaseAttention


@keras.saving.register_keras_serializable(package="keras_attention")
class GMMAttention(BaseAttention):
    """The Gaussian-mixture attention of Graves (2013), "Generating Sequences With RNNs".

    The weights do not score the keys: the query moves a mixture of K
    Gaussian windows along the source positions u = 0 .. T_v-1. At step t,
    from the query q_t:

        (α̂, β̂, κ̂) = W q_t + b                      # (batch, 3K)
        α = exp(α̂),  β = exp(β̂),  κ_t = κ_{t-1} + exp(κ̂)
        a_t(u) = Σ_k α_k exp(-β_k (κ_k - u)²)

    α is each window's importance, β its width and κ its centre, which only
    moves forward: the alignment is monotonic by construction, the property
    that long-form speech synthesis relies on. The weights are not
    normalized (Graves' form): they need not sum to 1. Masked keys get weight
    0. The state is the centres, `{"position": κ (batch, K)}`, starting at 0.

    This layer fills the contract of `BaseAttention` with `build_score`,
    `step_weights`, `attention_state_keys` and `initial_attention_state`;
    docs/custom_attention.md writes it step by step.

    Args:
        num_mixtures: K, the number of Gaussian windows.
        kernel_initializer: initializer of W.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: (batch, T_q, d_q), or (batch, d_q) for one step.
        value: (batch, T_v, d_v).
        key: optional, unused by the weights (they read only positions).
        query_mask: optional bool (batch, T_q) or (batch,).
        value_mask: optional bool (batch, T_v).
        return_attention_scores: also return the weights.
        attention_state: `{"position": (batch, K)}` to start from; None for
            the initial state (every window at the first position).
        return_attention_state: also return the state after the last query.

    Returns:
        The context, (batch, T_q, d_v) or (batch, d_v), and with
        `return_attention_scores=True` the weights, (batch, T_q, T_v) or
        (batch, T_v); with `return_attention_state=True` the state.

    Example:

    >>> import numpy as np
    >>> layer = GMMAttention(num_mixtures=3)
    >>> queries = np.zeros((2, 4, 8), "float32")  # (batch, T_q, d_q)
    >>> memory = np.ones((2, 6, 5), "float32")  # (batch, T_v, d_v)
    >>> context, weights = layer(queries, memory, return_attention_scores=True)
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 4, 5), (2, 4, 6))
    """

    attention_state_keys = ("position",)

    def __init__(self, num_mixtures=5, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int("num_mixtures", num_mixtures)
        self.num_mixtures = num_mixtures
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build_score(self, query_dim, key_dim):
        k = self.num_mixtures
        self.kernel = self.add_weight(
            name="kernel", shape=(query_dim, 3 * k), initializer=self.kernel_initializer
        )
        self.bias = self.add_weight(name="bias", shape=(3 * k,), initializer="zeros")

    def initial_attention_state(self, memory, value_mask=None):
        """`{"position": zeros (batch, K)}`: every window starts at the first position.

        Read from the batch size alone: an empty memory (T_v = 0) has a
        state too, and gives zero weights and context.
        """
        batch = memory[0] if isinstance(memory, (tuple, list)) else ops.shape(memory)[0]
        return {"position": ops.zeros((batch, self.num_mixtures), dtype=self.state_dtype)}

    def attention_state_shapes(self, value_shape):
        return {"position": (value_shape[0], self.num_mixtures)}

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        dtype = self.state_dtype  # float32 under mixed precision: exp and squares
        k = self.num_mixtures
        params = ops.matmul(ops.cast(query, dtype), ops.cast(self.kernel, dtype))
        params = params + ops.cast(self.bias, dtype)  # (B, 3K)
        alpha = ops.exp(params[:, :k])  # (B, K)
        beta = ops.exp(params[:, k : 2 * k])  # (B, K)
        position = state["position"] + ops.exp(params[:, 2 * k :])  # κ_t (B, K)
        t_v = ops.shape(processed_keys)[1]
        u = ops.cast(ops.arange(t_v), dtype)[None, None, :]  # (1, 1, T_v)
        distance = position[:, :, None] - u  # (B, K, T_v)
        windows = alpha[:, :, None] * ops.exp(-beta[:, :, None] * ops.square(distance))
        weights = ops.sum(windows, axis=1)  # (B, T_v)
        if value_mask is not None:
            weights = ops.where(ops.cast(value_mask, "bool"), weights, ops.zeros_like(weights))
        return weights, {"position": position}

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_mixtures": self.num_mixtures,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
