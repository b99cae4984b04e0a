"""The English-French translator: a functional-API encoder-decoder.

    source_ids (B, S) ─ Embedding ─ Dropout ─ BiGRU ─► memory (B, S, 2 · encoder_units)
                                              └─ final states ─ Dense(tanh) ─► s_0
                      (decoder_init="mean": the masked mean of the memory instead)
    decoder_input_ids (B, T) ─ Embedding ─ Dropout ─┐
         memory, s_0, source mask (automatic) ─► Decoder ─ Dropout ─ Dense ─► logits

With `tie_embeddings=True` the target embedding is a `TiedEmbedding` and the
last Dense is that same embedding called in reverse (logits = o · Eᵀ + b); the
decoder's output o then has the embedding size (the attention decoders' own
output layer, or a `readout` Dense(tanh) after the baseline's GRU).

The decoder is `BahdanauDecoder` (with `conditional=True`, the two-cell
conditional GRU of the published Multi30k systems) or `LuongDecoder` with the
attention the configuration names, or a plain Keras GRU for the no-attention baseline (it
starts from s_0, the whole source squeezed into one vector).
"""

import keras

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.bahdanau_attention import BahdanauAttention
from keras_attention.attention.luong_attention import LuongAttention
from keras_attention.decoders.bahdanau_decoder import BahdanauDecoder
from keras_attention.decoders.luong_decoder import LuongDecoder
from keras_attention.translation.tied_embedding import TiedEmbedding

ATTENTIONS = ("bahdanau", "luong-dot", "luong-general", "luong-concat", "none")
# What s_0 is computed from: the encoder's final states (both directions), or
# the mean of the memory over the real source tokens (`MaskedMean`).
DECODER_INITS = ("final", "mean")

# Layer names the inference code looks up in a trained (or reloaded) model.
SOURCE_EMBEDDING = "source_embedding"
ENCODER = "encoder"
BRIDGE = "bridge"
ENCODER_MEAN = "encoder_mean"  # only in models built with decoder_init="mean"
TARGET_EMBEDDING = "target_embedding"
DECODER = "decoder"
LOGITS = "logits"
READOUT = "readout"  # the baseline's projection to the embedding size when tied


@keras.saving.register_keras_serializable(package="keras_attention")
class MaskedMean(keras.layers.Layer):
    """The mean over time of the real steps: (B, S, M), mask (B, S) → (B, M).

    Unlike `GlobalAveragePooling1D`, a row with no real step (an empty
    source) gives zeros, not 0 / 0 = NaN.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return keras.ops.mean(inputs, axis=1)
        weights = keras.ops.cast(mask, inputs.dtype)[:, :, None]  # (B, S, 1)
        total = keras.ops.sum(inputs * weights, axis=1)  # (B, M)
        count = keras.ops.maximum(keras.ops.sum(weights, axis=1), 1.0)  # (B, 1)
        return total / count

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])


def check_conditional(attention, conditional):
    """Raises `ValueError` if `conditional` is asked for with another attention
    than "bahdanau": the conditional (two-cell) decoder is a Bahdanau decoder."""
    if conditional and attention != "bahdanau":
        raise ValueError(
            "Invalid value for argument `conditional`. The conditional decoder is a "
            "Bahdanau decoder (attention='bahdanau'). Received: "
            f"attention={attention!r}, conditional={conditional!r}"
        )


def make_decoder(
    attention,
    units,
    cell_type="gru",
    input_feeding=True,
    seed=None,
    output_units=None,
    conditional=False,
):
    """The decoder layer for an attention name of `ATTENTIONS` (not "none").

    `conditional=True` (Bahdanau only) gives the two-cell conditional decoder.
    """
    check_conditional(attention, conditional)
    if attention == "bahdanau":
        layer = BahdanauAttention(units, name="attention")
        return BahdanauDecoder(
            units,
            layer,
            cell_type=cell_type,
            output_units=output_units,
            seed=seed,
            conditional=conditional,
            name=DECODER,
        )
    if attention.startswith("luong-"):
        layer = LuongAttention(score_mode=attention[len("luong-") :], name="attention")
        return LuongDecoder(
            units,
            layer,
            cell_type=cell_type,
            input_feeding=input_feeding,
            output_units=output_units,
            seed=seed,
            name=DECODER,
        )
    raise ValueError(
        f"Invalid value for argument `attention`. Expected one of {ATTENTIONS}. "
        f"Received: attention={attention!r}"
    )


def build_translator(
    source_vocab_size,
    target_vocab_size,
    attention="bahdanau",
    embedding_dim=128,
    units=256,
    dropout=0.3,
    input_feeding=True,
    tie_embeddings=False,
    encoder_units=None,
    seed=None,
    conditional=False,
    decoder_init="final",
):
    """Builds the training model: `(source_ids, decoder_input_ids) → logits`.

    Args:
        source_vocab_size: size of the source vocabulary (id 0 is padding).
        target_vocab_size: size of the target vocabulary (id 0 is padding).
        attention: one of `ATTENTIONS`.
        embedding_dim: size of both embeddings.
        units: decoder state size.
        dropout: dropout on the embeddings and on the decoder outputs.
        input_feeding: Luong decoders only.
        tie_embeddings: whether the output layer reuses the target embedding
            matrix (`TiedEmbedding`); the decoder output then has
            `embedding_dim` features.
        encoder_units: GRU size of each direction of the bidirectional
            encoder; the memory has twice as many features. Default
            `units / 2`, so that the memory has `units` features, which
            "luong-dot" needs (d_q == d_k).
        seed: seed of the dropout layers.
        conditional: "bahdanau" only: the conditional (two-cell) decoder.
        decoder_init: one of `DECODER_INITS`, what the first decoder state
            s_0 = tanh(W x + b) reads: "final", x = the final states of the
            two encoder directions; "mean", x = the mean of the memory over
            the source tokens (padding excluded), as in the published system.

    Returns:
        An uncompiled `keras.Model` with inputs `source_ids`, `decoder_input_ids`
        (int32, 0-padded) and output logits (batch, T, target_vocab_size).
    """
    _check_choices(attention, conditional, decoder_init)
    check_positive_int("source_vocab_size", source_vocab_size)
    check_positive_int("target_vocab_size", target_vocab_size)
    check_positive_int("embedding_dim", embedding_dim)
    check_positive_int("units", units)
    encoder_units = _encoder_units(attention, units, encoder_units)
    source = keras.Input((None,), dtype="int32", name="source_ids")
    decoder_input = keras.Input((None,), dtype="int32", name="decoder_input_ids")
    memory, initial_state = _encoder(
        source, source_vocab_size, embedding_dim, encoder_units, units, dropout, seed, decoder_init
    )
    embedding_class = TiedEmbedding if tie_embeddings else keras.layers.Embedding
    target_embedding = embedding_class(
        target_vocab_size, embedding_dim, mask_zero=True, name=TARGET_EMBEDDING
    )
    y = target_embedding(decoder_input)  # (B, T, E)
    y = keras.layers.Dropout(dropout, seed=seed, name="target_dropout")(y)
    if attention == "none":
        outputs = _baseline_decoder(y, initial_state, units, embedding_dim, tie_embeddings)
    else:
        decoder = make_decoder(
            attention,
            units,
            input_feeding=input_feeding,
            seed=seed,
            output_units=embedding_dim if tie_embeddings else None,
            conditional=conditional,
        )
        outputs, _, _ = decoder(y, memory, initial_state=initial_state)  # (B, T, E or units)
    outputs = keras.layers.Dropout(dropout, seed=seed, name="output_dropout")(outputs)
    logits = _logits(outputs, target_embedding, target_vocab_size, tie_embeddings)
    return keras.Model([source, decoder_input], logits, name=f"translator_{attention}")


def _check_choices(attention, conditional, decoder_init):
    """Raises `ValueError` for an `attention`, `conditional` or
    `decoder_init` of `build_translator` that names no model."""
    if attention not in ATTENTIONS:
        raise ValueError(
            f"Invalid value for argument `attention`. Expected one of {ATTENTIONS}. "
            f"Received: attention={attention!r}"
        )
    check_conditional(attention, conditional)
    if decoder_init not in DECODER_INITS:
        raise ValueError(
            f"Invalid value for argument `decoder_init`. Expected one of {DECODER_INITS}. "
            f"Received: decoder_init={decoder_init!r}"
        )


def _encoder_units(attention, units, encoder_units):
    """`encoder_units` of `build_translator`, units / 2 when None, checked
    against `units` (even for the default; equal to the memory for
    "luong-dot")."""
    if encoder_units is None:
        if units % 2:
            raise ValueError(
                "Invalid value for argument `units`. Expected an even number (the "
                "encoder has units / 2 per direction unless `encoder_units` is "
                f"given). Received: units={units}"
            )
        encoder_units = units // 2
    check_positive_int("encoder_units", encoder_units)
    if attention == "luong-dot" and 2 * encoder_units != units:
        raise ValueError(
            "attention='luong-dot' scores s_t · h_i, so the memory (2 · encoder_units "
            f"= {2 * encoder_units} features) must have the size of the decoder state "
            f"(units = {units}). Received: units={units}, encoder_units={encoder_units}. "
            "Use encoder_units=units / 2, or 'luong-general'."
        )
    return encoder_units


def _encoder(
    source, source_vocab_size, embedding_dim, encoder_units, units, dropout, seed, decoder_init
):
    """The memory (B, S, 2 · encoder_units), its mask riding on it, and the
    first decoder state s_0 (B, units) of the source ids (B, S)."""
    x = keras.layers.Embedding(
        source_vocab_size, embedding_dim, mask_zero=True, name=SOURCE_EMBEDDING
    )(source)  # (B, S, E), mask (B, S)
    x = keras.layers.Dropout(dropout, seed=seed, name="source_dropout")(x)
    memory, forward, backward = keras.layers.Bidirectional(
        keras.layers.GRU(encoder_units, return_sequences=True, return_state=True),
        name=ENCODER,
    )(x)  # (B, S, 2 · encoder_units), (B, encoder_units) × 2
    if decoder_init == "mean":
        # The source mask rides on the memory; the pooling leaves padding out.
        summary = MaskedMean(name=ENCODER_MEAN)(memory)
    else:
        summary = keras.layers.Concatenate(name="encoder_state")([forward, backward])
    initial_state = keras.layers.Dense(units, activation="tanh", name=BRIDGE)(
        summary
    )  # s_0: (B, units)
    return memory, initial_state


def _baseline_decoder(y, initial_state, units, embedding_dim, tie_embeddings):
    """The no-attention decoder's outputs: a GRU from s_0 over the target
    embeddings (B, T, E), then (tied) a `readout` to the embedding size."""
    outputs = keras.layers.GRU(units, return_sequences=True, name=DECODER)(
        y, initial_state=initial_state
    )  # (B, T, units)
    if tie_embeddings:
        outputs = keras.layers.Dense(embedding_dim, activation="tanh", name=READOUT)(
            outputs
        )  # (B, T, E)
    return outputs


def _logits(outputs, target_embedding, target_vocab_size, tie_embeddings):
    """The logits (B, T, V) of the decoder's outputs: the target embedding
    called in reverse when tied, else a Dense layer."""
    if tie_embeddings:
        return target_embedding(outputs, reverse=True)  # (B, T, V)
    return keras.layers.Dense(target_vocab_size, name=LOGITS)(outputs)  # (B, T, V)
