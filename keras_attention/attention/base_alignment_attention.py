"""`BaseAlignmentAttention`: attention whose weights depend on the previous ones.

Location-sensitive and monotonic attention score a query against the keys *and*
the previous alignment, so they run step by step and carry an attention state
of (batch, T_v) tensors. They fill the contract of `BaseAttention`
(`step_weights`, `initial_attention_state`); this class adds what they share:
state entries of one weight per key (checked as such, zeroed where masked) and
a `call` that starts from given previous weights and can return the state.
"""

import keras
from keras import ops

from keras_attention.attention.base_attention import BaseAttention
from keras_attention.attention.base_attention import refuse_abstract_base
from keras_attention.attention.masking import shape_str
from keras_attention.attention.masking import zero_masked


@keras.saving.register_keras_serializable(package="keras_attention")
class BaseAlignmentAttention(BaseAttention):
    """Base class of the attention layers whose state is one weight per key.

    Not used directly (a `TypeError` says so). Subclasses implement
    `build_score(d_q, d_k)`, `precompute_keys(key)`,
    `step_weights(query, processed_keys, state, value_mask, training, noise)`
    and, when their state has more than "alignment", `attention_state_keys`.

    Args:
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments (those of every subclass):
        query: (batch, T_q, d_q), a sequence of queries run step by step, or
            (batch, d_q) for one step.
        value: (batch, T_v, d_v).
        key: optional (batch, T_v, d_k); defaults to `value`.
        previous_alignment: optional (batch, T_v) weights α_{t-1} of the step
            before the first query; defaults to `initial_attention_state`.
        previous_cumulative: (batch, T_v) Σ_{s<t} α_s, needed with
            `previous_alignment` by a layer whose state holds the sum of the
            previous weights (`LocationSensitiveAttention(cumulative=True)`).
        query_mask: optional bool (batch, T_q) or (batch,); padded queries get
            zero context and weights and leave the state unchanged.
        value_mask: optional bool (batch, T_v); masked keys get weight 0 and
            are never read. Both masks are filled in automatically from a
            masking layer upstream.
        return_attention_scores: also return the weights.
        return_attention_state: also return the state after the last query,
            a dict with the keys `attention_state_keys`, (batch, T_v) each.
        attention_state: that dict, to start from instead of
            `previous_alignment` (and `previous_cumulative`); not with them.
        training: whether the layer's random draws (noise) are active.

    Returns:
        The context, (batch, T_q, d_v) or (batch, d_v); with
        `return_attention_scores=True` also the weights, (batch, T_q, T_v) or
        (batch, T_v); with `return_attention_state=True` also the state dict.

    Step by step (what a decoder does): `keys = layer.precompute_keys(value)`
    once, `state = layer.initial_attention_state(value, value_mask)`, the
    noise of all steps `noise = layer.step_noise((T, batch, T_v), training)`
    before the loop (None for a layer that draws nothing), then `context,
    weights, state = layer.attend_step(query_t, value, keys, state,
    value_mask=value_mask, noise=noise_t)` at every step.
    """

    # The keys of the attention state dict, in order.
    attention_state_keys = ("alignment",)

    def __init__(self, **kwargs):
        refuse_abstract_base(
            self,
            BaseAlignmentAttention,
            "the stateful attention layers",
            "LocationSensitiveAttention, BahdanauMonotonicAttention or LuongMonotonicAttention",
        )
        super().__init__(**kwargs)

    def _check_state_entry(self, key, tensor, value_shape):
        self._check_per_key(f"attention_state['{key}']", tensor, value_shape, "one weight per key")

    def _masked_state(self, tensor, value_mask):
        # A masked key's previous weight counts as 0.
        return zero_masked(tensor, value_mask)

    # ------------------------------------------------------------------ call

    def _call_state(self, value, value_mask, attention_state, state_arguments):
        """The state `call` starts from: `attention_state`, or the one that
        `previous_alignment` (and `previous_cumulative`) give, or None for the
        initial one."""
        previous_alignment = state_arguments.pop("previous_alignment", None)
        previous_cumulative = state_arguments.pop("previous_cumulative", None)
        if previous_alignment is None and previous_cumulative is None:
            return super()._call_state(value, value_mask, attention_state, state_arguments)
        super()._call_state(value, value_mask, None, state_arguments)  # unknown names
        if attention_state is not None:
            raise ValueError(
                "Pass the state as `attention_state` or as `previous_alignment` "
                "(and `previous_cumulative`), not both."
            )
        if previous_cumulative is not None and "cumulative" not in self.attention_state_keys:
            raise ValueError(
                "Invalid value for argument `previous_cumulative`. Only a layer "
                "with cumulative weights in its state takes it. Received: "
                f"previous_cumulative.shape={shape_str(previous_cumulative.shape)}"
            )
        if previous_alignment is None:
            raise ValueError(
                "Invalid value for argument `previous_cumulative`. Pass it with "
                "`previous_alignment`, or neither for the initial state. "
                f"Received: previous_cumulative.shape={shape_str(previous_cumulative.shape)}"
            )
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

    def _check_state_arguments_spec(self, state_arguments, value_shape):
        state_arguments = dict(state_arguments)
        previous_alignment = state_arguments.pop("previous_alignment", None)
        state_arguments.pop("previous_cumulative", None)
        super()._check_state_arguments_spec(state_arguments, value_shape)
        if previous_alignment is not None:
            self._check_per_key(
                "previous_alignment",
                previous_alignment,
                value_shape,
                "the weights of the previous step",
            )
