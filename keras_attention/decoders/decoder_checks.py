"""`DecoderChecks`: the shape and state checks of the decoders' inputs.

Every check names the tensor, the expected shape in the symbols of the docs
(batch, T_dec, T_enc, d_emb, d_h, units) and what arrived. `BaseDecoder`
takes these methods from this class.
"""

from keras_attention.masking import dims_compatible as _same
from keras_attention.masking import shape_error as _shape_error
from keras_attention.masking import shape_str
from keras_attention.masking import shapes_compatible


class DecoderChecks:
    """The checks of `BaseDecoder`'s `call`, `build`, `get_decode_state` and `step`."""

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
            if not shapes_compatible(mask.shape, expected):
                symbols = "(batch, T_dec)" if name.startswith("target") else ("(batch, T_enc)")
                raise _shape_error(name, f"{symbols}={shape_str(expected)}", tuple(mask.shape))

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
