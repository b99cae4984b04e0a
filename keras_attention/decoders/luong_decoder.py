"""`LuongDecoder`: attention after the recurrence, queried with s_t."""

import keras
from keras import ops

from keras_attention.decoders.base_decoder import BaseDecoder
from keras_attention.decoders.decoder_loop import keep_previous
from keras_attention.decoders.decoder_loop import scan_steps
from keras_attention.decoders.decoder_loop import zero_padded


@keras.saving.register_keras_serializable(package="keras_attention")
class LuongDecoder(BaseDecoder):
    """The decoder of Luong, Pham and Manning (2015).

    At step t, with the previous target embedding y_{t-1}:

        s_t      = cell([y_{t-1}; h̃_{t-1}], s_{t-1})   # input feeding
        c_t, a_t = attention(query=s_t, value=h)      # after the step
        h̃_t      = tanh(W_c [c_t; s_t])

    h̃_t goes to the vocabulary projection. The attention queries the state
    *after* the step (`BahdanauDecoder` queries s_{t-1}). With
    `input_feeding=False` the cell reads y_{t-1} alone, the recurrence no longer
    depends on the attention, and the attention runs once over all steps in
    parallel.

    Any Keras RNN cell can replace the built-in GRU or LSTM (`cell=`): a
    `GRUCell`, `LSTMCell`, `SimpleRNNCell`, a `StackedRNNCells([...])` or a
    cell of one's own (Keras' cell protocol: `call(inputs, states)` returning
    `(output, new_states)`, a `state_size`, optionally an `output_size`). The
    cell reads [y_{t-1}; h̃_{t-1}] (y_{t-1} alone without input feeding; in a
    stack, the first layer reads it) with its flat list of states, and s_t,
    the query, is the cell's output: for a stack, that of its last layer.
    The built-in GRU and LSTM compute the same recurrence faster (the
    projection of y is taken out of the loop).

    With a stateful attention (`BaseDecoder`) and without input feeding, the
    attention runs step by step after the recurrence (its weights depend on
    the previous ones).

    Args:
        units: size of the recurrent state s. Optional with `cell` (the
            cell's output size).
        attention: the attention layer, e.g. `LuongAttention("general")` or
            `LuongMonotonicAttention()`.
        cell_type: "gru" (the default when no `cell` is given) or "lstm".
        input_feeding: feed h̃_{t-1} to the cell. Defaults to True.
        **kwargs: `output_units`, the size of h̃ (defaults to `units`);
            `cell`, a Keras RNN cell used instead of the built-in one (see
            above and `BaseDecoder`); `seed`, ignored (see `BaseDecoder`);
            base layer arguments.

    Call arguments and returns: those of `BaseDecoder` (the stateful
    attention layers included); the outputs are h̃_t.

    Example with a location-sensitive attention:

    >>> import keras
    >>> import numpy as np
    >>> from keras_attention import LocationSensitiveAttention
    >>> decoder = LuongDecoder(
    ...     None,
    ...     LocationSensitiveAttention(units=4, filters=2, kernel_size=3),
    ...     cell=keras.layers.SimpleRNNCell(6),
    ... )
    >>> y = np.zeros((2, 3, 5), "float32")  # (batch, T_dec, d_emb)
    >>> memory = np.ones((2, 7, 10), "float32")  # (batch, T_enc, d_h)
    >>> outputs, weights, state = decoder(y, memory)
    >>> tuple(outputs.shape), tuple(weights.shape), tuple(state.shape)
    ((2, 3, 6), (2, 3, 7), (2, 6))
    >>> state = decoder.get_decode_state(memory)
    >>> sorted(k for k in state if k not in ("memory", "memory_mask", "processed_keys"))
    ['attention_alignment', 'attention_cumulative', 'attentional', 'state_0']
    """

    def __init__(self, units=None, attention=None, cell_type=None, input_feeding=True, **kwargs):
        # `output_units`, `seed` and `cell` go to BaseDecoder by name.
        super().__init__(units=units, attention=attention, cell_type=cell_type, **kwargs)
        self.input_feeding = bool(input_feeding)
        self.attentional = keras.layers.Dense(
            self.attentional_units,
            activation="tanh",
            use_bias=False,
            name="combine",
            dtype=self.dtype_policy,
        )

    @property
    def attentional_units(self):
        return self.output_units or self.units

    def build_decoder(self, embedding_dim, memory_dim):
        self._cells.build(embedding_dim, self._cell_extra_dim())
        self.attentional.build((None, memory_dim + self.units))

    def _cell_extra_dim(self):
        return self.attentional_units if self.input_feeding else 0  # h̃_{t-1}

    def _attends_in_loop(self):
        # Without input feeding the recurrence never reads the attention: it
        # runs alone, and the attention's own sequence form runs after it (in
        # parallel for a content-only layer, step by step for a stateful one).
        return self.input_feeding

    def _recurrence(self, x, feed, prev, attention_state, attend, cell_weights, training):
        """Luong's step: `(h̃_t, weights, new state tuple, attention state)`.

        x: from `CellRunner.input_projection(y_{t-1})`; feed: h̃_{t-1} with
        input feeding, else None; attention_state: the attention's state dict
        ({} for a content-only layer); attend: `(query (B, units),
        attention_state) → (context, weights, new attention state)`.
        """
        query, new = self._cells.step(x, feed, prev, cell_weights, training)  # s_t
        context, weights, attention_state = attend(query, attention_state)  # query = s_t
        attentional = self.attentional(ops.concatenate([context, query], axis=-1))  # h̃_t
        return attentional, weights, new, attention_state

    def _decode_sequence(self, prepared, memory_mask, training):
        if not self.input_feeding:
            return self._call_without_input_feeding(prepared, memory_mask, training)
        memory = prepared.memory
        processed_keys = prepared.processed_keys
        cell_weights = prepared.cell_weights

        def loop_step(carry, inputs):
            prev = carry["state"]
            prev_attention = carry["attention"]  # the attention's state ({} if none)
            noise = inputs.get("attention_noise")  # drawn before the loop
            attend = self._attender(memory, processed_keys, memory_mask, training, noise)
            attentional, weights, new, attention_state = self._recurrence(
                inputs["x"], carry["outputs"], prev, prev_attention, attend, cell_weights, training
            )
            keep = inputs["mask"][:, None]  # (B, 1)
            # A padded step keeps h̃ for the next real step, like the state.
            carry = {
                "state": keep_previous(keep, new, prev),
                "outputs": keep_previous(keep, attentional, carry["outputs"]),
                "weights": zero_padded(keep, weights),
                "attention": keep_previous(keep, attention_state, prev_attention),
            }
            return carry, carry

        batch = ops.shape(memory)[0]
        feed = ops.zeros((batch, self.attentional_units), dtype=self.compute_dtype)  # h̃_0
        last, stacked = scan_steps(loop_step, prepared, {"outputs": feed}, self._cells, True)
        outputs = ops.transpose(stacked["outputs"], (1, 0, 2))  # (B, T, units)
        weights = ops.transpose(stacked["weights"], (1, 0, 2))  # (B, T, T_enc)
        keep_steps = ops.cast(prepared.step_mask, outputs.dtype)[:, :, None]  # (B, T, 1)
        return outputs * keep_steps, weights, self._cells.state_output(last["state"])

    def _call_without_input_feeding(self, prepared, memory_mask, training):
        """`call` without input feeding: the recurrence alone, then the attention.

        The recurrence does not read the attention: it runs alone, then the
        attention attends for all steps at once (its own sequence form), and
        h̃ is computed for all steps at once.
        """
        cells = self._cells
        memory = prepared.memory
        cell_weights = prepared.cell_weights
        dtype = self.compute_dtype
        batch = ops.shape(memory)[0]
        keep_steps = ops.cast(prepared.step_mask, dtype)[:, :, None]  # (B, T, 1)

        def recur(carry, inputs):
            prev = carry["state"]
            output, new = cells.step(inputs["x"], None, prev, cell_weights, training)
            keep = inputs["mask"][:, None]
            carry = {"state": keep_previous(keep, new, prev)}
            if not cells.builtin:
                carry["output"] = output  # s_t; for Keras' cells also a state
            return carry, carry

        init = {}
        if not cells.builtin:
            init["output"] = ops.zeros((batch, self.units), dtype=dtype)
        last, stacked = scan_steps(recur, prepared, init, cells, False)
        queries = stacked["output"] if not cells.builtin else stacked["state"][0]
        states = ops.transpose(queries, (1, 0, 2))  # (B, T, units)
        contexts, weights = self._attend_sequence(
            states, memory, prepared.processed_keys, memory_mask, prepared.step_mask, training
        )  # query = s_t for every t: (B, T, d_h), (B, T, T_enc)
        outputs = self.attentional(ops.concatenate([contexts, states], axis=-1))  # h̃
        return outputs * keep_steps, weights * keep_steps, cells.state_output(last["state"])

    def get_decode_state(self, memory, initial_state=None, memory_mask=None):
        decode_state = super().get_decode_state(memory, initial_state, memory_mask)
        if self.input_feeding:
            batch = ops.shape(decode_state["memory"])[0]
            decode_state["attentional"] = ops.zeros(
                (batch, self.attentional_units), dtype=self.compute_dtype
            )  # h̃_0
        return decode_state

    get_decode_state.__doc__ = BaseDecoder.get_decode_state.__doc__

    def _decode_state_keys(self):
        extra = ["attentional"] if self.input_feeding else []  # h̃_{t-1}
        return sorted(super()._decode_state_keys() + extra)

    def step(self, target_embedding, decode_state):
        """One decoder step, with the weights of `call`.

        Args:
            target_embedding: (batch, d_emb), the previous output's embedding.
            decode_state: from `get_decode_state` or the previous `step`.

        Returns:
            `(output, weights, decode_state)`: h̃_t (batch, output_units),
            weights (batch, T_enc), the next state.
        """
        embedding, prev, attention_state, attend = self._step_inputs(target_embedding, decode_state)
        feed = decode_state["attentional"] if self.input_feeding else None  # h̃_{t-1}
        output, weights, new, attention_state = self._recurrence(
            self._cells.input_projection(embedding),
            feed,
            prev,
            attention_state,
            attend,
            self._cells.weights(),
            False,
        )
        decode_state = self._with_state(decode_state, new, attention_state)
        if self.input_feeding:
            decode_state["attentional"] = output
        return output, weights, decode_state

    def _output_dim(self):
        return self.attentional_units

    def get_config(self):
        config = super().get_config()
        config.update({"input_feeding": self.input_feeding})
        return config
