"""`BaseAlignmentAttention`: attention whose weights depend on the previous ones.

Location-sensitive and monotonic attention score a query against the keys *and*
the previous alignment, so they run step by step and carry an attention state
(a dict of (batch, T_v) tensors). This base class holds what they share: the
call contract (one step, or a sequence of queries run step by step in a scan),
the initial state, the masks and the shape checks. A subclass says how keys are
projected (`precompute_keys`) and how one step's weights follow from a query,
the keys and the state (`_step_weights`).
"""

import keras
from keras import ops

from keras_attention import loops
from keras_attention.masking import dims_compatible as _same
from keras_attention.masking import shape_error as _arg_error
from keras_attention.masking import shape_str
from keras_attention.masking import softmax_dtype
from keras_attention.masking import zero_masked


@keras.saving.register_keras_serializable(package="keras_attention")
class BaseAlignmentAttention(keras.layers.Layer):
    """Base class of the attention layers that carry an alignment state.

    Not used directly (a `TypeError` says so). Subclasses implement
    `build_score(d_q, d_k)`, `precompute_keys(key)`,
    `_step_weights(query, processed_keys, state, value_mask, training, noise)`
    and, when their state has more than "alignment", `attention_state_keys`.

    A decoder tells these layers from the content-only ones
    (`BahdanauAttention`, `LuongAttention`) by `stateful_attention = True`:
    it must call `initial_attention_state` once per batch and
    `attend_step` at every step, carrying the state.

    The state tensors are float32 under mixed precision (the compute dtype
    otherwise): a cumulative sum of weights or a product of probabilities
    over hundreds of steps loses too much in float16.

    Args:
        **kwargs: base layer arguments (`name`, `dtype`, ...).
    """

    stateful_attention = True
    # A single alignment per step: the decoders read `num_heads`.
    num_heads = 1
    # The keys of the attention state dict, in order.
    attention_state_keys = ("alignment",)

    def __init__(self, **kwargs):
        if type(self) is BaseAlignmentAttention:
            raise TypeError(
                "BaseAlignmentAttention is the abstract base of the stateful "
                "attention layers and cannot be used directly. Use "
                "LocationSensitiveAttention, BahdanauMonotonicAttention or "
                "LuongMonotonicAttention."
            )
        super().__init__(**kwargs)
        self.supports_masking = True
        self.query_dim = None
        self.key_dim = None
        self.value_dim = None

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
        self.query_dim = int(query_shape[-1])
        self.key_dim = int(key_shape[-1])
        self.value_dim = int(value_shape[-1])
        self.build_score(self.query_dim, self.key_dim)
        self.built = True

    def build_score(self, query_dim, key_dim):
        raise self._not_implemented("build_score(query_dim, key_dim)")

    def _not_implemented(self, method):
        return NotImplementedError(
            f"{type(self).__name__} must implement {method}: a subclass of "
            "BaseAlignmentAttention implements build_score, precompute_keys and "
            "_step_weights."
        )

    # ---------------------------------------------------------------- checks

    def _check_static_shapes(self, query_shape, value_shape, key_shape):
        query_shape, value_shape, key_shape = (
            tuple(query_shape),
            tuple(value_shape),
            tuple(key_shape),
        )
        if len(query_shape) not in (2, 3):
            raise _arg_error(
                "query", "(batch, T_q, d_q), or (batch, d_q) for one decoder step", query_shape
            )
        if len(value_shape) != 3:
            raise _arg_error("value", "(batch, T_v, d_v)", value_shape)
        if len(key_shape) != 3:
            raise _arg_error("key", "(batch, T_v, d_k)", key_shape)
        if not _same(query_shape[0], value_shape[0]):
            raise _arg_error(
                "value",
                f"(batch, T_v, d_v) with batch={query_shape[0]} as in `query`",
                value_shape,
                "The batch sizes of query and value differ.",
            )
        if not (_same(key_shape[0], value_shape[0]) and _same(key_shape[1], value_shape[1])):
            raise _arg_error(
                "key",
                f"(batch, T_v, d_k) with (batch, T_v)={shape_str(value_shape[:2])} as in `value`",
                key_shape,
                "Every key needs a value.",
            )
        if self.query_dim is not None:
            for name, shape, symbol, dim, expected in (
                ("query", query_shape, "d_q", self.query_dim, "(batch, T_q, d_q) or (batch, d_q)"),
                ("key", key_shape, "d_k", self.key_dim, "(batch, T_v, d_k)"),
                ("value", value_shape, "d_v", self.value_dim, "(batch, T_v, d_v)"),
            ):
                if not _same(shape[-1], dim):
                    raise _arg_error(
                        name,
                        f"{expected} with {symbol}={dim}",
                        shape,
                        f"The layer was built with {symbol}={dim}.",
                    )

    def _check_per_key(self, name, tensor, value_shape, what):
        """(batch, T_v) tensors: value_mask, previous weights, state entries."""
        shape = tuple(tensor.shape)
        if len(shape) != 2 or not all(
            _same(a, b) for a, b in zip(shape, tuple(value_shape)[:2], strict=True)
        ):
            raise _arg_error(name, f"(batch, T_v)={shape_str(value_shape[:2])}, {what}", shape)

    def _check_query_mask(self, query_shape, query_mask):
        if query_mask is None:
            return
        shape = tuple(query_mask.shape)
        expected = tuple(query_shape)[:-1]
        if len(shape) != len(expected) or not all(
            _same(a, b) for a, b in zip(shape, expected, strict=True)
        ):
            symbols = "(batch,)" if len(expected) == 1 else "(batch, T_q)"
            raise _arg_error(
                "query_mask", f"{symbols}={shape_str(expected)}, one boolean per query", shape
            )

    def _check_state(self, attention_state, value_shape):
        if not isinstance(attention_state, dict) or set(attention_state) != set(
            self.attention_state_keys
        ):
            received = (
                sorted(attention_state) if isinstance(attention_state, dict) else attention_state
            )
            raise ValueError(
                "Invalid value for argument `attention_state`. Expected a dict with "
                f"the keys {list(self.attention_state_keys)}, as returned by "
                f"initial_attention_state. Received: attention_state={received!r}"
            )
        for key in self.attention_state_keys:
            self._check_per_key(
                f"attention_state['{key}']",
                attention_state[key],
                value_shape,
                "one weight per key",
            )

    # ----------------------------------------------------------------- state

    def initial_attention_state(self, memory, value_mask=None):
        """The attention state before the first step.

        Args:
            memory: the values, (batch, T_v, d_v), or any tensor whose first two
                dimensions are (batch, T_v); or a `(batch_size, T_v)` tuple.
            value_mask: optional bool (batch, T_v).

        Returns:
            A dict of (batch, T_v) tensors in `state_dtype`, with the keys
            `attention_state_keys`: zeros here (a subclass may start
            elsewhere).
        """
        zeros = self._zeros_per_key(memory)
        return {key: zeros for key in self.attention_state_keys}

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
        """Draws the random inputs of `shape` steps before a loop, or None.

        A loop over time (a scan) must not draw inside its body (on JAX the
        draw leaks a tracer): a decoder draws the noise of all its steps here
        and passes one slice to `attend_step` at each step. None when the
        layer draws nothing (this base class; monotonic attention outside
        training or without `sigmoid_noise`).
        """
        return None

    # ------------------------------------------------------------------ step

    def precompute_keys(self, key):
        """Projects the keys once, for every step: (batch, T_v, d_k) → (batch, T_v, units)."""
        raise self._not_implemented("precompute_keys(key)")

    def _step_weights(self, query, processed_keys, state, value_mask, training, noise):
        """(batch, d_q) query → (weights (batch, T_v) in `state_dtype`, new state).

        `state` entries are zero at masked keys; the weights must be too.
        """
        raise self._not_implemented("_step_weights(...)")

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
        _memory_zeroed=False,
    ):
        """One step: attends with keys from `precompute_keys` and the previous state.

        Args:
            query: (batch, d_q), the decoder state of this step.
            value: (batch, T_v, d_v).
            processed_keys: (batch, T_v, units), from `precompute_keys(key)`.
            attention_state: the dict returned by `initial_attention_state` or
                by the previous step.
            value_mask: optional bool (batch, T_v); masked keys get weight 0,
                and their previous weights count as 0.
            query_mask: optional bool (batch,); a padded step gives zero
                context and weights and passes the state on unchanged.
            training: whether the step is in training (sigmoid noise).
            noise: optional (batch, T_v) slice of `step_noise(...)`, used instead
                of a draw here.

        Returns:
            `(context, weights, new_state)`: context (batch, d_v) and weights
            (batch, T_v) in the compute dtype; the new state dict.
        """
        dtype = self.compute_dtype
        query = ops.cast(query, dtype)
        value = ops.cast(value, dtype)
        if len(query.shape) != 2:
            raise _arg_error("query", "(batch, d_q) for one step", query.shape)
        if len(value.shape) != 3:
            raise _arg_error("value", "(batch, T_v, d_v)", value.shape)
        pk_shape = tuple(processed_keys.shape)
        if len(pk_shape) != 3 or not all(
            _same(a, b) for a, b in zip(pk_shape[:2], value.shape[:2], strict=True)
        ):
            raise _arg_error(
                "processed_keys",
                f"(batch, T_v, units) with (batch, T_v)={shape_str(value.shape[:2])} "
                "as in `value`, as returned by precompute_keys(key)",
                pk_shape,
            )
        if value_mask is not None:
            self._check_per_key("value_mask", value_mask, value.shape, "one boolean per key")
        self._check_query_mask(query.shape, query_mask)
        self._check_state(attention_state, value.shape)
        if noise is not None:
            self._check_per_key("noise", noise, value.shape, "one draw per key")
        if not _memory_zeroed:
            # 0 · NaN is NaN: what the mask removes is zeroed before any product.
            value = zero_masked(value, value_mask)
            processed_keys = zero_masked(processed_keys, value_mask)
        # A padded step's query is never read either (its gradient stays finite).
        query = zero_masked(query, query_mask)
        state = {
            key: zero_masked(ops.cast(attention_state[key], self.state_dtype), value_mask)
            for key in self.attention_state_keys
        }
        weights, new_state = self._step_weights(
            query, processed_keys, state, value_mask, training, noise
        )  # (B, T_v)
        weights = ops.cast(weights, dtype)
        context = ops.einsum("bv,bvd->bd", weights, value)  # (B, d_v)
        if query_mask is not None:
            keep = ops.cast(query_mask, "bool")  # (B,)
            zero = ops.zeros((), dtype=dtype)
            context = ops.where(keep[:, None], context, zero)
            weights = ops.where(keep[:, None], weights, zero)
            new_state = {
                key: ops.where(
                    keep[:, None], ops.cast(new_state[key], state[key].dtype), state[key]
                )
                for key in self.attention_state_keys
            }
        new_state = {key: ops.cast(new_state[key], self.state_dtype) for key in new_state}
        return context, weights, new_state

    # ------------------------------------------------------------------ call

    def _state_from_arguments(self, value, value_mask, previous_alignment, previous_cumulative):
        if previous_cumulative is not None and "cumulative" not in self.attention_state_keys:
            raise ValueError(
                "Invalid value for argument `previous_cumulative`. Only a layer "
                "with cumulative weights in its state takes it. Received: "
                f"previous_cumulative.shape={shape_str(previous_cumulative.shape)}"
            )
        if previous_alignment is None:
            if previous_cumulative is not None:
                raise ValueError(
                    "Invalid value for argument `previous_cumulative`. Pass it with "
                    "`previous_alignment`, or neither for the initial state. "
                    f"Received: previous_cumulative.shape={shape_str(previous_cumulative.shape)}"
                )
            return self.initial_attention_state(value, value_mask)
        self._check_per_key(
            "previous_alignment", previous_alignment, value.shape, "the previous weights"
        )
        state = {"alignment": ops.cast(previous_alignment, self.state_dtype)}
        if "cumulative" in self.attention_state_keys:
            if previous_cumulative is None:
                raise ValueError(
                    "Invalid value for argument `previous_cumulative`. Expected the "
                    "(batch, T_v) sum of the weights of all previous steps with "
                    "`previous_alignment` when cumulative=True. Received: "
                    "previous_cumulative=None"
                )
            self._check_per_key(
                "previous_cumulative",
                previous_cumulative,
                value.shape,
                "the sum of the weights of all previous steps",
            )
            state["cumulative"] = ops.cast(previous_cumulative, self.state_dtype)
        return state

    def call(
        self,
        query,
        value,
        key=None,
        previous_alignment=None,
        previous_cumulative=None,
        query_mask=None,
        value_mask=None,
        return_attention_scores=False,
        return_attention_state=False,
        training=None,
    ):
        key = value if key is None else key
        self._check_static_shapes(query.shape, value.shape, key.shape)
        if value_mask is not None:
            self._check_per_key("value_mask", value_mask, value.shape, "one boolean per key")
        self._check_query_mask(query.shape, query_mask)
        dtype = self.compute_dtype
        value = zero_masked(ops.cast(value, dtype), value_mask)
        # Zeroed before the projection: a NaN there would reach its gradient.
        processed_keys = self.precompute_keys(zero_masked(ops.cast(key, dtype), value_mask))
        state = self._state_from_arguments(
            value, value_mask, previous_alignment, previous_cumulative
        )
        common = {"value_mask": value_mask, "training": training, "_memory_zeroed": True}
        if len(query.shape) == 2:
            context, weights, state = self.attend_step(
                query, value, processed_keys, state, query_mask=query_mask, **common
            )
        else:
            context, weights, state = self._sequence(
                query, value, processed_keys, state, query_mask, common
            )
        outputs = (context,)
        if return_attention_scores:
            outputs += (weights,)
        if return_attention_state:
            outputs += (state,)
        return outputs[0] if len(outputs) == 1 else outputs

    def _sequence(self, query, value, processed_keys, state, query_mask, common):
        """Runs `attend_step` over the T_q queries, carrying the state."""
        dtype = self.compute_dtype
        query = ops.cast(query, dtype)
        batch, t_v = ops.shape(value)[0], ops.shape(value)[1]
        xs = {"query": ops.transpose(query, (1, 0, 2))}  # (T_q, B, d_q)
        if query_mask is not None:
            xs["mask"] = ops.transpose(ops.cast(query_mask, "bool"), (1, 0))  # (T_q, B)
        # Drawn before the loop: no random draw inside a scan.
        noise = self.step_noise((ops.shape(query)[1], batch, t_v), common["training"])
        if noise is not None:
            xs["noise"] = noise  # (T_q, B, T_v)
        init = {
            "state": state,
            "context": ops.zeros((batch, self.value_dim), dtype=dtype),
            "weights": ops.zeros((batch, t_v), dtype=dtype),
        }

        def step(carry, x):
            context, weights, new_state = self.attend_step(
                x["query"],
                value,
                processed_keys,
                carry["state"],
                query_mask=x.get("mask"),
                noise=x.get("noise"),
                **common,
            )
            carry = {"state": new_state, "context": context, "weights": weights}
            return carry, carry

        last, ys = loops.scan(step, init, xs)
        context = ops.transpose(ys["context"], (1, 0, 2))  # (B, T_q, d_v)
        weights = ops.transpose(ys["weights"], (1, 0, 2))  # (B, T_q, T_v)
        return context, weights, last["state"]

    def compute_output_spec(
        self,
        query,
        value,
        key=None,
        previous_alignment=None,
        previous_cumulative=None,
        query_mask=None,
        value_mask=None,
        return_attention_scores=False,
        return_attention_state=False,
        training=None,
    ):
        key = value if key is None else key
        self._check_static_shapes(query.shape, value.shape, key.shape)
        if value_mask is not None:
            self._check_per_key("value_mask", value_mask, value.shape, "one boolean per key")
        self._check_query_mask(query.shape, query_mask)
        if previous_alignment is not None:
            self._check_per_key(
                "previous_alignment",
                previous_alignment,
                value.shape,
                "the weights of the previous step",
            )
        dtype = self.compute_dtype
        outputs = (keras.KerasTensor(tuple(query.shape[:-1]) + (value.shape[-1],), dtype=dtype),)
        if return_attention_scores:
            weights_shape = tuple(query.shape[:-1]) + (value.shape[1],)
            outputs += (keras.KerasTensor(weights_shape, dtype=dtype),)
        if return_attention_state:
            per_key = tuple(value.shape[:2])
            outputs += (
                {
                    key: keras.KerasTensor(per_key, dtype=self.state_dtype)
                    for key in self.attention_state_keys
                },
            )
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_output_shape(self, query_shape, value_shape, key_shape=None, **kwargs):
        return tuple(query_shape[:-1]) + (value_shape[-1],)
