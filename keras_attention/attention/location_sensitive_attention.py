"""`LocationSensitiveAttention`: additive attention that also sees where it looked."""

import keras
from keras import ops

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.additive_score import add_projections
from keras_attention.attention.additive_score import additive_score
from keras_attention.attention.additive_score import project_keys
from keras_attention.attention.base_alignment_attention import BaseAlignmentAttention
from keras_attention.attention.masking import masked_softmax
from keras_attention.attention.masking import project


@keras.saving.register_keras_serializable(package="keras_attention")
class LocationSensitiveAttention(BaseAlignmentAttention):
    """Location-sensitive attention (Chorowski et al., 2015), as in Tacotron 2.

    At step t, with s the query and h_j the keys,

        f_t     = conv1d(α_{t-1})   or, with cumulative=True, conv1d(Σ_{s<t} α_s)
        e_{t,j} = vᵀ tanh(W s + V h_j + U f_{t,j} + b)
        α_t     = softmax over the unmasked j of e_{t,·}

    The convolution has `filters` output channels, `kernel_size` taps, "same"
    padding (zeros beyond the source) and no bias; U projects its `filters`
    channels to `units`. W, V and U have no bias; b (units,) is the only one,
    initialized to zeros. Masked keys get weight exactly 0, and their previous
    weights count as 0 in the convolution; a fully masked row gives zero
    weights and context. The weights of the first step are computed from an
    all-zero previous alignment (`initial_attention_state`).

    Tacotron 2 (Shen et al., 2018) uses the cumulative form, the default.
    NVIDIA's Tacotron 2 feeds both α_{t-1} and the cumulative weights to the
    convolution as two channels; this layer feeds one of them.

    Args:
        units: size of the hidden layer inside the tanh.
        filters: number of channels of the location convolution. Defaults to 32.
        kernel_size: width of the location convolution. Defaults to 31.
        cumulative: convolve the sum of all previous weights rather than the
            last ones. Defaults to True.
        kernel_initializer: initializer of W, V, U, v and the convolution.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments, returns and step-by-step use: those of
    `BaseAlignmentAttention`. The state is `{"alignment": (batch, T_v)}`,
    with cumulative=True also "cumulative", Σ_{s<t} α_s (pass it as
    `previous_cumulative` with `previous_alignment`). The initial state is
    all zeros. `training` is unused (no dropout, no noise); the decoders pass it.

    Example:

    >>> import numpy as np
    >>> layer = LocationSensitiveAttention(units=16, filters=4, kernel_size=5)
    >>> decoder_states = np.zeros((2, 3, 8), "float32")  # (batch, T_q, d_q)
    >>> encoder_outputs = np.ones((2, 7, 12), "float32")  # (batch, T_v, d_v)
    >>> context, weights, state = layer(
    ...     decoder_states,
    ...     encoder_outputs,
    ...     return_attention_scores=True,
    ...     return_attention_state=True,
    ... )
    >>> tuple(context.shape), tuple(weights.shape), sorted(state)
    ((2, 3, 12), (2, 3, 7), ['alignment', 'cumulative'])
    """

    def __init__(
        self,
        units,
        filters=32,
        kernel_size=31,
        cumulative=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, size in (("units", units), ("filters", filters), ("kernel_size", kernel_size)):
            check_positive_int(name, size)
        self.units = units
        self.filters = filters
        self.kernel_size = kernel_size
        self.cumulative = bool(cumulative)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    @property
    def attention_state_keys(self):
        return ("alignment", "cumulative") if self.cumulative else ("alignment",)

    def build_score(self, query_dim, key_dim):
        add_projections(self, query_dim, key_dim, self.units)  # Wᵀ, Vᵀ
        self.location_kernel = self.add_weight(
            name="location_kernel",  # the convolution, (width, in, out)
            shape=(self.kernel_size, 1, self.filters),
            initializer=self.kernel_initializer,
        )
        self.location_projection = self.add_weight(
            name="location_projection",  # Uᵀ
            shape=(self.filters, self.units),
            initializer=self.kernel_initializer,
        )
        self.score_vector = self.add_weight(
            name="score_vector",  # v
            shape=(self.units,),
            initializer=self.kernel_initializer,
        )
        self.score_bias = self.add_weight(
            name="score_bias",  # b
            shape=(self.units,),
            initializer="zeros",
        )

    def precompute_keys(self, key):
        """V h_j for every key: (batch, T_v, d_k) → (batch, T_v, units)."""
        return project_keys(self, key)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        dtype = self.compute_dtype
        previous = state["cumulative"] if self.cumulative else state["alignment"]  # (B, T_v)
        # The convolution runs in the state dtype (float32 under mixed
        # precision), on weights that are already 0 at masked keys.
        kernel = ops.cast(self.location_kernel, previous.dtype)
        features = ops.conv(previous[:, :, None], kernel, strides=1, padding="same")
        # features: (B, T_v, filters)
        location = project(features, ops.cast(self.location_projection, previous.dtype))
        location = ops.cast(location, dtype)  # (B, T_v, units)
        projected = ops.matmul(query, ops.cast(self.query_kernel, dtype))  # (B, units)
        # The location term belongs to each key: vᵀ tanh(W s + (V h_j + U f_{t,j}) + b).
        scores = additive_score(
            projected,
            processed_keys + location,
            ops.cast(self.score_vector, dtype),
            ops.cast(self.score_bias, dtype),
        )  # (B, T_v)
        scores = ops.cast(scores, self.state_dtype)  # (B, T_v)
        weights = masked_softmax(scores, value_mask, axis=-1)  # (B, T_v)
        new_state = {"alignment": weights}
        if self.cumulative:
            new_state["cumulative"] = state["cumulative"] + weights
        return weights, new_state

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "filters": self.filters,
                "kernel_size": self.kernel_size,
                "cumulative": self.cumulative,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
