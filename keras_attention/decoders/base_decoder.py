"""`BaseDecoder`: a recurrent decoder with an attention layer in its loop.

Keras 3's `RNN` cannot give a cell the encoder outputs (it has no `constants`),
so the decoders run their own loop over time with `keras.ops.scan`: a compiled
`while` loop when traced, also under `jit_compile=True`.

Two kinds of cell. The built-in one (`units` and `cell_type`) is a Keras
`GRUCell` or `LSTMCell` (its weights, its initializers, its serialization)
whose update is written out here, so that the projection of the target
embeddings, which do not depend on the recurrence, is computed once for all
steps instead of once per step. Any other Keras RNN cell (`cell=`) is called
as it is at every step, on the concatenation of its inputs, with its flat list
of states.

Any attention layer, through the one contract of `BaseAttention`: the loop
carries the layer's state (the empty dict for a content-only layer such as
`BahdanauAttention`; the previous weights for `LocationSensitiveAttention`
and the monotonic layers; whatever a layer of one's own keeps), and
`get_decode_state` holds it under "attention_<key>".
"""

import copy
import dataclasses

import keras
from keras import ops

from keras_attention.attention.base_attention import BaseAttention
from keras_attention.masking import dims_compatible as _same
from keras_attention.masking import shape_error as _shape_error
from keras_attention.masking import shape_str
from keras_attention.masking import zero_masked

_CELL_TYPES = ("gru", "lstm")


@dataclasses.dataclass(frozen=True)
class _SequenceInputs:
    """What `BaseDecoder._sequence_inputs` prepares for a decoder's loop.

    Attributes:
        target_embeddings: (B, T, d_emb) in the compute dtype.
        memory: (B, T_enc, d_h) in the compute dtype, zero where masked.
        state: the initial recurrent state, a tuple of (B, size) tensors.
        processed_keys: `attention.precompute_keys(memory)`, once per batch.
        attention_state: the attention's initial state (a dict, empty for
            a content-only layer).
        cell_weights: the built-in cell's weights from `_cell_weights`, else
            None.
        step_mask: (B, T) bool, False at padded target steps.
        xs: what the scan slices, time-major: "x", the cell's input
            projection (T, B, G·u) (the embeddings (T, B, d_emb) for a cell
            given with `cell=`); "mask" (T, B); when the attention draws
            anything per step (dropout, noise), "attention_noise", what
            `attention.step_noise` returned for all steps.
    """

    target_embeddings: object
    memory: object
    state: tuple
    processed_keys: object
    attention_state: object
    cell_weights: object
    step_mask: object
    xs: dict


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
        seed: ignored: a decoder draws no random numbers of its own (its
            attention and its cell have their own seeds). Accepted so that
            code and `.keras` files that pass it keep working.
        cell: any Keras RNN cell instead of the built-in one (see
            `BahdanauDecoder` and `LuongDecoder` for what it reads and which
            of its outputs queries the attention).
        **kwargs: base layer arguments.
    """

    def __init__(self, units=None, attention=None, cell_type=None, seed=None, cell=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(cell, dict):
            cell = _deserialize_cell(cell)
        if cell is not None:
            _check_cell(cell)
            if cell_type is not None:
                raise ValueError(
                    "Invalid value for argument `cell_type`. It names the built-in "
                    "cell, and `cell` is given: pass one of them. Received: "
                    f"cell_type={cell_type!r}, cell={cell!r}"
                )
            query_size = _cell_output_size(cell)
            if units is not None and units != query_size:
                raise ValueError(
                    "Invalid value for argument `units`. With a `cell`, units is the "
                    f"size of the cell's output (the attention's query), {query_size} "
                    f"for {cell!r}; pass units=None or units={query_size}. "
                    f"Received: units={units!r}"
                )
            units = query_size
        else:
            cell_type = "gru" if cell_type is None else cell_type
            if isinstance(units, bool) or not isinstance(units, int) or units < 1:
                # Not `check_positive_int`: the message says when None is valid.
                raise ValueError(
                    "Invalid value for argument `units`. Expected a positive integer "
                    "(or None with a `cell`). "
                    f"Received: units={units!r}"
                )
            if cell_type not in _CELL_TYPES:
                raise ValueError(
                    "Invalid value for argument `cell_type`. Expected one of "
                    f"{_CELL_TYPES}. Received: cell_type={cell_type!r}"
                )
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
        self.units = units
        self.cell_type = None if cell is not None else cell_type
        self.attention = attention
        # The built-in cell has its update written out (the fused fast path).
        self._builtin_cell = cell is None
        self.cell = self._make_cell("cell") if cell is None else cell
        # Flat state sizes, and the state that holds the cell's output.
        if cell is None:
            self._state_sizes = [units] * (1 if cell_type == "gru" else 2)
            self._output_state = 0
        else:
            self._state_sizes = keras.tree.flatten(cell.state_size)
            self._output_state = _output_state_index(cell)
        self.supports_masking = True
        self.embedding_dim = None
        self.memory_dim = None

    # ------------------------------------------------------------ the cell

    def _make_cell(self, name):
        # Sub-layers take this layer's policy: with the global one, a decoder
        # built with `dtype="mixed_float16"` would mix float16 and float32.
        policy = self.dtype_policy
        if self.cell_type == "gru":
            return keras.layers.GRUCell(self.units, reset_after=True, name=name, dtype=policy)
        return keras.layers.LSTMCell(self.units, name=name, dtype=policy)

    @property
    def state_size(self):
        """The number of state tensors of the cell (flattened)."""
        return len(self._state_sizes)

    def _cell_input_projection(self, inputs):
        """The part of the cell's input transform that depends on `inputs` only.

        inputs: (..., embedding_dim) → (..., gates·units), input bias included.
        A cell given with `cell=` reads its whole input at every step: the
        inputs come back in the compute dtype.
        """
        dtype = self.compute_dtype
        if not self._builtin_cell:
            return ops.cast(inputs, dtype)
        kernel = ops.cast(self.cell.kernel, dtype)[: self.embedding_dim]
        projected = ops.matmul(ops.cast(inputs, dtype), kernel)
        return projected + self._cell_biases(self.cell)[0]

    def _cell_biases(self, cell):
        """`(input bias, recurrent bias or None)` of a cell, in the compute dtype."""
        bias = ops.cast(cell.bias, self.compute_dtype)
        if self.cell_type == "gru":
            return bias[0], bias[1]  # reset_after: (input bias, recurrent bias)
        return bias, None  # LSTM: one bias

    def _cell_weights(self):
        """The cell weights that every step reads, in the compute dtype.

        A loop reads them once, before it starts, and passes them to each
        step: cast and sliced inside the loop they would be copied every step.
        None for a cell given with `cell=` (it reads its own weights).
        """
        if not self._builtin_cell:
            return None
        dtype = self.compute_dtype
        weights = {
            "extra_kernel": ops.cast(self.cell.kernel, dtype)[self.embedding_dim :],
            "recurrent_kernel": ops.cast(self.cell.recurrent_kernel, dtype),
        }
        if self.cell_type == "gru":
            weights["recurrent_bias"] = self._cell_biases(self.cell)[1]
        return weights

    def _cell_extra_projection(self, extra, weights=None):
        """The cell's input transform of the extra input (context or h̃).

        weights: from `_cell_weights` (read here when None).
        """
        weights = weights or self._cell_weights()
        return ops.matmul(extra, weights["extra_kernel"])

    def _cell_update(self, x_projected, state, weights=None):
        """One step of the Keras cell, given its projected input.

        x_projected: (B, gates·units) = [inputs; extra] @ kernel + input bias.
        state: tuple (h,) for GRU, (h, c) for LSTM, each (B, units).
        weights: from `_cell_weights` (read here when None).
        """
        weights = weights or self._cell_weights()
        u = self.units
        h_prev = state[0]
        recurrent = ops.matmul(h_prev, weights["recurrent_kernel"])
        if self.cell_type == "gru":
            recurrent = recurrent + weights["recurrent_bias"]
            z = ops.sigmoid(x_projected[:, :u] + recurrent[:, :u])
            r = ops.sigmoid(x_projected[:, u : 2 * u] + recurrent[:, u : 2 * u])
            candidate = ops.tanh(x_projected[:, 2 * u :] + r * recurrent[:, 2 * u :])
            h = z * h_prev + (1.0 - z) * candidate
            return (h,)
        gates = x_projected + recurrent  # (B, 4u): input, forget, cell, output
        i = ops.sigmoid(gates[:, :u])
        f = ops.sigmoid(gates[:, u : 2 * u])
        c = f * state[1] + i * ops.tanh(gates[:, 2 * u : 3 * u])
        o = ops.sigmoid(gates[:, 3 * u :])
        h = o * ops.tanh(c)
        return (h, c)

    def _cell_step(self, x, extra, state, weights=None, training=None):
        """One step of the cell: `(output (B, units), new state tuple)`.

        x: from `_cell_input_projection` (of y_{t-1}); extra: None, or the
        second part of the cell's input (the context or h̃), (B, d);
        state: the flat state tuple; weights: from `_cell_weights`.
        """
        if self._builtin_cell:
            if extra is not None:
                x = x + self._cell_extra_projection(extra, weights)
            new = self._cell_update(x, state, weights)
            return new[0], new
        if extra is not None:
            x = ops.concatenate([x, ops.cast(extra, x.dtype)], axis=-1)  # (B, d_in)
        # Keras' RNN convention: a list of states, one entry per element of
        # `state_size` (itself a list for an LSTM inside StackedRNNCells).
        sizes = self.cell.state_size
        structure = [sizes] if isinstance(sizes, int) else list(sizes)
        states = keras.tree.pack_sequence_as(structure, list(state))
        kwargs = {}
        if getattr(self.cell, "_call_has_training_arg", False):
            kwargs["training"] = training
        output, new = self.cell(x, states, **kwargs)
        dtype = self.compute_dtype
        new = tuple(ops.cast(n, dtype) for n in keras.tree.flatten(new))
        if len(new) != len(state):
            raise ValueError(
                f"The cell {self.cell.name!r} returned {len(new)} state tensor(s) "
                f"for the {len(state)} of its `state_size` ({self.cell.state_size}). "
                "A cell's `call(inputs, states)` returns `(output, new_states)` with "
                "new_states structured like `state_size`."
            )
        return ops.cast(output, dtype), new

    def _cell_dropout_masks(self, batch, input_dim, training):
        """Draws the dropout masks of Keras' cells before the loop, as `RNN` does.

        A cell with `dropout` or `recurrent_dropout` (GRUCell, LSTMCell,
        SimpleRNNCell, also inside StackedRNNCells) caches one mask per call
        of the sequence; drawn inside the loop, on JAX, the draw would leak a
        tracer. `_reset_cell_dropout_masks` clears them after the loop.
        """
        if self._builtin_cell or not training:
            return
        dtype = self.compute_dtype
        cells = _sub_cells(self.cell)
        for cell in cells:
            if hasattr(cell, "get_dropout_mask") and hasattr(cell, "reset_dropout_mask"):
                sizes = keras.tree.flatten(cell.state_size)
                cell_dtype = getattr(cell, "compute_dtype", dtype)
                cell.get_dropout_mask(ops.zeros((batch, input_dim), dtype=cell_dtype))
                if hasattr(cell, "get_recurrent_dropout_mask"):
                    state = ops.zeros((batch, sizes[0]), dtype=cell_dtype)
                    cell.get_recurrent_dropout_mask(state)
            input_dim = _cell_output_size(cell)

    def _reset_cell_dropout_masks(self):
        if self._builtin_cell:
            return
        for cell in _sub_cells(self.cell):
            if hasattr(cell, "reset_dropout_mask"):
                cell.reset_dropout_mask()
            if hasattr(cell, "reset_recurrent_dropout_mask"):
                cell.reset_recurrent_dropout_mask()

    # ---------------------------------------------------------- attention

    def _attend_step(
        self,
        query,
        memory,
        processed_keys,
        memory_mask,
        attention_state,
        training,
        attention_noise=None,
    ):
        """The attention of one step: `(context, weights, new attention state)`.

        attention_state: the layer's state dict (empty for a content-only
        layer); attention_noise: this step's slice of `step_noise`, drawn
        before the loop.
        """
        # The memory was zeroed where masked (`_sequence_inputs`,
        # `get_decode_state`) and the keys projected from it: finite there.
        context, weights, new_state = self.attention.attend_step(
            query,
            memory,
            processed_keys,
            attention_state,
            value_mask=memory_mask,
            training=training,
            noise=attention_noise,
            _memory_zeroed=True,
        )
        # An attention layer with another policy (float32 inside a
        # mixed_float16 decoder) must not change the dtype of the loop carry.
        context = ops.cast(context, self.compute_dtype)
        weights = ops.cast(weights, self.compute_dtype)
        return context, weights, new_state

    def _attention_state_keys(self):
        """The keys of the attention state in the decode state."""
        return [f"attention_{key}" for key in self.attention.attention_state_keys]

    @staticmethod
    def _keep_attention_state(keep, new, previous):
        """A padded target step (keep False, (B, 1)) leaves the attention state as it was."""
        kept = {}
        for key in previous:
            shape = (-1,) + (1,) * (len(previous[key].shape) - 1)
            kept[key] = ops.where(ops.reshape(keep, shape), new[key], previous[key])
        return kept

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
            _memory_zeroed=True,
        )
        return ops.cast(contexts, self.compute_dtype), ops.cast(weights, self.compute_dtype)

    # -------------------------------------------------------------- checks

    def _check_inputs(self, target_shape, memory_shape, initial_state, masks):
        target_shape = tuple(target_shape)
        memory_shape = tuple(memory_shape)
        if len(target_shape) != 3:
            raise _shape_error("target_embeddings", "(batch, T_dec, d_emb)", target_shape)
        if len(memory_shape) != 3:
            raise _shape_error("memory", "(batch, T_enc, d_h)", memory_shape)
        if not _same(target_shape[0], memory_shape[0]):
            raise _shape_error(
                "memory",
                f"(batch, T_enc, d_h) with batch={target_shape[0]} as in `target_embeddings`",
                memory_shape,
                "The batch sizes of the target embeddings and the memory differ.",
            )
        if self.embedding_dim is not None:
            if not _same(target_shape[-1], self.embedding_dim):
                raise _shape_error(
                    "target_embeddings",
                    f"(batch, T_dec, d_emb={self.embedding_dim}), the size the "
                    "decoder was built with",
                    target_shape,
                )
            if not _same(memory_shape[-1], self.memory_dim):
                raise _shape_error(
                    "memory",
                    f"(batch, T_enc, d_h={self.memory_dim}), the size the decoder was built with",
                    memory_shape,
                )
        if initial_state is not None:
            states = self._as_state_tuple(initial_state)
            for index, (state, size) in enumerate(zip(states, self._state_sizes, strict=True)):
                shape = tuple(state.shape)
                if self._builtin_cell:
                    expected = f"(batch, units)=({target_shape[0]}, {self.units})"
                    note = f"The cell has units={self.units}."
                else:
                    expected = f"(batch, {size})=({target_shape[0]}, {size}) for state {index}"
                    note = f"State {index} of the cell {self.cell.name!r} has size {size}."
                if len(shape) != 2 or not _same(shape[0], target_shape[0]):
                    raise _shape_error("initial_state", expected, shape)
                if shape[1] != size:
                    raise _shape_error("initial_state", expected, shape, note)
        target_mask, memory_mask = masks
        for name, mask, expected in (
            ("target_embeddings_mask", target_mask, target_shape[:2]),
            ("memory_mask", memory_mask, memory_shape[:2]),
        ):
            if mask is None:
                continue
            shape = tuple(mask.shape)
            if len(shape) != 2 or not all(
                _same(a, b) for a, b in zip(shape, expected, strict=True)
            ):
                symbols = "(batch, T_dec)" if name.startswith("target") else ("(batch, T_enc)")
                raise _shape_error(name, f"{symbols}={shape_str(expected)}", shape)

    def _check_built(self, method):
        """`get_decode_state` and `step` need the weights that `build` makes."""
        if not self.built:
            raise ValueError(
                f"`{type(self).__name__}.{method}()` was called, but the decoder "
                "is not built yet, and the memory alone cannot build it: it does "
                "not give the size of the target embeddings (d_emb). Call the "
                "decoder once on a batch, `decoder(target_embeddings, memory)`, "
                "or call `decoder.build(target_embeddings_shape, memory_shape)` "
                "first."
            )

    def _state_keys(self):
        """The keys of the recurrent states in the decode state, in the cell's order.

        "h" (and "c" for an LSTM) for the built-in cell; "state_0", "state_1",
        ... (the flattened `state_size`) for a cell given with `cell=`.
        """
        if self._builtin_cell:
            return ["h", "c"][: self.state_size]
        return [f"state_{i}" for i in range(self.state_size)]

    def _decode_state_keys(self):
        """The keys of the dict that `get_decode_state` returns, sorted."""
        keys = ["memory", "memory_mask", "processed_keys"] + self._state_keys()
        return sorted(keys + self._attention_state_keys())

    def _check_step_input(self, target_embedding, decode_state):
        """Checks of `step`: a built decoder, every key of the state, shapes."""
        self._check_built("step")
        expected = self._decode_state_keys()
        received = sorted(decode_state) if isinstance(decode_state, dict) else None
        missing = [key for key in expected if received is None or key not in received]
        if missing:
            what = (
                f"decode_state with keys {received}"
                if received is not None
                else f"decode_state={type(decode_state).__name__}"
            )
            raise ValueError(
                f"Invalid value for argument `decode_state`. Expected a dict with "
                f"the keys {expected}, as returned by get_decode_state() or the "
                f"previous step(). Missing: {missing}. Received: {what}"
            )
        shape = tuple(target_embedding.shape)
        batch = tuple(decode_state[self._state_keys()[0]].shape)[0]
        if len(shape) != 2 or not _same(shape[0], batch) or not _same(shape[1], self.embedding_dim):
            raise _shape_error(
                "target_embedding",
                f"(batch, d_emb)=({batch}, {self.embedding_dim}): one embedding "
                "per sentence of the decode state, for one step",
                shape,
            )

    def _check_attention_size(self):
        """An attention layer built elsewhere must take queries of size units."""
        query_dim = getattr(self.attention, "query_dim", None)
        if query_dim is not None and query_dim != self.units:
            raise ValueError(
                "Invalid value for argument `attention`. Its queries are the "
                f"decoder states, of size units={self.units}, but the layer was "
                f"built for d_q={query_dim}. Pass a new (unbuilt) attention layer."
            )

    def _as_state_tuple(self, state):
        if not self._builtin_cell:
            # A cell's states may come nested like its `state_size`
            # ([h_1, [h_2, c_2]] for StackedRNNCells): flattened here.
            states = tuple(keras.tree.flatten(state))
            if len(states) != self.state_size:
                shapes = ", ".join(f"(batch, {n})" for n in self._state_sizes)
                raise ValueError(
                    "Invalid value for argument `initial_state`. Expected "
                    f"{self.state_size} tensor(s), one per state of the cell "
                    f"{self.cell.name!r} (its flattened state_size), of shapes {shapes}. "
                    f"Received: {len(states)} tensor(s)"
                )
            return states
        if isinstance(state, (list, tuple)):
            states = tuple(state)
        else:
            states = (state,)
        if len(states) != self.state_size:
            raise ValueError(
                "Invalid value for argument `initial_state`. Expected "
                f"{self.state_size} tensor(s) of shape (batch, units) for a "
                f"{self.cell_type.upper()} cell. Received: {len(states)} tensor(s)"
            )
        return states

    def _initial_state_tuple(self, initial_state, batch):
        dtype = self.compute_dtype
        if initial_state is None:
            return tuple(ops.zeros((batch, size), dtype=dtype) for size in self._state_sizes)
        return tuple(ops.cast(s, dtype) for s in self._as_state_tuple(initial_state))

    def _state_output(self, state):
        """The final state `call` returns: one tensor for a one-state cell, else a list."""
        return state[0] if len(state) == 1 else list(state)

    # ------------------------------------------------------ sequence call

    def _sequence_inputs(
        self,
        target_embeddings,
        memory,
        initial_state,
        target_embeddings_mask,
        memory_mask,
        training=None,
        attend_in_loop=True,
    ):
        """Checks the inputs of `call` and prepares what the loop reads.

        Returns a `_SequenceInputs`. With `training`, the dropout masks of a
        cell given with `cell=` are drawn here too; `call` clears them after
        its loop. The attention's per-step draws (`xs["attention_noise"]`) are
        made only with `attend_in_loop`.
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
        memory = zero_masked(ops.cast(memory, dtype), memory_mask)
        batch = ops.shape(memory)[0]
        steps = ops.shape(target_embeddings)[1]
        if target_embeddings_mask is None:
            step_mask = ops.ones((batch, steps), dtype="bool")
        else:
            step_mask = ops.cast(target_embeddings_mask, "bool")
        x_projected = self._cell_input_projection(target_embeddings)  # (B, T, G·u)
        xs = {
            "x": ops.transpose(x_projected, (1, 0, 2)),  # (T, B, G·u)
            "mask": ops.transpose(step_mask, (1, 0)),  # (T, B)
        }
        # Every random draw of the steps happens here, before the loop, as
        # Keras' RNN layers draw their dropout masks: the same training on
        # every backend, and no draw inside a scan (on JAX it leaks a tracer).
        t_enc = ops.shape(memory)[1]
        self._cell_dropout_masks(batch, self.embedding_dim + self._cell_extra_dim(), training)
        attention_state = self.attention.initial_attention_state(memory, memory_mask)
        if attend_in_loop:
            noise = self.attention.step_noise((steps, batch, t_enc), training)
            if noise is not None:
                xs["attention_noise"] = noise  # (T, B, ...) leaves
        return _SequenceInputs(
            target_embeddings=target_embeddings,
            memory=memory,
            state=self._initial_state_tuple(initial_state, batch),
            processed_keys=self.attention.precompute_keys(memory),  # once per batch
            attention_state=attention_state,
            cell_weights=self._cell_weights(),  # once per batch, not per step
            step_mask=step_mask,
            xs=xs,
        )

    def _output_dim(self):
        """The size of the per-step output of `call` and `step`."""
        raise NotImplementedError

    def _cell_extra_dim(self):
        """The size of what the cell reads after y_{t-1} (the context, h̃ or nothing)."""
        raise NotImplementedError

    def compute_output_spec(
        self,
        target_embeddings,
        memory,
        initial_state=None,
        target_embeddings_mask=None,
        memory_mask=None,
        training=None,
    ):
        self._check_inputs(
            target_embeddings.shape,
            memory.shape,
            initial_state,
            (target_embeddings_mask, memory_mask),
        )
        batch, steps = target_embeddings.shape[:2]
        dtype = self.compute_dtype
        outputs = keras.KerasTensor((batch, steps, self._output_dim()), dtype=dtype)
        weights = keras.KerasTensor((batch, steps, memory.shape[1]), dtype=dtype)
        state = [keras.KerasTensor((batch, size), dtype=dtype) for size in self._state_sizes]
        return outputs, weights, self._state_output(state)

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
        self._check_attention_size()
        self.build_decoder(self.embedding_dim, self.memory_dim)
        self.built = True

    def build_decoder(self, embedding_dim, memory_dim):
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
        self._check_built("get_decode_state")
        memory = ops.convert_to_tensor(memory)
        self._check_inputs(
            (memory.shape[0] if len(memory.shape) else None, None, self.embedding_dim),
            memory.shape,
            initial_state,
            (None, memory_mask),
        )
        memory = zero_masked(ops.cast(memory, self.compute_dtype), memory_mask)
        batch = ops.shape(memory)[0]
        state = self._initial_state_tuple(initial_state, batch)
        if memory_mask is None:
            memory_mask = ops.ones(ops.shape(memory)[:2], dtype="bool")
        decode_state = {
            "memory": memory,
            "processed_keys": self.attention.precompute_keys(memory),
            # A float mask: every entry of the state can be tiled and gathered
            # alike by a beam search.
            "memory_mask": ops.cast(memory_mask, self.compute_dtype),
        }
        decode_state.update(zip(self._state_keys(), state, strict=True))
        initial = self.attention.initial_attention_state(memory, ops.cast(memory_mask, "bool"))
        for key in self.attention.attention_state_keys:
            decode_state[f"attention_{key}"] = initial[key]  # (B, ...)
        return decode_state

    def _decode_state_tuple(self, decode_state):
        return tuple(decode_state[key] for key in self._state_keys())

    def _decode_attention_state(self, decode_state):
        """The attention's state dict in a decode state (empty for a content-only layer)."""
        return {
            key: decode_state[f"attention_{key}"] for key in self.attention.attention_state_keys
        }

    def _with_state(self, decode_state, state, attention_state=None):
        new = dict(decode_state)
        new.update(zip(self._state_keys(), state, strict=True))
        for key, value in (attention_state or {}).items():
            new[f"attention_{key}"] = value
        return new

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "attention": keras.saving.serialize_keras_object(self.attention),
                "cell_type": self.cell_type,
                "cell": None
                if self._builtin_cell
                else keras.saving.serialize_keras_object(self.cell),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("seed", None)  # ignored (see `seed` in the class docstring)
        if isinstance(config["attention"], dict):
            config["attention"] = keras.saving.deserialize_keras_object(config["attention"])
        if isinstance(config.get("cell"), dict):
            config["cell"] = _deserialize_cell(config["cell"])
        return cls(**config)


# ------------------------------------------------------------- RNN cells


def _deserialize_cell(config):
    # A copy: StackedRNNCells.from_config pops "cells" from the dict it gets,
    # which would empty the caller's config.
    return keras.saving.deserialize_keras_object(copy.deepcopy(config))


def _check_cell(cell):
    """A Keras RNN cell: a layer with `call(inputs, states)` and a `state_size`."""
    hint = ""
    if isinstance(cell, keras.layers.RNN):
        hint = (
            " A recurrent layer runs its own loop over time; pass its cell "
            "(keras.layers.GRUCell instead of keras.layers.GRU)."
        )
    sizes = getattr(cell, "state_size", None) if isinstance(cell, keras.layers.Layer) else None
    if hint or sizes is None:
        raise ValueError(
            "Invalid value for argument `cell`. Expected a Keras RNN cell: a layer "
            "with `call(inputs, states)` returning `(output, new_states)` and a "
            "`state_size` attribute, e.g. keras.layers.GRUCell(256), LSTMCell, "
            f"SimpleRNNCell or StackedRNNCells([...]). Received: cell={cell!r}" + hint
        )
    flat = keras.tree.flatten(sizes)
    if not flat or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in flat):
        raise ValueError(
            "Invalid value for argument `cell`. Its `state_size` must be a positive "
            "integer or a (nested) list of them, one per state tensor (batch, size). "
            f"Received: cell={cell!r} with state_size={sizes!r}"
        )


def _sub_cells(cell):
    """The cells of a StackedRNNCells, bottom to top; `[cell]` for any other."""
    if isinstance(cell, keras.layers.StackedRNNCells):
        return list(cell.cells)
    return [cell]


def _output_state_index(cell):
    """The index, in the flattened states, of the state that holds the output.

    Keras' convention: a cell's output is its first state (h), and the output
    of StackedRNNCells is that of its last cell.
    """
    if isinstance(cell, keras.layers.StackedRNNCells):
        below = sum(len(keras.tree.flatten(c.state_size)) for c in cell.cells[:-1])
        return below + _output_state_index(cell.cells[-1])
    return 0


def _cell_output_size(cell):
    """`cell.output_size`, or, as Keras' RNN reads it, the size of its output state."""
    size = getattr(cell, "output_size", None)
    if size is None:
        size = keras.tree.flatten(cell.state_size)[_output_state_index(cell)]
    return int(size)
