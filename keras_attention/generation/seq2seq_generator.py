"""`Seq2SeqGenerator`: greedy and beam-search generation for any model built
with the decoders.

A model trained with teacher forcing reads the whole target at once; a
generator reads one token at a time. `Seq2SeqGenerator.from_model` finds the
three pieces of the user's functional graph around the one decoder:

    source ─► encoder ─► memory, s_0, memory mask ─┐
    token  ─► target embedding ─► y_{t-1} ─────────┴► decoder.step ─► readout ─► logits

and runs them, with the model's own layers and weights, around the decoder's
single `step`. The search loops are those of `keras_attention.generation`.
"""

import numbers

import keras
import numpy as np
from keras import ops

from keras_attention.decoders.base_decoder import BaseDecoder
from keras_attention.validation import check_positive_int

# A source longer than this is refused (see `max_source_length`).
DEFAULT_MAX_SOURCE_LENGTH = 512
# Output length when `max_length` is not given: 2·S + 10 tokens, END included.
# Never more than `max_output_length` (see the constructor).
DEFAULT_MAX_OUTPUT_LENGTH = 1034


def default_max_length(source_length, cap=DEFAULT_MAX_OUTPUT_LENGTH):
    """The output bound when none is given: min(2·S + 10, cap), S the source length.

    `source_length` may be a Python int or a scalar tensor (a dynamic length).
    """
    if isinstance(source_length, numbers.Integral):
        return min(2 * int(source_length) + 10, cap)
    return ops.minimum(2 * source_length + 10, cap)


def _check_token_id(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(
            f"Invalid value for argument `{name}`. Expected a non-negative integer "
            f"token id. Received: {name}={value!r}"
        )


@keras.saving.register_keras_serializable(package="keras_attention")
class _KerasMaskOf(keras.layers.Layer):
    """Returns the Keras mask that rides on its input as a bool tensor.

    inputs (B, T, ...) with mask (B, T) → the mask; all True without one. Added
    to a model's graph by `from_model` so that a derived encoder returns the
    memory mask that the decoder received in the model.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return ops.ones(ops.shape(inputs)[:2], dtype="bool")
        return ops.cast(mask, "bool")

    def compute_output_spec(self, inputs, mask=None):
        return keras.KerasTensor(inputs.shape[:2], dtype="bool")

    def compute_mask(self, inputs, mask=None):
        return None


@keras.saving.register_keras_serializable(package="keras_attention")
class _SourcePositions(keras.layers.Layer):
    """The real positions of a source without a Keras mask: ids ≠ 0 for
    token ids, every position for features. (B, S[, F]) → bool (B, S)."""

    def call(self, inputs):
        if len(inputs.shape) == 2:
            return ops.not_equal(inputs, 0)
        return ops.ones(ops.shape(inputs)[:2], dtype="bool")

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape[:2], dtype="bool")


class RecurrentDecoder:
    """A Keras `GRU`, `LSTM` or `SimpleRNN` as a decoder without attention.

    It gives a plain recurrent decoder the `get_decode_state` / `step` interface
    of the attention decoders, so that the same generator and export serve a
    no-attention baseline. Its attention weights are zeros.

    Args:
        layer: the recurrent layer of the model (built).
    """

    def __init__(self, layer):
        if not isinstance(layer, keras.layers.RNN) or not layer.built:
            raise ValueError(
                "Invalid value for argument `layer`. Expected a built Keras recurrent "
                f"layer (GRU, LSTM, SimpleRNN). Received: layer={layer!r}"
            )
        self.layer = layer
        self.cell = layer.cell
        self.name = layer.name
        self.built = True
        sizes = self.cell.state_size
        self.state_sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]
        self.state_names = ["h", "c"][: len(self.state_sizes)]

    @property
    def variables(self):
        return self.layer.variables

    def get_decode_state(self, memory, initial_state=None, memory_mask=None):
        """The state before the first step: the recurrent state ("h", "c" for
        LSTM) and the source mask as a float (B, S), kept for the shape of the
        (zero) attention weights."""
        if memory_mask is None:
            raise ValueError("A decoder without attention needs the source mask (B, S).")
        dtype = self.layer.compute_dtype
        batch = ops.shape(memory_mask)[0]
        if initial_state is None:
            states = [ops.zeros((batch, n), dtype=dtype) for n in self.state_sizes]
        else:
            states = initial_state if isinstance(initial_state, (list, tuple)) else [initial_state]
            states = [ops.cast(x, dtype) for x in states]
        state = dict(zip(self.state_names, states, strict=True))
        state["memory_mask"] = ops.cast(memory_mask, dtype)
        return state

    def step(self, target_embedding, decode_state):
        states = [decode_state[n] for n in self.state_names]
        output, new = self.cell(target_embedding, states if len(states) > 1 else states[0])
        new = new if isinstance(new, (list, tuple)) else [new]
        out = dict(decode_state)
        out.update(zip(self.state_names, new, strict=True))
        return output, ops.zeros_like(decode_state["memory_mask"]), out

    def __call__(
        self,
        target_embeddings,
        memory,
        initial_state=None,
        target_embeddings_mask=None,
        memory_mask=None,
        training=False,
    ):
        outputs = self.layer(
            target_embeddings,
            initial_state=initial_state,
            mask=target_embeddings_mask,
            training=training,
        )
        return outputs, None, None


class Seq2SeqGenerator:
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
        _check_token_id("start_id", start_id)
        _check_token_id("end_id", end_id)
        check_positive_int("max_source_length", max_source_length)
        check_positive_int("max_output_length", max_output_length)
        self.encoder = encoder
        self.target_embedding = target_embedding
        self.decoder = decoder
        self.readout = readout
        self.start_id = start_id
        self.end_id = end_id
        self.max_source_length = int(max_source_length)
        self.max_output_length = int(max_output_length)
        self.source_spec = None  # (shape without batch, dtype), from `from_model`
        self.model = None  # the model of `from_model`
        self.encoder_model = None  # its source-side graph, from `from_model`
        self._compiled = {}

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
                generator with the constructor then.
        """
        graph = _ModelGraph(model)
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
        generator.encoder_model = graph._encoder_model
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
        generator = type(self)(
            self.encoder,
            self.target_embedding,
            decoder,
            self.readout,
            self.start_id,
            self.end_id,
            max_source_length=self.max_source_length,
            max_output_length=self.max_output_length,
        )
        generator.source_spec = self.source_spec
        generator.model = self.model
        generator.encoder_model = self.encoder_model
        return generator

    # ---------------------------------------------------------------- pieces

    def _check_source(self, source):
        source = ops.convert_to_tensor(source)
        if self.source_spec is not None:
            shape, dtype = self.source_spec
            if len(source.shape) != len(shape) + 1:
                expected = "(batch, S)" if len(shape) == 1 else f"(batch, S, F={shape[-1]})"
                raise ValueError(
                    f"Invalid shape for `source`: expected {expected} like the model's "
                    f"source input, received {tuple(source.shape)}."
                )
            if "int" in dtype:
                source = ops.cast(source, "int32")
        length = source.shape[1]
        if isinstance(length, int) and length > self.max_source_length:
            raise ValueError(
                f"The source has {length} positions, more than max_source_length="
                f"{self.max_source_length}. Split the input, or build the generator "
                "with a larger `max_source_length` (the search's memory grows with it)."
            )
        if "int" in str(source.dtype) and _is_eager(source):
            # Negative ids would wrap to the last embedding rows; ids past the
            # vocabulary fail deep in a gather on CPU and read zeros on GPU.
            values = keras.ops.convert_to_numpy(source)
            vocabulary = self._source_vocabulary()
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
        return source

    def _source_vocabulary(self):
        """`(size, layer name)` of the smallest Embedding that reads the source
        input of `from_model`'s model, or None (unknown: explicit constructor,
        features, or no Embedding on the input)."""
        if "_source_vocabulary_cache" not in self.__dict__:
            found = None
            if self.encoder_model is not None:
                source = self.encoder_model.inputs[0]
                for layer in self.encoder_model.layers:
                    if not isinstance(layer, keras.layers.Embedding):
                        continue
                    reads = any(
                        any(x is source for x in node.input_tensors)
                        for node in layer._inbound_nodes
                    )
                    if reads and (found is None or layer.input_dim < found[0]):
                        found = (int(layer.input_dim), layer.name)
            self._source_vocabulary_cache = found
        return self._source_vocabulary_cache

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
        return self.target_embedding(ops.expand_dims(tokens, 1))[:, 0]

    def logits(self, outputs):
        """Decoder outputs (batch, d_out) → logits (batch, vocabulary)."""
        return self.readout(ops.expand_dims(outputs, 1))[:, 0]

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

    def resolve_max_length(self, source_length, max_length):
        """`max_length`, checked against `max_output_length`, or the default."""
        if max_length is None:
            return default_max_length(source_length, self.max_output_length)
        if not _is_tensor(max_length):
            check_positive_int("max_length", max_length)
            max_length = int(max_length)
            if max_length > self.max_output_length:
                raise ValueError(
                    f"Invalid value for argument `max_length`. Expected at most "
                    f"max_output_length={self.max_output_length}. Received: "
                    f"max_length={max_length}"
                )
        return max_length

    def greedy_graph(self, source, max_length=None, empty_columns=True):
        """Greedy search as traced code (no `tf.function` around it): for
        exporting or wrapping in a graph of one's own.

        `empty_columns=False` keeps one (zero) attention column for an empty
        source instead of none: a TFLite model cannot return an empty tensor.
        """
        from keras_attention.generation import greedy_search

        length = ops.shape(source)[1]
        state, mask = self.encode(_at_least_one_position(source))
        batch = ops.shape(mask)[0]
        start = ops.full((batch,), self.start_id, dtype="int32")
        source_length = ops.shape(mask)[1]
        result = greedy_search(
            self.step,
            state,
            start,
            self.end_id,
            self.resolve_max_length(length, max_length),
            source_length,
            source_mask=mask,
        )
        if empty_columns:
            result["attention"] = result["attention"][:, :, :length]  # (B, L, S)
        return result

    def beam_graph(
        self,
        source,
        beam_width=4,
        length_penalty=0.6,
        coverage_penalty=0.0,
        max_length=None,
        empty_columns=True,
    ):
        """Beam search as traced code; see `beam` and `greedy_graph`."""
        from keras_attention.generation import beam_search

        length = ops.shape(source)[1]
        state, mask = self.encode(_at_least_one_position(source))
        batch = ops.shape(mask)[0]
        start = ops.full((batch,), self.start_id, dtype="int32")
        source_length = ops.shape(mask)[1]
        result = beam_search(
            self.step,
            state,
            start,
            self.end_id,
            self.resolve_max_length(length, max_length),
            source_length,
            beam_width=beam_width,
            length_penalty=length_penalty,
            coverage_penalty=coverage_penalty,
            source_mask=mask,
        )
        if empty_columns:
            result["attention"] = result["attention"][:, :, :length]  # (B, L, S)
        return result

    def greedy(self, source, max_length=None):
        """Greedy decoding of a batch.

        Args:
            source: (batch, S) token ids or (batch, S, F) features.
            max_length: the most output tokens, END included; default
                min(2·S + 10, max_output_length).

        Returns:
            dict: "tokens" (batch, L) int32, END included then 0; "lengths"
            (batch,) int32; "log_probs" (batch,) float32; "attention" (batch,
            L, S) float32; L = max_length.
        """
        source = self._check_source(source)
        max_length = self.resolve_max_length(source.shape[1], max_length)
        fn = self._compiled_fn(("greedy",), lambda s, n: self.greedy_graph(s, n))
        return _public(fn(source, max_length))

    def beam(
        self,
        source,
        beam_width=4,
        length_penalty=0.6,
        coverage_penalty=0.0,
        max_length=None,
    ):
        """Beam search (GNMT length and coverage penalties) of a batch.

        Args:
            source: (batch, S) token ids or (batch, S, F) features.
            beam_width: hypotheses kept per source.
            length_penalty: the GNMT alpha; 0 ranks by log-probability.
            coverage_penalty: the GNMT beta; 0 disables it.
            max_length: as in `greedy`.

        Returns:
            The dict of `greedy` for the best hypothesis, plus "scores"
            (batch,), "all_tokens" (batch, beam_width, L) and "all_scores"
            (batch, beam_width).
        """
        source = self._check_source(source)
        max_length = self.resolve_max_length(source.shape[1], max_length)
        key = ("beam", beam_width, float(length_penalty), float(coverage_penalty))
        fn = self._compiled_fn(
            key,
            lambda s, n: self.beam_graph(s, beam_width, length_penalty, coverage_penalty, n),
        )
        result = fn(source, max_length)
        out = _public(result)
        for name in ("scores", "all_tokens", "all_scores"):
            out[name] = keras.ops.convert_to_numpy(result[name])
        return out

    def _compiled_fn(self, key, fn):
        """`fn(source, max_length)` compiled for the backend, kept under `key`.

        TensorFlow: a `tf.function`, max_length a tensor (no retracing per
        length). JAX: `jax.jit`, compiled once per source shape and
        max_length (the search's buffers have max_length rows), the variables'
        current values passed in at every call, so weights trained after the
        first call are used. PyTorch: eager.
        """
        key = tuple(str(k) for k in key)
        if key not in self._compiled:
            backend = keras.backend.backend()
            if backend == "tensorflow":
                import tensorflow as tf

                traced = tf.function(fn, reduce_retracing=True)
                compiled = lambda s, n: traced(s, ops.convert_to_tensor(n, "int32"))  # noqa: E731
            elif backend == "jax":
                compiled = _jax_jit(fn, self.variables)
            else:
                compiled = lambda s, n: fn(s, ops.convert_to_tensor(n, "int32"))  # noqa: E731
            self._compiled[key] = compiled
        return self._compiled[key]

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


def _jax_jit(fn, variables):
    """`fn(source, max_length)` under `jax.jit`, max_length static.

    The values of `variables()` are arguments of the compiled function (read
    through a `keras.StatelessScope`), not constants captured when it is
    traced: a generator called, trained further and called again decodes with
    the new weights without compiling again.
    """
    import jax

    def pure(values, source, max_length):
        with keras.StatelessScope(state_mapping=list(zip(variables(), values, strict=True))):
            return fn(source, max_length)

    jitted = jax.jit(pure, static_argnums=2)

    def call(source, max_length):
        return jitted([v.value for v in variables()], source, int(max_length))

    return call


def _at_least_one_position(source):
    """A source of length 0 gets one padding position (id 0, or a zero frame):
    a recurrent encoder cannot run over zero steps. Its mask is then all False
    (for a mask from `Embedding(mask_zero=True)` or `Masking(0.0)`), and the
    search gives that row an empty output."""
    shape = ops.shape(source)
    length = shape[1]
    if isinstance(length, numbers.Integral):  # a static length: nothing to trace
        if length > 0:
            return source
        return ops.zeros((shape[0], 1, *shape[2:]), dtype=source.dtype)
    padding = ops.zeros((shape[0], 1, *shape[2:]), dtype=source.dtype)  # (B, 1[, F])
    return ops.concatenate([source, padding], axis=1)[:, : ops.maximum(length, 1)]


def _public(result):
    return {
        k: keras.ops.convert_to_numpy(result[k])
        for k in ("tokens", "lengths", "log_probs", "attention")
    }


def _is_tensor(x):
    return not isinstance(x, numbers.Integral) and hasattr(x, "dtype")


def _is_eager(x):
    if keras.backend.backend() != "tensorflow":
        return True
    import tensorflow as tf

    return tf.executing_eagerly() and not isinstance(x, keras.KerasTensor)


# ------------------------------------------------------------------ the graph


def _history(tensor):
    history = getattr(tensor, "_keras_history", None)
    if history is None:
        return None
    operation, node_index, _ = history
    return operation, operation._inbound_nodes[node_index]


class _ModelGraph:
    """Reads the encoder, target embedding and readout out of a functional model."""

    def __init__(self, model):
        how = (
            " Build the generator with `Seq2SeqGenerator(encoder, target_embedding, "
            "decoder, readout, start_id, end_id)` instead (see its docstring)."
        )
        if not isinstance(model, keras.Model) or not hasattr(model, "_nodes_by_depth"):
            raise ValueError(
                "Invalid value for argument `model`. Expected a functional keras.Model "
                f"(built with keras.Input), whose graph can be read. Received: {model!r}." + how
            )
        inputs = list(model.inputs)
        if len(inputs) != 2 or len(model.outputs) != 1:
            raise ValueError(
                f"The model {model.name!r} has {len(inputs)} input(s) and "
                f"{len(model.outputs)} output(s); expected two inputs [source, target_in] "
                "and one output, the logits." + how
            )
        decoders = [layer for layer in model._flatten_layers() if isinstance(layer, BaseDecoder)]
        if not decoders:
            recurrent = _recurrent_decoder(model, inputs)
            if recurrent is None:
                raise ValueError(
                    f"The model {model.name!r} has no BahdanauDecoder or LuongDecoder "
                    "layer (nor a GRU/LSTM decoder that reads the target input)." + how
                )
            self._read_recurrent(model, inputs, *recurrent, how)
            return
        if len(decoders) > 1:
            names = ", ".join(repr(d.name) for d in decoders)
            raise ValueError(
                f"The model {model.name!r} has {len(decoders)} decoders ({names}); "
                "a generator runs exactly one." + how
            )
        decoder = decoders[0]
        nodes = [n for n in decoder._inbound_nodes if _in_model(model, n)]
        if len(nodes) != 1:
            raise ValueError(
                f"The decoder {decoder.name!r} is called {len(nodes)} times in the graph "
                f"of {model.name!r} (inside a nested model, or shared); expected one call "
                "in the model's own graph." + how
            )
        node = nodes[0]
        args = node.arguments
        call = dict(zip(("target_embeddings", "memory"), args.args, strict=False))
        call.update(args.kwargs)
        target_kt, memory_kt = call.get("target_embeddings"), call.get("memory")
        if target_kt is None or memory_kt is None:
            raise ValueError(
                f"The decoder {decoder.name!r} is called without target embeddings and "
                "memory tensors." + how
            )
        # Which model input feeds which side of the decoder.
        memory_inputs = _inputs_reached(memory_kt, inputs)
        target_inputs = _inputs_reached(target_kt, inputs)
        if len(memory_inputs) != 1 or len(target_inputs) != 1 or memory_inputs == target_inputs:
            raise ValueError(
                f"Cannot tell the source input from the target input of {model.name!r}: "
                f"the decoder {decoder.name!r}'s memory reads input(s) "
                f"{_input_names(memory_inputs, inputs, model)} and its target "
                f"embeddings read {_input_names(target_inputs, inputs, model)}; expected "
                "the memory to read the source only and the embeddings the target only." + how
            )
        source = inputs[memory_inputs.pop()]
        target_in = inputs[target_inputs.pop()]
        initial_state = call.get("initial_state")
        for name in ("initial_state", "memory_mask"):
            value = call.get(name)
            for tensor in keras.tree.flatten(value) if value is not None else []:
                reached = _inputs_reached(tensor, inputs)
                if reached and reached != {inputs.index(source)}:
                    raise ValueError(
                        f"The decoder {decoder.name!r}'s `{name}` reads the target input "
                        f"{target_in.name!r}; a generator computes it from the source." + how
                    )
        memory_mask_kt = call.get("memory_mask")
        if memory_mask_kt is None:
            memory_mask_kt = _KerasMaskOf(name=f"{decoder.name}_memory_mask")(memory_kt)
        outputs = [memory_kt, memory_mask_kt]
        states = None if initial_state is None else keras.tree.flatten(initial_state)
        if states:
            outputs += states
        self._encoder_model = keras.Model(source, outputs, name=f"{model.name}_encoder")
        self._has_state = bool(states)
        self._single_state = states is not None and not isinstance(initial_state, (list, tuple))
        self.target_embedding = keras.Model(
            target_in, target_kt, name=f"{model.name}_target_embedding"
        )
        decoder_output = node.outputs[0]
        _check_readout(model, decoder, node, decoder_output, inputs, how)
        self.readout = keras.Model(decoder_output, model.outputs[0], name=f"{model.name}_readout")
        # The decoder's outputs carry the target mask in `teacher_forced_logits`;
        # the logits need none (the model's own readout ignored it too).
        self.readout.supports_masking = True
        self.decoder = decoder
        self.source_spec = (tuple(source.shape[1:]), str(source.dtype))

    def _read_recurrent(self, model, inputs, layer, node, target_index, how):
        """A model whose decoder is a plain recurrent layer (no attention)."""
        source = inputs[1 - target_index]
        target_in = inputs[target_index]
        initial_state = node.arguments.kwargs.get("initial_state")
        states = None if initial_state is None else keras.tree.flatten(initial_state)
        for tensor in states or []:
            if _inputs_reached(tensor, inputs) - {1 - target_index}:
                raise ValueError(
                    f"The decoder {layer.name!r}'s `initial_state` reads the target input "
                    f"{target_in.name!r}; a generator computes it from the source." + how
                )
        mask = _SourcePositions(name=f"{layer.name}_source_positions")(source)
        self._encoder_model = keras.Model(source, [mask, *(states or [])])
        self._has_state = bool(states)
        self._no_memory = True
        self.target_embedding = keras.Model(
            target_in, node.arguments.args[0], name=f"{model.name}_target_embedding"
        )
        decoder_output = node.outputs[0]
        _check_readout(model, layer, node, decoder_output, inputs, how)
        self.readout = keras.Model(decoder_output, model.outputs[0], name=f"{model.name}_readout")
        # The decoder's outputs carry the target mask in `teacher_forced_logits`;
        # the logits need none (the model's own readout ignored it too).
        self.readout.supports_masking = True
        self.decoder = layer
        self.source_spec = (tuple(source.shape[1:]), str(source.dtype))

    def encoder(self, source):
        if getattr(self, "_no_memory", False):
            outputs = keras.tree.flatten(self._encoder_model(source, training=False))
            states = list(outputs[1:])
            state = None if not states else states[0] if len(states) == 1 else states
            return None, state, outputs[0]
        outputs = self._encoder_model(source, training=False)
        memory, mask = outputs[0], outputs[1]
        if not self._has_state:
            return memory, None, mask
        states = list(outputs[2:])
        return memory, states[0] if len(states) == 1 else states, mask


def _recurrent_decoder(model, inputs):
    """`(layer, node, target input index)` of the one recurrent layer of the
    model's graph that reads one input only and returns sequences, or None."""
    found = []
    for layer in model.layers:
        if not isinstance(layer, keras.layers.RNN) or not layer.return_sequences:
            continue
        for node in layer._inbound_nodes:
            if not _in_model(model, node) or not node.arguments.args:
                continue
            reached = _inputs_reached(node.arguments.args[0], inputs)
            states = node.arguments.kwargs.get("initial_state")
            if len(reached) == 1 and states is not None:
                found.append((layer, node, reached.pop()))
    return found[0] if len(found) == 1 else None


def _in_model(model, node):
    return any(node in nodes for nodes in model._nodes_by_depth.values())


def _inputs_reached(tensor, inputs):
    """Indices of the model inputs that `tensor` depends on."""
    ids = {id(x): i for i, x in enumerate(inputs)}
    reached, seen, stack = set(), set(), [tensor]
    while stack:
        t = stack.pop()
        if id(t) in ids:
            reached.add(ids[id(t)])
            continue
        history = _history(t)
        if history is None:
            continue
        _, node = history
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(node.input_tensors)
    return reached


def _input_names(indices, inputs, model):
    if not indices:
        return "none"
    return ", ".join(repr(inputs[i].name) for i in sorted(indices))


def _check_readout(model, decoder, decoder_node, decoder_output, inputs, how):
    """The path from the decoder to the logits must read its outputs only."""
    allowed = id(decoder_output)
    stack, seen = [model.outputs[0]], set()
    while stack:
        t = stack.pop()
        if id(t) == allowed:
            continue
        history = _history(t)
        if history is None:
            continue
        operation, node = history
        if node is decoder_node:
            raise ValueError(
                f"The readout of {model.name!r} reads the decoder {decoder.name!r}'s "
                "attention weights or final state; a generator's readout reads only "
                "its outputs (the first of the three)." + how
            )
        if id(node) in seen:
            continue
        seen.add(id(node))
        for x in node.input_tensors:
            if id(x) in {id(i) for i in inputs} or (
                _history(x) is not None and _inputs_reached(x, inputs) and not _reaches(x, allowed)
            ):
                raise ValueError(
                    f"The layer {operation.name!r} between the decoder {decoder.name!r} "
                    f"and the logits of {model.name!r} reads more than the decoder's "
                    "outputs (a tensor computed from the model's inputs); a generator's "
                    "readout reads only the decoder's outputs." + how
                )
            stack.append(x)
    if not _reaches(model.outputs[0], allowed):
        raise ValueError(
            f"The output of {model.name!r} does not read the decoder {decoder.name!r}'s "
            "outputs." + how
        )


def _reaches(tensor, target_id):
    """Whether `tensor` depends on the tensor whose id is `target_id`."""
    seen, stack = set(), [tensor]
    while stack:
        t = stack.pop()
        if id(t) == target_id:
            return True
        history = _history(t)
        if history is None:
            continue
        _, node = history
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(node.input_tensors)
    return False
