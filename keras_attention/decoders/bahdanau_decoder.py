"""`BahdanauDecoder`: attention inside the recurrence, queried with s_{t-1}.

With `conditional=True` it is the conditional GRU of Nematus (Sennrich et al.
2017), the decoder of the published Multi30k systems: two cells per step, the
attention queried with the first one's output.
"""

import keras
from keras import ops

from keras_attention.decoders.base_decoder import BaseDecoder
from keras_attention.decoders.decoder_loop import keep_previous
from keras_attention.decoders.decoder_loop import scan_steps
from keras_attention.decoders.decoder_loop import zero_padded


@keras.saving.register_keras_serializable(package="keras_attention")
class BahdanauDecoder(BaseDecoder):
    """The decoder of Bahdanau, Cho and Bengio (2014).

    At step t, with the previous state s_{t-1}, the previous target embedding
    y_{t-1} and the encoder outputs (the memory) h_1..h_T:

        c_t, a_t = attention(query=s_{t-1}, value=h)   # before the step
        s_t      = cell([y_{t-1}; c_t], s_{t-1})
        o_t      = tanh(W_o [s_t; c_t; y_{t-1}] + b_o)  # the deep output

    o_t goes to the vocabulary projection. The attention queries the state
    *before* the step, the paper's convention (`LuongDecoder` queries s_t).

    With `conditional=True` (the conditional GRU of Nematus, Sennrich et al.
    2017) a first cell reads y_{t-1} before the attention and a second cell
    reads the context after it:

        s'_t     = cell(y_{t-1}, s_{t-1})
        c_t, a_t = attention(query=s'_t, value=h)
        s_t      = attended_cell(c_t, s'_t)
        o_t      = tanh(W_o [s_t; c_t; y_{t-1}] + b_o)

    The query still comes before the step's use of the context, but it already
    knows the previous word. This costs a second cell per step.

    Any Keras RNN cell can replace the built-in GRU or LSTM (`cell=`): a
    `GRUCell`, `LSTMCell`, `SimpleRNNCell`, a `StackedRNNCells([...])` or a
    cell of one's own (Keras' cell protocol: `call(inputs, states)` returning
    `(output, new_states)`, a `state_size`, optionally an `output_size`). The
    cell reads [y_{t-1}; c_t] (in a stack, the first layer reads it) with its
    flat list of states, and s is the cell's output: for a stack, that of its
    last layer, whose first state (h) holds it. The attention queries s_{t-1},
    so the decoder reads it in the state before the step: the output state of
    the last layer (for Keras' cells the output is that state; a cell of
    one's own must follow that convention). The built-in GRU and LSTM compute
    the same recurrence faster (the projection of y is taken out of the loop).

    Args:
        units: size of the recurrent state s. Optional with `cell` (the
            cell's output size).
        attention: the attention layer, e.g. `BahdanauAttention(units=256)`
            or `LocationSensitiveAttention(units=128)`.
        cell_type: "gru" (the default when no `cell` is given) or "lstm".
        conditional: whether to use the two-cell conditional recurrence above
            (built-in cells only).
        **kwargs: by name, `output_units` (size of the deep output o_t;
            defaults to `units`), `cell` (a Keras RNN cell used instead of the
            built-in one; see above and `BaseDecoder`) and `seed` (ignored;
            see `BaseDecoder`), then the base layer arguments.

    Call arguments and returns: those of `BaseDecoder` (the stateful
    attention layers included); the outputs are the deep outputs o_t.

    Example with a two-layer stack:

    >>> import keras
    >>> import numpy as np
    >>> from keras_attention import BahdanauAttention
    >>> cell = keras.layers.StackedRNNCells(
    ...     [keras.layers.GRUCell(8), keras.layers.LSTMCell(6)]
    ... )
    >>> decoder = BahdanauDecoder(None, BahdanauAttention(4), cell=cell)
    >>> y = np.zeros((2, 3, 5), "float32")  # (batch, T_dec, d_emb)
    >>> memory = np.ones((2, 7, 10), "float32")  # (batch, T_enc, d_h)
    >>> outputs, weights, state = decoder(y, memory)
    >>> tuple(outputs.shape), tuple(weights.shape), [tuple(s.shape) for s in state]
    ((2, 3, 6), (2, 3, 7), [(2, 8), (2, 6), (2, 6)])
    """

    def __init__(self, units=None, attention=None, cell_type=None, conditional=False, **kwargs):
        # `output_units`, `seed` and `cell` go to BaseDecoder by name.
        super().__init__(units=units, attention=attention, cell_type=cell_type, **kwargs)
        if not isinstance(conditional, bool):
            raise ValueError(
                "Invalid value for argument `conditional`. Expected True or False. "
                f"Received: conditional={conditional!r}"
            )
        cells = self._cells
        if conditional and not cells.builtin:
            raise ValueError(
                "Invalid value for argument `conditional`. The conditional recurrence "
                "has two built-in cells (made from `units` and `cell_type`); it does "
                f"not take a `cell`. Received: conditional=True, cell={self.cell!r}"
            )
        if not cells.builtin:
            # The query s_{t-1} is read in the state before the step.
            size = cells.state_sizes[cells.output_state]
            if size != self.units:
                raise ValueError(
                    "Invalid value for argument `cell`. BahdanauDecoder queries the "
                    "attention with the cell's previous output, which it reads in the "
                    f"cell's output state (state {cells.output_state}, of size {size}); "
                    f"the cell's output has size {self.units}. Received: cell={self.cell!r}"
                )
        self.conditional = conditional
        # The conditional recurrence's second cell, which reads the context.
        self.attended_cell = cells.make_cell("attended_cell") if conditional else None
        self.deep_output = keras.layers.Dense(
            self.output_units or self.units,
            activation="tanh",
            name="deep_output",
            dtype=self.dtype_policy,
        )

    def build_decoder(self, embedding_dim, memory_dim):
        if self.conditional:
            self._cells.build(embedding_dim, 0)  # reads y
            self.attended_cell.build((None, memory_dim))  # reads c
        else:
            self._cells.build(embedding_dim, memory_dim)  # reads [y; c]
        self.deep_output.build((None, self.units + memory_dim + embedding_dim))

    def _cell_extra_dim(self):
        return self.memory_dim  # the context c_t

    def _decode_sequence(self, prepared, memory_mask, training):
        memory = prepared.memory
        processed_keys = prepared.processed_keys
        cell_weights = prepared.cell_weights
        attended_weights = self._attended_cell_weights()

        def loop_step(carry, inputs):
            prev = carry["state"]
            prev_attention = carry["attention"]  # the attention's state ({} if none)
            noise = inputs.get("attention_noise")  # drawn before the loop
            attend = self._attender(memory, processed_keys, memory_mask, training, noise)
            new, context, weights, attention_state = self._recurrence(
                inputs["x"], prev, prev_attention, attend, cell_weights, attended_weights, training
            )
            keep = inputs["mask"][:, None]  # (B, 1)
            # `scan` stacks outputs of the carry's structure: the step's
            # outputs travel in the carry.
            carry = {
                "state": keep_previous(keep, new, prev),
                "context": zero_padded(keep, context),
                "weights": zero_padded(keep, weights),
                "attention": keep_previous(keep, attention_state, prev_attention),
            }
            return carry, carry

        batch = ops.shape(memory)[0]
        context = ops.zeros((batch, self.memory_dim), dtype=self.compute_dtype)
        last, stacked = scan_steps(loop_step, prepared, {"context": context}, self._cells, True)
        # s_t: the cell's output, held in its output state.
        state = stacked["state"][self._cells.output_state]
        states = ops.transpose(state, (1, 0, 2))  # (B, T, units)
        contexts = ops.transpose(stacked["context"], (1, 0, 2))  # (B, T, d_h)
        weights = ops.transpose(stacked["weights"], (1, 0, 2))  # (B, T, T_enc)
        outputs = self.deep_output(
            ops.concatenate([states, contexts, prepared.target_embeddings], axis=-1)
        )  # (B, T, output_units)
        keep = ops.cast(prepared.step_mask, outputs.dtype)[:, :, None]
        outputs = outputs * keep
        return outputs, weights, self._cells.state_output(last["state"])

    def step(self, target_embedding, decode_state):
        """One decoder step, with the weights of `call`.

        Args:
            target_embedding: (batch, d_emb), the embedding of the previous
                output token.
            decode_state: from `get_decode_state` or the previous `step`.

        Returns:
            `(output, weights, decode_state)`: output (batch, output_units),
            weights (batch, T_enc), the next state.
        """
        embedding, prev, attention_state, attend = self._step_inputs(target_embedding, decode_state)
        new, context, weights, attention_state = self._recurrence(
            self._cells.input_projection(embedding),
            prev,
            attention_state,
            attend,
            self._cells.weights(),
            self._attended_cell_weights(),
            False,
        )
        s = new[self._cells.output_state]
        output = self.deep_output(ops.concatenate([s, context, embedding], -1))
        return output, weights, self._with_state(decode_state, new, attention_state)

    def _recurrence(
        self, x, prev, attention_state, attend, cell_weights, attended_weights, training
    ):
        """One step of the recurrence: `(new state tuple, context, weights, attention state)`.

        x: from `CellRunner.input_projection(y_{t-1})`; attention_state: the
        attention's state dict ({} for a content-only layer); attend:
        `(query (B, units), attention_state) → (context, weights, new
        attention state)`.
        """
        cells = self._cells
        if not self.conditional:
            query = prev[cells.output_state]  # s_{t-1}
            context, weights, attention_state = attend(query, attention_state)
            _, new = cells.step(x, context, prev, cell_weights, training)
            return new, context, weights, attention_state
        middle = cells.update(x, prev, cell_weights)  # s'_t from y_{t-1}
        context, weights, attention_state = attend(middle[0], attention_state)  # query = s'_t
        x = ops.matmul(context, attended_weights["kernel"]) + attended_weights["input_bias"]
        return cells.update(x, middle, attended_weights), context, weights, attention_state

    def _attended_cell_weights(self):
        """The second cell's weights in the compute dtype (None unless conditional)."""
        if not self.conditional:
            return None
        dtype = self.compute_dtype
        cell = self.attended_cell
        input_bias, recurrent_bias = self._cells.biases(cell)
        weights = {
            "kernel": ops.cast(cell.kernel, dtype),
            "recurrent_kernel": ops.cast(cell.recurrent_kernel, dtype),
            "input_bias": input_bias,
        }
        if recurrent_bias is not None:
            weights["recurrent_bias"] = recurrent_bias
        return weights

    def get_config(self):
        config = super().get_config()
        config.update({"conditional": self.conditional})
        return config
