"""`ContentAttention`: attention whose weights depend on the query and keys alone.

No state passes from one decoder step to the next, so a whole sequence of
queries is attended at once, in parallel (`BahdanauAttention`, `LuongAttention`).
"""

import keras
from keras import ops

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.base_attention import BaseAttention
from keras_attention.attention.base_attention import refuse_abstract_base
from keras_attention.attention.masking import masked_softmax
from keras_attention.attention.masking import shape_error as _arg_error
from keras_attention.attention.masking import shape_str
from keras_attention.attention.masking import shapes_compatible
from keras_attention.attention.masking import zero_masked
from keras_attention.attention.step_guard import no_random_draws


@keras.saving.register_keras_serializable(package="keras_attention")
class ContentAttention(BaseAttention):
    """Base class of the content-only attention layers: heads, dropout, parallel queries.

    Not used directly (a `TypeError` says to use `BahdanauAttention` or
    `LuongAttention`). Subclasses implement `build_score(d_q, d_k)`,
    `precompute_keys(key)` and `score(query, processed_keys)`; this class
    defines `step_weights` from `score` (the masked softmax of one query's
    scores, with the step's dropout mask), so that the decoders, the
    generator and `keras_attention.testing.check_attention` meet one
    recipe, and computes the sequence form in parallel.

    Args:
        num_heads: number of heads the features are split into.
        dropout: dropout rate applied to the attention weights in training.
        seed: seed of the dropout.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments (those of every subclass):
        query: (batch, T_q, d_q), or (batch, d_q) for one decoder step.
        value: (batch, T_v, d_v).
        key: optional (batch, T_v, d_k); defaults to `value`.
        query_mask: optional bool (batch, T_q) or (batch,); padded queries get
            zero context and zero weights. Filled in automatically from a
            masking layer upstream of `query`.
        value_mask: optional bool (batch, T_v); masked keys get weight 0 and
            are never read (a NaN or inf there is harmless). Filled in
            automatically from a masking layer upstream of `value`.
        return_attention_scores: also return the weights.
        training: whether dropout is active.
        attention_state: `{}` or None (a content-only layer has no state).
        return_attention_state: also return the state, `{}`.

    Returns:
        The context, (batch, T_q, d_v) or (batch, d_v), and with
        `return_attention_scores=True` also the weights, (batch, T_q, T_v) or
        (batch, T_v), summing to 1 over the unmasked keys; with num_heads > 1,
        each head's: (batch, num_heads, T_q, T_v) or (batch, num_heads, T_v).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # The recipe of earlier versions scored through a private `_score`,
        # which nothing calls now: refused here, with the new name, rather than
        # a subclass whose scores are silently another class's.
        if "_score" in vars(cls) and "score" not in vars(cls):
            raise TypeError(
                f"{cls.__name__} defines `_score(query, processed_keys)`, the private "
                "scoring method of earlier versions of ContentAttention. Rename it "
                "`score(query, processed_keys)`, the public method of the content-only "
                "recipe: (batch, T_q, d_q) queries → (batch, num_heads, T_q, T_v) "
                "scores (see docs/custom_attention.md)."
            )

    def __init__(self, num_heads=1, dropout=0.0, seed=None, **kwargs):
        refuse_abstract_base(
            self,
            ContentAttention,
            "the content-only attention layers",
            "BahdanauAttention or LuongAttention (or a subclass that implements "
            "build_score, precompute_keys and score)",
        )
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(
                "Invalid value for argument `dropout`. Expected a rate in "
                f"[0, 1). Received: dropout={dropout!r}"
            )
        self.num_heads = num_heads
        self.dropout = float(dropout)
        self.seed = seed
        # The sub-layer takes this layer's policy: with its own (the global one) it
        # would cast float16 weights back to float32 under `dtype="mixed_float16"`.
        self.weights_dropout = keras.layers.Dropout(
            self.dropout, seed=seed, dtype=self.dtype_policy
        )

    def _check_build_shapes(self, query_shape, value_shape, key_shape):
        if self.num_heads == 1:
            return
        for name, shape, expected, symbol in (
            ("query", query_shape, "(batch, T_q, d_q) or (batch, d_q)", "d_q"),
            ("key", key_shape, "(batch, T_v, d_k)", "d_k"),
            ("value", value_shape, "(batch, T_v, d_v)", "d_v"),
        ):
            if int(shape[-1]) % self.num_heads:
                raise _arg_error(
                    name,
                    f"{expected} with {symbol} a multiple of num_heads={self.num_heads}",
                    shape,
                )

    def _not_implemented(self, method):
        return NotImplementedError(
            f"{type(self).__name__} must implement {method}: a subclass of "
            "ContentAttention implements build_score, precompute_keys and score "
            "(a mechanism with a state implements BaseAttention's step_weights: "
            "see docs/custom_attention.md)."
        )

    # ------------------------------------------------------- the contract

    def step_noise(self, shape, training=None):
        """The dropout masks of many steps, drawn before a loop.

        A decoder draws the masks of all its steps at once, before its loop,
        and passes one to `attend_step` at each step as `noise` (as Keras'
        RNN layers do with their dropout masks): the same training on every
        backend, and no random draw inside a JAX scan.

        Args:
            shape: (T, batch, T_v); with several heads the masks are
                (T, batch, num_heads, T_v).
            training: whether dropout is active.

        Returns:
            None when nothing is dropped (not training, or `dropout=0`);
            otherwise masks in the compute dtype, 0 where a weight is dropped
            and 1 / (1 - dropout) elsewhere.
        """
        if not training or self.dropout == 0.0:
            return None
        shape = tuple(shape)
        if self.num_heads > 1:
            shape = shape[:2] + (self.num_heads,) + shape[2:]
        ones = ops.ones(shape, dtype=self.compute_dtype)
        # The sub-layer's seed generator: the layer's `seed` and its state in
        # a `.keras` file serve both routes.
        return keras.random.dropout(ones, self.dropout, seed=self.weights_dropout.seed_generator)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        """One step, through `score`: query (batch, d_q) → `(weights (batch, T_v), {})`.

        The masked softmax of the query's scores over the keys, times this
        step's dropout mask `noise` (its slice of `step_noise`; None drops
        nothing, as a step draws no random numbers), with several heads the
        heads' average. `attend_step` gives the same weights along the
        parallel path of `attend_sequence`, each head's context from its own
        weights.
        """
        weights = self._weights(
            ops.expand_dims(query, 1), processed_keys, value_mask, False, noise
        )  # (B, H, 1, T_v)
        return ops.mean(ops.squeeze(weights, 2), axis=1), {}  # (B, T_v)

    def _step(self, query, value, processed_keys, attention_state, *options):
        """`attend_step` in one pass. The weights depend on the query and keys
        alone: the state is the empty dict, passed on. With several heads, the
        weights returned are the average of the heads' (the alignment a plot
        shows); the Keras call gives each head's."""
        value_mask, query_mask, training, noise, memory_prepared = options
        self._check_state(attention_state, tuple(value.shape))
        if len(query.shape) != 2:
            raise _arg_error("query", "(batch, d_q) for one step", query.shape)
        arguments = (query_mask, value_mask, training, noise, memory_prepared)
        return self._attend_averaged(query, value, processed_keys, *arguments)

    def _sequence(self, query, value, processed_keys, *options):
        """`attend_sequence` with every query at once, in parallel."""
        value_mask, query_mask, training, attention_state, memory_prepared = options
        if attention_state is not None:
            self._check_state(attention_state, tuple(value.shape))
        arguments = (query_mask, value_mask, training, None, memory_prepared)
        return self._attend_averaged(query, value, processed_keys, *arguments)

    def _attend_averaged(self, query, *arguments):
        """`_attend` (the same arguments) as the contract returns it:
        `(context, the heads' average weights, {})`."""
        context, weights = self._attend(query, *arguments)
        if len(weights.shape) > len(query.shape):
            # Several heads: (B, H, [T_q,] T_v) → the head average.
            weights = ops.mean(weights, axis=1)
        return context, weights, {}

    def _probe_step(self, query, processed_keys, value):
        # The step of a content-only layer is its score.
        with no_random_draws(f"{type(self).__name__}.score", self):
            self.score(ops.expand_dims(query, 1), processed_keys)  # (B, H, 1, T_v)

    # ------------------------------------------------------------------ call

    def precompute_keys(self, key):
        """Projects the keys once, for reuse at every decoder step.

        Args:
            key: (batch, T_v, d_k).

        Returns:
            The processed keys that the steps read; their shape depends on the
            score (see the class docstring).
        """
        raise self._not_implemented("precompute_keys(key)")

    def score(self, query, processed_keys):
        """The score of every key for every query, before the softmax.

        Args:
            query: (batch, T_q, d_q), in the compute dtype (T_q = 1 for one
                step).
            processed_keys: what `precompute_keys` returned, (batch, T_v, ...).

        Returns:
            (batch, num_heads, T_q, T_v) scores. They may have another float
            dtype than the compute dtype (float32 where float16 would
            overflow); the weights are cast back. `step_weights` and the
            parallel path softmax them over the unmasked keys.
        """
        raise self._not_implemented("score(query, processed_keys)")

    def _call_attend(
        self, query, value, key, query_mask, value_mask, training, attention_state=None
    ):
        # `_attend`, not `attend_step`: `call` returns the weights of each head.
        # Masked keys are zeroed before the projection, not only after: a NaN
        # there would otherwise reach the gradient of the key projection.
        processed_keys = self.precompute_keys(zero_masked(key, value_mask))
        context, weights = self._attend(
            query, value, processed_keys, query_mask, value_mask, training
        )
        return context, weights, {}

    def _attend(
        self,
        query,
        value,
        processed_keys,
        query_mask=None,
        value_mask=None,
        training=None,
        dropout_mask=None,
        memory_prepared=False,
    ):
        """What `attend_step`, `attend_sequence` and `call` compute: `(context, weights)`.

        The arguments are those of `attend_step` (`dropout_mask` is its
        `noise`, used whatever `training` says), for one query (batch, d_q)
        or a sequence (batch, T_q, d_q); the weights are each head's, with a
        heads axis after batch when num_heads > 1. Masked values and keys, and
        padded queries, are never read: a NaN or inf there reaches nothing.
        """
        dtype = self.compute_dtype
        query = ops.cast(query, dtype)
        value = ops.cast(value, dtype)
        self._check_processed_keys(processed_keys, value.shape)
        self._check_masks(query.shape, value.shape, query_mask, value_mask)
        if dropout_mask is not None:
            self._check_dropout_mask(query.shape, value.shape, dropout_mask.shape)
        single_step = len(query.shape) == 2
        if single_step:
            query = ops.expand_dims(query, 1)  # (B, 1, d_q)
            if query_mask is not None:
                query_mask = ops.expand_dims(query_mask, 1)  # (B, 1)
        # The masked weights are exactly 0, but 0 · NaN is NaN: what a mask
        # removes is zeroed before any product, so that it is never read.
        if not memory_prepared:
            # (A decoder prepares its memory once per batch, `prepare_memory`,
            # and passes `memory_prepared=True` at every step.)
            value = zero_masked(value, value_mask)
            processed_keys = zero_masked(processed_keys, value_mask)
        query = zero_masked(query, query_mask)

        weights = self._weights(query, processed_keys, value_mask, training, dropout_mask)
        context = self._context(weights, value, query)  # (B, T_q, d_v)
        heads = self.num_heads

        if query_mask is not None:
            # Padded query rows attend to nothing: zero weights, zero context.
            keep = ops.cast(query_mask, "bool")  # (B, T_q)
            zero = ops.zeros((), dtype=dtype)
            context = ops.where(keep[:, :, None], context, zero)
            weights = ops.where(keep[:, None, :, None], weights, zero)
        if heads == 1:
            weights = ops.squeeze(weights, 1)  # (B, T_q, T_v)
            if single_step:
                weights = ops.squeeze(weights, 1)  # (B, T_v)
        elif single_step:
            weights = ops.squeeze(weights, 2)  # (B, H, T_v)
        if single_step:
            context = ops.squeeze(context, 1)  # (B, d_v)
        return context, weights

    def _weights(self, query, processed_keys, value_mask, training, dropout_mask):
        """(B, T_q, d_q) queries → (B, H, T_q, T_v) weights, masked, with dropout.

        dropout_mask: None (drawn by the dropout layer), or (B, [H,] [T_q,] T_v).
        """
        dtype = self.compute_dtype
        scores = self.score(query, processed_keys)  # (B, H, T_q, T_v)
        mask = None
        if value_mask is not None:
            mask = ops.expand_dims(ops.cast(value_mask, "bool"), (1, 2))  # (B, 1, 1, T_v)
        weights = ops.cast(masked_softmax(scores, mask, axis=-1), dtype)  # (B, H, T_q, T_v)
        if dropout_mask is None:
            return self.weights_dropout(weights, training=training)
        keep = ops.cast(dropout_mask, dtype)  # 0 or 1 / (1 - rate)
        if len(keep.shape) == (2 if self.num_heads == 1 else 3):
            keep = ops.expand_dims(keep, -2)  # one step: (B, [H,] 1, T_v)
        if self.num_heads == 1:
            keep = ops.expand_dims(keep, 1)  # (B, 1, T_q, T_v)
        return weights * keep

    def _context(self, weights, value, query):
        """(B, H, T_q, T_v) weights, (B, T_v, d_v) values → (B, T_q, d_v), heads concatenated."""
        batch = ops.shape(value)[0]
        t_v = ops.shape(value)[1]
        t_q = ops.shape(query)[1]
        if value.shape[0] is not None:
            # A static batch (an exported model's): an unknown time axis is
            # reshaped as -1, not as a length read at run time, so the shapes
            # stay constants even with a dynamic source length.
            t_v = value.shape[1] if value.shape[1] is not None else -1
            t_q = query.shape[1] if query.shape[1] is not None else -1
        heads = self.num_heads
        # Not `ops.matmul(weights, value)` for one head, although the einsum
        # costs a transpose of the values at each step of an exported loop:
        # LiteRT.js 2.5.3 then gave a later call's loop the values of an
        # earlier call (wrong translations on the page, Python LiteRT right).
        value_heads = ops.reshape(
            value, (batch, t_v, heads, self.value_dim // heads)
        )  # (B, T_v, H, d_v / H)
        context = ops.einsum("bhqv,bvhd->bqhd", weights, value_heads)
        return ops.reshape(context, (batch, t_q, self.value_dim))  # (B, T_q, d_v)

    def _check_dropout_mask(self, query_shape, value_shape, mask_shape):
        weights_shape = self._weights_shape(query_shape, value_shape)
        heads = ("num_heads",) if self.num_heads > 1 else ()
        steps = ("T_q",) if len(query_shape) == 3 else ()
        symbols = f"({', '.join(('batch', *heads, *steps, 'T_v'))})"
        if not shapes_compatible(mask_shape, weights_shape):
            raise _arg_error(
                "noise",
                f"{symbols}={shape_str(weights_shape)}, the shape of the weights, a slice "
                "of step_noise(...)",
                tuple(mask_shape),
            )

    def _weights_shape(self, query_shape, value_shape):
        # Each head's weights, after the batch axis.
        heads = (self.num_heads,) if self.num_heads > 1 else ()
        return (query_shape[0],) + heads + tuple(query_shape[1:-1]) + (value_shape[1],)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "dropout": self.dropout, "seed": self.seed})
        return config
