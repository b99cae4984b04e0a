"""`CellMachinery`: the recurrent cell of a decoder, and the fused fast path.

Two kinds of cell. The built-in one (`units` and `cell_type`) is a Keras
`GRUCell` or `LSTMCell` (its weights, its initializers, its serialization)
whose update is written out here, so that the projection of the target
embeddings, which do not depend on the recurrence, is computed once for all
steps instead of once per step. Any other Keras RNN cell (`cell=`) is called
as it is at every step, on the concatenation of its inputs, with its flat list
of states. `BaseDecoder` takes these methods from this class.
"""

import copy

import keras
from keras import ops

_CELL_TYPES = ("gru", "lstm")


class CellMachinery:
    """The cell part of `BaseDecoder`: state layout, the step of the cell, its dropout."""

    def _init_cell(self, units, cell_type, cell):
        self.units = units
        self.cell_type = None if cell is not None else cell_type
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
        h_prev = state[0]
        recurrent = ops.matmul(h_prev, weights["recurrent_kernel"])
        if self.cell_type == "gru":
            recurrent = recurrent + weights["recurrent_bias"]
            # One split per product, not a slice per gate: an exported decoder
            # runs one operator instead of three at every step.
            x_z, x_r, x_h = ops.split(x_projected, 3, axis=-1)
            r_z, r_r, r_h = ops.split(recurrent, 3, axis=-1)
            z = ops.sigmoid(x_z + r_z)
            r = ops.sigmoid(x_r + r_r)
            candidate = ops.tanh(x_h + r * r_h)
            h = z * h_prev + (1.0 - z) * candidate
            return (h,)
        gates = x_projected + recurrent  # (B, 4u): input, forget, cell, output
        g_i, g_f, g_c, g_o = ops.split(gates, 4, axis=-1)
        i = ops.sigmoid(g_i)
        f = ops.sigmoid(g_f)
        c = f * state[1] + i * ops.tanh(g_c)
        o = ops.sigmoid(g_o)
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

    def _state_keys(self):
        """The keys of the recurrent states in the decode state, in the cell's order.

        "h" (and "c" for an LSTM) for the built-in cell; "state_0", "state_1",
        ... (the flattened `state_size`) for a cell given with `cell=`.
        """
        if self._builtin_cell:
            return ["h", "c"][: self.state_size]
        return [f"state_{i}" for i in range(self.state_size)]

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


def cell_arguments(units, cell_type, cell):
    """Checks the cell arguments of a decoder: `(units, cell_type, cell)` to use."""
    if isinstance(cell, dict):
        cell = deserialize_cell(cell)
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
    return units, cell_type, cell


# ------------------------------------------------------------- RNN cells


def deserialize_cell(config):
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
