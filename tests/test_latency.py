"""AP, AL and DAL (`keras_attention.scoring.latency`) against worked examples
and an independent float64 NumPy reference."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from keras_attention.scoring.latency import Latency
from keras_attention.scoring.latency import corpus_latency
from keras_attention.scoring.latency import delays_of_trace


def wait_k_trace(k, source_length, target_length):
    """Reads k tokens, then alternates write and read; writes the rest at the end."""
    trace, read = [], 0
    for t in range(target_length):
        while read < min(k + t, source_length):
            trace.append("R")
            read += 1
        trace.append("W")
    return "".join(trace + ["R"] * (source_length - read))


def reference(delays, source_length, target_length):
    """The three measures in float64 NumPy, DAL in its closed form
    g'(t) = max_{s <= t} g(s) + (t - s) / gamma."""
    g = np.asarray(delays, dtype=np.float64)
    t = np.arange(len(g), dtype=np.float64)  # t - 1
    ratio = target_length / source_length
    ap = g.sum() / (source_length * len(g))
    full = np.flatnonzero(g == source_length)
    tau = full[0] + 1 if full.size else len(g)
    al = np.mean(g[:tau] - t[:tau] / ratio)
    lagged = np.max(
        np.tril(g[None, :] + (t[:, None] - t[None, :]) / ratio, 0)
        + np.triu(np.full((len(g), len(g)), -np.inf), 1),
        axis=1,
    )
    dal = np.mean(lagged - t / ratio)
    return ap, al, dal


@pytest.mark.parametrize("k", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("length", [8, 12])
def test_wait_k_on_equal_lengths_lags_by_k(k, length):
    # Ma et al. 2019: wait-k on a source and a target of the same length has AL = k;
    # DAL charges each write after the source is read 1 / gamma = 1 more, so also k.
    latency = Latency.of_trace(wait_k_trace(k, length, length))
    assert latency.delays == tuple(min(k + t, length) for t in range(length))
    assert latency.average_lagging == pytest.approx(k)
    assert latency.differentiable_average_lagging == pytest.approx(k)


def test_full_sentence_decoding_lags_by_the_source_length():
    latency = Latency.of_trace("R" * 6 + "W" * 9)
    assert latency.average_proportion == 1.0
    assert latency.average_lagging == 6.0  # tau = 1: only the first write counts
    assert latency.differentiable_average_lagging == pytest.approx(6.0)


def test_a_worked_example_of_unequal_lengths():
    # |x| = 4, |y| = 6, g = (2, 2, 3, 4, 4, 4), by hand:
    # AP = 19 / 24; r = 1.5, tau = 4, AL = (2 + 4/3 + 5/3 + 2) / 4 = 7 / 4;
    # g' = (2, 8/3, 10/3, 4, 14/3, 16/3), each minus (t - 1) / 1.5 is 2: DAL = 2.
    latency = Latency.of((2, 2, 3, 4, 4, 4), source_length=4)
    assert latency.average_proportion == pytest.approx(19 / 24)
    assert latency.average_lagging == pytest.approx(7 / 4)
    assert latency.differentiable_average_lagging == pytest.approx(2.0)
    assert latency.as_dict() == pytest.approx({"AP": 19 / 24, "AL": 1.75, "DAL": 2.0})


def test_dal_charges_writes_faster_than_the_ideal_and_the_tail():
    # Cherry and Foster's point: AL lets a decoder write faster than the ideal
    # (a term of 0 at t = 3 below) and stops at tau; DAL forbids the first and
    # charges the tail. |x| = 3, |y| = 6, gamma = 2, by hand:
    # AL = (1 + 0.5 + 0 + 1.5) / 4 = 0.75;
    # g' = (1, 1.5, 2, 3, 3.5, 4), minus (t - 1) / 2: (1, 1, 1, 1.5, 1.5, 1.5): DAL = 1.25.
    latency = Latency.of((1, 1, 1, 3, 3, 3), source_length=3)
    assert latency.average_lagging == pytest.approx(0.75)
    assert latency.differentiable_average_lagging == pytest.approx(1.25)


def test_a_reference_length_changes_the_ratio():
    hypothesis = Latency.of((2, 3, 4, 4), source_length=4)
    with_reference = Latency.of((2, 3, 4, 4), source_length=4, target_length=8)
    assert with_reference.target_length == 8
    assert with_reference.average_lagging == pytest.approx(
        np.mean([2 - 0 / 2, 3 - 1 / 2, 4 - 2 / 2])
    )
    assert hypothesis.average_lagging == pytest.approx(np.mean([2, 3 - 1, 4 - 2]))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.integers(0, n), min_size=1, max_size=20).map(sorted),
            st.one_of(st.none(), st.integers(1, 25)),
        )
    )
)
def test_measures_equal_the_float64_reference(case):
    source_length, delays, target_length = case
    latency = Latency.of(delays, source_length, target_length)
    expected = reference(delays, source_length, target_length or len(delays))
    got = (
        latency.average_proportion,
        latency.average_lagging,
        latency.differentiable_average_lagging,
    )
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_the_trace_gives_one_delay_per_write():
    assert delays_of_trace("RWRRWW") == (1, 3, 3)
    assert delays_of_trace(["W", "R", "W"]) == (0, 1)
    assert Latency.of_trace("RRWRW").source_length == 3


def test_corpus_latency_is_the_mean_over_sentences():
    a = Latency.of((1, 2), source_length=2)
    b = Latency.of((2, 2, 2), source_length=2)
    corpus = corpus_latency([a, b])
    for name in ("AP", "AL", "DAL"):
        assert corpus[name] == pytest.approx((a.as_dict()[name] + b.as_dict()[name]) / 2)
    assert all(math.isfinite(value) for value in corpus.values())


def test_numpy_integers_are_delays():
    assert Latency.of(np.array([1, 2, 2]), source_length=2).delays == (1, 2, 2)


@pytest.mark.parametrize(
    "delays, source_length, target_length, message",
    [
        ((), 3, None, "empty output"),
        ((2, 1), 3, None, "g(2)=1 after g(1)=2"),
        ((1, 4), 3, None, "g(2)=4"),
        ((-1,), 3, None, "g(1)=-1"),
        ((1.5,), 3, None, "g(1)=1.5"),
        ((True,), 3, None, "g(1)=True"),
        ((1,), 0, None, "source_length=0"),
        ((1,), 3, 0, "target_length=0"),
    ],
)
def test_bad_delays_are_refused_naming_the_entry(delays, source_length, target_length, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Latency.of(delays, source_length, target_length)


def test_a_bad_action_is_refused_with_its_position():
    with pytest.raises(ValueError, match=r"'X' at position 2"):
        delays_of_trace("RWX")


def test_corpus_latency_refuses_no_sentences():
    with pytest.raises(ValueError, match="at least one"):
        corpus_latency([])


def test_the_module_example_runs():
    import keras_attention.scoring.latency as module

    block = module.__doc__.split("```python\n")[1].split("```")[0]
    namespace = {}
    exec(compile(block, module.__file__, "exec"), namespace)
    # The example's wait-3 trace on 5 source tokens lags by 3 (Ma et al.).
    assert namespace["latency"].delays == (3, 4, 5, 5, 5)
    assert namespace["latency"].average_lagging == pytest.approx(3.0)
