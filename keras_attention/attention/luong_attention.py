"""`LuongAttention`: multiplicative (dot, general) and concat attention."""

import keras
from keras import ops

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.additive_score import build_additive_score
from keras_attention.attention.additive_score import layer_additive_score
from keras_attention.attention.additive_score import project_keys
from keras_attention.attention.content_attention import ContentAttention
from keras_attention.attention.masking import shape_str

_SCORE_MODES = ("dot", "general", "concat")


@keras.saving.register_keras_serializable(package="keras_attention")
class LuongAttention(ContentAttention):
    """The attention scores of Luong, Pham and Manning (2015).

    - `score_mode="dot"`: e_i = qᵀ k_i (needs d_q == d_k).
    - `score_mode="general"`: e_i = qᵀ W k_i with W (d_q × d_k).
    - `score_mode="concat"`: e_i = v_aᵀ tanh(W_a [q; k_i]), with W_a split into
      a query part (d_q → units) and a key part (d_k → units).

    `use_scale=True` multiplies the score by a learned scalar (initialized to 1),
    as TensorFlow Addons' `LuongAttention(scale=True)`. With `num_heads > 1`
    (dot and general), query, key and value are split into `num_heads` equal
    slices, each head attends on its own (general: one d_q/H × d_k/H matrix per
    head) and the head contexts are concatenated; `num_heads=1` is exactly the
    single-head layer.

    Under float16 the "dot" and "general" scores are computed in float32: a
    product of two vectors overflows float16 (65,504) long before the softmax,
    which runs in float32 anyway.

    In a decoder, Luong's query is the state *after* the step, s_t.

    Args:
        score_mode: "dot", "general" or "concat". Defaults to "dot".
        units: hidden size of the "concat" score; defaults to d_q. Only used by
            "concat".
        use_scale: learn a scalar factor on the scores. Defaults to False.
        num_heads: number of heads ("dot" and "general"). Defaults to 1.
        dropout: dropout rate on the attention weights during training.
        seed: seed of the dropout.
        kernel_initializer: initializer of W (general) or W_a and v_a (concat).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments and returns: those of `ContentAttention`.

    Example:

    >>> import numpy as np
    >>> layer = LuongAttention(score_mode="general")
    >>> decoder_outputs = np.zeros((2, 3, 8), "float32")  # (batch, T_q, d_q)
    >>> encoder_outputs = np.ones((2, 5, 12), "float32")  # (batch, T_v, d_v)
    >>> context, weights = layer(
    ...     decoder_outputs, encoder_outputs, return_attention_scores=True
    ... )
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 3, 12), (2, 3, 5))
    """

    def __init__(
        self,
        score_mode="dot",
        units=None,
        use_scale=False,
        num_heads=1,
        dropout=0.0,
        seed=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(num_heads=num_heads, dropout=dropout, seed=seed, **kwargs)
        if score_mode not in _SCORE_MODES:
            raise ValueError(
                "Invalid value for argument `score_mode`. Expected one of "
                f"{_SCORE_MODES}. Received: score_mode={score_mode!r}"
            )
        if units is not None and score_mode != "concat":
            raise ValueError(
                "Invalid value for argument `units`. Only score_mode='concat' "
                f"has a hidden layer. Received: units={units!r} with "
                f"score_mode={score_mode!r}"
            )
        check_positive_int("units", units, allow_none=True)
        if score_mode == "concat" and num_heads != 1:
            raise ValueError(
                "Invalid value for argument `num_heads`. score_mode='concat' has "
                f"a single head. Received: num_heads={num_heads}"
            )
        self.score_mode = score_mode
        self.units = units
        self.use_scale = bool(use_scale)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        d_q, d_k = query_shape[-1], key_shape[-1]
        if self.score_mode == "dot" and None not in (d_q, d_k) and d_q != d_k:
            raise ValueError(
                "Invalid value for argument `key`. score_mode='dot' needs query "
                f"and key of the same size: expected shape (batch, T_v, d_k={d_q}) "
                f"for a query with d_q={d_q}. Received: key.shape="
                f"{shape_str(key_shape)}. Use score_mode='general', which learns "
                "a (d_q × d_k) matrix between them."
            )
        super().build(query_shape, value_shape, key_shape)

    def build_score(self, query_dim, key_dim):
        heads = self.num_heads
        if self.score_mode == "general":
            self.kernel = self.add_weight(
                name="kernel",  # W, one (d_q/H × d_k/H) block per head
                shape=(heads, query_dim // heads, key_dim // heads),
                initializer=self.kernel_initializer,
            )
        if self.score_mode == "concat":
            # W_a [q; k] = W_a's query part · q + its key part · k.
            build_additive_score(self, query_dim, key_dim, self.units or query_dim)
        if self.use_scale:
            self.scale = self.add_weight(name="scale", shape=(), initializer="ones")

    def precompute_keys(self, key):
        """Projects the keys once per source sentence.

        dot: the keys themselves, (batch, T_v, d_k); general: W k for every key,
        (batch, T_v, d_q); concat: the key part of W_a [q; k], (batch, T_v, units).
        """
        if self.score_mode == "concat":
            return project_keys(self, key)
        dtype = self.compute_dtype
        key = ops.cast(key, dtype)
        if self.score_mode == "dot":
            return key
        heads = self.num_heads  # "general"
        batch, t_v = ops.shape(key)[0], ops.shape(key)[1]
        key = ops.reshape(key, (batch, t_v, heads, self.key_dim // heads))
        kernel = ops.cast(self.kernel, dtype)  # (H, d_q/H, d_k/H)
        projected = ops.einsum("bvhk,hqk->bvhq", key, kernel)
        return ops.reshape(projected, (batch, t_v, self.query_dim))

    def score(self, query, processed_keys):
        """The score of `score_mode`: (batch, T_q, d_q) → (batch, num_heads, T_q, T_v)."""
        dtype = self.compute_dtype
        if self.score_mode == "concat":
            scores = layer_additive_score(self, query, processed_keys)  # (B, T_q, T_v)
            scores = ops.expand_dims(scores, 1)  # (B, 1, T_q, T_v)
        else:
            if keras.backend.standardize_dtype(dtype) == "float16":
                # A product of two vectors is unbounded: beyond 65504 it is inf
                # in float16 before the float32 softmax sees it. bfloat16 has
                # the range of float32.
                dtype = "float32"
                query = ops.cast(query, dtype)
                processed_keys = ops.cast(processed_keys, dtype)
            heads = self.num_heads
            batch, t_q = ops.shape(query)[0], ops.shape(query)[1]
            t_v = ops.shape(processed_keys)[1]
            size = self.query_dim // heads
            q = ops.reshape(query, (batch, t_q, heads, size))  # (B, T_q, H, d_q/H)
            k = ops.reshape(processed_keys, (batch, t_v, heads, size))
            scores = ops.einsum("bqhd,bvhd->bhqv", q, k)  # (B, H, T_q, T_v)
        if self.use_scale:
            scores = scores * ops.cast(self.scale, dtype)
        return scores

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "score_mode": self.score_mode,
                "units": self.units,
                "use_scale": self.use_scale,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
