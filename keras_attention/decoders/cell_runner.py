"""`CellRunner`: the recurrent cell of a decoder, and the fused fast path.

Two kinds of cell. The built-in one (`units` and `cell_type`) is a Keras
`GRUCell` or `LSTMCell` (its weights, its initializers, its serialization)
whose update is written out here, so that the projection of the target
embeddings, which do not depend on the recurrence, is computed once for all
steps instead of once per step. Any other Keras RNN cell (`cell=`) is called
as it is at every step, on the concatenation of its inputs, with its flat list
of states. A decoder holds one `CellRunner` and the cell itself (the cell is
the decoder's sub-layer: its weights are saved under the decoder).
"""

import copy
import inspect

import keras
from keras import ops

_CELL_TYPES = ("gru", "lstm")


class CellRunner:
    """The cell of a decoder: its state layout, one step of it, its dropout masks.

    Args:
        units: the size of the cell's output (checked by `cell_arguments`).
        cell_type: "gru" or "lstm" for the built-in cell; None with `cell`.
        cell: a Keras RNN cell, or None for the built-in cell, made here.
        dtype_policy: the decoder's dtype policy: the built-in cells take it,
            and every tensor the runner returns is in its compute dtype.

    The runner holds no weights of its own; `build(embedding_dim, extra_dim)`
    builds the cell for inputs [y_{t-1}; extra].
    """

    def __init__(self, units, cell_type, cell, dtype_policy):
        self.units = units
        self.cell_type = None if cell is not None else cell_type
        self.dtype_policy = dtype_policy
        # The built-in cell has its update written out (the fused fast path).
        self.builtin = cell is None
        self.cell = self.make_cell("cell") if cell is None else cell
        # Flat state sizes, and the index of the state that holds the output.
        if cell is None:
            self.state_sizes = [units] * (1 if cell_type == "gru" else 2)
            self.output_state = 0
        else:
            self.state_sizes = keras.tree.flatten(cell.state_size)
            self.output_state = _output_state_index(cell)
        self.takes_training = cell is not None and call_takes_training(cell)
        self.embedding_dim = None

    @property
    def compute_dtype(self):
        return self.dtype_policy.compute_dtype

    def make_cell(self, name):
        """A new built-in cell of this runner's type, units and dtype policy."""
        # Sub-layers take the decoder's policy: with the global one, a decoder
        # built with `dtype="mixed_float16"` would mix float16 and float32.
        policy = self.dtype_policy
        if self.cell_type == "gru":
            return keras.layers.GRUCell(self.units, reset_after=True, name=name, dtype=policy)
        return keras.layers.LSTMCell(self.units, name=name, dtype=policy)

    def build(self, embedding_dim, extra_dim):
        """Builds the cell for the input [y_{t-1} (embedding_dim); extra (extra_dim)].

        A cell given with `cell=` that is built already (deserialized) is kept.
        """
        self.embedding_dim = embedding_dim
        if self.builtin or not self.cell.built:
            self.cell.build((None, embedding_dim + extra_dim))

    @property
    def state_size(self):
        """The number of state tensors of the cell (flattened)."""
        return len(self.state_sizes)

    def state_keys(self):
        """The keys of the recurrent states in a decode state, in the cell's order.

        "h" (and "c" for an LSTM) for the built-in cell; "state_0", "state_1",
        ... (the flattened `state_size`) for a cell given with `cell=`.
        """
        if self.builtin:
            return ["h", "c"][: self.state_size]
        return [f"state_{i}" for i in range(self.state_size)]

    # ------------------------------------------------------------ one step

    def input_projection(self, inputs):
        """The part of the cell's input transform that depends on `inputs` only.

        inputs: (..., embedding_dim) → (..., gates·units), input bias included.
        A cell given with `cell=` reads its whole input at every step: the
        inputs come back in the compute dtype.
        """
        dtype = self.compute_dtype
        if not self.builtin:
            return ops.cast(inputs, dtype)
        kernel = ops.cast(self.cell.kernel, dtype)[: self.embedding_dim]
        projected = ops.matmul(ops.cast(inputs, dtype), kernel)
        return projected + self.biases(self.cell)[0]

    def biases(self, cell):
        """`(input bias, recurrent bias or None)` of a built-in cell, in the compute dtype."""
        bias = ops.cast(cell.bias, self.compute_dtype)
        if self.cell_type == "gru":
            return bias[0], bias[1]  # reset_after: (input bias, recurrent bias)
        return bias, None  # LSTM: one bias

    def weights(self):
        """The cell weights that every step reads, in the compute dtype.

        A loop reads them once, before it starts, and passes them to each
        step: cast and sliced inside the loop they would be copied every step.
        None for a cell given with `cell=` (it reads its own weights).
        """
        if not self.builtin:
            return None
        dtype = self.compute_dtype
        weights = {
            "extra_kernel": ops.cast(self.cell.kernel, dtype)[self.embedding_dim :],
            "recurrent_kernel": ops.cast(self.cell.recurrent_kernel, dtype),
        }
        if self.cell_type == "gru":
            weights["recurrent_bias"] = self.biases(self.cell)[1]
        return weights

    def extra_projection(self, extra, weights=None):
        """The cell's input transform of the extra input (context or h̃).

        weights: from `weights()` (read here when None).
        """
        weights = weights or self.weights()
        return ops.matmul(extra, weights["extra_kernel"])

    def update(self, x_projected, state, weights=None):
        """One step of a built-in cell, given its projected input.

        x_projected: (B, gates·units) = [inputs; extra] @ kernel + input bias.
        state: tuple (h,) for GRU, (h, c) for LSTM, each (B, units).
        weights: from `weights()` (read here when None), or those of another
            built-in cell of the same type (the conditional GRU's second cell).
        """
        weights = weights or self.weights()
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

    def step(self, x, extra, state, weights=None, training=None):
        """One step of the cell: `(output (B, units), new state tuple)`.

        x: from `input_projection` (of y_{t-1}); extra: None, or the second
        part of the cell's input (the context or h̃), (B, d); state: the flat
        state tuple; weights: from `weights()`; training: passed to a cell
        whose `call` takes a `training` argument.
        """
        if self.builtin:
            if extra is not None:
                x = x + self.extra_projection(extra, weights)
            new = self.update(x, state, weights)
            return new[0], new
        if extra is not None:
            x = ops.concatenate([x, ops.cast(extra, x.dtype)], axis=-1)  # (B, d_in)
        # Keras' RNN convention: a list of states, one entry per element of
        # `state_size` (itself a list for an LSTM inside StackedRNNCells).
        sizes = self.cell.state_size
        structure = [sizes] if isinstance(sizes, int) else list(sizes)
        states = keras.tree.pack_sequence_as(structure, list(state))
        kwargs = {"training": training} if self.takes_training else {}
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

    # ------------------------------------------------------ dropout, states

    def draw_dropout_masks(self, batch, input_dim, training):
        """Draws the dropout masks of Keras' cells before the loop, as `RNN` does.

        A cell with `dropout` or `recurrent_dropout` (GRUCell, LSTMCell,
        SimpleRNNCell, also inside StackedRNNCells) caches one mask per call
        of the sequence; drawn inside the loop, on JAX, the draw would leak a
        tracer. `reset_dropout_masks` clears them after the loop.
        """
        if self.builtin or not training:
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

    def reset_dropout_masks(self):
        """Clears the masks `draw_dropout_masks` drew, after the loop."""
        if self.builtin:
            return
        for cell in _sub_cells(self.cell):
            if hasattr(cell, "reset_dropout_mask"):
                cell.reset_dropout_mask()
            if hasattr(cell, "reset_recurrent_dropout_mask"):
                cell.reset_recurrent_dropout_mask()

    def as_state_tuple(self, state):
        """A state given by the caller as the flat tuple the loop carries."""
        if not self.builtin:
            # A cell's states may come nested like its `state_size`
            # ([h_1, [h_2, c_2]] for StackedRNNCells): flattened here.
            states = tuple(keras.tree.flatten(state))
            if len(states) != self.state_size:
                shapes = ", ".join(f"(batch, {n})" for n in self.state_sizes)
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

    def initial_state(self, initial_state, batch):
        """The state tuple a loop starts from: `initial_state`, or zeros."""
        dtype = self.compute_dtype
        if initial_state is None:
            return tuple(ops.zeros((batch, size), dtype=dtype) for size in self.state_sizes)
        return tuple(ops.cast(s, dtype) for s in self.as_state_tuple(initial_state))

    def state_output(self, state):
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


def call_takes_training(layer):
    """Whether `layer.call` names a `training` parameter (Keras' own rule).

    Keras passes `training` only to a `call` that declares it; read here from
    the signature, not from a private attribute of the layer.
    """
    try:
        parameters = inspect.signature(layer.call).parameters
    except (TypeError, ValueError):  # a builtin or C callable: no signature
        return False
    return "training" in parameters
