"""`overridden_decoder`: a copy of a decoder whose attention weights are replaced."""

from keras_attention.attention.overridden_attention import OverriddenAttention
from keras_attention.decoders.base_decoder import BaseDecoder


def overridden_decoder(decoder, mode, seed=None):
    """A copy of a built decoder whose attention weights are replaced.

    The copy wraps the decoder's attention layer in
    `OverriddenAttention(attention, mode, seed)` and holds copies of the
    decoder's other weights; the decoder itself, and any function traced with
    it, are unchanged. Its `call`, `get_decode_state` and `step` are the
    decoder's.

    Args:
        decoder: a built `BahdanauDecoder` or `LuongDecoder` with a
            content-only, single-head attention layer.
        mode: "uniform" or "permute" (see `OverriddenAttention`).
        seed: seed of the random order of "permute".

    Returns:
        The new decoder, built.
    """
    if not isinstance(decoder, BaseDecoder) or not decoder.built:
        raise ValueError(
            "Invalid value for argument `decoder`. Expected a built BahdanauDecoder "
            f"or LuongDecoder (call it once on a batch first). Received: decoder={decoder!r}"
        )
    config = decoder.get_config()
    config["attention"] = OverriddenAttention(decoder.attention, mode, seed=seed)
    copy = type(decoder).from_config(config)
    copy.build((None, None, decoder.embedding_dim), (None, None, decoder.memory_dim))
    copy.set_weights(decoder.get_weights())
    return copy
