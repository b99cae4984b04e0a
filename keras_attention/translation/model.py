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

With a simultaneous `policy` the model is the streaming one pysimt trains on
Multi30k (Caglayan et al. 2020, its `wait{k}-rnn.conf`): a memory position
reads the source up to it only, and the decoder starts before the source
has ended, so that decoding the sentence whole is decoding it as it arrives:

    source_ids (B, S) ─ Embedding ─ Dropout ─ GRU ─ ... ─ GRU ─► memory (B, S, encoder_units)
    decoder_input_ids (B, T) ─ Embedding ─ Dropout ─┐
         memory, source mask ─► BahdanauDecoder (first state zeros, the attention
                                 wrapped by the policy) ─ Dropout ─ Dense ─► logits

"wait-k" wraps the Bahdanau attention in `WaitKAttention` (one k, or every k
of a range at once: `training_k`), "milk" replaces it with
`MonotonicInfiniteLookbackAttention` (soft "parallel" mode in training; the
translator sets `mode="hard"` to decode), "consecutive" leaves it as it is
(k = infinity: the unidirectional baseline).
"""

from types import SimpleNamespace

import keras

from keras_attention.arguments.validation import check_positive_int
from keras_attention.attention.bahdanau_attention import BahdanauAttention
from keras_attention.attention.luong_attention import LuongAttention
from keras_attention.attention.monotonic_infinite_lookback_attention import (
    MonotonicInfiniteLookbackAttention,
)
from keras_attention.attention.wait_k_attention import WaitKAttention
from keras_attention.attention.wait_k_attention import check_k
from keras_attention.decoders.bahdanau_decoder import BahdanauDecoder
from keras_attention.decoders.luong_decoder import LuongDecoder
from keras_attention.translation.tied_embedding import TiedEmbedding

ATTENTIONS = ("bahdanau", "luong-dot", "luong-general", "luong-concat", "none")
# What s_0 is computed from: the encoder's final states (both directions), or
# the mean of the memory over the real source tokens (`MaskedMean`).
DECODER_INITS = ("final", "mean")
# The read/write policies of a simultaneous (streaming) model; None: the
# offline model, bidirectional encoder and bridge.
POLICIES = ("consecutive", "wait-k", "milk")
# pysimt's streaming encoder: two unidirectional GRU layers.
ENCODER_LAYERS = 2
# MILk's monotonic head: noise before the sigmoid pushes the soft training
# towards the hard decisions of decoding (Raffel et al. 2017 add Gaussian
# noise of standard deviation 1); a score bias of 0 starts it at p = 1/2.
MILK_SIGMOID_NOISE = 1.0

# Layer names the inference code looks up in a trained (or reloaded) model.
SOURCE_EMBEDDING = "source_embedding"
ENCODER = "encoder"  # the streaming encoder's GRU layers: encoder_1, encoder_2, ...
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
    policy=None,
    wait_k=None,
):
    """The decoder layer for an attention name of `ATTENTIONS` (not "none").

    `conditional=True` (Bahdanau only) gives the two-cell conditional decoder;
    a `policy` (Bahdanau only) wraps or replaces its attention as the module
    docstring says.
    """
    check_conditional(attention, conditional)
    if attention == "bahdanau":
        layer = policy_attention(policy, units, wait_k, seed)
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
    policy=None,
    wait_k=None,
    encoder_layers=None,
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
            "luong-dot" needs (d_q == d_k). With a `policy`: the size of
            each unidirectional GRU layer, default `units`.
        seed: seed of the dropout layers (and of the draws of k).
        conditional: "bahdanau" only: the conditional (two-cell) decoder.
        decoder_init: one of `DECODER_INITS`, what the first decoder state
            s_0 = tanh(W x + b) reads: "final", x = the final states of the
            two encoder directions; "mean", x = the mean of the memory over
            the source tokens (padding excluded), as in the published
            system. With a `policy` there is no s_0 (zeros): None, or
            "final" left as the default.
        policy: None (the offline model above), or one of `POLICIES`: the
            streaming model, "bahdanau" attention only.
        wait_k: "wait-k" only: the k of `WaitKAttention`, an int >= 1, or a
            pair `(low, high)` to train for every k in [low, high] at once
            (`training_k`; the model then decodes with k = high).
        encoder_layers: with a `policy`, the unidirectional GRU layers of
            the encoder; None: `ENCODER_LAYERS` (2, pysimt's).

    Returns:
        An uncompiled `keras.Model` with inputs `source_ids`, `decoder_input_ids`
        (int32, 0-padded) and output logits (batch, T, target_vocab_size).

    Raises:
        ValueError: an argument that names no model (`attention`,
            `decoder_init`, `policy`), a size that is not a positive integer,
            or two arguments that contradict each other.
    """
    # The arguments by name, for the two sides below (taken before any other
    # local name exists).
    args = SimpleNamespace(**locals())
    _check_choices(attention, conditional, decoder_init if policy is None else "final")
    check_read_write_policy(policy, attention, decoder_init, wait_k, encoder_layers)
    check_positive_int("source_vocab_size", source_vocab_size)
    check_positive_int("target_vocab_size", target_vocab_size)
    check_positive_int("embedding_dim", embedding_dim)
    check_positive_int("units", units)
    source = keras.Input((None,), dtype="int32", name="source_ids")
    decoder_input = keras.Input((None,), dtype="int32", name="decoder_input_ids")
    memory, initial_state = _encoder_side(source, args)
    logits = _decoder_side(decoder_input, memory, initial_state, args)
    return keras.Model([source, decoder_input], logits, name=f"translator_{attention}")


def _encoder_side(source, args):
    """The encoder of `build_translator`: the offline bidirectional encoder
    and its bridge, or with a `policy` the streaming encoder and no first
    state.

    Args:
        source: the source ids (B, S), int32, 0-padded.
        args: `build_translator`'s arguments, by name (a namespace).

    Returns:
        `(memory, initial_state)`: the memory (B, S, d), its mask riding on
        it, d = 2 · encoder_units offline and encoder_units streaming; the
        first decoder state s_0 (B, units), or None with a `policy` (zeros:
        the decoder starts before the source ends).

    Raises:
        ValueError: `encoder_units` is not a positive integer, or does not
            fit `units` and `attention` (`_encoder_units`).
    """
    if args.policy is None:
        encoder_units = _encoder_units(args.attention, args.units, args.encoder_units)
        return _encoder(
            source,
            args.source_vocab_size,
            args.embedding_dim,
            encoder_units,
            args.units,
            args.dropout,
            args.seed,
            args.decoder_init,
        )
    encoder_units = args.units if args.encoder_units is None else args.encoder_units
    check_positive_int("encoder_units", encoder_units)
    memory = _streaming_encoder(
        source,
        args.source_vocab_size,
        args.embedding_dim,
        encoder_units,
        args.encoder_layers or ENCODER_LAYERS,
        args.dropout,
        args.seed,
    )
    return memory, None


def _decoder_side(decoder_input, memory, initial_state, args):
    """The decoder of `build_translator`, from the target embedding to the
    logits: the attention decoder (`make_decoder`), or the baseline GRU for
    attention "none".

    Args:
        decoder_input: the decoder input ids (B, T), int32, 0-padded.
        memory: the encoder's memory (B, S, d), its mask riding on it.
        initial_state: the first decoder state (B, units), or None (zeros).
        args: `build_translator`'s arguments, by name (a namespace).

    Returns:
        The logits (B, T, target_vocab_size).
    """
    embedding_class = TiedEmbedding if args.tie_embeddings else keras.layers.Embedding
    target_embedding = embedding_class(
        args.target_vocab_size, args.embedding_dim, mask_zero=True, name=TARGET_EMBEDDING
    )
    y = target_embedding(decoder_input)  # (B, T, E)
    y = keras.layers.Dropout(args.dropout, seed=args.seed, name="target_dropout")(y)
    if args.attention == "none":
        outputs = _baseline_decoder(
            y, initial_state, args.units, args.embedding_dim, args.tie_embeddings
        )
    else:
        decoder = make_decoder(
            args.attention,
            args.units,
            input_feeding=args.input_feeding,
            seed=args.seed,
            output_units=args.embedding_dim if args.tie_embeddings else None,
            conditional=args.conditional,
            policy=args.policy,
            wait_k=args.wait_k,
        )
        outputs, _, _ = decoder(y, memory, initial_state=initial_state)  # (B, T, E or units)
    outputs = keras.layers.Dropout(args.dropout, seed=args.seed, name="output_dropout")(outputs)
    return _logits(outputs, target_embedding, args.target_vocab_size, args.tie_embeddings)


def policy_attention(policy, units, wait_k=None, seed=None):
    """The decoder's attention layer, named "attention", for a `policy` of
    `POLICIES` or None (a plain `BahdanauAttention`)."""
    if policy == "wait-k":
        k, training_k = wait_k_setting(wait_k)
        return WaitKAttention(
            BahdanauAttention(units, name="bahdanau"),
            k=k,
            training_k=training_k,
            seed=seed,
            name="attention",
        )
    if policy == "milk":
        return MonotonicInfiniteLookbackAttention(
            units, sigmoid_noise=MILK_SIGMOID_NOISE, seed=seed, name="attention"
        )
    return BahdanauAttention(units, name="attention")


def wait_k_setting(wait_k):
    """`(k, training_k)` of `WaitKAttention` for a `wait_k` of `build_translator`:
    `(k, None)` for one k, `(high, (low, high))` for a range."""
    if isinstance(wait_k, (tuple, list)):
        low, high = (int(k) for k in wait_k)
        return high, (low, high)
    return int(wait_k), None


def check_read_write_policy(
    policy, attention="bahdanau", decoder_init=None, wait_k=None, encoder_layers=None
):
    """Raises `ValueError` for a `policy` of `build_translator` that names no
    model, or an option that contradicts it."""
    if policy is None:
        for name, value in (("wait_k", wait_k), ("encoder_layers", encoder_layers)):
            if value is not None:
                raise ValueError(
                    f"Invalid value for argument `{name}`: it sets the streaming model of a "
                    f"simultaneous `policy` ({', '.join(POLICIES)}), and policy=None. "
                    f"Received: {name}={value!r}"
                )
        return
    if policy not in POLICIES:
        raise ValueError(
            f"Invalid value for argument `policy`. Expected None or one of {POLICIES}. "
            f"Received: policy={policy!r}"
        )
    if attention != "bahdanau":
        raise ValueError(
            f"Invalid value for argument `attention`: the streaming model of policy={policy!r} "
            f"has Bahdanau (MLP) attention. Received: attention={attention!r}"
        )
    # "final", the default, names the offline model's bridge: unused here.
    if decoder_init not in (None, "final"):
        raise ValueError(
            "Invalid value for argument `decoder_init`: the streaming model's first decoder "
            "state is zeros (it is needed before the source has ended): leave it unset. "
            f"Received: decoder_init={decoder_init!r}, policy={policy!r}"
        )
    check_positive_int("encoder_layers", encoder_layers, allow_none=True)
    if policy != "wait-k":
        if wait_k is not None:
            raise ValueError(
                f"Invalid value for argument `wait_k`: it is the schedule of policy='wait-k'. "
                f"Received: wait_k={wait_k!r}, policy={policy!r}"
            )
        return
    if isinstance(wait_k, (tuple, list)):
        if len(wait_k) != 2:
            raise ValueError(
                "Invalid value for argument `wait_k`. Expected an integer k >= 1 or a pair "
                f"(low, high). Received: wait_k={wait_k!r}"
            )
        check_k("wait_k[0]", wait_k[0])
        check_k("wait_k[1]", wait_k[1])
        if wait_k[0] > wait_k[1]:
            raise ValueError(
                "Invalid value for argument `wait_k`. Expected a range (low, high) with "
                f"low <= high. Received: wait_k={wait_k!r}"
            )
    else:
        check_k("wait_k", wait_k)


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


def _streaming_encoder(source, source_vocab_size, embedding_dim, units, layers, dropout, seed):
    """The memory (B, S, units) of the source ids (B, S), its mask riding on
    it: `layers` unidirectional GRUs, so position j reads tokens 1..j only."""
    x = keras.layers.Embedding(
        source_vocab_size, embedding_dim, mask_zero=True, name=SOURCE_EMBEDDING
    )(source)  # (B, S, E), mask (B, S)
    x = keras.layers.Dropout(dropout, seed=seed, name="source_dropout")(x)
    for i in range(1, layers + 1):
        x = keras.layers.GRU(units, return_sequences=True, name=f"{ENCODER}_{i}")(
            x
        )  # (B, S, units)
    return x


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
