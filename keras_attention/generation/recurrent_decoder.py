"""`RecurrentDecoder`: a Keras recurrent layer seen as a decoder without attention."""

import keras
from keras import ops

from keras_attention.arguments.validation import bound_arguments
from keras_attention.decoders.base_decoder import BaseDecoder


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

    def __call__(self, *args, **kwargs):
        """The recurrent layer over the target embeddings: `(outputs, None, None)`.

        The arguments are those of `BaseDecoder.call`; `memory` and
        `memory_mask` are not read, and `training` defaults to False.
        """
        arguments = bound_arguments(BaseDecoder.call, (self, *args), kwargs)
        training = arguments["training"]
        outputs = self.layer(
            arguments["target_embeddings"],
            initial_state=arguments["initial_state"],
            mask=arguments["target_embeddings_mask"],
            training=False if training is None else training,
        )
        return outputs, None, None
