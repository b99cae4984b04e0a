"""`BaseMonotonicAttention`: the choosing probabilities and modes of Raffel et al."""

import keras
from keras import ops

from keras_attention.attention.base_alignment_attention import BaseAlignmentAttention
from keras_attention.attention.base_attention import refuse_abstract_base
from keras_attention.attention.monotonic_alignment import MONOTONIC_MODES
from keras_attention.attention.monotonic_alignment import exclusive_cumsum
from keras_attention.attention.monotonic_alignment import monotonic_alignment


@keras.saving.register_keras_serializable(package="keras_attention")
class BaseMonotonicAttention(BaseAlignmentAttention):
    """Base class of monotonic attention (Raffel et al., 2017).

    Not used directly. A subclass implements `build_energy(d_q, d_k)`,
    `precompute_keys(key)` and `_energy(query, processed_keys)` (the score of
    Bahdanau or Luong); this class adds the learned scalar bias r, the noise,
    the choosing probabilities and the expected alignment:

        energy_j = score(s, h_j) + r              (r initialized to score_bias_init)
        p_j      = sigmoid(energy_j + σ·n_j)      n_j ~ N(0, 1), in training only
        α_t      = monotonic_alignment(p, α_{t-1}, mode)

    as TensorFlow Addons' monotonic attention mechanisms. In "hard" mode
    p_j = 1 when energy_j + σ·n_j > 0 (p above 1/2) and 0 otherwise. Masked
    keys get p_j = 0 (Addons' -inf scores beyond the sequence length), and
    their previous weights count as 0.

    Args:
        sigmoid_noise: standard deviation σ of the noise added to the energies
            before the sigmoid, in training only. Defaults to 0.
        score_bias_init: initial value of the scalar bias r. Defaults to 0.
        mode: "parallel", "recursive" or "hard" (see
            `keras_attention.attention.monotonic_alignment`). Defaults to "parallel".
            It may be set again on a trained layer: train soft, then set
            `layer.mode = "hard"` for hard decisions at inference (streaming)
            before a generator or export traces the decoder; functions
            traced earlier keep the mode they were traced with.
        seed: seed of the noise.
        kernel_initializer: initializer of the score's weights.
        **kwargs: base layer arguments (`name`, `dtype`, ...).
    """

    def __init__(
        self,
        sigmoid_noise=0.0,
        score_bias_init=0.0,
        mode="parallel",
        seed=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        refuse_abstract_base(
            self,
            BaseMonotonicAttention,
            "monotonic attention",
            "BahdanauMonotonicAttention or LuongMonotonicAttention",
        )
        super().__init__(**kwargs)
        if isinstance(sigmoid_noise, bool) or not float(sigmoid_noise) >= 0.0:
            raise ValueError(
                "Invalid value for argument `sigmoid_noise`. Expected a standard "
                f"deviation >= 0. Received: sigmoid_noise={sigmoid_noise!r}"
            )
        self.mode = mode  # checked by the setter
        self.sigmoid_noise = float(sigmoid_noise)
        self.score_bias_init = float(score_bias_init)
        self.seed = seed
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.seed_generator = keras.random.SeedGenerator(seed)

    @property
    def mode(self):
        """ "parallel", "recursive" or "hard"; see the class docstring."""
        return self._mode

    @mode.setter
    def mode(self, mode):
        if not isinstance(mode, str) or mode not in MONOTONIC_MODES:
            raise ValueError(
                f"Invalid value for argument `mode`. Expected one of {MONOTONIC_MODES}. "
                f"Received: mode={mode!r}"
            )
        self._mode = mode

    def build_score(self, query_dim, key_dim):
        self.build_energy(query_dim, key_dim)
        self.energy_bias = self.add_weight(
            name="energy_bias",  # r, Addons' "attention_score_bias"
            shape=(),
            initializer=keras.initializers.Constant(self.score_bias_init),
        )

    def build_energy(self, query_dim, key_dim):
        raise self._not_implemented("build_energy(query_dim, key_dim)")

    def _energy(self, query, processed_keys):
        """(batch, d_q) query → (batch, T_v) scores, without the bias r."""
        raise self._not_implemented("_energy(query, processed_keys)")

    def initial_attention_state(self, memory, value_mask=None):
        """The state before the first step: all weight on the first source position.

        As Addons' `initial_alignments` (one-hot at position 0); with a
        `value_mask`, one-hot at the first unmasked position, and all zeros
        for a fully masked row.

        Args:
            memory: the values, (batch, T_v, d_v), or any tensor whose first two
                dimensions are (batch, T_v); or a `(batch_size, T_v)` tuple.
            value_mask: optional bool (batch, T_v).

        Returns:
            `{"alignment": (batch, T_v)}` in `state_dtype`.
        """
        ones = self._zeros_per_key(memory) + 1.0  # (B, T_v)
        if value_mask is not None:
            self._check_per_key("value_mask", value_mask, ones.shape, "one boolean per key")
            ones = ops.where(ops.cast(value_mask, "bool"), ones, ops.zeros_like(ones))
        first = ops.cast(ops.equal(exclusive_cumsum(ones), 0.0), ones.dtype)
        return {"alignment": ones * first}  # (B, T_v)

    def step_noise(self, shape, training=None):
        """Standard normal draws of `shape`, e.g. (T_dec, batch, T_v), or None.

        None outside training or with `sigmoid_noise=0`. The layer scales them
        by `sigmoid_noise`.
        """
        if not training or self.sigmoid_noise == 0.0:
            return None
        return keras.random.normal(shape, dtype=self.state_dtype, seed=self.seed_generator)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        dtype = self.state_dtype
        energy = ops.cast(self._energy(query, processed_keys), dtype)  # (B, T_v)
        energy = energy + ops.cast(self.energy_bias, dtype)
        # `noise` is drawn before the step (`step_noise`): None outside training.
        if noise is not None and self.sigmoid_noise > 0.0:
            energy = energy + self.sigmoid_noise * ops.cast(noise, dtype)
        if self.mode == "hard":
            p_choose = ops.cast(ops.greater(energy, 0.0), dtype)
        else:
            p_choose = ops.sigmoid(energy)  # (B, T_v)
        if value_mask is not None:
            p_choose = ops.where(ops.cast(value_mask, "bool"), p_choose, ops.zeros_like(p_choose))
        alignment = monotonic_alignment(p_choose, state["alignment"], self.mode)  # (B, T_v)
        return alignment, {"alignment": alignment}

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sigmoid_noise": self.sigmoid_noise,
                "score_bias_init": self.score_bias_init,
                "mode": self.mode,
                "seed": self.seed,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
