"""The loop over time of a decoder's `call`: what it reads, and its padding rule.

A decoder's `call` checks its inputs and prepares a `SequenceInputs` once per
batch; its subclass then runs its step over time with `scan` (a compiled
`while` loop when traced, also under `jit_compile=True`). A padded target step
keeps what the loop carries (`keep_previous`) and gives zero per-step outputs
(`zero_padded`).
"""

import dataclasses

import keras
from keras import ops

from keras_attention.backend.loops import scan


@dataclasses.dataclass(frozen=True)
class SequenceInputs:
    """What a decoder's `call` prepares for its loop.

    Attributes:
        target_embeddings: (B, T, d_emb) in the compute dtype.
        memory: (B, T_enc, d_h) in the compute dtype, zero where masked, and
        processed_keys: the keys projected from it, both from
            `attention.prepare_memory(memory, memory_mask)`, once per batch.
        state: the initial recurrent state, a tuple of (B, size) tensors.
        attention_state: the attention's initial state (a dict, empty for
            a content-only layer).
        cell_weights: the built-in cell's weights (`CellRunner.weights`), else
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


def keep_previous(keep, new, previous):
    """`new` where `keep` (B, 1) is True, else `previous`, for every tensor of a structure.

    A padded target step leaves the recurrent state, the attention's state and
    the fed-back output as they were.
    """

    def where(n, p):
        rank = len(p.shape)
        k = keep if rank == 2 else ops.reshape(keep, (-1,) + (1,) * (rank - 1))
        return ops.where(k, n, p)

    return keras.tree.map_structure(where, new, previous)


def zero_padded(keep, x):
    """`x` (B, d) where `keep` (B, 1) is True, else zeros: a padded step's output."""
    return ops.where(keep, x, ops.zeros_like(x))


def scan_steps(step, prepared, init, cells, attention_in_loop):
    """`scan(step, carry, prepared.xs)`: `(last carry, stacked carries)`.

    The carry starts as `init` with the decoder state and, where the
    attention runs in the loop (`attention_in_loop`), its state and zero
    weights (B, T_enc). The dropout masks that `cells` (the `CellRunner`)
    drew for this loop are cleared after it.
    """
    init = {"state": prepared.state, **init}
    if attention_in_loop:
        memory_shape = ops.shape(prepared.memory)
        init["weights"] = ops.zeros(memory_shape[:2], dtype=cells.compute_dtype)
        init["attention"] = prepared.attention_state  # (B, ...) each; {} if none
    last, stacked = scan(step, init, prepared.xs)
    cells.reset_dropout_masks()
    return last, stacked
