"""`BahdanauMonotonicAttention`: monotonic attention over the additive score."""

import math

import keras
from keras import ops

from keras_attention.attention.additive_score import additive_score
from keras_attention.attention.additive_score import normalized_score_vector
from keras_attention.attention.base_monotonic_attention import BaseMonotonicAttention
from keras_attention.masking import project
from keras_attention.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class BahdanauMonotonicAttention(BaseMonotonicAttention):
    """Monotonic attention (Raffel et al., 2017) with Bahdanau's additive score.

    The Keras 3 successor of TensorFlow Addons' `BahdanauMonotonicAttention`,
    with its arguments and semantics. At step t, with s the query and h_j the
    keys,

        energy_j = v_aᵀ tanh(W_a s + U_a h_j) + r
        p_j      = sigmoid(energy_j + σ·n_j)        (noise in training only)
        α_t      = the expected monotonic alignment from p and α_{t-1}

    with `normalize=True` the weight-normalized score
    (g · v_a / ‖v_a‖)ᵀ tanh(W_a s + U_a h_j + b), as `BahdanauAttention`. r is
    a learned scalar initialized to `score_bias_init` (Raffel et al. suggest a
    negative value, e.g. -4, so that the attention moves on at first). The
    alignment of a step is computed from that of the previous step:

    - "recursive": q_j = (1 - p_{j-1}) q_{j-1} + α_{t-1,j}; α_{t,j} = p_j q_j.
    - "parallel" (default): the same in closed form with cumulative products,
      as Addons' `monotonic_attention` (safe cumprod, divisor clipped to
      [1e-10, 1]); equal to "recursive" unless probabilities saturate near 1.
    - "hard": p_j = 1 where energy_j > 0, else 0; α_t is one-hot at the first
      such position at or after the previous one (all zeros when there is
      none). For inference and streaming: it has no gradient.

    The weights of a step sum to at most 1 (mass that runs past the last key is
    lost), they are 0 at masked keys (p_j = 0 there), and a fully masked row
    gives zero weights and context. The first step starts from
    `initial_attention_state`: one-hot at the first unmasked key.

    Args:
        units: size of the hidden layer inside the tanh.
        sigmoid_noise: standard deviation of the noise added to the energies
            before the sigmoid, in training only. Defaults to 0.
        score_bias_init: initial value of the scalar bias r. Defaults to 0.
        mode: "parallel", "recursive" or "hard". Defaults to "parallel".
        normalize: weight-normalized score (see above). Defaults to False.
        seed: seed of the noise.
        kernel_initializer: initializer of W_a, U_a and v_a.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: (batch, T_q, d_q), a sequence of queries run step by step, or
            (batch, d_q) for one step.
        value: (batch, T_v, d_v).
        key: optional (batch, T_v, d_k); defaults to `value`.
        previous_alignment: optional (batch, T_v) weights α_{t-1} of the step
            before the first query; defaults to `initial_attention_state`.
        query_mask: optional bool (batch, T_q) or (batch,); padded queries get
            zero context and weights and leave the state unchanged.
        value_mask: optional bool (batch, T_v); masked keys get weight 0 and
            are never read. Both masks are filled in automatically from a
            masking layer upstream.
        return_attention_scores: also return the weights.
        return_attention_state: also return the state after the last query,
            `{"alignment": (batch, T_v)}`.
        training: whether the sigmoid noise is added.

    Returns:
        The context, (batch, T_q, d_v) or (batch, d_v); with
        `return_attention_scores=True` also the weights, (batch, T_q, T_v) or
        (batch, T_v); with `return_attention_state=True` also the state dict.

    Step by step (what a decoder does): `keys = layer.precompute_keys(value)`
    once, `state = layer.initial_attention_state(value, value_mask)`, the
    noise of all steps `noise = layer.step_noise((T, batch, T_v), training)`
    before the loop, then `context, weights, state = layer.attend_step(query_t,
    value, keys, state, value_mask=value_mask, noise=noise_t)` at every step.

    Example:

    >>> import numpy as np
    >>> layer = BahdanauMonotonicAttention(units=16, score_bias_init=-1.0)
    >>> decoder_states = np.zeros((2, 3, 8), "float32")  # (batch, T_q, d_q)
    >>> encoder_outputs = np.ones((2, 5, 12), "float32")  # (batch, T_v, d_v)
    >>> context, weights = layer(
    ...     decoder_states, encoder_outputs, return_attention_scores=True
    ... )
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 3, 12), (2, 3, 5))
    """

    def __init__(
        self,
        units,
        sigmoid_noise=0.0,
        score_bias_init=0.0,
        mode="parallel",
        normalize=False,
        seed=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(
            sigmoid_noise=sigmoid_noise,
            score_bias_init=score_bias_init,
            mode=mode,
            seed=seed,
            kernel_initializer=kernel_initializer,
            **kwargs,
        )
        check_positive_int("units", units)
        self.units = units
        self.normalize = bool(normalize)

    def build_energy(self, query_dim, key_dim):
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
        """U_a h_j for every key: (batch, T_v, d_k) → (batch, T_v, units)."""
        key = ops.cast(key, self.compute_dtype)
        return project(key, ops.cast(self.key_kernel, self.compute_dtype))

    def _energy(self, query, processed_keys):
        dtype = self.compute_dtype
        projected = ops.matmul(query, ops.cast(self.query_kernel, dtype))  # (B, units)
        if self.normalize:
            v = normalized_score_vector(self.score_vector, self.score_scale, dtype)
            bias = ops.cast(self.score_bias, dtype)
        else:
            v, bias = ops.cast(self.score_vector, dtype), None
        return additive_score(projected, processed_keys, v, bias)  # (B, T_v)

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "normalize": self.normalize})
        return config
