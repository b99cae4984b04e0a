"""Greedy and beam search (`keras_attention.generation.search`) against
float64 numpy references, on every Keras backend.

Two kinds of hand-built step functions drive the searches:
- a Markov table: the next token's probabilities depend on the previous token
  only, so every hypothesis's score can be summed independently and small
  searches can be checked against an exhaustive enumeration;
- a tiny attentional RNN (tanh cell, dot-product attention over a "memory"
  carried in the state), so that the state must be tiled and reordered with
  its hypothesis; its numpy twin drives a reference beam search written
  hypothesis by hypothesis with Python lists.
"""

import itertools

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.generation.search import COVERAGE_FLOOR
from keras_attention.generation.search import beam_search
from keras_attention.generation.search import greedy_search
from keras_attention.generation.search_defaults import MAX_BEAM_WIDTH

PAD, START, END = 0, 1, 2


# ---------------------------------------------------------------------------
# Step functions and their numpy twins.


def _constant(x):
    return ops.convert_to_tensor(np.asarray(x, np.float32))


def _numpy(out):
    return {k: ops.convert_to_numpy(v) for k, v in out.items()}


def _log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _softmax(x):
    return np.exp(_log_softmax(x))


class MarkovStep:
    """Next-token probabilities `probs[prev]`; attention `attn[prev]`."""

    def __init__(self, probs, source_length=3, seed=0):
        probs = np.asarray(probs, np.float64)
        np.testing.assert_allclose(probs.sum(-1), 1.0)
        self.log_probs = np.log(probs)  # (V, V)
        rng = np.random.default_rng(seed)
        self.attention = _softmax(rng.normal(size=(len(probs), source_length)))
        self.source_length = source_length

    def step(self, tokens, state):
        logits = ops.take(_constant(self.log_probs), tokens, axis=0)
        weights = ops.take(_constant(self.attention), tokens, axis=0)
        return logits, weights, state

    def np_step(self, prev, state):
        return self.log_probs[prev], self.attention[prev], state

    def initial_state(self, batch_size):
        # The search must carry a state even when the step ignores it.
        return {"unused": ops.zeros((batch_size, 2))}

    def sequence_log_prob(self, tokens, start=START):
        """Sum of log-probs of `tokens` up to and including the first END."""
        total, prev = 0.0, start
        for token in tokens:
            total += self.log_probs[prev, token]
            if token == END:
                break
            prev = token
        return total


class RnnStep:
    """h' = tanh(h W + E[prev]); a = softmax(M h'); logits = [h', a M] W_o."""

    def __init__(self, vocab_size=7, hidden=6, seed=0):
        rng = np.random.default_rng(seed)
        as32 = lambda x: x.astype(np.float32).astype(np.float64)  # noqa: E731
        self.embedding = as32(rng.normal(size=(vocab_size, hidden)))
        self.kernel = as32(0.5 * rng.normal(size=(hidden, hidden)))
        self.output = as32(1.5 * rng.normal(size=(2 * hidden, vocab_size)))
        self.hidden = hidden

    def step(self, tokens, state):
        c = _constant
        memory = state["memory"]  # (B, T_src, H)
        h = ops.tanh(
            ops.matmul(state["h"], c(self.kernel)) + ops.take(c(self.embedding), tokens, axis=0)
        )
        weights = ops.softmax(ops.einsum("bsh,bh->bs", memory, h), axis=-1)  # (B, T_src)
        context = ops.einsum("bs,bsh->bh", weights, memory)  # (B, H)
        logits = ops.matmul(ops.concatenate([h, context], axis=-1), c(self.output))
        return logits, weights, {"h": h, "memory": memory}

    def np_step(self, prev, state):
        h0, memory = state
        h = np.tanh(h0 @ self.kernel + self.embedding[prev])
        weights = _softmax(memory @ h)  # (T_src,)
        logits = np.concatenate([h, weights @ memory]) @ self.output
        return logits, weights, (h, memory)

    def inputs(self, batch_size, source_length, seed=1):
        rng = np.random.default_rng(seed)
        h0 = rng.normal(size=(batch_size, self.hidden)).astype(np.float32)
        memory = rng.normal(size=(batch_size, source_length, self.hidden))
        return h0, memory.astype(np.float32)


# ---------------------------------------------------------------------------
# Float64 references.


def np_greedy(np_step, state, start, max_length, source_length):
    tokens = np.zeros(max_length, np.int64)
    attention = np.zeros((max_length, source_length))
    log_prob, prev, length = 0.0, start, 0
    for t in range(max_length):
        logits, weights, state = np_step(prev, state)
        logp = _log_softmax(np.asarray(logits, np.float64))
        prev = int(np.argmax(logp))
        tokens[t], attention[t] = prev, weights
        log_prob += logp[prev]
        length += 1
        if prev == END:
            break
    return dict(tokens=tokens, log_probs=log_prob, lengths=length, attention=attention)


def gnmt_score(log_prob, length, finished, coverage, alpha, beta, mask):
    score = log_prob / ((5.0 + length) / 6.0) ** alpha
    if finished and beta:
        covered = np.maximum(np.minimum(coverage, 1.0), COVERAGE_FLOOR)
        score += beta * np.log(covered)[mask].sum()
    return score


def np_beam(
    np_step,
    state,
    start,
    max_length,
    source_length,
    beam_width,
    alpha=0.0,
    beta=0.0,
    mask=None,
):
    """Beam search hypothesis by hypothesis; returns (beam best first, steps)."""
    mask = np.ones(source_length, bool) if mask is None else np.asarray(mask)

    def score(hyp):
        return gnmt_score(
            hyp["log_prob"], len(hyp["tokens"]), hyp["finished"], hyp["coverage"],
            alpha, beta, mask,
        )  # fmt: skip

    beam = [
        dict(tokens=[], attention=[], log_prob=0.0, finished=False,
             coverage=np.zeros(source_length), state=state, prev=start)
    ]  # fmt: skip
    steps = 0
    for _ in range(max_length):
        if all(hyp["finished"] for hyp in beam):
            break
        steps += 1
        candidates = []
        for hyp in beam:
            if hyp["finished"]:
                candidates.append(hyp)  # unchanged: padding costs nothing
                continue
            logits, weights, new_state = np_step(hyp["prev"], hyp["state"])
            logp = _log_softmax(np.asarray(logits, np.float64))
            for token in range(len(logp)):
                candidates.append(
                    dict(
                        tokens=hyp["tokens"] + [token],
                        attention=hyp["attention"] + [weights],
                        log_prob=hyp["log_prob"] + logp[token],
                        finished=token == END,
                        coverage=hyp["coverage"] + weights,
                        state=new_state,
                        prev=token,
                    )
                )
        candidates.sort(key=score, reverse=True)
        beam = candidates[:beam_width]
    for hyp in beam:
        hyp["score"] = score(hyp)
        hyp["padded"] = np.zeros(max_length, np.int64)
        hyp["padded"][: len(hyp["tokens"])] = hyp["tokens"]
        hyp["padded_attention"] = np.zeros((max_length, source_length))
        if hyp["attention"]:
            hyp["padded_attention"][: len(hyp["tokens"])] = hyp["attention"]
    return beam, steps


def enumerate_hypotheses(vocab_size, max_length):
    """Every output the search can produce: ended by END, or cut at max."""
    for n in range(1, max_length + 1):
        for seq in itertools.product(range(vocab_size), repeat=n):
            if END in seq[:-1]:
                continue
            if n < max_length and seq[-1] != END:
                continue
            yield list(seq)


def run_rnn(search, rnn, h0, memory, **kwargs):
    state = {"h": ops.convert_to_tensor(h0), "memory": ops.convert_to_tensor(memory)}
    start = ops.full((h0.shape[0],), START, dtype="int32")
    out = search(rnn.step, state, start, END, source_length=memory.shape[1], **kwargs)
    return _numpy(out)


def run_markov(search, markov, start_tokens, **kwargs):
    start = ops.convert_to_tensor(np.asarray(start_tokens, np.int32))
    out = search(
        markov.step,
        markov.initial_state(len(start_tokens)),
        start,
        END,
        source_length=markov.source_length,
        **kwargs,
    )
    return _numpy(out)


def assert_matches_reference_beam(out, refs):
    for b, (beam, _) in enumerate(refs):
        best = beam[0]
        np.testing.assert_array_equal(out["tokens"][b], best["padded"])
        np.testing.assert_allclose(out["scores"][b], best["score"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["log_probs"][b], best["log_prob"], rtol=1e-5, atol=1e-5)
        assert out["lengths"][b] == len(best["tokens"])
        np.testing.assert_allclose(
            out["attention"][b], best["padded_attention"], rtol=1e-5, atol=1e-6
        )
        np.testing.assert_array_equal(
            out["all_tokens"][b], np.stack([hyp["padded"] for hyp in beam])
        )
        np.testing.assert_allclose(
            out["all_scores"][b], [hyp["score"] for hyp in beam], rtol=1e-5, atol=1e-5
        )


# Greedy first picks A (0.5), after which END has only 0.36: A END = 0.18.
# B (0.4) then END (0.9) = 0.36 is the better sequence.
A, B = 3, 4
MISLEADING = [
    [0.20, 0.20, 0.20, 0.20, 0.20],  # after PAD (fed to finished rows)
    [0.01, 0.01, 0.08, 0.50, 0.40],  # after START
    [0.20, 0.20, 0.20, 0.20, 0.20],  # after END
    [0.02, 0.02, 0.36, 0.32, 0.28],  # after A
    [0.01, 0.01, 0.90, 0.04, 0.04],  # after B
]


# ---------------------------------------------------------------------------
# Tests.


def test_greedy_matches_numpy_reference():
    rnn = RnnStep(seed=5)
    h0, memory = rnn.inputs(batch_size=6, source_length=5)
    out = run_rnn(greedy_search, rnn, h0, memory, max_length=9)
    for b in range(6):
        ref = np_greedy(rnn.np_step, (h0[b], memory[b]), START, 9, 5)
        np.testing.assert_array_equal(out["tokens"][b], ref["tokens"])
        np.testing.assert_allclose(out["log_probs"][b], ref["log_probs"], rtol=1e-5)
        np.testing.assert_allclose(out["scores"][b], ref["log_probs"], rtol=1e-5)
        assert out["lengths"][b] == ref["lengths"]
        np.testing.assert_allclose(out["attention"][b], ref["attention"], atol=1e-6)
    # The seed gives both finished and cut-off sequences.
    assert 9 in out["lengths"] and min(out["lengths"]) < 9


def test_beam_width_one_equals_greedy():
    rnn = RnnStep(seed=4)
    h0, memory = rnn.inputs(batch_size=5, source_length=4)
    greedy = run_rnn(greedy_search, rnn, h0, memory, max_length=10)
    beam = run_rnn(beam_search, rnn, h0, memory, max_length=10, beam_width=1, length_penalty=0.0)
    np.testing.assert_array_equal(beam["tokens"], greedy["tokens"])
    np.testing.assert_allclose(beam["scores"], greedy["scores"], rtol=1e-6)
    np.testing.assert_allclose(beam["log_probs"], greedy["log_probs"], rtol=1e-6)
    np.testing.assert_array_equal(beam["lengths"], greedy["lengths"])
    np.testing.assert_allclose(beam["attention"], greedy["attention"], atol=1e-7)


@pytest.mark.parametrize(
    "alpha, beta, masked",
    [(0.0, 0.0, False), (0.6, 0.0, False), (0.0, 0.4, True), (1.0, 0.2, True)],
)
def test_beam_search_matches_numpy_reference(alpha, beta, masked):
    rnn = RnnStep(seed=5)
    batch_size, source_length, max_length = 3, 6, 8
    h0, memory = rnn.inputs(batch_size, source_length, seed=2)
    mask = np.ones((batch_size, source_length), bool)
    if masked:
        mask[0, 4:] = False
        mask[2, 1:] = False
    out = run_rnn(
        beam_search, rnn, h0, memory, max_length=max_length, beam_width=3,
        length_penalty=alpha, coverage_penalty=beta,
        source_mask=mask if masked else None,
    )  # fmt: skip
    refs = [
        np_beam(rnn.np_step, (h0[b], memory[b]), START, max_length, source_length,
                3, alpha, beta, mask[b])
        for b in range(batch_size)
    ]  # fmt: skip
    assert_matches_reference_beam(out, refs)


def test_beam_search_finds_sequence_that_greedy_misses():
    markov = MarkovStep(MISLEADING)
    greedy = run_markov(greedy_search, markov, [START], max_length=5)
    beam = run_markov(beam_search, markov, [START], max_length=5, beam_width=2, length_penalty=0.0)

    # The exhaustive best under the plain sum of log-probs, in float64.
    scored = [(markov.sequence_log_prob(seq), seq) for seq in enumerate_hypotheses(5, 3)]
    best_score, best_seq = max(scored)
    assert best_seq == [B, END]
    np.testing.assert_array_equal(beam["tokens"][0], [B, END, 0, 0, 0])
    np.testing.assert_allclose(beam["scores"][0], best_score, rtol=1e-6)
    np.testing.assert_allclose(beam["scores"][0], np.log(0.4) + np.log(0.9), rtol=1e-6)
    np.testing.assert_allclose(beam["log_probs"][0], best_score, rtol=1e-6)

    np.testing.assert_array_equal(greedy["tokens"][0], [A, END, 0, 0, 0])
    np.testing.assert_allclose(greedy["scores"][0], np.log(0.5 * 0.36), rtol=1e-6)
    assert greedy["scores"][0] < beam["scores"][0]


def test_finished_hypotheses_stay_finished():
    markov = MarkovStep(MISLEADING)
    long = run_markov(beam_search, markov, [START], max_length=6, beam_width=3, length_penalty=0.0)
    all_tokens, all_scores = long["all_tokens"][0], long["all_scores"][0]
    lengths = []
    for tokens, score in zip(all_tokens, all_scores, strict=True):
        ends = np.flatnonzero(tokens == END)
        assert len(ends) >= 1
        lengths.append(ends[0] + 1)
        assert np.all(tokens[ends[0] + 1 :] == 0), tokens  # only padding after END
        np.testing.assert_allclose(score, markov.sequence_log_prob(tokens), rtol=1e-6)
    # Some hypothesis had finished while another still grew, so finished ones
    # were carried through later steps.
    assert min(lengths) < max(lengths)

    # Cut the search right after the shortest hypothesis finished: the same
    # hypothesis, with the same score, is in the beam after more steps.
    short = run_markov(
        beam_search,
        markov,
        [START],
        max_length=min(lengths),
        beam_width=3,
        length_penalty=0.0,
    )
    first = short["all_tokens"][0, 0]
    row = [i for i, t in enumerate(all_tokens) if list(t[: len(first)]) == list(first)]
    assert len(row) == 1
    np.testing.assert_array_equal(all_tokens[row[0], len(first) :], 0)
    assert all_scores[row[0]] == short["all_scores"][0, 0]


def test_batch_entries_are_independent():
    rnn = RnnStep(seed=4)
    h0, memory = rnn.inputs(batch_size=4, source_length=5, seed=3)
    mask = np.ones((4, 5), bool)
    mask[1, 3:] = False
    mask[3, 2:] = False
    kwargs = dict(max_length=9, beam_width=3, length_penalty=0.7, coverage_penalty=0.3)
    batch = run_rnn(beam_search, rnn, h0, memory, source_mask=mask, **kwargs)
    batch_greedy = run_rnn(greedy_search, rnn, h0, memory, max_length=9)
    for b in range(4):
        alone = run_rnn(
            beam_search, rnn, h0[b : b + 1], memory[b : b + 1],
            source_mask=mask[b : b + 1], **kwargs,
        )  # fmt: skip
        alone_greedy = run_rnn(greedy_search, rnn, h0[b : b + 1], memory[b : b + 1], max_length=9)
        for key, value in alone.items():
            np.testing.assert_allclose(batch[key][b], value[0], rtol=1e-6, atol=1e-7)
        for key, value in alone_greedy.items():
            np.testing.assert_allclose(batch_greedy[key][b], value[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0])
def test_length_penalty_ranks_as_gnmt(alpha):
    # [END] has 0.4; [A, END] has 0.55 * 0.7 = 0.385: the plain sum prefers the
    # short one, a length penalty the long one.
    probs = [
        [0.25, 0.25, 0.25, 0.25],
        [0.025, 0.025, 0.40, 0.55],  # after START
        [0.25, 0.25, 0.25, 0.25],
        [0.025, 0.025, 0.70, 0.25],  # after A
    ]
    markov = MarkovStep(probs)
    max_length = 3
    # A beam of 24 holds every hypothesis until the last step (4 + 16 < 24),
    # so the search is exhaustive and must return the numpy ranking.
    out = run_markov(
        beam_search, markov, [START], max_length=max_length, beam_width=24,
        length_penalty=alpha,
    )  # fmt: skip

    def ranking(a):
        scored = []
        for seq in enumerate_hypotheses(4, max_length):
            score = markov.sequence_log_prob(seq) / ((5.0 + len(seq)) / 6.0) ** a
            scored.append((score, seq))
        return sorted(scored, reverse=True)

    expected = ranking(alpha)
    assert expected[0][0] > expected[1][0]  # a unique best
    best = expected[0][1]
    assert best == ([END] if alpha == 0.0 else [A, END])
    assert ranking(0.0)[0][1] != ranking(1.0)[0][1]
    np.testing.assert_array_equal(out["tokens"][0], best + [0] * (max_length - len(best)))
    np.testing.assert_allclose(out["all_scores"][0], [s for s, _ in expected[:24]], rtol=1e-5)
    np.testing.assert_allclose(out["scores"][0], expected[0][0], rtol=1e-6)
    np.testing.assert_allclose(out["log_probs"][0], markov.sequence_log_prob(best), rtol=1e-6)


@pytest.mark.tensorflow
def test_runs_in_tf_function_with_dynamic_batch_and_source():
    import tensorflow as tf

    rnn = RnnStep(seed=4)
    hidden = rnn.hidden
    signature = [
        tf.TensorSpec([None, hidden], tf.float32),
        tf.TensorSpec([None, None, hidden], tf.float32),
        tf.TensorSpec([None, None], tf.bool),
    ]

    @tf.function(input_signature=signature, jit_compile=False)
    def decode(h0, memory, mask):
        state = {"h": h0, "memory": memory}
        start = tf.fill(tf.shape(h0)[:1], START)
        source_length = tf.shape(memory)[1]
        greedy = greedy_search(rnn.step, state, start, END, 7, source_length)
        beam = beam_search(
            rnn.step, state, start, END, 7, source_length,
            beam_width=3, length_penalty=0.5, coverage_penalty=0.2, source_mask=mask,
        )  # fmt: skip
        return greedy, beam

    concrete = decode.get_concrete_function()
    greedy_spec, beam_spec = concrete.structured_outputs
    assert greedy_spec["tokens"].shape.as_list() == [None, 7]
    assert beam_spec["attention"].shape.as_list() == [None, 7, None]
    assert beam_spec["all_tokens"].shape.as_list() == [None, 3, 7]

    for batch_size, source_length in [(1, 4), (3, 6)]:
        h0, memory = rnn.inputs(batch_size, source_length, seed=batch_size)
        mask = np.ones((batch_size, source_length), bool)
        mask[-1, 2:] = False
        greedy, beam = decode(h0, memory, mask)
        greedy = {k: v.numpy() for k, v in greedy.items()}
        beam = {k: v.numpy() for k, v in beam.items()}
        assert beam["attention"].shape == (batch_size, 7, source_length)
        refs = []
        for b in range(batch_size):
            state = (h0[b], memory[b])
            ref = np_greedy(rnn.np_step, state, START, 7, source_length)
            np.testing.assert_array_equal(greedy["tokens"][b], ref["tokens"])
            np.testing.assert_allclose(greedy["log_probs"][b], ref["log_probs"], rtol=1e-5)
            refs.append(np_beam(rnn.np_step, state, START, 7, source_length, 3, 0.5, 0.2, mask[b]))
        assert_matches_reference_beam(beam, refs)


@pytest.mark.parametrize("search", ["greedy", "beam"])
@pytest.mark.tensorflow
def test_stops_early_when_all_sequences_finished(search):
    import tensorflow as tf

    markov = MarkovStep(MISLEADING)
    calls = tf.Variable(0)

    def counting_step(tokens, state):
        calls.assign_add(1)
        return markov.step(tokens, state)

    kwargs = dict(beam_width=3, length_penalty=0.0) if search == "beam" else {}
    fn = beam_search if search == "beam" else greedy_search

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def decode(start):
        state = markov.initial_state(tf.shape(start)[0])
        return fn(counting_step, state, start, END, 40, markov.source_length, **kwargs)

    starts = [START, A, START]
    out = {k: v.numpy() for k, v in decode(tf.constant(starts)).items()}
    if search == "beam":
        refs = [np_beam(markov.np_step, None, s, 40, 3, 3) for s in starts]
        expected_calls = max(steps for _, steps in refs)
        assert_matches_reference_beam(out, refs)
    else:
        refs = [np_greedy(markov.np_step, None, s, 40, 3) for s in starts]
        expected_calls = max(ref["lengths"] for ref in refs)
        np.testing.assert_array_equal(out["tokens"], [r["tokens"] for r in refs])
    assert expected_calls < 5
    assert int(calls.numpy()) == expected_calls


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_attention_rows_are_step_weights_then_zeros(search):
    markov = MarkovStep(MISLEADING, source_length=4)
    fn = beam_search if search == "beam" else greedy_search
    kwargs = dict(beam_width=2, length_penalty=0.0) if search == "beam" else {}
    out = run_markov(fn, markov, [START, B, A], max_length=6, **kwargs)
    assert out["attention"].shape == (3, 6, 4)
    assert out["attention"].dtype == np.float32
    for b, start in enumerate([START, B, A]):
        length = out["lengths"][b]
        tokens = out["tokens"][b]
        assert tokens[length - 1] == END
        previous = [start] + list(tokens[: length - 1])
        np.testing.assert_allclose(
            out["attention"][b, :length], markov.attention[previous], rtol=1e-6
        )
        np.testing.assert_array_equal(out["attention"][b, length:], 0.0)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_float16_step_gives_float32_outputs(search):
    markov = MarkovStep(MISLEADING)

    def half_step(tokens, state):
        logits, weights, state = markov.step(tokens, state)
        return ops.cast(logits, "float16"), ops.cast(weights, "float16"), state

    fn = beam_search if search == "beam" else greedy_search
    kwargs = dict(beam_width=2, length_penalty=0.0) if search == "beam" else {}
    start = ops.convert_to_tensor(np.array([START, A], np.int32))
    state = markov.initial_state(2)
    half = fn(half_step, state, start, END, 5, 3, **kwargs)
    full = fn(markov.step, state, start, END, 5, 3, **kwargs)
    for key in ("scores", "log_probs", "attention"):
        assert keras.backend.standardize_dtype(half[key].dtype) == "float32"
    half, full = _numpy(half), _numpy(full)
    for key in ("scores", "log_probs", "attention"):
        np.testing.assert_allclose(half[key], full[key], rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(half["tokens"], full["tokens"])


@pytest.mark.parametrize("beam_width", [0, -1, 2.0, True, MAX_BEAM_WIDTH + 1])
def test_invalid_beam_width_raises(beam_width):
    markov = MarkovStep(MISLEADING)
    with pytest.raises(ValueError, match="Invalid value for argument `beam_width`"):
        beam_search(
            markov.step, markov.initial_state(1), np.array([START], np.int32), END, 4, 3,
            beam_width=beam_width,
        )  # fmt: skip
