"""`BaseDecoder`: a recurrent decoder with an attention layer in its loop.

Keras 3's `RNN` cannot give a cell the encoder outputs (it has no `constants`),
so the decoders run their own loop over time (`decoder_loop.py`).

A decoder is composed of parts, each in its own module: its cell, a
`CellRunner` (`cell_runner.py`: any Keras RNN cell, or the built-in GRU or
LSTM with its update written out); its attention layer, through the contract
of `BaseAttention` (`get_decode_state` holds the layer's state under
"attention_<key>"); the loop (`decoder_loop.py`) and the input checks
(`decoder_checks.py`).

A subclass writes its step once, `_recurrence`, which both its `call` (inside
the loop) and its `step` run.
"""

import keras
from keras import ops

from keras_attention.arguments.validation import bound_arguments
from keras_attention.attention.base_attention import BaseAttention
from keras_attention.attention.masking import shape_error as _shape_error
from keras_attention.decoders import decoder_checks
from keras_attention.decoders.cell_runner import CellRunner
from keras_attention.decoders.cell_runner import cell_arguments
from keras_attention.decoders.cell_runner import deserialize_cell
from keras_attention.decoders.decoder_loop import SequenceInputs


@keras.saving.register_keras_serializable(package="keras_attention")
class BaseDecoder(keras.layers.Layer):
    """Shared machinery of `BahdanauDecoder` and `LuongDecoder`.

    Args:
        units: size of the recurrent state (the attention's query). Optional
            with `cell`: then the cell's output size, which `units` must
            equal when given.
        attention: the attention layer (or its serialized config): a
            content-only `BahdanauAttention` or `LuongAttention`, or a
            stateful `LocationSensitiveAttention`, `BahdanauMonotonicAttention`
            or `LuongMonotonicAttention`.
        cell_type: "gru" or "lstm", the built-in cell of `units` units; None
            (the default) means "gru" unless `cell` is given.
        cell: any Keras RNN cell instead of the built-in one (see
            `BahdanauDecoder` and `LuongDecoder` for what it reads and which
            of its outputs queries the attention). With `training`, the
            dropout masks of Keras' cells are drawn before the loop, as
            `keras.layers.RNN` does; a cell of one's own that draws random
            numbers in its `call` draws them inside the loop, which JAX
            refuses (`UnexpectedTracerError`).
        output_units: size of the per-step outputs (the subclass says what
            they are); defaults to `units`.
        **kwargs: base layer arguments, and `seed`, ignored: a decoder draws
            no random numbers of its own (its attention and its cell have
            their own seeds). It is accepted so that code and `.keras` files
            that pass it keep working.

    The attention can be stateful (`LocationSensitiveAttention`,
    `BahdanauMonotonicAttention`, `LuongMonotonicAttention`): its state (the
    previous weights) travels in the loop, starts from
    `attention.initial_attention_state(memory, memory_mask)`, and stays as it
    was at a padded target step.

    Call arguments (those of both decoders):
        target_embeddings: (batch, T_dec, d_emb), the embeddings of the decoder
            inputs (teacher forcing: [START] + target[:-1]).
        memory: (batch, T_enc, d_h), the encoder outputs.
        initial_state: optional s_0, (batch, units), or [h_0, c_0] for LSTM;
            for a `cell`, one tensor per state (its flattened `state_size`);
            zeros by default.
        target_embeddings_mask: optional bool (batch, T_dec); masked steps keep
            the state and give zero outputs and weights. Filled in from an
            `Embedding(mask_zero=True)` automatically.
        memory_mask: optional bool (batch, T_enc); filled in from the encoder
            automatically.
        training: whether dropout is active.

    Returns:
        `(outputs, weights, state)`: outputs (batch, T_dec, output_units)
        (the subclass says what they are), weights (batch, T_dec, T_enc), the
        final state (batch, units) (a list [h, c] for LSTM; for a `cell`, the
        list of its flattened states, or one tensor for a one-state cell).
    """

    def __init__(
        self, units=None, attention=None, cell_type=None, cell=None, output_units=None, **kwargs
    ):
        kwargs.pop("seed", None)  # ignored (see `**kwargs` above)
        super().__init__(**kwargs)
        units, cell_type, cell = cell_arguments(units, cell_type, cell)
        if isinstance(attention, dict):
            attention = keras.saving.deserialize_keras_object(attention)
        if not isinstance(attention, BaseAttention):
            raise ValueError(
                "Invalid value for argument `attention`. Expected an attention layer "
                "of keras_attention: BahdanauAttention or LuongAttention, a stateful "
                "LocationSensitiveAttention, BahdanauMonotonicAttention, "
                "LuongMonotonicAttention or GMMAttention, or a layer of one's own that "
                "subclasses BaseAttention (docs/custom_attention.md). "
                f"Received: attention={attention!r}"
            )
        self.attention = attention
        # The cell's machinery; the cell itself is this layer's attribute, so
        # that its weights are saved under "cell" as they always were.
        self._cells = CellRunner(units, cell_type, cell, self.dtype_policy)
        self.units = units
        self.cell_type = self._cells.cell_type
        self.cell = self._cells.cell
        self.output_units = output_units
        self.supports_masking = True
        self.embedding_dim = None
        self.memory_dim = None

    @property
    def state_size(self):
        """The number of state tensors of the cell (flattened)."""
        return self._cells.state_size

    # ---------------------------------------------------------- attention

    def _attender(self, memory, processed_keys, memory_mask, training, noise=None):
        """`attend(query, attention_state) → (context, weights, new attention state)`.

        One step's attention on this memory. attention_state: the layer's
        state dict (empty for a content-only layer); noise: this step's slice
        of `step_noise` (`xs["attention_noise"]`), drawn before the loop.
        """
        dtype = self.compute_dtype

        def attend(query, attention_state):
            # The memory and the keys come from the attention's `prepare_memory`
            # (`_sequence_inputs`, `get_decode_state`), once per batch: a step
            # does not mask them again.
            context, weights, new_state = self.attention.attend_step(
                query,
                memory,
                processed_keys,
                attention_state,
                value_mask=memory_mask,
                training=training,
                noise=noise,
                memory_prepared=True,
            )
            # An attention layer with another policy (float32 inside a
            # mixed_float16 decoder) must not change the dtype of the loop carry.
            return ops.cast(context, dtype), ops.cast(weights, dtype), new_state

        return attend

    def _attend_sequence(self, queries, memory, processed_keys, memory_mask, step_mask, training):
        """The attention of every step at once: `(contexts, weights)`, (B, T, ·).

        The layer's own sequence form: parallel for a content-only layer, a
        loop carrying the state for a stateful one. A padded step (step_mask
        False) gives zero context and weights.
        """
        contexts, weights, _ = self.attention.attend_sequence(
            queries,
            memory,
            processed_keys,
            value_mask=memory_mask,
            query_mask=step_mask,
            training=training,
            memory_prepared=True,
        )
        return ops.cast(contexts, self.compute_dtype), ops.cast(weights, self.compute_dtype)

    # ------------------------------------------------------ sequence call

    def _check_inputs(self, target_shape, memory_shape, initial_state, masks):
        decoder_checks.check_inputs(
            target_shape,
            memory_shape,
            initial_state,
            masks,
            self._cells,
            (self.embedding_dim, self.memory_dim),
        )

    def _sequence_inputs(
        self,
        target_embeddings,
        memory,
        initial_state,
        target_embeddings_mask,
        memory_mask,
        training=None,
    ):
        """Checks the inputs of `call` and prepares what the loop reads.

        Returns a `SequenceInputs`. With `training`, the dropout masks of a
        cell given with `cell=` are drawn here too; the loop clears them
        (`scan_steps`). The attention's per-step draws
        (`xs["attention_noise"]`) are made only when it runs in the loop
        (`_attends_in_loop`).
        """
        self._check_inputs(
            target_embeddings.shape,
            memory.shape,
            initial_state,
            (target_embeddings_mask, memory_mask),
        )
        dtype = self.compute_dtype
        target_embeddings = ops.cast(target_embeddings, dtype)
        # Padded memory is zeroed once per batch, before the keys are projected
        # from it: a NaN or inf there never reaches an output or a gradient.
        memory, processed_keys = self.attention.prepare_memory(ops.cast(memory, dtype), memory_mask)
        batch = ops.shape(memory)[0]
        steps = ops.shape(target_embeddings)[1]
        if target_embeddings_mask is None:
            step_mask = ops.ones((batch, steps), dtype="bool")
        else:
            step_mask = ops.cast(target_embeddings_mask, "bool")
        x_projected = self._cells.input_projection(target_embeddings)  # (B, T, G·u)
        xs = {
            "x": ops.transpose(x_projected, (1, 0, 2)),  # (T, B, G·u)
            "mask": ops.transpose(step_mask, (1, 0)),  # (T, B)
        }
        # Every random draw of the steps happens here, before the loop, as
        # Keras' RNN layers draw their dropout masks: the same training on
        # every backend, and no draw inside a scan (on JAX it leaks a tracer).
        t_enc = ops.shape(memory)[1]
        self._cells.draw_dropout_masks(batch, self.embedding_dim + self._cell_extra_dim(), training)
        attention_state = self.attention.initial_attention_state(memory, memory_mask)
        if self._attends_in_loop():
            noise = self.attention.step_noise((steps, batch, t_enc), training)
            if noise is not None:
                xs["attention_noise"] = noise  # (T, B, ...) leaves
        return SequenceInputs(
            target_embeddings=target_embeddings,
            memory=memory,
            state=self._cells.initial_state(initial_state, batch),
            processed_keys=processed_keys,  # once per batch
            attention_state=attention_state,
            cell_weights=self._cells.weights(),  # once per batch, not per step
            step_mask=step_mask,
            xs=xs,
        )

    def call(
        self,
        target_embeddings,
        memory,
        initial_state=None,
        target_embeddings_mask=None,
        memory_mask=None,
        training=None,
    ):
        prepared = self._sequence_inputs(
            target_embeddings, memory, initial_state, target_embeddings_mask, memory_mask, training
        )
        return self._decode_sequence(prepared, memory_mask, training)

    def _attends_in_loop(self):
        """Whether the attention runs inside the recurrence's loop (else after it)."""
        return True

    def _decode_sequence(self, prepared, memory_mask, training):
        """`call` after the checks: `(outputs, weights, state)` from a `SequenceInputs`."""
        raise NotImplementedError

    def _output_dim(self):
        """The size of the per-step output of `call` and `step`."""
        return self.output_units or self.units

    def _cell_extra_dim(self):
        """The size of what the cell reads after y_{t-1} (the context, h̃ or nothing)."""
        raise NotImplementedError

    def compute_output_spec(self, *args, **kwargs):
        arguments = bound_arguments(self.call, args, kwargs)
        target_embeddings, memory = arguments["target_embeddings"], arguments["memory"]
        self._check_inputs(
            target_embeddings.shape,
            memory.shape,
            arguments["initial_state"],
            (arguments["target_embeddings_mask"], arguments["memory_mask"]),
        )
        batch, steps = target_embeddings.shape[:2]
        dtype = self.compute_dtype
        outputs = keras.KerasTensor((batch, steps, self._output_dim()), dtype=dtype)
        weights = keras.KerasTensor((batch, steps, memory.shape[1]), dtype=dtype)
        sizes = self._cells.state_sizes
        state = [keras.KerasTensor((batch, size), dtype=dtype) for size in sizes]
        return outputs, weights, self._cells.state_output(state)

    def compute_mask(self, target_embeddings, previous_mask):
        return None if previous_mask is None else [previous_mask, None, None]

    # -------------------------------------------------------------- build

    def build(self, target_embeddings_shape, memory_shape):
        self._check_inputs(target_embeddings_shape, memory_shape, None, (None, None))
        for name, shape in (
            ("target_embeddings", target_embeddings_shape),
            ("memory", memory_shape),
        ):
            if shape[-1] is None:
                raise _shape_error(name, "with a known last dimension", shape)
        self.embedding_dim = int(target_embeddings_shape[-1])
        self.memory_dim = int(memory_shape[-1])
        decoder_checks.check_attention_size(self.attention, self.units)
        # A deserialized attention layer arrives already built.
        if not self.attention.built:
            self.attention.build((None, self.units), (None, None, self.memory_dim))
        self.build_decoder(self.embedding_dim, self.memory_dim)
        self.built = True

    def build_decoder(self, embedding_dim, memory_dim):
        """Builds the cell(s) and the output layers (the attention is built)."""
        raise NotImplementedError

    # ---------------------------------------------------------- inference

    def get_decode_state(self, memory, initial_state=None, memory_mask=None):
        """The state a step-by-step decoder starts from.

        The memory is projected here, once per source sentence.

        Args:
            memory: (batch, T_enc, d_h) encoder outputs.
            initial_state: optional (batch, units) (GRU) or [h, c] (LSTM);
                for a cell given with `cell=`, one tensor per state (its
                flattened `state_size`), or one tensor for a one-state cell.
            memory_mask: optional bool (batch, T_enc).

        Returns:
            A dict of tensors, each with the batch as first axis, for `step`:
            "memory" (zero where `memory_mask` is False), "processed_keys",
            "memory_mask" (float), the recurrent state ("h", for an LSTM "c";
            "state_0", "state_1", ... (batch, size) for a cell given with
            `cell=`), for a stateful attention its state ("attention_<key>",
            e.g. "attention_alignment", (batch, T_enc), float32 under mixed
            precision), and for a `LuongDecoder` with input feeding
            "attentional" (h̃_0).

        Raises:
            ValueError: when the decoder is not built (call it once on a batch
                first: the memory does not give the embedding size).
        """
        decoder_checks.check_built(self, "get_decode_state")
        memory = ops.convert_to_tensor(memory)
        self._check_inputs(
            (memory.shape[0] if len(memory.shape) else None, None, self.embedding_dim),
            memory.shape,
            initial_state,
            (None, memory_mask),
        )
        memory, processed_keys = self.attention.prepare_memory(
            ops.cast(memory, self.compute_dtype), memory_mask
        )
        batch = ops.shape(memory)[0]
        state = self._cells.initial_state(initial_state, batch)
        if memory_mask is None:
            memory_mask = ops.ones(ops.shape(memory)[:2], dtype="bool")
        decode_state = {
            "memory": memory,
            "processed_keys": processed_keys,
            # A float mask: every entry of the state can be tiled and gathered
            # alike by a beam search.
            "memory_mask": ops.cast(memory_mask, self.compute_dtype),
        }
        decode_state.update(zip(self._cells.state_keys(), state, strict=True))
        initial = self.attention.initial_attention_state(memory, ops.cast(memory_mask, "bool"))
        for key in self.attention.attention_state_keys:
            decode_state[f"attention_{key}"] = initial[key]  # (B, ...)
        return decode_state

    def _decode_state_keys(self):
        """The keys of the dict that `get_decode_state` returns, sorted."""
        keys = ["memory", "memory_mask", "processed_keys"] + self._cells.state_keys()
        attention = [f"attention_{key}" for key in self.attention.attention_state_keys]
        return sorted(keys + attention)

    def _step_inputs(self, target_embedding, decode_state):
        """Checks the arguments of `step` and reads its decode state.

        Returns `(embedding, state tuple, attention state, attend)`: the
        embedding (B, d_emb) in the compute dtype, the recurrent state, the
        attention's state dict (empty for a content-only layer) and
        `attend(query, attention_state)` on the decode state's memory.
        """
        decoder_checks.check_built(self, "step")
        decoder_checks.check_decode_state(
            decode_state,
            self._decode_state_keys(),
            target_embedding,
            self._cells.state_keys()[0],
            self.embedding_dim,
        )
        state = tuple(decode_state[key] for key in self._cells.state_keys())
        attention_state = {
            key: decode_state[f"attention_{key}"] for key in self.attention.attention_state_keys
        }
        attend = self._attender(
            decode_state["memory"],
            decode_state["processed_keys"],
            ops.cast(decode_state["memory_mask"], "bool"),
            False,
        )
        return ops.cast(target_embedding, self.compute_dtype), state, attention_state, attend

    def _with_state(self, decode_state, state, attention_state):
        """`decode_state` with a new recurrent state and attention state."""
        new = dict(decode_state)
        new.update(zip(self._cells.state_keys(), state, strict=True))
        for key, value in attention_state.items():
            new[f"attention_{key}"] = value
        return new

    # ------------------------------------------------------------- config

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "attention": keras.saving.serialize_keras_object(self.attention),
                "cell_type": self.cell_type,
                "output_units": self.output_units,
                "cell": None
                if self._cells.builtin
                else keras.saving.serialize_keras_object(self.cell),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("seed", None)  # ignored (see `seed` in the class docstring)
        if isinstance(config.get("cell"), dict):
            config["cell"] = deserialize_cell(config["cell"])
        return cls(**config)
