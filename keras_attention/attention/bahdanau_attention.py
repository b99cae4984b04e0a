"""`BahdanauAttention`: additive attention with learned projections."""

import keras
from keras import ops

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.additive_score import build_additive_score
from keras_attention.attention.additive_score import layer_additive_score
from keras_attention.attention.additive_score import project_keys
from keras_attention.attention.content_attention import ContentAttention


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

    Call arguments and returns: those of `ContentAttention` (one head).

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
        build_additive_score(self, query_dim, key_dim, self.units, self.normalize)

    def precompute_keys(self, key):
        """U_a k for every key: (batch, T_v, d_k) → (batch, T_v, units)."""
        return project_keys(self, key)

    def score(self, query, processed_keys):
        """e = v_aᵀ tanh(W_a q + U_a k): (batch, T_q, d_q) → (batch, 1, T_q, T_v)."""
        scores = layer_additive_score(self, query, processed_keys, self.normalize)
        return ops.expand_dims(scores, 1)  # (B, 1, T_q, T_v)

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
