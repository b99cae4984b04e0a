"""`BahdanauMonotonicAttention`: monotonic attention over the additive score."""

import keras

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.additive_score import build_additive_score
from keras_attention.attention.additive_score import layer_additive_score
from keras_attention.attention.additive_score import project_keys
from keras_attention.attention.base_monotonic_attention import BaseMonotonicAttention


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
        **kwargs: `seed`, the seed of the noise; `kernel_initializer`, the
            initializer of W_a, U_a and v_a (both kept by
            `BaseMonotonicAttention`); base layer arguments (`name`, `dtype`, ...).

    Call arguments, returns and step-by-step use: those of
    `BaseAlignmentAttention`. The state is `{"alignment": (batch, T_v)}`, and
    `training` adds the sigmoid noise.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> layer = BahdanauMonotonicAttention(units=16, score_bias_init=-1.0)
    >>> previous = np.array([[0, 0, 1, 0, 0]] * 2, "float32")  # α_{t-1}: the third key
    >>> context, weights = layer(
    ...     np.zeros((2, 3, 8), "float32"),  # (batch, T_q, d_q)
    ...     np.ones((2, 5, 12), "float32"),  # (batch, T_v, d_v)
    ...     previous_alignment=previous,
    ...     return_attention_scores=True,
    ... )
    >>> tuple(context.shape), tuple(weights.shape)
    ((2, 3, 12), (2, 3, 5))
    >>> float(keras.ops.convert_to_numpy(weights)[:, :, :2].max())  # it never moves back
    0.0
    """

    def __init__(
        self,
        units,
        sigmoid_noise=0.0,
        score_bias_init=0.0,
        mode="parallel",
        normalize=False,
        **kwargs,
    ):
        # `seed` and `kernel_initializer` go to BaseMonotonicAttention by name.
        super().__init__(sigmoid_noise, score_bias_init, mode, **kwargs)
        check_positive_int("units", units)
        self.units = units
        self.normalize = bool(normalize)

    def build_energy(self, query_dim, key_dim):
        build_additive_score(self, query_dim, key_dim, self.units, self.normalize)

    def precompute_keys(self, key):
        """U_a h_j for every key: (batch, T_v, d_k) → (batch, T_v, units)."""
        return project_keys(self, key)

    def _energy(self, query, processed_keys):
        return layer_additive_score(self, query, processed_keys, self.normalize)  # (B, T_v)

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "normalize": self.normalize})
        return config
