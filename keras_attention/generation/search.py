"""Greedy and beam search over a single-step function, in `keras.ops`.

One implementation for every Keras backend and for export: a
`keras.ops.while_loop` over preallocated, fixed-size output buffers, written
one time step at a time through a `where` over the time axis. The loop uses no
`TensorArray` (on TensorFlow those lower to TensorList ops, which a TFLite
model can only run with the Flex delegate), so the TensorFlow graph of this
same code converts to builtin-only TFLite (`WHILE`, `TOPK_V2`, `GATHER`,
`SELECT_V2`, ...).

The step function is `step_fn(tokens, state) -> (logits, attention,
new_state)`: `tokens` int32 `(rows,)`, the previous output token; `state` a
nested structure of tensors with a leading row dimension; `logits` `(rows, V)`
unnormalized scores of the next token; `attention` `(rows, S)` the attention
weights of this step; `new_state` the structure, dtypes and shapes of
`state`. The log-softmax runs in float32 whatever the step's dtype.

Arguments of both searches:

- `step_fn`: the step function above.
- `initial_state`: the decoder state before the first step, a nested
  structure of tensors with a leading batch dimension.
- `start_tokens`: int32 `(batch,)`, the first input token of each sequence.
  Its length gives the (possibly dynamic) batch size.
- `end_token`: int, the END token id (Python int or scalar tensor).
- `max_length`: int, the most output tokens per sequence, END included
  (Python int or scalar tensor; a Python int on JAX).
- `source_length`: int, `S`, the length of the attention weights (Python
  int or scalar tensor, may be dynamic on TensorFlow).
- `source_mask`: optional bool `(batch, S)`, True on the real source
  positions. An entry without any (an empty source) is finished before the
  first step: its output is empty (length 0, log-prob 0).
- `row_max_length`: optional int32 `(batch,)`, each entry's own bound, at
  most `max_length` (the buffers' size): an entry stops after that many
  tokens, as it would alone with `max_length` equal to it (the generator's
  default bound, `search_defaults.default_max_length` of each source).

Both return a dict of float32 and int32 tensors for the best output of each
batch entry: `tokens` int32 `(batch, max_length)`, END included, then 0
(padding); `scores` `(batch,)`, its ranking score; `log_probs` `(batch,)`,
the sum of its tokens' log-probabilities up to and including END; `lengths`
int32 `(batch,)`, its number of tokens, END included (`max_length` when END
never came); `attention` `(batch, max_length, S)`, the attention weights of
each of its tokens, zeros after END. Each loop stops as soon as every
sequence (every hypothesis) has emitted END.

Beam layout: the batch is tiled batch-major, entry `b` occupying the rows
`b * K .. b * K + K - 1` of every `(B * K, ...)` tensor (B the batch size, K
the beam width). Every hypothesis carries its own token and attention history,
gathered by its parent's index at each step, so no backtracking
(`gather_tree`) is needed at the end.

The defaults (beam width, length and coverage penalty) are those of
`search_defaults`, like every entry point's.
"""

import numbers

import keras
from keras import ops

from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import COVERAGE_PENALTY
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import check_beam_width
from keras_attention.generation.search_defaults import check_max_length
from keras_attention.generation.search_defaults import check_penalty

# Floor under the coverage in the coverage penalty: a source position that
# no output token attended to would otherwise give log(0) = -inf.
COVERAGE_FLOOR = 1e-10

_NEG_INF = float("-inf")


def _checked_max_length(max_length):
    """`check_max_length`, without its None: a search needs a bound."""
    if max_length is None:
        raise ValueError(
            "Invalid value for argument `max_length`. Expected a positive integer "
            "or a scalar int32 tensor. Received: max_length=None"
        )
    return check_max_length(max_length)


def greedy_search(
    step_fn,
    initial_state,
    start_tokens,
    end_token,
    max_length,
    source_length,
    source_mask=None,
    row_max_length=None,
):
    """Decodes by taking the most probable token at every step.

    The arguments and the returned dict are those the module docstring
    describes; `step_fn` is called on `batch` rows, and `scores` equals
    `log_probs` (greedy decoding ranks nothing).
    """
    max_length = _checked_max_length(max_length)
    start_tokens = ops.cast(ops.convert_to_tensor(start_tokens), "int32")
    batch_size = ops.shape(start_tokens)[0]
    positions = ops.arange(max_length, dtype="int32")  # made once, outside the loop
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
        # top_k rather than argmax: Keras' TensorFlow argmax tests the sign
        # bit of zeros with a BitwiseAnd, which TFLite has no builtin for.
        # Both pick the lowest index among equal values.
        token_logp, next_tokens = ops.top_k(logp, k=1)  # (B, 1) each
        token_logp = ops.squeeze(token_logp, 1)  # (B,)
        next_tokens = ops.cast(ops.squeeze(next_tokens, 1), "int32")  # (B,)
        # A finished sequence only grows padding: token 0, log-prob 0 and
        # no attention.
        next_tokens = ops.where(finished, 0, next_tokens)
        token_logp = ops.where(finished, 0.0, token_logp)
        weights = ops.where(ops.expand_dims(finished, 1), 0.0, weights)
        log_probs = log_probs + token_logp
        lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        finished = ops.logical_or(finished, ops.equal(next_tokens, end_token))
        if row_max_length is not None:  # an entry's own bound ends it, as alone
            finished = ops.logical_or(finished, ops.greater_equal(step + 1, row_max_length))
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
    _, _, _, log_probs, lengths, _, out, attn = ops.while_loop(cond, body, loop_vars)
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
    beam_width=BEAM_WIDTH,
    length_penalty=LENGTH_PENALTY,
    coverage_penalty=COVERAGE_PENALTY,
    source_mask=None,
    row_max_length=None,
):
    """Decodes by keeping the `beam_width` best hypotheses at every step.

    Hypotheses are ranked by the GNMT score (Wu et al., 2016)

        s(Y, X) = log P(Y | X) / lp(Y) + cp(X; Y)
        lp(Y) = ((5 + |Y|) / 6) ** length_penalty
        cp(X; Y) = coverage_penalty * sum_i log(min(sum_j a_ij, 1.0))

    where `|Y|` counts the tokens with END, `a_ij` is the attention of
    output token `j` on source position `i`, and the sum over `i` skips the
    positions that `source_mask` masks. As in TensorFlow Addons, `cp` is
    added to finished hypotheses only: an unfinished hypothesis has not yet
    had the chance to cover the source. Here it counts from the candidate
    that emits END on, so that candidate is ranked by its final score. The
    coverage is floored at `COVERAGE_FLOOR` inside the log (`source_mask`,
    not a zero coverage, tells padding apart).

    A finished hypothesis stays finished: its only extension is padding
    (token 0) with log-probability 0, so its score no longer changes, and it
    keeps competing with the unfinished ones for a place in the beam. The
    loop stops when every hypothesis of every batch entry has finished (or
    at `max_length`).

    It stays one function of about 180 lines, most of them the loop's body:
    `ranking_score`, `cond` and `body` are closures over the constants of one
    search (the beam width, the penalties, the coverage mask, the entries'
    row offsets), which split-out functions would each have to take again.

    `step_fn`, `initial_state`, `start_tokens`, `end_token`, `max_length`,
    `source_length` and `source_mask` are the arguments the module docstring
    describes: `step_fn` is called on `batch * beam_width` rows; the search
    repeats each entry of `initial_state` `beam_width` times; `source_mask`
    gives the positions the coverage penalty counts.

    Args:
        beam_width: Python int, `K`, the number of hypotheses kept, at most
            `search_defaults.MAX_BEAM_WIDTH`. It shapes the graph (reshapes,
            top-k), so it cannot be a tensor.
        length_penalty: float, the GNMT `alpha`; 0 disables it.
        coverage_penalty: float, the GNMT `beta`; 0 disables it.

    Returns:
        The dict the module docstring describes, for the best hypothesis of
        each batch entry (`scores` its ranking score `s(Y, X)`), and two more
        entries:
        - `all_tokens`: int32 `(batch, beam_width, max_length)`, every
          hypothesis of the final beam, best first.
        - `all_scores`: float32 `(batch, beam_width)`, their scores, sorted
          in decreasing order.
    """
    # The same rules, and messages, as the generator's: a search a user calls
    # directly refuses what it cannot use (a negative or NaN penalty gives NaN
    # scores, an unbounded length an unbounded loop).
    beam_width = check_beam_width(beam_width)
    max_length = _checked_max_length(max_length)
    length_penalty = check_penalty("length_penalty", length_penalty)
    coverage_penalty = check_penalty("coverage_penalty", coverage_penalty)
    use_length_penalty = not _is_python_zero(length_penalty)
    use_coverage_penalty = not _is_python_zero(coverage_penalty)
    start_tokens = ops.cast(ops.convert_to_tensor(start_tokens), "int32")
    batch_size = ops.shape(start_tokens)[0]
    rows = batch_size * beam_width
    positions = ops.arange(max_length, dtype="int32")  # made once, outside the loop
    length_penalty = ops.cast(length_penalty, "float32")
    coverage_penalty = ops.cast(coverage_penalty, "float32")

    # Row r of the tiled batch copies entry r // K; a gather keeps the
    # trailing static shape, which a reshape of a tile would lose.
    tile_index = ops.arange(rows, dtype="int32") // beam_width  # (B*K,)
    initial_state = keras.tree.map_structure(lambda x: _gather_rows(x, tile_index), initial_state)
    if source_mask is None:
        coverage_mask = ops.ones((rows, source_length), dtype="bool")
        initially_finished = ops.zeros((rows,), dtype="bool")
    else:
        coverage_mask = _gather_rows(ops.cast(source_mask, "bool"), tile_index)
        initially_finished = ops.logical_not(ops.any(coverage_mask, axis=-1))
    if row_max_length is not None:
        row_max_length = _gather_rows(ops.cast(row_max_length, "int32"), tile_index)  # (B*K,)
    # Offset of each entry's first row, to turn an index into the entry's
    # K * V candidates into a row of the tiled batch.
    entry_offset = ops.arange(batch_size, dtype="int32")[:, None] * beam_width  # (B, 1)

    def ranking_score(log_probs, lengths, coverage, ends):
        """The GNMT score of candidates that share a parent row.

        `log_probs`: (B*K, V); `lengths`: (B*K,); `coverage`: (B*K, S);
        `ends`: (B*K, V) bool, the candidates that are finished.
        """
        score = log_probs
        if use_length_penalty:
            lp = ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, length_penalty)
            score = score / ops.expand_dims(lp, 1)
        if use_coverage_penalty:
            covered = ops.maximum(ops.minimum(coverage, 1.0), COVERAGE_FLOOR)
            cp = ops.sum(ops.where(coverage_mask, ops.log(covered), 0.0), axis=-1)  # (B*K,)
            score = score + ops.where(ends, coverage_penalty * ops.expand_dims(cp, 1), 0.0)
        return score

    def cond(step, tokens, state, log_probs, scores, finished, *_):
        # A row at -inf is an empty slot (fewer than K finite candidates):
        # it can never win, so it does not keep the loop alive.
        done = ops.logical_or(finished, ops.equal(log_probs, _NEG_INF))
        return ops.logical_and(ops.less(step, max_length), ops.logical_not(ops.all(done)))

    def body(step, tokens, state, log_probs, scores, finished, lengths, coverage, out, attn):
        logits, weights, new_state = step_fn(tokens, state)
        logp = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)  # (B*K, V)
        weights = ops.cast(weights, "float32")  # (B*K, S)
        vocab_size = ops.shape(logp)[1]
        vocab = ops.arange(vocab_size, dtype="int32")  # (V,)
        # A finished hypothesis can only be extended by padding (token 0)
        # with log-prob 0 and no attention.
        pad_only = ops.where(ops.equal(vocab, 0), 0.0, _NEG_INF)  # (V,)
        # expand_dims, not `x[:, None]`: TFLite makes the indexing a strided
        # slice that copies element by element at every step.
        finished_rows = ops.expand_dims(finished, 1)  # (B*K, 1)
        logp = ops.where(finished_rows, ops.expand_dims(pad_only, 0), logp)
        weights = ops.where(finished_rows, 0.0, weights)

        candidate_log_probs = ops.expand_dims(log_probs, 1) + logp  # (B*K, V)
        # The length and the coverage depend on the parent only.
        parent_lengths = lengths + ops.cast(ops.logical_not(finished), "int32")
        parent_coverage = coverage + weights  # (B*K, S)
        ends = ops.logical_or(finished_rows, ops.expand_dims(ops.equal(vocab, end_token), 0))
        candidate_scores = ranking_score(candidate_log_probs, parent_lengths, parent_coverage, ends)
        candidate_scores = ops.reshape(candidate_scores, (batch_size, beam_width * vocab_size))
        top_scores, top_index = ops.top_k(candidate_scores, k=beam_width)  # (B, K) best first
        top_index = ops.cast(top_index, "int32")
        parent = ops.reshape(top_index // vocab_size + entry_offset, (-1,))  # (B*K,)
        next_tokens = ops.reshape(top_index % vocab_size, (-1,))  # (B*K,)

        log_probs = _gather_rows(
            ops.reshape(candidate_log_probs, (-1,)), parent * vocab_size + next_tokens
        )
        # Padding, also where a finished row's -inf candidate filled a slot
        # (only possible when V < K).
        parent_finished = _gather_rows(finished, parent)
        next_tokens = ops.where(parent_finished, 0, next_tokens)
        finished = ops.logical_or(parent_finished, ops.equal(next_tokens, end_token))
        if row_max_length is not None:
            # An entry's own bound ends its hypotheses, as alone. (With a
            # coverage penalty, the later steps of the batch then add it to
            # them; alone, the loop would have stopped first.)
            finished = ops.logical_or(finished, ops.greater_equal(step + 1, row_max_length))
        lengths = _gather_rows(parent_lengths, parent)
        coverage = _gather_rows(parent_coverage, parent)
        out = _write_step(_gather_rows(out, parent), step, next_tokens, positions)
        weights = _gather_rows(weights, parent)
        attn = _write_step(_gather_rows(attn, parent), step, weights, positions)
        new_state = keras.tree.map_structure(lambda x: _gather_rows(x, parent), new_state)
        top_scores = ops.reshape(top_scores, (-1,))
        return (
            step + 1,
            next_tokens,
            new_state,
            log_probs,
            top_scores,
            finished,
            lengths,
            coverage,
            out,
            attn,
        )

    # Only beam 0 of each entry is alive at the start, so that the first
    # step expands a single hypothesis into K distinct ones.
    first_beam = ops.equal(ops.arange(rows, dtype="int32") % beam_width, 0)
    initial_log_probs = ops.where(first_beam, 0.0, _NEG_INF)  # (B*K,)
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
    best = entry_offset[:, 0]  # (B,) the first row of each entry is its best
    return {
        "tokens": all_tokens[:, 0],
        "scores": all_scores[:, 0],
        "log_probs": _gather_rows(log_probs, best),
        "lengths": _gather_rows(lengths, best),
        "attention": _gather_rows(attn, best),
        "all_tokens": all_tokens,
        "all_scores": all_scores,
    }


def _write_step(buffer, step, values, positions):
    """Writes `values` at time `step` of a `(rows, max_length, ...)` buffer.

    A `where` over a one-hot time mask instead of an indexed update, so the
    buffer keeps one fixed shape through the loop and the graph stays in
    TFLite builtin ops (EQUAL, SELECT_V2).

    Args:
        buffer: `(rows, max_length)` or `(rows, max_length, d)`.
        step: int32 scalar, the time index to write.
        values: `(rows,)` or `(rows, d)`, matching `buffer` without time.
        positions: int32 `(max_length,)`, `arange(max_length)`, made outside
            the loop: a `range` inside the body would have a shape computed
            at every step.

    Returns:
        The buffer with row `[:, step]` replaced by `values`.
    """
    at_step = ops.equal(positions, step)  # (L,)
    if len(buffer.shape) == 2:
        return ops.where(ops.expand_dims(at_step, 0), ops.expand_dims(values, 1), buffer)
    return ops.where(ops.expand_dims(at_step, (0, 2)), ops.expand_dims(values, 1), buffer)


def _gather_rows(x, index):
    """`x[index]` along the first axis (a GATHER in TFLite)."""
    return ops.take(x, index, axis=0)


def _is_python_zero(value):
    return isinstance(value, numbers.Number) and value == 0
