"""`LuongDecoder`: attention after the recurrence, queried with s_t."""

import keras
from keras import ops

from keras_attention.base_decoder import BaseDecoder
from keras_attention.loops import scan


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

    Args:
        units: size of the recurrent state s.
        attention: the attention layer, e.g. `LuongAttention("general")`.
        cell_type: "gru" (default) or "lstm".
        input_feeding: feed h̃_{t-1} to the cell. Defaults to True.
        output_units: size of h̃; defaults to `units`.
        seed: seed of `attention_override="permute"`.
        **kwargs: base layer arguments.

    Call arguments:
        target_embeddings: (batch, T_dec, d_emb) decoder input embeddings.
        memory: (batch, T_enc, d_h) encoder outputs.
        initial_state: optional (batch, units), or [h_0, c_0] for LSTM.
        target_embeddings_mask: optional bool (batch, T_dec); filled in from
            `Embedding(mask_zero=True)` automatically.
        memory_mask: optional bool (batch, T_enc); filled in from the encoder
            automatically.
        attention_override: None, "uniform", "permute", or fixed weights
            (batch, T_dec, T_enc).
        training: whether dropout is active.

    Returns:
        `(outputs, weights, state)`: h̃ (batch, T_dec, output_units), weights
        (batch, T_dec, T_enc), the final state (batch, units) (a list [h, c]
        for LSTM).
    """

    def __init__(
        self,
        units,
        attention,
        cell_type="gru",
        input_feeding=True,
        output_units=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(units=units, attention=attention, cell_type=cell_type, seed=seed, **kwargs)
        self.input_feeding = bool(input_feeding)
        self.output_units = output_units
        self.attentional = keras.layers.Dense(
            output_units or units,
            activation="tanh",
            use_bias=False,
            name="combine",
            dtype=self.dtype_policy,
        )

    @property
    def attentional_units(self):
        return self.output_units or self.units

    def build_decoder(self, embedding_dim, memory_dim):
        # A deserialized attention layer arrives already built.
        if not self.attention.built:
            self.attention.build((None, self.units), (None, None, memory_dim))
        extra = self.attentional_units if self.input_feeding else 0
        self.cell.build((None, embedding_dim + extra))
        self.attentional.build((None, memory_dim + self.units))

    def _combine(self, context, state):
        return self.attentional(ops.concatenate([context, state], axis=-1))

    def call(
        self,
        target_embeddings,
        memory,
        initial_state=None,
        target_embeddings_mask=None,
        memory_mask=None,
        attention_override=None,
        training=None,
    ):
        prepared = self._sequence_inputs(
            target_embeddings,
            memory,
            initial_state,
            target_embeddings_mask,
            memory_mask,
            attention_override,
            training,
            # Without input feeding the attention runs once, after the loop.
            attend_in_loop=self.input_feeding,
        )
        memory = prepared["memory"]
        processed_keys = prepared["processed_keys"]
        step_mask = prepared["step_mask"]
        xs = prepared["xs"]
        fixed, mode = prepared["fixed"], prepared["mode"]
        cell_weights = prepared["cell_weights"]
        dtype = self.compute_dtype

        if not self.input_feeding:
            # The recurrence does not read the attention: run it alone, then
            # attend for all steps at once.
            def recur(carry, inputs):
                prev = carry["state"]
                new = self._cell_update(inputs["x"], prev, cell_weights)
                keep = inputs["mask"][:, None]
                new = tuple(ops.where(keep, n, p) for n, p in zip(new, prev, strict=True))
                carry = {"state": new}
                return carry, carry

            xs.pop("override", None)  # applied below, to all steps at once
            last, stacked = scan(recur, {"state": prepared["state"]}, xs)
            states = ops.transpose(stacked["state"][0], (1, 0, 2))  # (B, T, units)
            override = fixed if fixed is not None else mode
            contexts, weights = self._attend(
                states, memory, processed_keys, memory_mask, override, training
            )  # query = s_t for every t: (B, T, d_h), (B, T, T_enc)
            outputs = self._combine(contexts, states)
            keep = ops.cast(step_mask, dtype)[:, :, None]
            return outputs * keep, weights * keep, self._state_output(last["state"])

        def step(carry, inputs):
            prev = carry["state"]
            x = inputs["x"] + self._cell_extra_projection(carry["outputs"], cell_weights)
            new = self._cell_update(x, prev, cell_weights)
            override = inputs["override"] if fixed is not None else mode
            context, weights = self._attend(
                new[0],
                memory,
                processed_keys,
                memory_mask,
                override,
                training,
                inputs.get("dropout_mask"),  # drawn before the loop
                inputs.get("noise"),
            )  # query = s_t
            output = self._combine(context, new[0])  # h̃_t
            keep = inputs["mask"][:, None]
            new = tuple(ops.where(keep, n, p) for n, p in zip(new, prev, strict=True))
            # A padded step keeps h̃ for the next real step, like the state.
            carry = {
                "state": new,
                "outputs": ops.where(keep, output, carry["outputs"]),
                "weights": ops.where(keep, weights, ops.zeros_like(weights)),
            }
            return carry, carry

        batch = prepared["batch"]
        init = {
            "state": prepared["state"],
            "outputs": ops.zeros((batch, self.attentional_units), dtype=dtype),
            "weights": ops.zeros((batch, prepared["t_enc"]), dtype=dtype),
        }
        last, stacked = scan(step, init, xs)
        outputs = ops.transpose(stacked["outputs"], (1, 0, 2))  # (B, T, units)
        weights = ops.transpose(stacked["weights"], (1, 0, 2))  # (B, T, T_enc)
        outputs = outputs * ops.cast(step_mask, dtype)[:, :, None]
        return outputs, weights, self._state_output(last["state"])

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

    def step(self, target_embedding, decode_state, attention_override=None):
        """One decoder step, with the weights of `call`.

        Args:
            target_embedding: (batch, d_emb), the previous output's embedding.
            decode_state: from `get_decode_state` or the previous `step`.
            attention_override: None, "uniform", "permute" or fixed weights
                (batch, T_enc).

        Returns:
            `(output, weights, decode_state)`: h̃_t (batch, output_units),
            weights (batch, T_enc), the next state.
        """
        self._check_step_input(target_embedding, decode_state)
        prev = self._decode_state_tuple(decode_state)
        embedding = ops.cast(target_embedding, self.compute_dtype)
        x = self._cell_input_projection(embedding)
        cell_weights = self._cell_weights()
        if self.input_feeding:
            x = x + self._cell_extra_projection(decode_state["attentional"], cell_weights)
        new = self._cell_update(x, prev, cell_weights)
        mask = ops.cast(decode_state["memory_mask"], "bool")
        context, weights = self._attend(
            new[0],
            decode_state["memory"],
            decode_state["processed_keys"],
            mask,
            attention_override,
            False,
        )
        output = self._combine(context, new[0])
        decode_state = self._with_state(decode_state, new)
        if self.input_feeding:
            decode_state["attentional"] = output
        return output, weights, decode_state

    def _output_dim(self):
        return self.attentional_units

    def get_config(self):
        config = super().get_config()
        config.update({"input_feeding": self.input_feeding, "output_units": self.output_units})
        return config
