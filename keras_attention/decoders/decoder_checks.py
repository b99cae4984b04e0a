"""The shape and state checks of the decoders' inputs, as functions.

Every check names the tensor, the expected shape in the symbols of the docs
(batch, T_dec, T_enc, d_emb, d_h, units) and what arrived. `BaseDecoder` calls
them with its sizes (None before it is built) and its `CellRunner`.
"""

from keras_attention.attention.masking import dims_compatible as _same
from keras_attention.attention.masking import shape_error as _shape_error
from keras_attention.attention.masking import shape_str
from keras_attention.attention.masking import shapes_compatible


def check_inputs(target_shape, memory_shape, initial_state, masks, cells, sizes):
    """The checks of a decoder's `call`, `build` and `get_decode_state`.

    Args:
        target_shape: the shape of `target_embeddings`, (batch, T_dec, d_emb).
        memory_shape: the shape of `memory`, (batch, T_enc, d_h).
        initial_state: None, or the states the caller gives.
        masks: `(target_embeddings_mask, memory_mask)`, each None or a tensor.
        cells: the decoder's `CellRunner` (the state layout).
        sizes: `(d_emb, d_h)` the decoder was built with, `(None, None)` before.
    """
    embedding_dim, memory_dim = sizes
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
    if embedding_dim is not None:
        if not _same(target_shape[-1], embedding_dim):
            raise _shape_error(
                "target_embeddings",
                f"(batch, T_dec, d_emb={embedding_dim}), the size the decoder was built with",
                target_shape,
            )
        if not _same(memory_shape[-1], memory_dim):
            raise _shape_error(
                "memory",
                f"(batch, T_enc, d_h={memory_dim}), the size the decoder was built with",
                memory_shape,
            )
    if initial_state is not None:
        _check_initial_state(initial_state, target_shape[0], cells)
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


def _check_initial_state(initial_state, batch, cells):
    states = cells.as_state_tuple(initial_state)
    for index, (state, size) in enumerate(zip(states, cells.state_sizes, strict=True)):
        shape = tuple(state.shape)
        if cells.builtin:
            expected = f"(batch, units)=({batch}, {cells.units})"
            note = f"The cell has units={cells.units}."
        else:
            expected = f"(batch, {size})=({batch}, {size}) for state {index}"
            note = f"State {index} of the cell {cells.cell.name!r} has size {size}."
        if len(shape) != 2 or not _same(shape[0], batch):
            raise _shape_error("initial_state", expected, shape)
        if shape[1] != size:
            raise _shape_error("initial_state", expected, shape, note)


def check_built(decoder, method):
    """`get_decode_state` and `step` need the weights that `build` makes."""
    if not decoder.built:
        raise ValueError(
            f"`{type(decoder).__name__}.{method}()` was called, but the decoder "
            "is not built yet, and the memory alone cannot build it: it does "
            "not give the size of the target embeddings (d_emb). Call the "
            "decoder once on a batch, `decoder(target_embeddings, memory)`, "
            "or call `decoder.build(target_embeddings_shape, memory_shape)` "
            "first."
        )


def check_decode_state(decode_state, expected_keys, target_embedding, state_key, embedding_dim):
    """The checks of `step`: every key of the decode state, the embedding's shape.

    expected_keys: the sorted keys `get_decode_state` gives; state_key: the
    key of the first recurrent state (its first axis is the batch).
    """
    received = sorted(decode_state) if isinstance(decode_state, dict) else None
    missing = [key for key in expected_keys if received is None or key not in received]
    if missing:
        what = (
            f"decode_state with keys {received}"
            if received is not None
            else f"decode_state={type(decode_state).__name__}"
        )
        raise ValueError(
            f"Invalid value for argument `decode_state`. Expected a dict with "
            f"the keys {expected_keys}, as returned by get_decode_state() or the "
            f"previous step(). Missing: {missing}. Received: {what}"
        )
    shape = tuple(target_embedding.shape)
    batch = tuple(decode_state[state_key].shape)[0]
    if len(shape) != 2 or not _same(shape[0], batch) or not _same(shape[1], embedding_dim):
        raise _shape_error(
            "target_embedding",
            f"(batch, d_emb)=({batch}, {embedding_dim}): one embedding "
            "per sentence of the decode state, for one step",
            shape,
        )


def check_attention_size(attention, units):
    """An attention layer built elsewhere must take queries of size units."""
    query_dim = getattr(attention, "query_dim", None)
    if query_dim is not None and query_dim != units:
        raise ValueError(
            "Invalid value for argument `attention`. Its queries are the "
            f"decoder states, of size units={units}, but the layer was "
            f"built for d_q={query_dim}. Pass a new (unbuilt) attention layer."
        )
