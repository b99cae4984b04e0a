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
from keras_attention.masking import shape_str
from keras_attention.masking import zero_masked


@keras.saving.register_keras_serializable(package="keras_attention")
class BaseAlignmentAttention(BaseAttention):
    """Base class of the attention layers whose state is one weight per key.

    Not used directly (a `TypeError` says so). Subclasses implement
    `build_score(d_q, d_k)`, `precompute_keys(key)`,
    `step_weights(query, processed_keys, state, value_mask, training, noise)`
    and, when their state has more than "alignment", `attention_state_keys`.

    Args:
        **kwargs: base layer arguments (`name`, `dtype`, ...).
    """

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

    def _check_state_entry(self, key, tensor, value_shape):
        self._check_per_key(f"attention_state['{key}']", tensor, value_shape, "one weight per key")

    def _masked_state(self, tensor, value_mask):
        # A masked key's previous weight counts as 0.
        return zero_masked(tensor, value_mask)

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
        self._check_masks(query.shape, value.shape, query_mask, value_mask)
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
            context, weights, state = self.attend_sequence(
                query, value, processed_keys, query_mask=query_mask, attention_state=state, **common
            )
        outputs = (context,)
        if return_attention_scores:
            outputs += (weights,)
        if return_attention_state:
            outputs += (state,)
        return outputs[0] if len(outputs) == 1 else outputs

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
        self._check_masks(query.shape, value.shape, query_mask, value_mask)
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
