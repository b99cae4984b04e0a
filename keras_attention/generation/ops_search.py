"""Greedy and beam search written with `keras.ops`, for every Keras backend.

The same algorithms, arguments and outputs as `greedy_search.greedy_search`
and `beam_search.beam_search` (read those docstrings for the contract): a
`keras.ops.while_loop` over fixed-size buffers, `keras.ops.top_k`,
`keras.ops.take_along_axis` and `keras.tree`. On TensorFlow the package uses
the `tf` versions, whose graphs are known to convert to builtin-only TFLite;
these run on JAX and PyTorch, and on TensorFlow in the tests that check both
give the same results.
"""

import keras
from keras import ops

from keras_attention.generation.beam_search import COVERAGE_FLOOR
from keras_attention.generation.beam_search import _check_beam_width
from keras_attention.generation.beam_search import _is_python_zero

_NEG_INF = float("-inf")


def _write_step(buffer, step, values, positions):
    """`buffer[:, step] = values` through a `where` over the time axis."""
    at_step = ops.equal(positions, step)  # (L,)
    if len(buffer.shape) == 2:
        return ops.where(at_step[None, :], values[:, None], buffer)
    return ops.where(at_step[None, :, None], values[:, None, :], buffer)


def _gather_rows(x, index):
    return ops.take(x, index, axis=0)


def greedy_search(
    step_fn,
    initial_state,
    start_tokens,
    end_token,
    max_length,
    source_length,
    source_mask=None,
):
    """`keras.ops` version of `keras_attention.generation.greedy_search`."""
    start_tokens = ops.cast(ops.convert_to_tensor(start_tokens), "int32")
    batch_size = ops.shape(start_tokens)[0]
    positions = ops.arange(max_length, dtype="int32")
    if source_mask is None:
        finished = ops.zeros((batch_size,), dtype="bool")
    else:
        finished = ops.logical_not(ops.any(ops.cast(source_mask, "bool"), axis=-1))

    def cond(step, tokens, state, log_probs, lengths, finished, out, attn):
        return ops.logical_and(ops.less(step, max_length), ops.logical_not(ops.all(finished)))

    def body(step, tokens, state, log_probs, lengths, finished, out, attn):
        logits, weights, new_state = step_fn(tokens, state)
        logp = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)  # (B, V)
        weights = ops.cast(weights, "float32")  # (B, S)
        next_tokens = ops.cast(ops.argmax(logp, axis=-1), "int32")  # (B,)
        token_logp = ops.take_along_axis(logp, next_tokens[:, None], axis=-1)[:, 0]
        # A finished sequence only grows padding: token 0, log-prob 0, no attention.
        next_tokens = ops.where(finished, 0, next_tokens)
        token_logp = ops.where(finished, 0.0, token_logp)
        weights = ops.where(finished[:, None], 0.0, weights)
        log_probs = log_probs + token_logp
        lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        finished = ops.logical_or(finished, ops.equal(next_tokens, end_token))
        out = _write_step(out, step, next_tokens, positions)
        attn = _write_step(attn, step, weights, positions)
        return step + 1, next_tokens, new_state, log_probs, lengths, finished, out, attn

    loop_vars = (
        ops.convert_to_tensor(0, dtype="int32"),
        start_tokens,
        initial_state,
        ops.zeros((batch_size,), dtype="float32"),
        ops.zeros((batch_size,), dtype="int32"),
        finished,
        ops.zeros((batch_size, max_length), dtype="int32"),
        ops.zeros((batch_size, max_length, source_length), dtype="float32"),
    )
    final = ops.while_loop(cond, body, loop_vars)
    _, _, _, log_probs, lengths, _, out, attn = final
    return {
        "tokens": out,
        "scores": log_probs,
        "log_probs": log_probs,
        "lengths": lengths,
        "attention": attn,
    }


def beam_search(
    step_fn,
    initial_state,
    start_tokens,
    end_token,
    max_length,
    source_length,
    beam_width=4,
    length_penalty=0.0,
    coverage_penalty=0.0,
    source_mask=None,
):
    """`keras.ops` version of `keras_attention.generation.beam_search`."""
    beam_width = _check_beam_width(beam_width)
    use_length_penalty = not _is_python_zero(length_penalty)
    use_coverage_penalty = not _is_python_zero(coverage_penalty)
    start_tokens = ops.cast(ops.convert_to_tensor(start_tokens), "int32")
    batch_size = ops.shape(start_tokens)[0]
    rows = batch_size * beam_width
    positions = ops.arange(max_length, dtype="int32")
    length_penalty = ops.cast(length_penalty, "float32")
    coverage_penalty = ops.cast(coverage_penalty, "float32")

    tile_index = ops.arange(rows, dtype="int32") // beam_width  # (B*K,)
    initial_state = keras.tree.map_structure(lambda x: _gather_rows(x, tile_index), initial_state)
    if source_mask is None:
        coverage_mask = ops.ones((rows, source_length), dtype="bool")
        initially_finished = ops.zeros((rows,), dtype="bool")
    else:
        coverage_mask = _gather_rows(ops.cast(source_mask, "bool"), tile_index)
        initially_finished = ops.logical_not(ops.any(coverage_mask, axis=-1))
    entry_offset = ops.arange(batch_size, dtype="int32")[:, None] * beam_width  # (B, 1)

    def ranking_score(log_probs, lengths, coverage, ends):
        score = log_probs
        if use_length_penalty:
            lp = ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, length_penalty)
            score = score / lp[:, None]
        if use_coverage_penalty:
            covered = ops.maximum(ops.minimum(coverage, 1.0), COVERAGE_FLOOR)
            cp = ops.sum(ops.where(coverage_mask, ops.log(covered), 0.0), axis=-1)
            score = score + ops.where(ends, coverage_penalty * cp[:, None], 0.0)
        return score

    def cond(step, tokens, state, log_probs, scores, finished, *_):
        done = ops.logical_or(finished, ops.equal(log_probs, _NEG_INF))
        return ops.logical_and(ops.less(step, max_length), ops.logical_not(ops.all(done)))

    def body(step, tokens, state, log_probs, scores, finished, lengths, coverage, out, attn):
        logits, weights, new_state = step_fn(tokens, state)
        logp = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)  # (B*K, V)
        weights = ops.cast(weights, "float32")
        vocab_size = ops.shape(logp)[1]
        vocab = ops.arange(vocab_size, dtype="int32")
        pad_only = ops.where(ops.equal(vocab, 0), 0.0, _NEG_INF)  # (V,)
        logp = ops.where(finished[:, None], pad_only[None, :], logp)
        weights = ops.where(finished[:, None], 0.0, weights)

        candidate_log_probs = log_probs[:, None] + logp  # (B*K, V)
        parent_lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        parent_coverage = coverage + weights
        ends = ops.logical_or(finished[:, None], ops.equal(vocab, end_token)[None, :])
        candidate_scores = ranking_score(candidate_log_probs, parent_lengths, parent_coverage, ends)
        candidate_scores = ops.reshape(candidate_scores, (batch_size, beam_width * vocab_size))
        top_scores, top_index = ops.top_k(candidate_scores, k=beam_width)  # (B, K)
        top_index = ops.cast(top_index, "int32")
        parent = ops.reshape(top_index // vocab_size + entry_offset, (-1,))
        next_tokens = ops.reshape(top_index % vocab_size, (-1,))

        log_probs = ops.take(
            ops.reshape(candidate_log_probs, (-1,)), parent * vocab_size + next_tokens
        )
        parent_finished = _gather_rows(finished, parent)
        next_tokens = ops.where(parent_finished, 0, next_tokens)
        finished = ops.logical_or(parent_finished, ops.equal(next_tokens, end_token))
        lengths = _gather_rows(parent_lengths, parent)
        coverage = _gather_rows(parent_coverage, parent)
        out = _write_step(_gather_rows(out, parent), step, next_tokens, positions)
        attn = _write_step(
            _gather_rows(attn, parent), step, _gather_rows(weights, parent), positions
        )
        new_state = keras.tree.map_structure(lambda x: _gather_rows(x, parent), new_state)
        return (
            step + 1,
            next_tokens,
            new_state,
            log_probs,
            ops.reshape(top_scores, (-1,)),
            finished,
            lengths,
            coverage,
            out,
            attn,
        )

    first_beam = ops.equal(ops.arange(rows, dtype="int32") % beam_width, 0)
    initial_log_probs = ops.where(first_beam, 0.0, _NEG_INF)
    loop_vars = (
        ops.convert_to_tensor(0, dtype="int32"),
        _gather_rows(start_tokens, tile_index),
        initial_state,
        initial_log_probs,
        initial_log_probs,
        initially_finished,
        ops.zeros((rows,), dtype="int32"),
        ops.zeros((rows, source_length), dtype="float32"),
        ops.zeros((rows, max_length), dtype="int32"),
        ops.zeros((rows, max_length, source_length), dtype="float32"),
    )
    final = ops.while_loop(cond, body, loop_vars)
    _, _, _, log_probs, scores, _, lengths, _, out, attn = final
    all_tokens = ops.reshape(out, (batch_size, beam_width, max_length))
    all_scores = ops.reshape(scores, (batch_size, beam_width))
    best = entry_offset[:, 0]
    return {
        "tokens": all_tokens[:, 0],
        "scores": all_scores[:, 0],
        "log_probs": ops.take(log_probs, best),
        "lengths": ops.take(lengths, best),
        "attention": ops.take(attn, best, axis=0),
        "all_tokens": all_tokens,
        "all_scores": all_scores,
    }
