"""`OverriddenAttention`: an attention layer whose weights are replaced, an ablation.

Jain and Wallace (2019) ask whether other attention weights would give another
output; Wiegreffe and Pinter (2019) add uniform weights as the baseline. This
layer wraps a trained content-only attention layer, lets it compute its
weights, and replaces them (docs/attention_is_not_explanation.md). The
decoders call it as any attention layer; `overridden_decoder` gives a copy of
a trained decoder whose attention is wrapped (the translator's `explain`).
"""

import keras
from keras import ops

from keras_attention.arguments.validation import bound_arguments
from keras_attention.attention.content_attention import ContentAttention
from keras_attention.attention.masking import zero_masked
from keras_attention.attention.wrapped_attention import WrappedAttention

MODES = ("uniform", "permute")


@keras.saving.register_keras_serializable(package="keras_attention")
class OverriddenAttention(WrappedAttention, ContentAttention):
    """A content-only attention layer whose weights are replaced.

    The wrapped layer computes its weights (with its masks and dropout); then

    - "uniform": every unmasked key gets weight 1 / n (n unmasked keys);
    - "permute": the layer's weights are shuffled among the unmasked keys,
      with a new random order for every query (masked keys keep weight 0);

    and the context is the replaced weights times the values. The layer owns
    no weights: it reads those of the wrapped layer, so wrapping a trained
    layer ablates the trained model.

    In a decoder the random keys of "permute" for every step are drawn before
    the decoder's loop, by `step_noise` (as the dropout masks are: no random
    draw inside a JAX scan); the Keras call draws them itself.

    Args:
        attention: the layer whose weights are replaced (or its serialized
            config): a single-head `BahdanauAttention` or `LuongAttention`. A
            stateful layer (`LocationSensitiveAttention`, the monotonic ones)
            computes each step's weights from its previous ones and is
            refused.
        mode: "uniform" or "permute".
        seed: seed of the random order of "permute".
        **kwargs: base layer arguments (`name`, ...); `dtype` defaults to the
            wrapped layer's.

    Call arguments:
        Those of the wrapped layer: query (batch, T_q, d_q) or (batch, d_q),
        value (batch, T_v, d_v), optional key, query_mask, value_mask,
        return_attention_scores and training.

    Returns:
        As the wrapped layer: the context, and with
        `return_attention_scores=True` the replaced weights, (batch, T_q, T_v)
        or (batch, T_v). A padded query gets zero weights and context.

    Example:

    >>> import numpy as np
    >>> from keras_attention import BahdanauAttention
    >>> layer = OverriddenAttention(BahdanauAttention(units=4), "uniform")
    >>> query = np.ones((1, 3), "float32")  # (batch, d_q)
    >>> value = np.ones((1, 4, 2), "float32")  # (batch, T_v, d_v)
    >>> mask = np.array([[True, True, False, False]])
    >>> _, weights = layer(query, value, value_mask=mask, return_attention_scores=True)
    >>> np.asarray(weights).round(2).tolist()
    [[0.5, 0.5, 0.0, 0.0]]
    """

    def __init__(self, attention, mode, seed=None, **kwargs):
        if isinstance(attention, dict):
            attention = keras.saving.deserialize_keras_object(attention)
        _check_attention(attention)
        if not isinstance(mode, str) or mode not in MODES:
            raise ValueError(
                f"Invalid value for argument `mode`. Expected one of {MODES}. "
                f"Received: mode={mode!r}"
            )
        # A saved config holds the base class's arguments: the layer has one
        # head and no dropout of its own.
        kwargs.pop("num_heads", None)
        kwargs.pop("dropout", None)
        kwargs.setdefault("dtype", attention.dtype_policy)
        super().__init__(num_heads=1, dropout=0.0, seed=seed, **kwargs)
        self.attention = attention
        self.mode = mode
        self.seed_generator = keras.random.SeedGenerator(seed)
        self._read_sizes()

    def step_noise(self, shape, training=None):
        """Draws the random numbers of many queries at once.

        A decoder calls `step_noise` before its loop, with the shape of its
        weights for all steps (T_dec, batch, T_v), and passes each step's
        slice to `attend_step` as `noise`.

        Returns:
            None when nothing is random ("uniform" without dropout), else a
            dict of tensors of `shape`: "dropout", the wrapped layer's own
            `step_noise` (in training with dropout), and "keys", the float32
            random keys that order "permute".
        """
        draws = {}
        mask = self.attention.step_noise(shape, training)
        if mask is not None:
            draws["dropout"] = mask
        if self.mode == "permute":
            draws["keys"] = self._permutation_keys(shape)
        return draws or None

    def _permutation_keys(self, shape):
        return keras.random.uniform(shape, seed=self.seed_generator, dtype="float32")

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        """The wrapped layer's `step_weights`, replaced: `(weights (batch, T_v), {})`.

        noise: this step's slice of `step_noise`, a dict ("dropout" for the
        wrapped layer, "keys" for "permute"), or None.
        """
        draws = noise or {}
        weights, _ = self.attention.step_weights(
            query, processed_keys, {}, value_mask, training, draws.get("dropout")
        )  # (B, T_v)
        return self._replaced(ops.cast(weights, self.compute_dtype), value_mask, draws), {}

    def _attend(self, *args, **kwargs):
        """The wrapped layer's weights (the same arguments), replaced.

        dropout_mask: None (draws here), or a slice of what `step_noise`
        returned, of the shape of the weights (batch, T_v): one step's.
        """
        arguments = bound_arguments(super()._attend, args, kwargs)
        draws = {} if arguments["dropout_mask"] is None else arguments["dropout_mask"]
        query, value, processed_keys = (arguments[k] for k in ("query", "value", "processed_keys"))
        value_mask, query_mask = arguments["value_mask"], arguments["query_mask"]
        common = {
            "value_mask": value_mask,
            "query_mask": query_mask,
            "training": arguments["training"],
            "memory_prepared": arguments["memory_prepared"],
        }
        if len(query.shape) == 2:
            _, weights, _ = self.attention.attend_step(
                query, value, processed_keys, {}, noise=draws.get("dropout"), **common
            )  # (B, T_v)
        else:
            # The sequence form draws its dropout itself (`dropout_mask` is a step's).
            _, weights, _ = self.attention.attend_sequence(
                query, value, processed_keys, **common
            )  # (B, T_q, T_v)
        # The wrapped layer computes in its own dtype; this layer returns its
        # own compute dtype, as the contract says, when the two differ.
        weights = self._replaced(ops.cast(weights, self.compute_dtype), value_mask, draws)
        weights = zero_masked(weights, query_mask)  # padded queries attend to nothing
        value = ops.cast(value, weights.dtype)
        if not arguments["memory_prepared"]:
            value = zero_masked(value, value_mask)  # 0 · NaN is NaN
        if len(weights.shape) == 2:
            context = ops.einsum("bv,bvd->bd", weights, value)  # (B, d_v)
        else:
            context = ops.einsum("bqv,bvd->bqd", weights, value)  # (B, T_q, d_v)
        return context, weights

    def _replaced(self, weights, value_mask, draws):
        """`weights` (B, [T_q,] T_v) replaced, "uniform" or "permute" (by
        `draws["keys"]`, drawn here when absent); zero at masked keys."""
        if value_mask is None:
            keep = ops.ones_like(weights, dtype="bool")
        else:
            keep = ops.cast(value_mask, "bool")
            if len(weights.shape) == 3:
                keep = ops.broadcast_to(keep[:, None, :], ops.shape(weights))
        if self.mode == "uniform":
            kept = ops.cast(keep, weights.dtype)
            # A fully masked row keeps zero weights: max(n, 1).
            return kept / ops.maximum(ops.sum(kept, axis=-1, keepdims=True), 1.0)
        keys = draws.get("keys")
        if keys is None:
            keys = self._permutation_keys(ops.shape(weights))
        return _permute(weights, keep, keys)

    def get_config(self):
        config = super().get_config()
        for key in ("num_heads", "dropout"):
            config.pop(key)
        config.update(
            {
                "attention": keras.saving.serialize_keras_object(self.attention),
                "mode": self.mode,
            }
        )
        return config


def _permute(weights, keep, keys):
    """`weights` (B, [T_q,] T_v) shuffled among the keys where `keep` is True.

    The unmasked keys are taken in the order of `keys` (float32 of the shape
    of `weights`) and put back in their own order; masked keys sort after
    every unmasked one, in their own order, so they map onto themselves.
    """
    length = ops.shape(weights)[-1]
    positions = ops.cast(ops.arange(length), "float32")
    last = ops.cast(length, "float32") + 2.0 + positions
    shuffled = ops.argsort(ops.where(keep, keys, last), axis=-1)
    ordered = ops.argsort(ops.where(keep, positions, last), axis=-1)
    gathered = ops.take_along_axis(weights, shuffled, axis=-1)
    inverse = ops.argsort(ordered, axis=-1)
    return ops.take_along_axis(gathered, inverse, axis=-1)


def _check_attention(attention):
    if isinstance(attention, keras.layers.Layer) and getattr(attention, "attention_state_keys", ()):
        raise ValueError(
            "Invalid value for argument `attention`. Overriding the weights needs a "
            "content-only attention layer (BahdanauAttention or LuongAttention): "
            f"{type(attention).__name__} computes each step's weights from its own "
            f"previous ones. Received: attention={attention!r}"
        )
    if not isinstance(attention, ContentAttention):
        raise ValueError(
            "Invalid value for argument `attention`. Expected a content-only attention "
            "layer of keras_attention (BahdanauAttention or LuongAttention). "
            f"Received: attention={attention!r}"
        )
    if attention.num_heads != 1:
        raise ValueError(
            "Invalid value for argument `attention`. Overriding the weights needs a "
            f"single-head attention layer. Received: num_heads={attention.num_heads}"
        )
