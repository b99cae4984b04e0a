"""The attention layers: the contract every mechanism fills (`BaseAttention`) and the mechanisms.

One public class per module, named after it, with the mask math they share
(`masking`) and the dense monotonic alignment (`monotonic_alignment`). The
classes are imported from `keras_attention` itself; here the room lists its
modules.
"""

__all__ = [
    "additive_score",
    "bahdanau_attention",
    "bahdanau_monotonic_attention",
    "base_alignment_attention",
    "base_attention",
    "base_monotonic_attention",
    "content_attention",
    "gmm_attention",
    "location_sensitive_attention",
    "luong_attention",
    "luong_monotonic_attention",
    "masked_softmax",
    "masking",
    "monotonic_alignment",
    "monotonic_infinite_lookback_attention",
    "overridden_attention",
    "step_guard",
    "wait_k_attention",
    "wrapped_attention",
]
