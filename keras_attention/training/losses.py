"""`SmoothedSparseCrossentropy`: token cross-entropy with label smoothing and padding."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attention")
class SmoothedSparseCrossentropy(keras.losses.Loss):
    """Cross-entropy over integer targets, label-smoothed, padding ignored.

    With smoothing ε over V classes the target distribution is
    (1 − ε)·one_hot(y) + ε/V (Keras's `CategoricalCrossentropy` convention), so
    each token's loss is

        (1 − ε)·(−log p_y) + ε·mean_k(−log p_k)

    and the batch's loss is the mean over the tokens whose target is not
    `ignore_class`: padded positions weigh nothing and do not count in the
    mean, as with `SparseCategoricalCrossentropy(ignore_class=0)`, which this
    equals at ε = 0. Keras's sparse loss has no smoothing argument.

    Args:
        label_smoothing: ε in [0, 1).
        ignore_class: target id to ignore (the padding id); None ignores
            nothing.
        from_logits: whether `y_pred` holds logits (else probabilities).
        name: loss name.

    Call arguments:
        y_true: int (batch, T) target ids.
        y_pred: (batch, T, V) logits or probabilities.
    """

    def __init__(
        self,
        label_smoothing=0.1,
        ignore_class=0,
        from_logits=True,
        name="smoothed_sparse_crossentropy",
        **kwargs,
    ):
        label_smoothing = float(label_smoothing)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(
                "Invalid value for argument `label_smoothing`. Expected a number "
                f"in [0, 1). Received: label_smoothing={label_smoothing}"
            )
        # The mean over real tokens is taken in `call`; "sum" then adds it up.
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        self.label_smoothing = label_smoothing
        self.ignore_class = ignore_class
        self.from_logits = bool(from_logits)

    def call(self, y_true, y_pred):
        y_pred = ops.convert_to_tensor(y_pred)
        y_true = ops.convert_to_tensor(y_true)
        if len(y_pred.shape) != len(y_true.shape) + 1:
            raise ValueError(
                "SmoothedSparseCrossentropy expects `y_true` of shape (batch, T) "
                "and `y_pred` of shape (batch, T, V). Received: "
                f"y_true.shape={tuple(y_true.shape)}, y_pred.shape={tuple(y_pred.shape)}"
            )
        y_true = ops.cast(y_true, "int32")
        if self.from_logits:
            log_probs = ops.log_softmax(y_pred, axis=-1)  # (B, T, V)
        else:
            log_probs = ops.log(ops.clip(y_pred, keras.config.epsilon(), 1.0))
        if self.ignore_class is None:
            valid = ops.ones_like(y_true, dtype="bool")
        else:
            valid = ops.not_equal(y_true, self.ignore_class)  # (B, T)
        # A padded target id may lie outside the vocabulary: index with 0.
        safe_true = ops.where(valid, y_true, 0)
        index = ops.expand_dims(safe_true, -1)  # (B, T, 1)
        true_log_prob = ops.take_along_axis(log_probs, index, axis=-1)[..., 0]  # (B, T)
        token_loss = -(1.0 - self.label_smoothing) * true_log_prob
        if self.label_smoothing:
            token_loss -= self.label_smoothing * ops.mean(log_probs, axis=-1)
        weights = ops.cast(valid, token_loss.dtype)
        count = ops.maximum(ops.sum(weights), 1.0)
        return token_loss * weights / count  # (B, T); sums to the mean

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        config.update(
            label_smoothing=self.label_smoothing,
            ignore_class=self.ignore_class,
            from_logits=self.from_logits,
        )
        return config
