"""`Seq2SeqGenerator`: greedy and beam-search generation for any model built
with the decoders.

A model trained with teacher forcing reads the whole target at once; a
generator reads one token at a time. `Seq2SeqGenerator.from_model` finds the
three pieces of the user's functional graph around the one decoder:

    source ─► encoder ─► memory, s_0, memory mask ─┐
    token  ─► target embedding ─► y_{t-1} ─────────┴► decoder.step ─► readout ─► logits

and runs them, with the model's own layers and weights, around the decoder's
single `step`. The search loops are those of `keras_attention.generation`,
run by a `StepSearch` over the generator's `step`.
"""

import copy
import numbers

import keras
import numpy as np
from keras import ops

from keras_attention.arguments.validation import check_positive_int
from keras_attention.decoders.base_decoder import BaseDecoder
from keras_attention.generation.compiled import is_eager
from keras_attention.generation.model_graph import ModelGraph
from keras_attention.generation.model_graph import check_special_ids
from keras_attention.generation.recurrent_decoder import RecurrentDecoder
from keras_attention.generation.search_defaults import MAX_OUTPUT_LENGTH
from keras_attention.generation.search_defaults import MAX_SOURCE_LENGTH
from keras_attention.generation.step_search import Searching
from keras_attention.generation.step_search import StepSearch

# The bounds of `search_defaults`, under the names the constructor documents.
DEFAULT_MAX_SOURCE_LENGTH = MAX_SOURCE_LENGTH
DEFAULT_MAX_OUTPUT_LENGTH = MAX_OUTPUT_LENGTH


def _check_token_id(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(
            f"Invalid value for argument `{name}`. Expected a non-negative integer "
            f"token id. Received: {name}={value!r}"
        )


def _checked_decoder(decoder):
    """The decoder a generator runs: a built decoder of this package, or a
    Keras RNN layer in a `RecurrentDecoder`."""
    if isinstance(decoder, keras.layers.RNN):
        decoder = RecurrentDecoder(decoder)
    if not isinstance(decoder, BaseDecoder | RecurrentDecoder):
        raise ValueError(
            "Invalid value for argument `decoder`. Expected a BahdanauDecoder "
            "or LuongDecoder (or, without attention, a Keras GRU, LSTM or "
            f"SimpleRNN layer). Received: decoder={decoder!r}"
        )
    if not decoder.built:
        raise ValueError(
            f"The decoder {decoder.name!r} is not built. Call it on a batch "
            "(or fit the model) before building a generator from it."
        )
    return decoder


class Seq2SeqGenerator(Searching):
    """Generates sequences with a trained attentional encoder-decoder.

    Build it from a functional model with `Seq2SeqGenerator.from_model(model,
    start_id, end_id)`, or from the four pieces directly:

    Args:
        encoder: callable `encoder(source) -> (memory, initial_state,
            memory_mask)`: memory (batch, S, d_h); the decoder's first state
            (batch, units), `[h, c]` for LSTM, or None for zeros; memory_mask
            bool (batch, S) or None (every position real).
        target_embedding: callable, target ids (batch, T) int32 → (batch, T,
            d_emb), the decoder's inputs (the same layers as in training).
        decoder: the `BahdanauDecoder` or `LuongDecoder` of the model (built);
            for a model without attention, its Keras `GRU`, `LSTM` or
            `SimpleRNN` decoder layer (then `encoder` may return None as the
            memory, but not as the mask).
        readout: callable, decoder outputs (batch, T, d_out) → logits (batch,
            T, vocabulary).
        start_id: the id of the token every output starts from.
        end_id: the id that ends an output. Id 0 is padding.
        max_source_length: the longest source accepted (see below).
        max_output_length: the largest `max_length` accepted, and the cap of
            the default `2·S + 10`.

    The source is token ids (batch, S) int32 or features (batch, S, F) float32,
    whatever the encoder takes. A source without any real position (all
    padding, or S = 0) gives an empty output: length 0, log-prob 0. Bounds: a source longer than
    `max_source_length` is refused with a `ValueError` (in exported models it
    is truncated to that length, see `keras_attention.export`); outputs stop at
    `max_length` tokens, END included, at most `max_output_length`. The memory
    of a search grows as batch × beam × max_length × S for the attention
    history. Token ids must be in [0, vocabulary): `greedy` and `beam` refuse
    a negative id, and, for a model of `from_model` whose source input feeds an
    `Embedding`, an id at or past its `input_dim`, with a `ValueError`.

    Example:

    ```python
    generator = Seq2SeqGenerator.from_model(model, start_id=1, end_id=2)
    result = generator.greedy(source_ids, max_length=50)
    result["tokens"]      # (batch, 50) int32, END included, then 0
    result["lengths"]     # (batch,) int32, END included
    result["log_probs"]   # (batch,) float32
    result["attention"]   # (batch, 50, S) float32
    ```

    The explicit form, for a model `from_model` cannot read:

    ```python
    def encoder(source):
        memory = encoder_model(source)                       # (B, S, d_h)
        return memory, bridge(memory[:, -1]), source != 0    # s_0, mask
    encoder.variables = encoder_model.variables + bridge.variables  # for export
    generator = Seq2SeqGenerator(
        encoder, target_embedding_layer, decoder, output_layer, start_id=1, end_id=2
    )
    ```

    The export freezes the variables that `variables()` lists: a plain function
    that reads layers must list their variables in a `variables` attribute (a
    Keras layer or model lists its own); the export names any it missed.
    """

    def __init__(
        self,
        encoder,
        target_embedding,
        decoder,
        readout,
        start_id,
        end_id,
        max_source_length=DEFAULT_MAX_SOURCE_LENGTH,
        max_output_length=DEFAULT_MAX_OUTPUT_LENGTH,
    ):
        for name, value in (
            ("encoder", encoder),
            ("target_embedding", target_embedding),
            ("readout", readout),
        ):
            if not callable(value):
                raise ValueError(
                    f"Invalid value for argument `{name}`. Expected a callable "
                    f"(a Keras layer, model or function). Received: {name}={value!r}"
                )
        _check_token_id("start_id", start_id)
        _check_token_id("end_id", end_id)
        check_positive_int("max_source_length", max_source_length)
        check_positive_int("max_output_length", max_output_length)
        self.encoder = encoder
        self.target_embedding = target_embedding
        self.decoder = _checked_decoder(decoder)
        self.readout = readout
        self.start_id = start_id
        self.end_id = end_id
        self.max_source_length = int(max_source_length)
        self.max_output_length = int(max_output_length)
        self.source_spec = None  # (shape without batch, dtype), from `from_model`
        self.model = None  # the model of `from_model`
        self.encoder_model = None  # its source-side graph, from `from_model`
        self._target_vocabulary_size = None  # the logits' size, from `from_model`
        # (input_dim, name) of the smallest Embedding that reads the source of
        # `from_model`'s model; None: explicit constructor, features, none.
        self._source_vocabulary = None
        # The greedy and beam searches over `step`, compiled on their first call.
        self.search = StepSearch(self)

    # ------------------------------------------------------------ from_model

    @classmethod
    def from_model(
        cls,
        model,
        start_id,
        end_id,
        max_source_length=DEFAULT_MAX_SOURCE_LENGTH,
        max_output_length=DEFAULT_MAX_OUTPUT_LENGTH,
    ):
        """Derives a generator from a functional teacher-forced model.

        Args:
            model: a functional `keras.Model` with inputs `[source, target_in]`
                (target_in = start + target[:-1]) whose output, the logits,
                passes through exactly one `BahdanauDecoder` or `LuongDecoder`.
            start_id: the id every output starts from.
            end_id: the id that ends an output.
            max_source_length: as in the constructor.
            max_output_length: as in the constructor.

        Whatever the model computes from the source (any encoder, a bridge to
        the first state or none, a `Masking` layer on features) becomes the
        encoder; what it computes from the target ids becomes the target
        embedding; what it computes from the decoder's outputs becomes the
        readout. The layers and weights are the model's own.

        Raises:
            ValueError: naming the layer, when the model is not functional, has
                no decoder or several, its inputs cannot be told apart, or its
                readout reads more than the decoder's outputs. Build the
                generator with the constructor then. Also naming the layer,
                when the readout may mix target steps, at any distance (a
                `Conv1D` wider than one step, a recurrent layer, a shift, a
                `Lambda`, a layer of one's own that does not declare
                `acts_on_each_step = True`: decided from the layers, see
                "The readout `from_model` accepts"), which a generator running
                the readout one step at a time cannot reproduce; naming the
                argument, for a `start_id` or `end_id` outside the target
                vocabulary (see `model_graph.check_special_ids`).
        """
        graph = ModelGraph(model)
        check_special_ids(start_id, end_id, graph.target_vocabulary_size)
        generator = cls(
            graph.encoder,
            graph.target_embedding,
            graph.decoder,
            graph.readout,
            start_id,
            end_id,
            max_source_length=max_source_length,
            max_output_length=max_output_length,
        )
        generator.source_spec = graph.source_spec
        generator.model = model
        generator.encoder_model = graph.encoder_model
        generator._source_vocabulary = graph.source_vocabulary
        generator._target_vocabulary_size = graph.target_vocabulary_size
        return generator

    def with_decoder(self, decoder):
        """A generator that runs `decoder` in place of this one's.

        The encoder, target embedding, readout and bounds are this one's; the
        compiled searches are not shared, so none keeps the old decoder. For
        an ablation, e.g. with
        `keras_attention.attention.overridden_attention.overridden_decoder`.

        Args:
            decoder: a built decoder with the same inputs and output sizes.
        """
        generator = copy.copy(self)
        generator.decoder = _checked_decoder(decoder)
        generator.search = StepSearch(generator)
        return generator

    # ---------------------------------------------------------------- pieces

    def check_source(self, source):
        """The source as the search reads it: (batch, S) ids, cast to int32,
        or (batch, S, F) features; refused with a `ValueError` when its shape
        or dtype differs from the model's source input, it is longer than
        `max_source_length`, or (eagerly) an id is outside [0, vocabulary)."""
        given = source
        source = ops.convert_to_tensor(source)
        if self.source_spec is not None:
            shape, dtype = self.source_spec
            if len(source.shape) != len(shape) + 1:
                expected = "(batch, S)" if len(shape) == 1 else f"(batch, S, F={shape[-1]})"
                raise ValueError(
                    f"Invalid shape for `source`: expected {expected} like the model's "
                    f"source input, received {tuple(source.shape)}."
                )
            if "int" in dtype and "int" not in str(source.dtype):
                # A float id 1.7 would be cast to 1: refused, not cast.
                raise ValueError(
                    "Invalid dtype for `source`: token ids must be integers. "
                    f"Received: {source.dtype}"
                )
        length = source.shape[1]
        if isinstance(length, int) and length > self.max_source_length:
            raise ValueError(
                f"The source has {length} positions, more than max_source_length="
                f"{self.max_source_length}. Split the input, or build the generator "
                "with a larger `max_source_length` (the search's memory grows with it)."
            )
        if "int" in str(source.dtype) and is_eager(source):
            # Negative ids would wrap to the last embedding rows; ids past the
            # vocabulary fail deep in a gather on CPU and read zeros on GPU.
            # The ids as given: a backend may have narrowed int64 already.
            given_ids = isinstance(given, np.ndarray | list | tuple)
            values = np.asarray(given) if given_ids else keras.ops.convert_to_numpy(source)
            vocabulary = self._source_vocabulary
            bad = values < 0
            if vocabulary is not None:
                bad |= values >= vocabulary[0]
            if bad.any():
                row, col = np.argwhere(bad)[0]
                bound = "Ids must be in [0, vocabulary)."
                if vocabulary is not None:
                    size, name = vocabulary
                    bound = (
                        f"Ids must be in [0, {size}): {size} is the input_dim of the "
                        f"Embedding {name!r} that reads the source."
                    )
                raise ValueError(
                    f"Invalid token id in `source`: {int(values[row, col])} at "
                    f"[{row}, {col}]. {bound}"
                )
        if self.source_spec is not None and "int" in self.source_spec[1]:
            # After the range check: an int64 id 2**32 + 5 is not 5.
            source = ops.cast(source, "int32")
        return source

    @property
    def source_vocabulary_size(self):
        """The `input_dim` of the smallest Embedding that reads the source of
        `from_model`'s model, or None (explicit constructor, features)."""
        vocabulary = self._source_vocabulary
        return None if vocabulary is None else vocabulary[0]

    def encode(self, source):
        """source → `(decode_state, source_mask)`: the decoder's first state
        (a dict of tensors, batch first) and the bool mask (batch, S)."""
        memory, initial_state, mask = self.encoder(source)
        if mask is None:
            if memory is None:
                raise ValueError(
                    "The encoder returned neither a memory nor a mask; a generator "
                    "needs the source mask (batch, S) at least."
                )
            mask = ops.ones(ops.shape(memory)[:2], dtype="bool")
        mask = ops.cast(mask, "bool")
        state = self.decoder.get_decode_state(memory, initial_state, mask)
        return state, mask

    def embed(self, tokens):
        """tokens (batch,) int32 → the decoder's input (batch, d_emb)."""
        return ops.squeeze(self.target_embedding(ops.expand_dims(tokens, 1)), 1)

    def logits(self, outputs):
        """Decoder outputs (batch, d_out) → logits (batch, vocabulary)."""
        return ops.squeeze(self.readout(ops.expand_dims(outputs, 1)), 1)

    def step(self, tokens, state):
        """tokens (batch,), state → `(logits (batch, V), weights (batch, S), state)`."""
        output, weights, state = self.decoder.step(self.embed(tokens), state)
        return self.logits(output), weights, state

    def teacher_forced_logits(self, source, target_in):
        """Logits (batch, T, V) along given decoder inputs, as the model computes
        them."""
        memory, initial_state, mask = self.encoder(source)
        target_in = ops.convert_to_tensor(target_in)
        embedded = self.target_embedding(target_in)
        target_mask = None
        if "int" in str(target_in.dtype):
            target_mask = ops.not_equal(target_in, 0)
        outputs, _, _ = self.decoder(
            embedded,
            memory,
            initial_state=initial_state,
            target_embeddings_mask=target_mask,
            memory_mask=None if mask is None else ops.cast(mask, "bool"),
            training=False,
        )
        return self.readout(outputs)

    # ---------------------------------------------------------------- search

    @property
    def target_vocabulary_size(self):
        """The number of logits per step (the readout's `units`, else the
        target embedding's `input_dim`), or None when neither says."""
        if self._target_vocabulary_size is not None:  # the logits of `from_model`'s model
            return self._target_vocabulary_size
        for layer, name in ((self.readout, "units"), (self.target_embedding, "input_dim")):
            size = getattr(layer, name, None)
            if isinstance(size, numbers.Integral):
                return int(size)
        return None

    # ------------------------------------------------------------- export

    def variables(self):
        """Every variable the generator reads (for freezing at export): those
        of the model, the decoder and every piece with a `variables`
        attribute (Keras layers and models have one; give a plain function
        one, a list of the variables it reads, to export it)."""
        seen = {}
        parts = (self.encoder, self.target_embedding, self.decoder, self.readout)
        for part in ((self.model,) if self.model is not None else ()) + parts:
            for v in getattr(part, "variables", []):
                seen.setdefault(id(v), v)
        return list(seen.values())
