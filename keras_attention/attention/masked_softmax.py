"""`MaskedSoftmax`: a softmax layer whose masked positions get exactly 0."""

import keras

from keras_attention.attention.masking import masked_softmax


@keras.saving.register_keras_serializable(package="keras_attention")
class MaskedSoftmax(keras.layers.Layer):
    """Softmax that gives masked positions exactly 0 weight.

    A row in which every position is masked gives all zeros (not the uniform
    distribution over padding that `keras.layers.Attention` produces).
    Infinite scores take the softmax's limits: a -inf score gets exactly 0 (a
    row of -inf scores gives all zeros, like a fully masked row), and the +inf
    scores of a row share it equally. The result is NaN only in a row with a
    NaN among its unmasked scores: then every unmasked weight of that row is
    NaN (an upstream error shows instead of being hidden), and its masked
    positions are still 0. A masked score is never read, NaN or inf.
    Under a mixed-precision policy the softmax is computed in float32 and cast
    back to the compute dtype.

    Args:
        axis: the axis to normalize over. Defaults to -1.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: float scores of any rank.
        mask: optional boolean tensor with the rank of `inputs` (sizes equal or
            1). `True` keeps a position.

    Returns:
        The weights, with the shape of `inputs`.

    Example:

    >>> import numpy as np
    >>> layer = MaskedSoftmax()
    >>> scores = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], "float32")
    >>> mask = np.array([[True, True, False], [False, False, False]])
    >>> np.round(np.asarray(layer(scores, mask=mask)), 3).tolist()
    [[0.269, 0.731, 0.0], [0.0, 0.0, 0.0]]
    """

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis
        self.supports_masking = True

    def call(self, inputs, mask=None):
        return masked_softmax(inputs, mask, axis=self.axis)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"axis": self.axis})
        return config
