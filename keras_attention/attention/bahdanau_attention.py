"""`BahdanauAttention`: additive attention with learned projections."""

import math

import keras
from keras import ops

from keras_attention.attention.additive_score import additive_score
from keras_attention.attention.additive_score import normalized_score_vector
from keras_attention.attention.content_attention import ContentAttention
from keras_attention.masking import project
from keras_attention.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class BahdanauAttention(ContentAttention):
    """Additive attention of Bahdanau, Cho and Bengio (2014).

    Scores every key against the query with

        e_i = v_aᵀ tanh(W_a q + U_a k_i)

    where W_a projects the query (d_q → units), U_a the keys (d_k → units) and
    v_a (units,) reduces to a score. The query and key sizes may differ (a
    bidirectional encoder gives d_k = 2·d_q). With `normalize=True` it is the
    weight-normalized form of TensorFlow Addons' `BahdanauAttention`:

        e_i = (g · v_a / ‖v_a‖)ᵀ tanh(W_a q + U_a k_i + b)

    with a learned scalar g (initialized to sqrt(1 / units)) and bias b.

    In a decoder, Bahdanau's query is the state *before* the step, s_{t-1}.

    Args:
        units: size of the hidden layer inside the tanh.
        normalize: weight-normalized score (see above). Defaults to False.
        dropout: dropout rate on the attention weights during training.
        seed: seed of the dropout.
        kernel_initializer: initializer of W_a, U_a and v_a.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: (batch, T_q, d_q), or (batch, d_q) for one decoder step.
        value: (batch, T_v, d_v).
        key: optional (batch, T_v, d_k); defaults to `value`.
        query_mask: optional bool (batch, T_q) or (batch,); padded queries get
            zero context and zero weights. Filled in automatically from a
            masking layer upstream of `query`.
        value_mask: optional bool (batch, T_v); masked keys get weight 0 and
            are never read (a NaN or inf there is harmless). Filled in
            automatically from a masking layer upstream of `value`.
        return_attention_scores: also return the weights.
        training: whether dropout is active.

    Returns:
        The context, (batch, T_q, d_v) or (batch, d_v), and with
        `return_attention_scores=True` also the weights, (batch, T_q, T_v) or
        (batch, T_v), summing to 1 over the unmasked keys.

    Example:

    >>> import numpy as np
    >>> layer = BahdanauAttention(units=16)
    >>> decoder_state = np.zeros((2, 8), "float32")  # (batch, d_q)
    >>> encoder_outputs = np.ones((2, 5, 12), "float32")  # (batch, T_v, d_v)
    >>> context, weights = layer(
    ...     decoder_state, encoder_outputs, return_attention_scores=True
    ... )
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 12), (2, 5))
    """

    def __init__(
        self,
        units,
        normalize=False,
        dropout=0.0,
        seed=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        kwargs.pop("num_heads", None)
        super().__init__(num_heads=1, dropout=dropout, seed=seed, **kwargs)
        check_positive_int("units", units)
        self.units = units
        self.normalize = bool(normalize)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build_score(self, query_dim, key_dim):
        self.query_kernel = self.add_weight(
            name="query_kernel",  # W_aᵀ
            shape=(query_dim, self.units),
            initializer=self.kernel_initializer,
        )
        self.key_kernel = self.add_weight(
            name="key_kernel",  # U_aᵀ
            shape=(key_dim, self.units),
            initializer=self.kernel_initializer,
        )
        self.score_vector = self.add_weight(
            name="score_vector",  # v_a
            shape=(self.units,),
            initializer=self.kernel_initializer,
        )
        if self.normalize:
            self.score_scale = self.add_weight(
                name="score_scale",  # g
                shape=(),
                initializer=keras.initializers.Constant(math.sqrt(1.0 / self.units)),
            )
            self.score_bias = self.add_weight(
                name="score_bias",  # b
                shape=(self.units,),
                initializer="zeros",
            )

    def precompute_keys(self, key):
        """U_a k for every key: (batch, T_v, d_k) → (batch, T_v, units)."""
        key = ops.cast(key, self.compute_dtype)
        return project(key, ops.cast(self.key_kernel, self.compute_dtype))

    def _score(self, query, processed_keys):
        dtype = self.compute_dtype
        projected = project(query, ops.cast(self.query_kernel, dtype))  # (B, T_q, u)
        if self.normalize:
            v = normalized_score_vector(self.score_vector, self.score_scale, dtype)
            bias = ops.cast(self.score_bias, dtype)
        else:
            v, bias = ops.cast(self.score_vector, dtype), None
        scores = additive_score(projected, processed_keys, v, bias)  # (B, T_q, T_v)
        return scores[:, None, :, :]  # (B, 1, T_q, T_v)

    def get_config(self):
        config = super().get_config()
        config.pop("num_heads")
        config.update(
            {
                "units": self.units,
                "normalize": self.normalize,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
