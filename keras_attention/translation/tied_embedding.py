"""`TiedEmbedding`: one matrix that embeds the target tokens and scores them.

Press and Wolf (2017), "Using the Output Embedding to Improve Language
Models": the output layer's weight matrix can be the input embedding itself,

    embed(ids)          = E[ids]                    # (..., E)
    embed(o, reverse)   = o · Eᵀ + b                # (..., V), o of size E

which removes V × E parameters and, on small corpora, regularizes. The
translator ties its target embedding this way (`build_translator(...,
tie_embeddings=True)`); the decoder's output then has the embedding size.

Because the matrix also sets the scale of the logits, the default initializer
is a normal with standard deviation 1/√E: a tanh output o then gives logits of
standard deviation at most 1 at the start, as a Glorot-initialized Dense would.
`Embedding`'s own default, uniform in ±0.05, gives logits near 0 for every
token: on Multi30k such a translator was still at the unigram loss after two
epochs.

The layer is Keras' own `ReversibleEmbedding` (tied) plus the output bias b
and that initializer. Its weights ("embeddings", then "output_bias") and
registered name are those of the layer before it was built on
`ReversibleEmbedding`, so earlier `.keras` files load unchanged.
"""

import keras
from keras import ops

# `ReversibleEmbedding` arguments this layer fixes: the matrix is always tied; a
# soft cap would be applied before the output bias; the reverse product runs in
# the compute dtype (see `reverse_dtype`).
_FIXED = {"tie_weights": True, "logit_soft_cap": None, "reverse_dtype": None}


@keras.saving.register_keras_serializable(package="keras_attention")
class TiedEmbedding(keras.layers.ReversibleEmbedding):
    """A tied `ReversibleEmbedding` with an output bias and a scaled initializer.

    Args:
        input_dim: vocabulary size V.
        output_dim: embedding size E.
        use_output_bias: whether the reverse call adds a learned bias (V,).
            Defaults to `True`.
        embeddings_initializer: defaults to a normal of standard deviation
            `output_dim ** -0.5` (see the module docstring).
        **kwargs: the other arguments of `keras.layers.Embedding`
            (`mask_zero`, `name`, `dtype`, ...). `ReversibleEmbedding`'s
            `tie_weights`, `logit_soft_cap` and `reverse_dtype` are fixed
            (tied, none, the compute dtype) and cannot be given.

    Call arguments:
        inputs: int token ids (any shape) for the forward call; float vectors
            (..., E) for the reverse call.
        reverse: `False` (default) embeds ids; `True` returns `inputs · Eᵀ + b`.

    Returns:
        (..., E) embeddings, or (..., V) logits when `reverse=True`. The
        reverse call keeps the mask of its input (the embedding of padding
        gives masked logits); the forward call masks id 0 if `mask_zero`.

    Example:

    >>> import numpy as np
    >>> layer = TiedEmbedding(5, 3, use_output_bias=False)
    >>> vectors = layer(np.array([[1, 4]]))
    >>> logits = layer(vectors, reverse=True)
    >>> tuple(vectors.shape), tuple(logits.shape)
    ((1, 2, 3), (1, 2, 5))
    """

    def __init__(
        self,
        input_dim,
        output_dim,
        use_output_bias=True,
        embeddings_initializer=None,
        **kwargs,
    ):
        for name in _FIXED:
            if name in kwargs:
                raise ValueError(
                    f"Invalid keyword argument `{name}`. TiedEmbedding's matrix is always "
                    "tied, its logits have no soft cap and are computed in the layer's "
                    f"compute dtype. Received: {name}={kwargs[name]!r}"
                )
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=output_dim**-0.5)
        super().__init__(
            input_dim,
            output_dim,
            embeddings_initializer=embeddings_initializer,
            **_FIXED,
            **kwargs,
        )
        self.use_output_bias = use_output_bias

    @property
    def reverse_dtype(self):
        # Always the compute dtype. With None, `ReversibleEmbedding` leaves the
        # matrix uncast, and under mixed precision the logits' dtype would
        # depend on whether Keras autocasts the variable at that call (float16
        # called on its own, float32 inside a model).
        return self.compute_dtype

    @reverse_dtype.setter
    def reverse_dtype(self, value):
        pass  # `ReversibleEmbedding.__init__` assigns its None here

    def build(self, input_shape=None):
        if self.built:
            return
        super().build(input_shape)
        if self.use_output_bias:
            self.output_bias = self.add_weight(
                shape=(self.input_dim,), initializer="zeros", name="output_bias"
            )

    def call(self, inputs, reverse=False):
        if not reverse:
            return super().call(inputs)
        if inputs.shape[-1] is not None and inputs.shape[-1] != self.output_dim:
            raise ValueError(
                f"TiedEmbedding '{self.name}' (reverse call): expected `inputs` of shape "
                f"(..., {self.output_dim}) (the embedding size), received shape "
                f"{tuple(inputs.shape)}."
            )
        logits = super().call(inputs, reverse=True)  # (..., V)
        if self.use_output_bias:
            logits = logits + ops.cast(self.output_bias, logits.dtype)
        return logits

    def compute_mask(self, inputs, mask=None):
        if "int" not in keras.backend.standardize_dtype(inputs.dtype):
            return mask  # reverse call: the logits keep their positions' mask
        # `ReversibleEmbedding` returns None here and sets the mask in `call`,
        # which a symbolic (functional) call never runs.
        return keras.layers.Embedding.compute_mask(self, inputs, mask)

    @property
    def variable_serialization_spec(self):
        # `Embedding` saves the variables this lists, in order, per quantization
        # mode; the unquantized layer also has the output bias.
        spec = dict(super().variable_serialization_spec)
        if self.use_output_bias:
            spec[None] = [*spec[None], "output_bias"]
        return spec

    def get_config(self):
        config = super().get_config()
        for name in _FIXED:
            del config[name]
        config.update({"use_output_bias": self.use_output_bias})
        return config
