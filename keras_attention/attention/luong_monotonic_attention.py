"""`LuongMonotonicAttention`: monotonic attention over the multiplicative score."""

import keras
from keras import ops

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.additive_score import project_keys
from keras_attention.attention.base_monotonic_attention import BaseMonotonicAttention
from keras_attention.attention.masking import shape_error as _arg_error


@keras.saving.register_keras_serializable(package="keras_attention")
class LuongMonotonicAttention(BaseMonotonicAttention):
    """Monotonic attention (Raffel et al., 2017) with Luong's multiplicative score.

    The Keras 3 successor of TensorFlow Addons' `LuongMonotonicAttention`, with
    its arguments and semantics. At step t, with s the query and h_j the keys,

        energy_j = sᵀ (W_m h_j) + r          (scale=True: g · sᵀ (W_m h_j) + r)
        p_j      = sigmoid(energy_j + σ·n_j)  (noise in training only)
        α_t      = the expected monotonic alignment from p and α_{t-1}

    W_m projects the keys to `units`, which must equal the query size d_q
    (Addons' memory layer); g is a learned scalar initialized to 1 and r a
    learned scalar initialized to `score_bias_init`. The modes ("parallel",
    "recursive", "hard"), the masks and the initial state are those of
    `BahdanauMonotonicAttention`. Under float16 the dot products are computed
    in float32 (a product of two vectors overflows 65,504 easily).

    Args:
        units: size of the projected keys; must equal d_q. None (default)
            takes d_q.
        sigmoid_noise: standard deviation of the noise added to the energies
            before the sigmoid, in training only. Defaults to 0.
        score_bias_init: initial value of the scalar bias r. Defaults to 0.
        mode: "parallel", "recursive" or "hard". Defaults to "parallel".
        scale: learn the scalar g. Defaults to False.
        **kwargs: `seed`, the seed of the noise; `kernel_initializer`, the
            initializer of W_m (both kept by `BaseMonotonicAttention`); base
            layer arguments (`name`, `dtype`, ...).

    Call arguments, returns and step-by-step use: those of
    `BaseAlignmentAttention`, as for `BahdanauMonotonicAttention`.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> layer = LuongMonotonicAttention(mode="hard", score_bias_init=1.0)
    >>> context, weights = layer(
    ...     np.zeros((2, 8), "float32"),  # one decoder step: (batch, d_q)
    ...     np.ones((2, 5, 12), "float32"),  # (batch, T_v, d_v)
    ...     return_attention_scores=True,
    ... )
    >>> tuple(context.shape)
    (2, 12)
    >>> keras.ops.convert_to_numpy(weights)[0].tolist()  # p = 1 at the first key: it stops there
    [1.0, 0.0, 0.0, 0.0, 0.0]
    """

    def __init__(
        self,
        units=None,
        sigmoid_noise=0.0,
        score_bias_init=0.0,
        mode="parallel",
        scale=False,
        **kwargs,
    ):
        # `seed` and `kernel_initializer` go to BaseMonotonicAttention by name.
        super().__init__(sigmoid_noise, score_bias_init, mode, **kwargs)
        check_positive_int("units", units, allow_none=True)
        self.units = units
        self.scale = bool(scale)

    def build(self, query_shape, value_shape, key_shape=None):
        d_q = query_shape[-1]
        if self.units is not None and d_q is not None and d_q != self.units:
            raise _arg_error(
                "query",
                f"(batch, T_q, d_q) or (batch, d_q) with d_q=units={self.units}",
                query_shape,
                "Luong's score is the dot product of the query with the keys projected to `units`.",
            )
        super().build(query_shape, value_shape, key_shape)

    def build_energy(self, query_dim, key_dim):
        self.key_kernel = self.add_weight(
            name="key_kernel",  # W_mᵀ, Addons' memory layer
            shape=(key_dim, query_dim),
            initializer=self.kernel_initializer,
        )
        if self.scale:
            self.score_scale = self.add_weight(name="score_scale", shape=(), initializer="ones")

    def precompute_keys(self, key):
        """W_m h_j for every key: (batch, T_v, d_k) → (batch, T_v, d_q)."""
        return project_keys(self, key)

    def _energy(self, query, processed_keys):
        # In float32 under half precision (see the class docstring).
        dtype = self.state_dtype
        energy = ops.einsum(
            "bd,bvd->bv", ops.cast(query, dtype), ops.cast(processed_keys, dtype)
        )  # (B, T_v)
        if self.scale:
            energy = energy * ops.cast(self.score_scale, dtype)
        return energy

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "scale": self.scale})
        return config
