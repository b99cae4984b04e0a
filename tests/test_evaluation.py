"""`evaluation` helpers that need no trained model."""

import math

import numpy as np
import pytest

from keras_attention.translation import evaluation


def test_attention_statistics_of_one_hot_and_uniform_rows():
    one_hot = np.eye(4)[[0, 3, 3]]  # 3 steps over 4 source tokens; 2 on the last
    uniform = np.full((2, 5), 0.2)
    stats = evaluation.attention_statistics([one_hot, uniform])
    assert stats["steps"] == 5
    # Entropy / log(S): 0 for each one-hot step, 1 for each uniform one.
    assert stats["entropy"] == pytest.approx(2 / 5)
    assert stats["max_weight"] == pytest.approx((3 * 1.0 + 2 * 0.2) / 5)
    # A uniform row's argmax is its first token, not the last.
    assert stats["on_last_token"] == pytest.approx(2 / 5)


def test_attention_statistics_match_a_direct_computation():
    rng = np.random.default_rng(0)
    rows = [rng.dirichlet(np.ones(s), size=t) for t, s in ((3, 6), (5, 2), (1, 9))]
    stats = evaluation.attention_statistics(rows)
    entropies, maxima, last = [], [], []
    for weights in rows:
        for step in weights:
            entropies.append(-sum(w * math.log(w) for w in step if w > 0) / math.log(len(step)))
            maxima.append(max(step))
            last.append(int(np.argmax(step)) == len(step) - 1)
    assert stats["steps"] == 9
    assert stats["entropy"] == pytest.approx(np.mean(entropies), abs=1e-4)
    assert stats["max_weight"] == pytest.approx(np.mean(maxima), abs=1e-4)
    assert stats["on_last_token"] == pytest.approx(np.mean(last), abs=1e-4)


def test_attention_statistics_skip_sentences_without_a_scale():
    stats = evaluation.attention_statistics([np.ones((3, 1)), np.zeros((0, 4))])
    assert stats["steps"] == 0 and math.isnan(stats["entropy"])


def test_attention_statistics_name_a_wrong_shape():
    with pytest.raises(ValueError, match=r"\(target steps, source tokens\).*shape=\(2, 3, 4\)"):
        evaluation.attention_statistics([np.zeros((2, 3, 4))])


def test_total_variation_over_masked_rows():
    p = np.array([[0.5, 0.5], [1.0, 0.0], [0.2, 0.8]])
    q = np.array([[0.5, 0.5], [0.0, 1.0], [0.9, 0.1]])
    assert evaluation.total_variation(p, q) == pytest.approx((0.0 + 1.0 + 0.7) / 3)
    assert evaluation.total_variation(p, q, [True, True, False]) == pytest.approx(0.5)
