"""Beam-search decoding over a single-step function, inside the graph.

Every hypothesis carries its own token and attention history, gathered by
its parent's index at each step, so no backtracking (`gather_tree`) is
needed at the end. As in greedy search, the histories are preallocated,
fixed-size buffers written through a `where` over the time axis: no
`tf.TensorArray`, whose TensorList ops a TFLite model can only run with the
Flex delegate.

On the other Keras backends the same search runs as `keras.ops` code
(`ops_search.py`).

Layout: the batch is tiled batch-major, entry `b` occupying the rows
`b * beam_width .. b * beam_width + beam_width - 1` of every `(B * K, ...)`
tensor, where `B` is the batch size and `K` the beam width.
"""

import numbers

import keras

from keras_attention.generation.greedy_search import _write_step
from keras_attention.validation import check_positive_int

# Floor under the coverage in the coverage penalty: a source position that
# no output token attended to would otherwise give log(0) = -inf.
COVERAGE_FLOOR = 1e-10


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

    Args:
        step_fn: callable `step_fn(tokens, state) -> (logits, attention,
            new_state)`, as in `greedy_search`, called on `batch *
            beam_width` rows. `new_state` must have the structure, dtypes
            and shapes of `state`.
        initial_state: a nested structure of tensors with a leading batch
            dimension: the decoder state before the first step. The search
            repeats each entry `beam_width` times.
        start_tokens: int32 `(batch,)`, the first input token of each
            sequence. Its length gives the (possibly dynamic) batch size.
        end_token: int, the END token id (Python int or scalar tensor).
        max_length: int, the most output tokens per sequence, END included
            (Python int or scalar tensor).
        source_length: int, `T_src`, the length of the attention weights
            (Python int or scalar tensor, may be dynamic).
        beam_width: positive Python int, `K`, the number of hypotheses kept.
        length_penalty: float, the GNMT `alpha`; 0 disables it.
        coverage_penalty: float, the GNMT `beta`; 0 disables it.
        source_mask: optional bool `(batch, T_src)`, True on the real source
            positions, the ones the coverage penalty counts. An entry without
            any (an empty source) is finished before the first step: its
            output is empty (length 0, log-prob 0).

    Returns:
        A dict of tensors, the best hypothesis of each batch entry first:
        - `tokens`: int32 `(batch, max_length)`, the best hypothesis, END
          included, then 0 (padding).
        - `scores`: float32 `(batch,)`, its ranking score `s(Y, X)`.
        - `log_probs`: float32 `(batch,)`, its sum of log-probabilities.
        - `lengths`: int32 `(batch,)`, its number of tokens, END included.
        - `attention`: float32 `(batch, max_length, T_src)`, the attention
          weights of each of its tokens; zeros after END.
        - `all_tokens`: int32 `(batch, beam_width, max_length)`, every
          hypothesis of the final beam, best first.
        - `all_scores`: float32 `(batch, beam_width)`, their scores, sorted
          in decreasing order.
    """
    if keras.backend.backend() != "tensorflow":
        from keras_attention.generation import ops_search

        return ops_search.beam_search(
            step_fn,
            initial_state,
            start_tokens,
            end_token,
            max_length,
            source_length,
            beam_width=beam_width,
            length_penalty=length_penalty,
            coverage_penalty=coverage_penalty,
            source_mask=source_mask,
        )
    import tensorflow as tf

    beam_width = _check_beam_width(beam_width)
    use_length_penalty = not _is_python_zero(length_penalty)
    use_coverage_penalty = not _is_python_zero(coverage_penalty)

    start_tokens = tf.convert_to_tensor(start_tokens, dtype=tf.int32)
    end_token = tf.convert_to_tensor(end_token, dtype=tf.int32)
    max_length = tf.convert_to_tensor(max_length, dtype=tf.int32)
    positions = tf.range(max_length)  # made once, outside the loop
    source_length = tf.convert_to_tensor(source_length, dtype=tf.int32)
    length_penalty = tf.cast(length_penalty, tf.float32)
    coverage_penalty = tf.cast(coverage_penalty, tf.float32)
    batch_size = tf.shape(start_tokens)[0]
    rows = batch_size * beam_width

    # Row r of the tiled batch copies entry r // K; a gather keeps the
    # trailing static shape, which a reshape of a tile would lose.
    tile_index = tf.range(rows) // beam_width  # (B*K,)
    initial_state = tf.nest.map_structure(lambda x: tf.gather(x, tile_index), initial_state)
    if source_mask is None:
        coverage_mask = tf.ones([rows, source_length], tf.bool)
    else:
        coverage_mask = tf.gather(tf.cast(source_mask, tf.bool), tile_index)
    # Offset of each entry's first row, to turn an index into the entry's
    # K * V candidates into a row of the tiled batch.
    entry_offset = tf.range(batch_size)[:, None] * beam_width  # (B, 1)

    def ranking_score(log_probs, lengths, coverage, ends):
        """The GNMT score of candidates that share a parent row.

        `log_probs`: (B*K, V); `lengths`: (B*K,); `coverage`: (B*K, T_src);
        `ends`: (B*K, V) bool, the candidates that are finished.
        """
        score = log_probs
        if use_length_penalty:
            lp = tf.pow((5.0 + tf.cast(lengths, tf.float32)) / 6.0, length_penalty)
            score = score / lp[:, None]
        if use_coverage_penalty:
            covered = tf.maximum(tf.minimum(coverage, 1.0), COVERAGE_FLOOR)
            cp = tf.reduce_sum(
                tf.where(coverage_mask, tf.math.log(covered), 0.0), axis=-1
            )  # (B*K,)
            score = score + tf.where(ends, coverage_penalty * cp[:, None], 0.0)
        return score

    def cond(step, tokens, state, log_probs, scores, finished, *_):
        # A row at -inf is an empty slot (fewer than K finite candidates):
        # it can never win, so it does not keep the loop alive.
        done = tf.logical_or(finished, tf.equal(log_probs, -float("inf")))
        return tf.logical_and(step < max_length, tf.logical_not(tf.reduce_all(done)))

    def body(
        step,
        tokens,
        state,
        log_probs,
        scores,
        finished,
        lengths,
        coverage,
        out,
        attn,
    ):
        logits, weights, new_state = step_fn(tokens, state)
        logp = tf.nn.log_softmax(tf.cast(logits, tf.float32))  # (B*K, V)
        weights = tf.cast(weights, tf.float32)  # (B*K, T_src)
        vocab_size = tf.shape(logp)[1]
        vocab = tf.range(vocab_size)  # (V,)

        # A finished hypothesis can only be extended by padding (token 0)
        # with log-prob 0 and no attention.
        pad_only = tf.where(tf.equal(vocab, 0), 0.0, -float("inf"))  # (V,)
        logp = tf.where(finished[:, None], pad_only[None, :], logp)
        weights = tf.where(finished[:, None], 0.0, weights)

        candidate_log_probs = log_probs[:, None] + logp  # (B*K, V)
        # The length and the coverage depend on the parent only.
        parent_lengths = lengths + tf.cast(tf.logical_not(finished), tf.int32)
        parent_coverage = coverage + weights  # (B*K, T_src)
        ends = tf.logical_or(finished[:, None], tf.equal(vocab, end_token)[None, :])  # (B*K, V)
        candidate_scores = ranking_score(candidate_log_probs, parent_lengths, parent_coverage, ends)

        candidate_scores = tf.reshape(
            candidate_scores, [batch_size, beam_width * vocab_size]
        )  # (B, K*V)
        top_scores, top_index = tf.math.top_k(candidate_scores, k=beam_width)
        # (B, K) each, sorted best first.
        parent = tf.reshape(top_index // vocab_size + entry_offset, [-1])
        next_tokens = tf.reshape(top_index % vocab_size, [-1])  # (B*K,)

        log_probs = tf.gather(
            tf.reshape(candidate_log_probs, [-1]),
            parent * vocab_size + next_tokens,
        )
        # Padding, also where a finished row's -inf candidate filled a slot
        # (only possible when vocab < K).
        parent_finished = tf.gather(finished, parent)
        next_tokens = tf.where(parent_finished, 0, next_tokens)
        finished = tf.logical_or(parent_finished, tf.equal(next_tokens, end_token))
        lengths = tf.gather(parent_lengths, parent)
        coverage = tf.gather(parent_coverage, parent)
        out = _write_step(tf.gather(out, parent), step, next_tokens, positions)
        attn = _write_step(tf.gather(attn, parent), step, tf.gather(weights, parent), positions)
        new_state = tf.nest.map_structure(lambda x: tf.gather(x, parent), new_state)
        return (
            step + 1,
            next_tokens,
            new_state,
            log_probs,
            tf.reshape(top_scores, [-1]),
            finished,
            lengths,
            coverage,
            out,
            attn,
        )

    # Only beam 0 of each entry is alive at the start, so that the first
    # step expands a single hypothesis into K distinct ones.
    first_beam = tf.equal(tf.range(rows) % beam_width, 0)
    initial_log_probs = tf.where(first_beam, 0.0, -float("inf"))  # (B*K,)
    if source_mask is None:
        initially_finished = tf.zeros([rows], tf.bool)
    else:
        initially_finished = tf.logical_not(tf.reduce_any(coverage_mask, axis=-1))
    loop_vars = (
        tf.constant(0, tf.int32),
        tf.gather(start_tokens, tile_index),
        initial_state,
        initial_log_probs,
        initial_log_probs,
        initially_finished,
        tf.zeros([rows], tf.int32),
        tf.zeros([rows, source_length], tf.float32),
        tf.zeros([rows, max_length], tf.int32),
        tf.zeros([rows, max_length, source_length], tf.float32),
    )
    final = tf.while_loop(cond, body, loop_vars)
    _, _, _, log_probs, scores, _, lengths, _, out, attn = final

    all_tokens = tf.reshape(out, [batch_size, beam_width, max_length])
    all_scores = tf.reshape(scores, [batch_size, beam_width])
    best = entry_offset[:, 0]  # (B,) the first row of each entry is its best
    return {
        "tokens": all_tokens[:, 0],
        "scores": all_scores[:, 0],
        "log_probs": tf.gather(log_probs, best),
        "lengths": tf.gather(lengths, best),
        "attention": tf.gather(attn, best),
        "all_tokens": all_tokens,
        "all_scores": all_scores,
    }


def _check_beam_width(beam_width):
    # A Python int: the width shapes the graph (reshapes, top-k), so it cannot
    # be a tensor.
    check_positive_int("beam_width", beam_width)
    return int(beam_width)


def _is_python_zero(value):
    return isinstance(value, numbers.Number) and value == 0
