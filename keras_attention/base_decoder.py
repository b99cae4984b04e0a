"""`BaseDecoder`: a recurrent decoder with an attention layer in its loop.

Keras 3's `RNN` cannot give a cell the encoder outputs (it has no `constants`),
so the decoders run their own loop over time with `keras.ops.scan`: a compiled
`while` loop when traced, also under `jit_compile=True`. The cell is a Keras
`GRUCell` or `LSTMCell` (its weights, its initializers, its serialization); its
update is written out here so that the projection of the target embeddings,
which do not depend on the recurrence, is computed once for all steps instead
of once per step.
"""

import keras
from keras import ops

from keras_attention.base_attention import BaseAttention
from keras_attention.masking import dims_compatible as _same
from keras_attention.masking import shape_error as _shape_error
from keras_attention.masking import shape_str
from keras_attention.masking import zero_masked

_CELL_TYPES = ("gru", "lstm")
_OVERRIDES = ("uniform", "permute")


@keras.saving.register_keras_serializable(package="keras_attention")
class BaseDecoder(keras.layers.Layer):
    """Shared machinery of `BahdanauDecoder` and `LuongDecoder`.

    Args:
        units: size of the recurrent state.
        attention: a `BahdanauAttention` or `LuongAttention` layer (or its
            serialized config).
        cell_type: "gru" or "lstm".
        seed: seed of the random permutation used by
            `attention_override="permute"`.
        **kwargs: base layer arguments.
    """

    def __init__(self, units, attention, cell_type="gru", seed=None, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units < 1:
            raise ValueError(
                "Invalid value for argument `units`. Expected a positive integer. "
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
                "Invalid value for argument `attention`. Expected a layer of "
                "keras_attention (BahdanauAttention or LuongAttention). "
                f"Received: attention={attention!r}"
            )
        self.units = units
        self.cell_type = cell_type
        self.seed = seed
        self.attention = attention
        self.cell = self._make_cell("cell")
        self.seed_generator = keras.random.SeedGenerator(seed)
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
        return 1 if self.cell_type == "gru" else 2

    def _cell_input_projection(self, inputs):
        """The part of the cell's input transform that depends on `inputs` only.

        inputs: (..., embedding_dim) → (..., gates·units), input bias included.
        """
        dtype = self.compute_dtype
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
        """
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

    # ---------------------------------------------------------- attention

    def _override_weights(self, weights, memory_mask, override, noise=None):
        """Replaces the attention weights (B, [T,] T_v) at decode time.

        "uniform": equal weight on every unmasked key. "permute": the weights
        the model computed, shuffled among the unmasked keys (in the order of
        `noise`, float32 of the shape of `weights`, drawn here when None). A
        tensor: fixed weights of the shape of `weights`.
        """
        if override is None:
            return weights
        dtype = weights.dtype
        if memory_mask is None:
            mask = ops.ones_like(weights, dtype="bool")
        else:
            mask = ops.cast(memory_mask, "bool")
            if len(weights.shape) == 3:
                mask = ops.broadcast_to(mask[:, None, :], ops.shape(weights))
        if isinstance(override, str):
            if override == "uniform":
                keep = ops.cast(mask, dtype)
                count = ops.maximum(ops.sum(keep, axis=-1, keepdims=True), 1.0)
                return keep / count
            # "permute": a random order of the unmasked keys. Masked keys sort
            # last, in their own order, so they map onto themselves.
            length = ops.shape(weights)[-1]
            positions = ops.cast(ops.arange(length), "float32")
            if noise is None:
                noise = self._permute_noise(ops.shape(weights))
            # Masked keys sort after every unmasked one, in their own order.
            big = ops.cast(length, "float32") + 2.0 + positions
            shuffled = ops.argsort(ops.where(mask, noise, big), axis=-1)
            ordered = ops.argsort(ops.where(mask, positions, big), axis=-1)
            gathered = ops.take_along_axis(weights, shuffled, axis=-1)
            inverse = ops.argsort(ordered, axis=-1)
            return ops.take_along_axis(gathered, inverse, axis=-1)
        override = ops.cast(override, dtype)
        if tuple(override.shape)[1:] != tuple(weights.shape)[1:]:
            raise _shape_error(
                "attention_override",
                f"{shape_str(weights.shape)} like the attention weights",
                override.shape,
            )
        return override

    def _permute_noise(self, shape):
        """The random keys that order `attention_override="permute"`."""
        return keras.random.uniform(shape, seed=self.seed_generator, dtype="float32")

    def _attend(
        self,
        query,
        memory,
        processed_keys,
        memory_mask,
        override,
        training,
        dropout_mask=None,
        noise=None,
    ):
        """The attention of one step (or of all steps at once).

        dropout_mask and noise: drawn before the loop (`_sequence_inputs`) for
        a step inside it; None draws them here.
        """
        # The memory was zeroed where masked (`_sequence_inputs`,
        # `get_decode_state`) and the keys projected from it: finite there.
        context, weights = self.attention.attend(
            query,
            memory,
            processed_keys,
            value_mask=memory_mask,
            training=training,
            dropout_mask=dropout_mask,
            _memory_zeroed=True,
        )
        # An attention layer with another policy (float32 inside a
        # mixed_float16 decoder) must not change the dtype of the loop carry.
        context = ops.cast(context, self.compute_dtype)
        weights = ops.cast(weights, self.compute_dtype)
        if len(weights.shape) > len(query.shape):
            # Several heads: report the head average, the alignment a plot shows.
            weights = ops.mean(weights, axis=1)
        if override is not None:
            if self.attention.num_heads != 1:
                raise ValueError(
                    "Invalid value for argument `attention_override`. Overriding "
                    "the weights needs a single-head attention layer. Received: "
                    f"num_heads={self.attention.num_heads}"
                )
            weights = self._override_weights(weights, memory_mask, override, noise)
            if len(weights.shape) == 2:
                context = ops.einsum("bv,bvd->bd", weights, memory)
            else:
                context = ops.einsum("bqv,bvd->bqd", weights, memory)
        return context, weights

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
            for state in states:
                shape = tuple(state.shape)
                if len(shape) != 2 or not _same(shape[0], target_shape[0]):
                    raise _shape_error(
                        "initial_state",
                        f"(batch, units)=({target_shape[0]}, {self.units})",
                        shape,
                    )
                if shape[1] != self.units:
                    raise _shape_error(
                        "initial_state",
                        f"(batch, units)=({target_shape[0]}, {self.units})",
                        shape,
                        f"The cell has units={self.units}.",
                    )
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

    def _decode_state_keys(self):
        """The keys of the dict that `get_decode_state` returns, sorted."""
        keys = ["h", "memory", "memory_mask", "processed_keys"]
        if self.cell_type == "lstm":
            keys.append("c")
        return sorted(keys)

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
        batch = tuple(decode_state["h"].shape)[0]
        if len(shape) != 2 or not _same(shape[0], batch) or not _same(shape[1], self.embedding_dim):
            raise _shape_error(
                "target_embedding",
                f"(batch, d_emb)=({batch}, {self.embedding_dim}): one embedding "
                "per sentence of the decode state, for one step",
                shape,
            )

    def _check_override(self, override, target_shape, memory_shape):
        """A fixed override has the shape of the weights: (batch, T_dec, T_enc)."""
        if override is None or isinstance(override, str):
            if isinstance(override, str) and override not in _OVERRIDES:
                raise ValueError(
                    "Invalid value for argument `attention_override`. Expected "
                    f"None, one of {_OVERRIDES} or fixed weights. Received: "
                    f"attention_override={override!r}"
                )
            return
        expected = (target_shape[0], target_shape[1], memory_shape[1])
        shape = tuple(override.shape)
        if len(shape) != 3 or not all(_same(a, b) for a, b in zip(shape, expected, strict=True)):
            raise _shape_error(
                "attention_override",
                f"(batch, T_dec, T_enc)={shape_str(expected)}, like the weights",
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
            zeros = ops.zeros((batch, self.units), dtype=dtype)
            return tuple(zeros for _ in range(self.state_size))
        return tuple(ops.cast(s, dtype) for s in self._as_state_tuple(initial_state))

    def _state_output(self, state):
        return state[0] if self.cell_type == "gru" else list(state)

    # ------------------------------------------------------ sequence call

    def _sequence_inputs(
        self,
        target_embeddings,
        memory,
        initial_state,
        target_embeddings_mask,
        memory_mask,
        attention_override,
        training=None,
        attend_in_loop=True,
    ):
        """Checks the inputs of `call` and prepares what the loop reads.

        Returns a dict: `target_embeddings` and `memory` in the compute dtype,
        `batch`, `t_enc`, `state` (a tuple), `processed_keys` (projected once
        per batch), `step_mask` (B, T) bool, `xs` (time-major: the cell's input
        projection "x" (T, B, G·u), "mask" (T, B), for fixed override
        weights "override" (T, B, T_enc), in training with attention dropout
        "dropout_mask" (T, B, [H,] T_enc), and for "permute" "noise"
        (T, B, T_enc); these two only with `attend_in_loop`), `fixed` (the
        fixed weights or None) and `mode` (the override's name or None).
        """
        self._check_inputs(
            target_embeddings.shape,
            memory.shape,
            initial_state,
            (target_embeddings_mask, memory_mask),
        )
        self._check_override(attention_override, target_embeddings.shape, memory.shape)
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
        fixed = None if isinstance(attention_override, str) else attention_override
        if fixed is not None:
            xs["override"] = ops.transpose(ops.cast(fixed, dtype), (1, 0, 2))
        # Every random draw of the steps happens here, before the loop, as
        # Keras' RNN layers draw their dropout masks: the same training on
        # every backend, and no draw inside a scan (on JAX it leaks a tracer).
        t_enc = ops.shape(memory)[1]
        if attend_in_loop:
            heads = (self.attention.num_heads,) if self.attention.num_heads > 1 else ()
            dropout_mask = self.attention.dropout_mask((steps, batch) + heads + (t_enc,), training)
            if dropout_mask is not None:
                xs["dropout_mask"] = dropout_mask  # (T, B, [H,] T_enc)
            if isinstance(attention_override, str) and attention_override == "permute":
                xs["noise"] = self._permute_noise((steps, batch, t_enc))  # (T, B, T_enc)
        return {
            "target_embeddings": target_embeddings,
            "memory": memory,
            "batch": batch,
            "t_enc": t_enc,
            "state": self._initial_state_tuple(initial_state, batch),
            "processed_keys": self.attention.precompute_keys(memory),  # once per batch
            "cell_weights": self._cell_weights(),  # once per batch, not per step
            "step_mask": step_mask,
            "xs": xs,
            "fixed": fixed,
            "mode": attention_override if isinstance(attention_override, str) else None,
        }

    def _output_dim(self):
        """The size of the per-step output of `call` and `step`."""
        raise NotImplementedError

    def compute_output_spec(
        self,
        target_embeddings,
        memory,
        initial_state=None,
        target_embeddings_mask=None,
        memory_mask=None,
        attention_override=None,
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
        state = [
            keras.KerasTensor((batch, self.units), dtype=dtype) for _ in range(self.state_size)
        ]
        return outputs, weights, state[0] if self.cell_type == "gru" else state

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
            initial_state: optional (batch, units) (GRU) or [h, c] (LSTM).
            memory_mask: optional bool (batch, T_enc).

        Returns:
            A dict of tensors, each with the batch as first axis, for `step`:
            "memory" (zero where `memory_mask` is False), "processed_keys",
            "memory_mask" (float), "h", for an LSTM "c", and for a
            `LuongDecoder` with input feeding "attentional" (h̃_0).

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
            "h": state[0],
        }
        if self.cell_type == "lstm":
            decode_state["c"] = state[1]
        return decode_state

    def _decode_state_tuple(self, decode_state):
        if self.cell_type == "gru":
            return (decode_state["h"],)
        return (decode_state["h"], decode_state["c"])

    def _with_state(self, decode_state, state):
        new = dict(decode_state)
        new["h"] = state[0]
        if self.cell_type == "lstm":
            new["c"] = state[1]
        return new

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "attention": keras.saving.serialize_keras_object(self.attention),
                "cell_type": self.cell_type,
                "seed": self.seed,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["attention"] = keras.saving.deserialize_keras_object(config["attention"])
        return cls(**config)
