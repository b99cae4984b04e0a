"""Greedy decoding over a single-step function, inside the graph.

On TensorFlow the loop is a `tf.while_loop` over preallocated, fixed-size output buffers,
written one time step at a time through a `where` over the time axis. It
uses no `tf.TensorArray`: those lower to TensorList ops, which a TFLite
model can only run with the Flex delegate. On the other Keras backends the same
search runs as `keras.ops` code (`ops_search.py`).
"""

import keras


def greedy_search(
    step_fn,
    initial_state,
    start_tokens,
    end_token,
    max_length,
    source_length,
    source_mask=None,
):
    """Decodes by taking the most probable token at every step.

    Args:
        step_fn: callable `step_fn(tokens, state) -> (logits, attention,
            new_state)`. `tokens`: int32 `(batch,)`, the previous output
            token; `state`: a nested structure of tensors with a leading
            batch dimension; `logits`: `(batch, vocab)` unnormalized scores
            of the next token; `attention`: `(batch, T_src)` attention
            weights of this step. `new_state` must have the structure,
            dtypes and shapes of `state`.
        initial_state: the decoder state before the first step.
        start_tokens: int32 `(batch,)`, the first input token of each
            sequence. Its length gives the (possibly dynamic) batch size.
        end_token: int, the END token id (Python int or scalar tensor).
        max_length: int, the most output tokens per sequence, END included
            (Python int or scalar tensor).
        source_length: int, `T_src`, the length of the attention weights
            (Python int or scalar tensor, may be dynamic).
        source_mask: optional bool `(batch, T_src)`, True on real source
            positions. A row without any (an empty source) is finished before
            the first step: its output is empty (length 0, log-prob 0).

    Returns:
        A dict of tensors:
        - `tokens`: int32 `(batch, max_length)`, the output tokens, END
          included, then 0 (padding).
        - `scores`: float32 `(batch,)`, the same as `log_probs` (greedy
          decoding ranks nothing).
        - `log_probs`: float32 `(batch,)`, the sum of the tokens'
          log-probabilities up to and including END.
        - `lengths`: int32 `(batch,)`, the number of tokens, END included
          (`max_length` when END never came).
        - `attention`: float32 `(batch, max_length, T_src)`, the attention
          weights of each output token; zeros after END.

    The log-softmax runs in float32 whatever the step's dtype. The loop
    stops as soon as every sequence has emitted END.
    """
    if keras.backend.backend() != "tensorflow":
        from keras_attention.generation import ops_search

        return ops_search.greedy_search(
            step_fn, initial_state, start_tokens, end_token, max_length, source_length, source_mask
        )
    import tensorflow as tf

    start_tokens = tf.convert_to_tensor(start_tokens, dtype=tf.int32)
    end_token = tf.convert_to_tensor(end_token, dtype=tf.int32)
    max_length = tf.convert_to_tensor(max_length, dtype=tf.int32)
    source_length = tf.convert_to_tensor(source_length, dtype=tf.int32)
    batch_size = tf.shape(start_tokens)[0]
    positions = tf.range(max_length)  # made once, outside the loop

    def cond(step, tokens, state, log_probs, lengths, finished, out, attn):
        return tf.logical_and(step < max_length, tf.logical_not(tf.reduce_all(finished)))

    def body(step, tokens, state, log_probs, lengths, finished, out, attn):
        logits, weights, new_state = step_fn(tokens, state)
        logp = tf.nn.log_softmax(tf.cast(logits, tf.float32))  # (B, V)
        weights = tf.cast(weights, tf.float32)  # (B, T_src)

        next_tokens = tf.argmax(logp, axis=-1, output_type=tf.int32)  # (B,)
        token_logp = tf.gather(logp, next_tokens, batch_dims=1)  # (B,)
        # A finished sequence only grows padding: token 0, log-prob 0 and
        # no attention.
        next_tokens = tf.where(finished, 0, next_tokens)
        token_logp = tf.where(finished, 0.0, token_logp)
        weights = tf.where(finished[:, None], 0.0, weights)

        log_probs = log_probs + token_logp
        lengths = lengths + tf.cast(tf.logical_not(finished), tf.int32)
        finished = tf.logical_or(finished, tf.equal(next_tokens, end_token))
        out = _write_step(out, step, next_tokens, positions)
        attn = _write_step(attn, step, weights, positions)
        return (
            step + 1,
            next_tokens,
            new_state,
            log_probs,
            lengths,
            finished,
            out,
            attn,
        )

    if source_mask is None:
        finished = tf.zeros([batch_size], tf.bool)
    else:
        finished = tf.logical_not(tf.reduce_any(tf.cast(source_mask, tf.bool), axis=-1))
    loop_vars = (
        tf.constant(0, tf.int32),
        start_tokens,
        initial_state,
        tf.zeros([batch_size], tf.float32),
        tf.zeros([batch_size], tf.int32),
        finished,
        tf.zeros([batch_size, max_length], tf.int32),
        tf.zeros([batch_size, max_length, source_length], tf.float32),
    )
    _, _, _, log_probs, lengths, _, out, attn = tf.while_loop(cond, body, loop_vars)
    return {
        "tokens": out,
        "scores": log_probs,
        "log_probs": log_probs,
        "lengths": lengths,
        "attention": attn,
    }


def _write_step(buffer, step, values, positions):
    """Writes `values` at time `step` of a `(rows, max_length, ...)` buffer.

    A `where` over a one-hot time mask instead of a TensorArray write, so the
    buffer keeps one fixed shape through the loop and the graph stays in
    TFLite builtin ops (RANGE, EQUAL, SELECT_V2).

    Args:
        buffer: `(rows, max_length)` or `(rows, max_length, d)`.
        step: int32 scalar, the time index to write.
        values: `(rows,)` or `(rows, d)`, matching `buffer` without time.
        positions: int32 `(max_length,)`, `range(max_length)`, made outside
            the loop: a `range` inside the body would have a shape computed
            at every step.

    Returns:
        The buffer with row `[:, step]` replaced by `values`.
    """
    import tensorflow as tf

    at_step = tf.equal(positions, step)  # (L,)
    if buffer.shape.rank == 2:
        return tf.where(at_step[None, :], values[:, None], buffer)
    return tf.where(at_step[None, :, None], values[:, None, :], buffer)
