"""`BaseAttention`: the one contract every attention mechanism fills.

A decoder, the generator and the export talk to an attention layer through
four public methods, whatever the mechanism:

    memory, keys = attention.prepare_memory(memory, mask)    # once per batch
    state = attention.initial_attention_state(memory, mask)   # {} if content-only
    noise = attention.step_noise((T, batch, T_v), training)   # drawn before a loop
    context, weights, state = attention.attend_step(query, memory, keys, state,
                                                    value_mask=mask, noise=noise[t],
                                                    memory_prepared=True)

and the sequence form `attend_sequence`. What a mechanism of one's own
implements is in the class docstring (docs/custom_attention.md); everything a
user can get wrong about shapes, masks and dtypes is checked here, once.
"""

import keras
from keras import ops

from keras_attention.arguments.validation import bound_arguments
from keras_attention.attention.masking import dims_compatible as _same
from keras_attention.attention.masking import shape_error as _arg_error
from keras_attention.attention.masking import shape_str
from keras_attention.attention.masking import shapes_compatible
from keras_attention.attention.masking import softmax_dtype
from keras_attention.attention.masking import zero_masked
from keras_attention.attention.step_guard import RandomDrawInStepError
from keras_attention.attention.step_guard import is_traced
from keras_attention.attention.step_guard import no_random_draws
from keras_attention.backend import loops

# The shapes of the inputs, in the symbols of the docs and the error messages.
_SYMBOLS = {
    "query": "(batch, T_q, d_q) or (batch, d_q)",
    "key": "(batch, T_v, d_k)",
    "value": "(batch, T_v, d_v)",
}


@keras.saving.register_keras_serializable(package="keras_attention")
class BaseAttention(keras.layers.Layer):
    """The base class of every attention layer: the step contract and its checks.

    Not used directly (a `TypeError` names the layers to use). A subclass
    implements:

    - `build_score(query_dim, key_dim)`: creates the weights;
    - `step_weights(query, processed_keys, state, value_mask, training,
      noise)`: query (batch, d_q) → `(weights (batch, T_v), new_state)`, the
      weights non-negative and zero at masked keys (a masked softmax gives
      both and a sum of 1; Graves' GMM weights need not sum to 1), the new
      state a dict with the keys of the old one, each entry of its shape;

    and may override:

    - `precompute_keys(key)`: keys projected once per batch (default: the
      keys themselves, in the compute dtype);
    - `attention_state_keys` and `initial_attention_state(memory,
      value_mask)`: the state carried from step to step (default: no state;
      with keys, zeros of (batch, T_v) each). Entries are tensors with the
      batch as first axis, of any shape after it;
    - `step_noise(shape, training)`: the random draws of all steps, made
      before a loop (default: none).

    The base class gives `prepare_memory` (the memory masked and the keys
    projected, once per batch), `attend_step` (one step, with the checks,
    masks and dtypes), `attend_sequence` (a scan of steps) and the Keras
    `call`.

    Call arguments (every layer's; a subclass documents what it adds):
        query: (batch, T_q, d_q), or (batch, d_q) for one step.
        value: (batch, T_v, d_v).
        key: optional (batch, T_v, d_k); defaults to `value`.
        query_mask: optional bool (batch, T_q) or (batch,).
        value_mask: optional bool (batch, T_v).
        return_attention_scores: also return the weights.
        training: whether the layer's dropout or noise is active.
        attention_state: the state to start from, a dict with the keys
            `attention_state_keys` as a step or `return_attention_state`
            gives it; None for `initial_attention_state`.
        return_attention_state: also return the state after the last query
            (`{}` for a layer without state).

    Returns:
        The context, and the weights and the state when asked for, in that
        order.

    The state tensors are float32 under mixed precision (the compute dtype
    otherwise): a sum or a product over hundreds of steps loses too much in
    float16.

    Args:
        **kwargs: base layer arguments (`name`, `dtype`, ...).
    """

    # The keys of the attention state dict, in order: none for a layer whose
    # weights depend on the query and keys alone.
    attention_state_keys = ()

    def __init__(self, **kwargs):
        refuse_abstract_base(
            self,
            BaseAttention,
            "the attention layers",
            "BahdanauAttention or LuongAttention (or LocationSensitiveAttention, the "
            "monotonic layers, GMMAttention, or a subclass that implements build_score "
            "and step_weights: see docs/custom_attention.md)",
        )
        super().__init__(**kwargs)
        self.supports_masking = True
        self.query_dim = None
        self.key_dim = None
        self.value_dim = None

    @property
    def stateful_attention(self):
        """Whether each step's weights read a state carried from the previous step."""
        return bool(self.attention_state_keys)

    @property
    def state_dtype(self):
        """The dtype of the attention state: float32 under mixed precision."""
        return softmax_dtype(self.compute_dtype)

    # ----------------------------------------------------------------- build

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        self._check_static_shapes(query_shape, value_shape, key_shape)
        for name, shape, symbol in (
            ("query", query_shape, "d_q"),
            ("key", key_shape, "d_k"),
            ("value", value_shape, "d_v"),
        ):
            if shape[-1] is None:
                raise _arg_error(name, f"with a known last dimension ({symbol})", shape)
        self._check_build_shapes(query_shape, value_shape, key_shape)
        self.query_dim = int(query_shape[-1])
        self.key_dim = int(key_shape[-1])
        self.value_dim = int(value_shape[-1])
        self.build_score(self.query_dim, self.key_dim)
        self._check_built_weights()
        self.built = True

    def _check_built_weights(self):
        """One step on zeros, right after `build_score`: a weight of the wrong
        shape is named here, with `build_score` and the sizes it was given,
        instead of by a backend's matmul at the first step of a model."""
        dtype = self.compute_dtype
        query = ops.zeros((1, self.query_dim), dtype=dtype)  # (batch, d_q)
        key = ops.zeros((1, 2, self.key_dim), dtype=dtype)  # (batch, T_v, d_k)
        value = ops.zeros((1, 2, self.value_dim), dtype=dtype)  # (batch, T_v, d_v)
        name = type(self).__name__
        stage = "precompute_keys"
        try:
            processed_keys = self.precompute_keys(key)
            stage = "step_weights"
            self._probe_step(query, processed_keys, value)
        except (RandomDrawInStepError, NotImplementedError):
            raise
        except Exception as error:
            made = ", ".join(
                f"{weight.path.split('/')[-1]} {shape_str(weight.shape)}" for weight in self.weights
            )
            reason = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
            raise ValueError(
                f"The weights that `{name}.build_score(query_dim={self.query_dim}, "
                f"key_dim={self.key_dim})` made do not fit the layer's step: {name}.{stage} "
                f"failed on zeros of query (batch, d_q)=(1, {self.query_dim}) and key "
                f"(batch, T_v, d_k)=(1, 2, {self.key_dim}). A weight that multiplies the "
                f"query expects d_q={self.query_dim} on the axis it contracts, one that "
                f"multiplies the keys d_k={self.key_dim}. build_score made: {made or 'nothing'}. "
                f"The error was {type(error).__name__}: {reason}"
            ) from error

    def _probe_step(self, query, processed_keys, value):
        """What `_check_built_weights` runs: one `step_weights` on zeros."""
        state = self.initial_attention_state(value, None)
        if not isinstance(state, dict) or set(state) != set(self.attention_state_keys):
            return  # not build_score's doing: the step's own checks name it
        with no_random_draws(f"{type(self).__name__}.step_weights", self):
            self.step_weights(query, processed_keys, state, None, False, None)

    def _probe_draws(self, query, processed_keys, state, value_mask, training, noise):
        """What `attend_step` runs before `step_weights`: `step_weights` on the
        same inputs, as a probe that raises `RandomDrawInStepError` for a draw
        (`keras_attention.attention.step_guard`). At every trace, once per
        compiled loop; in eager calls, at the first one with each value of
        `training` only, so an eager step costs one set lookup."""
        flag = bool(training)
        traced = is_traced(query)
        if not traced and flag in getattr(self, "_probed_eagerly", frozenset()):
            return
        with no_random_draws(f"{type(self).__name__}.step_weights", self):
            self.step_weights(query, processed_keys, state, value_mask, training, noise)
        if not traced:
            self._probed_eagerly = getattr(self, "_probed_eagerly", frozenset()) | {flag}

    def _check_build_shapes(self, query_shape, value_shape, key_shape):
        """A subclass's own conditions on the sizes (e.g. divisible by heads)."""

    def build_score(self, query_dim, key_dim):
        """Creates the layer's weights for queries of size d_q and keys of size d_k."""
        raise self._not_implemented("build_score(query_dim, key_dim)")

    def _not_implemented(self, method):
        return NotImplementedError(
            f"{type(self).__name__} must implement {method}: a subclass of "
            "BaseAttention implements build_score and step_weights (see "
            "docs/custom_attention.md)."
        )

    # ---------------------------------------------------------------- checks

    def _check_static_shapes(self, query_shape, value_shape, key_shape):
        shapes = {"query": tuple(query_shape), "key": tuple(key_shape), "value": tuple(value_shape)}
        if len(shapes["query"]) not in (2, 3):
            raise _arg_error(
                "query", "(batch, T_q, d_q), or (batch, d_q) for one decoder step", query_shape
            )
        for name in ("value", "key"):
            if len(shapes[name]) != 3:
                raise _arg_error(name, _SYMBOLS[name], shapes[name])
        for name, axis, other, why in (
            ("value", 0, "query", "The batch sizes of query and value differ."),
            ("key", 0, "value", "The batch sizes of key and value differ."),
            ("key", 1, "value", "Every key needs a value: their lengths differ."),
        ):
            size = shapes[other][axis]
            if not _same(shapes[name][axis], size):
                expected = f"{_SYMBOLS[name]} with {('batch', 'T_v')[axis]}={size} as in `{other}`"
                raise _arg_error(name, expected, shapes[name], why)
        if self.query_dim is not None:
            for name, symbol, dim in (
                ("query", "d_q", self.query_dim),
                ("key", "d_k", self.key_dim),
                ("value", "d_v", self.value_dim),
            ):
                if not _same(shapes[name][-1], dim):
                    raise _arg_error(
                        name,
                        f"{_SYMBOLS[name]} with {symbol}={dim}",
                        shapes[name],
                        f"The layer was built with {symbol}={dim}.",
                    )

    def _check_per_key(self, name, tensor, value_shape, what):
        """(batch, T_v) tensors: value_mask, previous weights, noise."""
        if not shapes_compatible(tensor.shape, tuple(value_shape)[:2]):
            expected = f"(batch, T_v)={shape_str(value_shape[:2])}, {what}"
            raise _arg_error(name, expected, tuple(tensor.shape))

    def _check_masks(self, query_shape, value_shape, query_mask, value_mask):
        if value_mask is not None:
            self._check_per_key("value_mask", value_mask, value_shape, "one boolean per key")
        if query_mask is not None:
            expected = tuple(query_shape)[:-1]
            if not shapes_compatible(query_mask.shape, expected):
                symbols = "(batch,)" if len(expected) == 1 else "(batch, T_q)"
                raise _arg_error(
                    "query_mask",
                    f"{symbols}={shape_str(expected)}, one boolean per query",
                    tuple(query_mask.shape),
                )

    def _check_processed_keys(self, processed_keys, value_shape):
        pk_shape = tuple(processed_keys.shape)
        if len(pk_shape) < 3 or not shapes_compatible(pk_shape[:2], tuple(value_shape)[:2]):
            raise _arg_error(
                "processed_keys",
                f"(batch, T_v, ...) with (batch, T_v)={shape_str(value_shape[:2])} "
                "as in `value`, as returned by precompute_keys(key)",
                pk_shape,
            )

    def _check_state(self, attention_state, value_shape):
        keys = tuple(self.attention_state_keys)
        if not isinstance(attention_state, dict) or set(attention_state) != set(keys):
            received = (
                sorted(attention_state) if isinstance(attention_state, dict) else attention_state
            )
            raise ValueError(
                "Invalid value for argument `attention_state`. Expected a dict with "
                f"the keys {list(keys)}, as returned by initial_attention_state. "
                f"Received: attention_state={received!r}"
            )
        for key in keys:
            self._check_state_entry(key, attention_state[key], value_shape)

    def _check_state_entry(self, key, tensor, value_shape):
        """Every state entry has the batch as its first axis."""
        shape = tuple(tensor.shape)
        if len(shape) < 1 or not _same(shape[0], value_shape[0]):
            raise _arg_error(
                f"attention_state['{key}']",
                f"(batch, ...) with batch={value_shape[0]} as in `value`",
                shape,
            )

    # ----------------------------------------------------------------- state

    def initial_attention_state(self, memory, value_mask=None):
        """The attention state before the first step.

        Args:
            memory: the values, (batch, T_v, d_v), or any tensor whose first two
                dimensions are (batch, T_v); or a `(batch_size, T_v)` tuple.
            value_mask: optional bool (batch, T_v).

        Returns:
            A dict with the keys `attention_state_keys`: empty for a layer
            without state; zeros of (batch, T_v) in `state_dtype` here (a
            subclass may start elsewhere, or hold other shapes).
        """
        if not self.attention_state_keys:
            return {}
        zeros = self._zeros_per_key(memory)
        return {key: zeros for key in self.attention_state_keys}

    def attention_state_shapes(self, value_shape):
        """The shape of each state entry for a (batch, T_v, d_v) value: what a
        functional model sees of `call(..., return_attention_state=True)`.

        The default matches the default `initial_attention_state`, (batch, T_v)
        per key; a layer whose state has other shapes overrides both.
        """
        return {key: tuple(value_shape[:2]) for key in self.attention_state_keys}

    def _zeros_per_key(self, memory):
        if isinstance(memory, (tuple, list)):
            return ops.zeros(tuple(memory), dtype=self.state_dtype)  # (B, T_v)
        if len(memory.shape) not in (2, 3):
            raise _arg_error(
                "memory",
                "(batch, T_v, d_v), (batch, T_v) or a (batch_size, T_v) tuple",
                memory.shape,
            )
        if len(memory.shape) == 3:
            memory = memory[:, :, 0]  # (B, T_v)
        return ops.zeros_like(ops.cast(memory, self.state_dtype))  # (B, T_v)

    def step_noise(self, shape, training=None):
        """Draws the random inputs of many steps before a loop, or None.

        A loop over time (a scan) must not draw inside its body (on JAX the
        draw leaks a tracer): a decoder draws the noise of all its steps here,
        with `shape` = (T, batch, T_v), and passes one slice along the first
        axis to `attend_step` at each step. None when the layer draws nothing
        (this base class).
        """
        return None

    # ------------------------------------------------------------- streaming

    def needs_unread_source(self, attention_state, read_count):
        """Whether a step wanted a source token not read yet: a read/write policy.

        A simultaneous decoder (`keras_attention.generation.SimultaneousGenerator`)
        reads the source one token at a time. Before each write it tries the
        step over the tokens read so far (the memory masked after
        `read_count`) and asks the layer, with the attention state that step
        returned, whether the step needed more: then it discards the step,
        reads the next token and tries again; else it writes. Once the whole
        source is read it writes without asking.

        This base class answers True in every row: a layer that is not a
        read/write policy reads the whole source before its first write
        (consecutive decoding). `WaitKAttention` (a fixed schedule) and
        `MonotonicInfiniteLookbackAttention` (a learned one) answer from the
        state.

        Args:
            attention_state: the state dict the tried step returned (empty for
                a layer without state).
            read_count: int32 (batch,), the source tokens read in each row.

        Returns:
            bool (batch,): True where the step needs another source token.
        """
        return ops.ones(ops.shape(read_count), dtype="bool")

    # ------------------------------------------------------------------ step

    def precompute_keys(self, key):
        """Projects the keys once, for every step (default: the keys themselves).

        Args:
            key: (batch, T_v, d_k).

        Returns:
            (batch, T_v, ...): what `step_weights` reads as `processed_keys`.
        """
        return ops.cast(key, self.compute_dtype)

    def prepare_memory(self, value, value_mask=None, key=None):
        """What every step reads of the memory, prepared once per batch.

        The values and the keys are zeroed at masked keys (a `where`: a NaN or
        inf in the padding never reaches a product or a gradient), then the
        keys are projected by `precompute_keys`. A loop over steps hands both
        to `attend_step` (or `attend_sequence`) with `memory_prepared=True`,
        and the steps read them as they are, without masking them again.

        Args:
            value: (batch, T_v, d_v), in its own dtype (a step casts it to the
                compute dtype).
            value_mask: optional bool (batch, T_v).
            key: optional (batch, T_v, d_k); defaults to `value`.

        Returns:
            `(value, processed_keys)`: the values, zero at masked keys, and
            `precompute_keys` of the keys, zero there before the projection.
        """
        value = zero_masked(value, value_mask)
        key = value if key is None else zero_masked(key, value_mask)
        return value, self.precompute_keys(key)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        """One step's weights: (batch, d_q) query → `(weights (batch, T_v), new state)`.

        Args:
            query: (batch, d_q) in the compute dtype, zero at padded steps.
            processed_keys: from `precompute_keys`, zero at masked keys.
            state: the attention state dict (empty without state), in
                `state_dtype`.
            value_mask: optional bool (batch, T_v): the weights must be zero
                where it is False.
            training: whether the step is in training.
            noise: this step's slice of `step_noise(...)`, or None.
        """
        raise self._not_implemented(
            "step_weights(query, processed_keys, state, value_mask, training, noise)"
        )

    def attend_step(
        self,
        query,
        value,
        processed_keys,
        attention_state,
        value_mask=None,
        query_mask=None,
        training=None,
        noise=None,
        *,
        memory_prepared=False,
    ):
        """One step: attends with keys from `precompute_keys` and the previous state.

        Args:
            query: (batch, d_q), the decoder state of this step.
            value: (batch, T_v, d_v).
            processed_keys: from `precompute_keys(key)`, (batch, T_v, ...).
            attention_state: the dict returned by `initial_attention_state` or
                by the previous step (empty for a layer without state).
            value_mask: optional bool (batch, T_v); masked keys get weight 0
                and are never read.
            query_mask: optional bool (batch,); a padded step gives zero
                context and weights and passes the state on unchanged.
            training: whether the step is in training (dropout, noise).
            noise: optional slice of `step_noise(...)` for this step, used
                instead of a draw here.
            memory_prepared: True when `value` and `processed_keys` come from
                `prepare_memory(value, value_mask)`, made once before a loop:
                the step then does not zero them at masked keys again.

        Returns:
            `(context, weights, new_state)`: context (batch, d_v) and weights
            (batch, T_v) in the compute dtype (for a layer with several heads,
            their average); the new state dict.
        """
        args = (value_mask, query_mask, training, noise, memory_prepared)
        return self._step(query, value, processed_keys, attention_state, *args)

    def _step(self, query, value, processed_keys, attention_state, *options):
        """`attend_step`'s work (a subclass with a path of its own overrides it)."""
        value_mask, query_mask, training, noise, memory_prepared = options
        dtype = self.compute_dtype
        query = ops.cast(query, dtype)
        value = ops.cast(value, dtype)
        self._check_step_inputs(query, value, processed_keys, value_mask, query_mask)
        self._check_state(attention_state, value.shape)
        if not memory_prepared:
            # 0 · NaN is NaN: what the mask removes is zeroed before any product.
            value = zero_masked(value, value_mask)
            processed_keys = zero_masked(processed_keys, value_mask)
        # A padded step's query is never read either (its gradient stays finite).
        query = zero_masked(query, query_mask)
        state = {
            key: self._masked_state(ops.cast(attention_state[key], self.state_dtype), value_mask)
            for key in self.attention_state_keys
        }
        if noise is None and training:
            # A step called alone in training (not by a decoder's loop, which
            # draws every step's noise before it) draws its noise here, never
            # inside step_weights.
            noise = self.step_noise((1, ops.shape(value)[0], ops.shape(value)[1]), training)
            noise = None if noise is None else noise[0]
        self._probe_draws(query, processed_keys, state, value_mask, training, noise)
        returned = self.step_weights(query, processed_keys, state, value_mask, training, noise)
        weights, new_state = self._check_step_weights(returned, state, value.shape)  # (B, T_v)
        # The base guarantees the contract's zero at masked keys, whatever the
        # mechanism returned: a `where` that leaves a correct mechanism's
        # weights as they were, bit for bit, and keeps a mechanism that forgot
        # the mask from putting weight on padding. It does not renormalise (GMM
        # and monotonic weights need not sum to 1): the weight such a mechanism
        # gave the padding is lost, and `keras_attention.testing.check_attention`
        # reports the breach by name.
        weights = ops.cast(zero_masked(weights, value_mask), dtype)
        context = ops.einsum("bv,bvd->bd", weights, value)  # (B, d_v)
        return self._padded_step_kept(context, weights, state, new_state, query_mask)

    def _padded_step_kept(self, context, weights, state, new_state, query_mask):
        """`(context, weights, new_state)` of a step, with zero context and
        weights and the state passed on unchanged in the rows `query_mask`
        pads; the state in `state_dtype`."""
        if query_mask is not None:
            keep = ops.cast(query_mask, "bool")  # (B,)
            zero = ops.zeros((), dtype=self.compute_dtype)
            context = ops.where(keep[:, None], context, zero)
            weights = ops.where(keep[:, None], weights, zero)
            new_state = {
                key: _keep_rows(keep, ops.cast(new_state[key], state[key].dtype), state[key])
                for key in self.attention_state_keys
            }
        new_state = {
            key: ops.cast(new_state[key], self.state_dtype) for key in self.attention_state_keys
        }
        return context, weights, new_state

    def _masked_state(self, tensor, value_mask):
        """A state entry as a step reads it (per-key entries are zeroed where masked)."""
        return tensor

    def _check_step_inputs(self, query, value, processed_keys, value_mask, query_mask):
        if len(query.shape) != 2:
            raise _arg_error("query", "(batch, d_q) for one step", query.shape)
        if len(value.shape) != 3:
            raise _arg_error("value", "(batch, T_v, d_v)", value.shape)
        self._check_processed_keys(processed_keys, value.shape)
        self._check_masks(query.shape, value.shape, query_mask, value_mask)

    def _check_step_weights(self, returned, state, value_shape):
        """What `step_weights` returned: `(weights (B, T_v), new state)`, checked."""
        method = f"{type(self).__name__}.step_weights"
        if not isinstance(returned, (tuple, list)) or len(returned) != 2:
            raise ValueError(
                f"{method} must return a pair `(weights, new_state)`: the weights "
                "(batch, T_v) and the new attention state dict (an empty dict "
                f"without state). Received: {type(returned).__name__}"
                + (f" of length {len(returned)}" if isinstance(returned, (tuple, list)) else "")
            )
        weights, new_state = returned
        self._check_per_key(
            f"the weights returned by {method}", weights, value_shape, "one weight per key"
        )
        keys = sorted(self.attention_state_keys)
        if not isinstance(new_state, dict) or sorted(new_state) != keys:
            received = (
                sorted(new_state) if isinstance(new_state, dict) else type(new_state).__name__
            )
            raise ValueError(
                f"{method} must return the new state as a dict with the keys {keys} "
                f"(`attention_state_keys`). Received: {received}"
            )
        for key in keys:
            old, new = tuple(state[key].shape), tuple(new_state[key].shape)
            if not shapes_compatible(new, old):
                raise _arg_error(
                    f"the new state entry '{key}' returned by {method}",
                    f"the shape of the state it replaces, {shape_str(old)}",
                    new,
                )
        return weights, new_state

    def attend_sequence(
        self,
        query,
        value,
        processed_keys,
        value_mask=None,
        query_mask=None,
        training=None,
        attention_state=None,
        *,
        memory_prepared=False,
    ):
        """Every query of a sequence: `attend_step` over the T_q queries, carrying the state.

        Args:
            query: (batch, T_q, d_q).
            value: (batch, T_v, d_v).
            processed_keys: from `precompute_keys(key)`, (batch, T_v, ...).
            value_mask: optional bool (batch, T_v).
            query_mask: optional bool (batch, T_q); a padded query gives zero
                context and weights and leaves the state as it was.
            training: whether the steps are in training (dropout, noise).
            attention_state: the state before the first query; None starts
                from `initial_attention_state`.
            memory_prepared: True when `value` and `processed_keys` come from
                `prepare_memory(value, value_mask)`: they are not zeroed at
                masked keys again.

        Returns:
            `(context (batch, T_q, d_v), weights (batch, T_q, T_v), last state)`.
        """
        args = (value_mask, query_mask, training, attention_state, memory_prepared)
        return self._sequence(query, value, processed_keys, *args)

    def _sequence(self, query, value, processed_keys, *options):
        """`attend_sequence`'s work (overridden like `_step`)."""
        value_mask, query_mask, training, attention_state, memory_prepared = options
        dtype = self.compute_dtype
        query = ops.cast(query, dtype)
        value = ops.cast(value, dtype)
        if not memory_prepared:
            value = zero_masked(value, value_mask)
            processed_keys = zero_masked(processed_keys, value_mask)
        if attention_state is None:
            attention_state = self.initial_attention_state(value, value_mask)
        batch, t_v = ops.shape(value)[0], ops.shape(value)[1]
        xs = {"query": ops.transpose(query, (1, 0, 2))}  # (T_q, B, d_q)
        if query_mask is not None:
            xs["mask"] = ops.transpose(ops.cast(query_mask, "bool"), (1, 0))  # (T_q, B)
        # Drawn before the loop: no random draw inside a scan.
        noise = self.step_noise((ops.shape(query)[1], batch, t_v), training)
        if noise is not None:
            xs["noise"] = noise  # (T_q, B, ...)
        init = {
            "state": attention_state,
            "context": ops.zeros((batch, self.value_dim), dtype=dtype),
            "weights": ops.zeros((batch, t_v), dtype=dtype),
        }

        def step(carry, x):
            context, weights, new_state = self.attend_step(
                x["query"],
                value,
                processed_keys,
                carry["state"],
                value_mask=value_mask,
                query_mask=x.get("mask"),
                training=training,
                noise=x.get("noise"),
                memory_prepared=True,
            )
            carry = {"state": new_state, "context": context, "weights": weights}
            return carry, carry

        last, ys = loops.scan(step, init, xs)
        context = ops.transpose(ys["context"], (1, 0, 2))  # (B, T_q, d_v)
        weights = ops.transpose(ys["weights"], (1, 0, 2))  # (B, T_q, T_v)
        return context, weights, last["state"]

    # ------------------------------------------------------------------ call

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        return_attention_scores=False,
        training=None,
        attention_state=None,
        return_attention_state=False,
        **state_arguments,
    ):
        key = self._check_call_inputs(query, value, key, query_mask, value_mask)
        state = self._call_state(value, value_mask, attention_state, state_arguments)
        context, weights, state = self._call_attend(
            query, value, key, query_mask, value_mask, training, state
        )
        return _outputs(context, weights, state, return_attention_scores, return_attention_state)

    def _call_state(self, value, value_mask, attention_state, state_arguments):
        """The state `call` starts from: `attention_state`, checked, or None
        for `initial_attention_state`. A subclass whose `call` takes its state
        under other names (`state_arguments`) maps them here."""
        if state_arguments:
            raise TypeError(
                f"{type(self).__name__}.call() got unexpected keyword arguments: "
                f"{', '.join(sorted(state_arguments))}"
            )
        if attention_state is not None:
            self._check_state(attention_state, value.shape)
        return attention_state

    def _check_call_inputs(self, query, value, key, query_mask, value_mask):
        """The checks of `call` and `compute_output_spec`; returns the keys."""
        key = value if key is None else key
        self._check_static_shapes(query.shape, value.shape, key.shape)
        self._check_masks(query.shape, value.shape, query_mask, value_mask)
        return key

    def _call_attend(
        self, query, value, key, query_mask, value_mask, training, attention_state=None
    ):
        """What `call` computes: `(context, weights, last state)`.

        One step for a (batch, d_q) query, `attend_sequence` for (batch, T_q,
        d_q); `attention_state` None starts from `initial_attention_state`.
        """
        dtype = self.compute_dtype
        # Zeroed before the projection: a NaN there would reach its gradient.
        value, processed_keys = self.prepare_memory(
            ops.cast(value, dtype), value_mask, ops.cast(key, dtype)
        )
        common = {"value_mask": value_mask, "training": training, "memory_prepared": True}
        if len(query.shape) == 2:
            if attention_state is None:
                attention_state = self.initial_attention_state(value, value_mask)
            return self.attend_step(
                query, value, processed_keys, attention_state, query_mask=query_mask, **common
            )
        return self.attend_sequence(
            query,
            value,
            processed_keys,
            query_mask=query_mask,
            attention_state=attention_state,
            **common,
        )

    def compute_output_spec(self, *args, **kwargs):
        arguments = bound_arguments(self.call, args, kwargs)
        query, value = arguments["query"], arguments["value"]
        self._check_call_inputs(
            query, value, arguments["key"], arguments["query_mask"], arguments["value_mask"]
        )
        self._check_state_arguments_spec(arguments["state_arguments"], value.shape)
        context, weights = self._output_specs(query.shape, value.shape)
        state = {
            name: keras.KerasTensor(shape, dtype=self.state_dtype)
            for name, shape in self.attention_state_shapes(tuple(value.shape)).items()
        }
        return _outputs(
            context,
            weights,
            state,
            arguments["return_attention_scores"],
            arguments["return_attention_state"],
        )

    def _check_state_arguments_spec(self, state_arguments, value_shape):
        """What `compute_output_spec` checks of a subclass's own state arguments."""
        if state_arguments:
            raise TypeError(
                f"{type(self).__name__}.call() got unexpected keyword arguments: "
                f"{', '.join(sorted(state_arguments))}"
            )

    def _output_specs(self, query_shape, value_shape):
        """The `KerasTensor`s of the context and the weights that `call` returns."""
        dtype = self.compute_dtype
        context = keras.KerasTensor(tuple(query_shape[:-1]) + (value_shape[-1],), dtype=dtype)
        weights = keras.KerasTensor(self._weights_shape(query_shape, value_shape), dtype=dtype)
        return context, weights

    def _weights_shape(self, query_shape, value_shape):
        """The shape of the weights that `call` returns: (batch, [T_q,] T_v)."""
        return tuple(query_shape[:-1]) + (value_shape[1],)

    def compute_output_shape(self, query_shape, value_shape, key_shape=None, **kwargs):
        return tuple(query_shape[:-1]) + (value_shape[-1],)


def refuse_abstract_base(layer, base, layers, use):
    """Raises when `layer` is an instance of the abstract class `base` itself.

    Called first in `base.__init__`, so a saved config of the base class fails
    there, and not later with a bare NotImplementedError. `layers` names what
    `base` is the base of; `use` the layers to use instead.
    """
    if type(layer) is base:
        raise TypeError(
            f"{base.__name__} is the abstract base of {layers} and cannot be used "
            f"directly. Use {use}."
        )


def _keep_rows(keep, new, old):
    """`new` where `keep` (batch,) is True, `old` elsewhere, for a tensor of any rank."""
    keep = ops.reshape(keep, (-1,) + (1,) * (len(new.shape) - 1))
    return ops.where(keep, new, old)


def _outputs(context, weights, state, return_attention_scores, return_attention_state):
    """The context, and the weights and the state when asked for."""
    outputs = (context,)
    if return_attention_scores:
        outputs += (weights,)
    if return_attention_state:
        outputs += (state,)
    return outputs[0] if len(outputs) == 1 else outputs
