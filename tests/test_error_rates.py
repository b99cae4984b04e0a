"""`keras_attention.scoring.error_rates`: sequence and token error rates against
several references, overall and by length."""

import functools
import math

import numpy as np
import pytest

from keras_attention.scoring.error_rates import ErrorRates
from keras_attention.scoring.error_rates import error_rate_table
from keras_attention.scoring.error_rates import error_rates_by_length
from keras_attention.scoring.error_rates import plot_error_rates_by_length
from keras_attention.scoring.error_rates import score_decodings
from keras_attention.scoring.error_rates import sequence_errors

G2P = ("word", "phone", "wer", "per")


def brute_force_distance(a, b):
    """Levenshtein distance by its recursive definition (a, b tuples)."""

    @functools.cache
    def d(i, j):  # the distance between a[:i] and b[:j]
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return d(len(a), len(b))


def test_wer_and_per_use_the_closest_of_several_references():
    references = {
        "READ": [("R", "IY", "D"), ("R", "EH", "D")],
        "CAT": [("K", "AE", "T")],
        "EITHER": [("IY", "DH", "ER"), ("AY", "DH", "ER", "Z")],
        "A": [("AH",), ("EY",)],
    }
    predictions = {
        "READ": ["R", "EH", "D"],  # the second reference: correct, 0 errors of 3
        "CAT": ["K", "AH", "T", "S"],  # 1 substitution + 1 insertion: 2 of 3
        "EITHER": ["AY", "DH", "ER"],  # 1 from both; the first listed: 1 of 3
        "A": [],  # 1 deletion from either reference: 1 of 1
    }
    result = ErrorRates.of(predictions, references, G2P).as_dict()
    # By hand: 3 of 4 words wrong; (0 + 2 + 1 + 1) errors over (3 + 3 + 3 + 1).
    assert result == {
        "wer": 75.0,
        "per": 40.0,
        "words": 4,
        "wrong_words": 3,
        "phone_errors": 4,
        "reference_phones": 10,
    }


@pytest.mark.parametrize("seed", range(5))
def test_counts_equal_a_brute_force_reference(seed):
    rng = np.random.default_rng(seed)

    def sequence():
        return tuple(rng.integers(0, 3, rng.integers(0, 6)).tolist())

    references = {k: [sequence() for _ in range(rng.integers(1, 4))] for k in range(40)}
    predictions = {}
    for key, refs in references.items():  # about a third equal one of their references
        predictions[key] = refs[rng.integers(len(refs))] if rng.random() < 0.3 else sequence()
    wrong = errors = length = 0
    for key, refs in references.items():
        distances = [brute_force_distance(predictions[key], r) for r in refs]
        best = int(np.argmin(distances))  # the first of the closest
        wrong += predictions[key] not in refs
        errors += distances[best]
        length += len(refs[best])
    rates = ErrorRates.of(predictions, references)
    assert 0 < wrong < 40
    assert (rates.sequences, rates.wrong_sequences) == (40, wrong)
    assert (rates.token_errors, rates.reference_tokens) == (errors, length)
    assert rates.sequence_error_rate == pytest.approx(100 * wrong / 40)
    assert rates.token_error_rate == pytest.approx(100 * errors / length)


def test_sequence_errors_of_one_prediction():
    # Equally close to both: the first reference's length counts.
    assert sequence_errors("KAT", ["CAT", "KATS"]) == (0, 1, 3)
    assert sequence_errors("KATS", ["CAT", "KATS"]) == (1, 0, 4)


def test_scores_by_length_split_the_sequences_by_key_length():
    references = {"A": [("AH",)], "CAT": [("K", "AE", "T")], "ABANDON": [tuple("ABANDON")]}
    predictions = {"A": ["AH"], "CAT": ["K"], "ABANDON": list("ABANDON")}
    rows = error_rates_by_length(predictions, references, ((1, 2), (3, 5), (6, 9), (10, 12)), G2P)
    rows = dict(rows)
    assert rows[(1, 2)].sequence_error_rate == 0.0 and rows[(1, 2)].sequences == 1
    assert rows[(3, 5)].sequence_error_rate == 100.0
    assert rows[(3, 5)].token_error_rate == pytest.approx(200 / 3)
    assert rows[(6, 9)].sequence_error_rate == 0.0
    assert rows[(10, 12)] is None


def test_summary_names_both_rates_and_their_counts():
    rates = ErrorRates(12_000, 841, 1_432, 83_260, G2P)
    assert rates.summary("beam 4") == (
        "beam 4: WER 7.01 % (841 of 12,000 words), PER 1.72 % (1,432 of 83,260 phones)"
    )


def test_the_table_has_a_column_per_decoding_and_skips_empty_buckets():
    greedy = [
        ((1, 4), ErrorRates(10, 1, 2, 40, G2P)),
        ((5, 6), None),
        ((7, 8), ErrorRates(4, 2, 3, 30, G2P)),
    ]
    beam = [
        ((1, 4), ErrorRates(10, 0, 1, 40, G2P)),
        ((5, 6), None),
        ((7, 8), ErrorRates(4, 1, 3, 30, G2P)),
    ]
    assert error_rate_table({"greedy": greedy, "beam 2": beam}, "letters") == "\n".join(
        [
            "| letters | words | greedy WER / PER | beam 2 WER / PER |",
            "|---|---:|---:|---:|",
            "| 1-4 | 10 | 10.0 % / 5.0 % | 0.0 % / 2.5 % |",
            "| 7-8 | 4 | 50.0 % / 10.0 % | 25.0 % / 10.0 % |",
        ]
    )


def test_references_without_tokens_give_a_nan_token_rate():
    rates = ErrorRates.of({"a": []}, {"a": [()]})
    assert rates.sequence_error_rate == 0.0 and math.isnan(rates.token_error_rate)


def test_no_references_is_an_error():
    with pytest.raises(ValueError, match=r"^No references to score: `references` is empty\.$"):
        ErrorRates.of({}, {})


def test_a_key_without_a_prediction_is_named():
    with pytest.raises(
        ValueError, match=r"^2 of the 3 references have no prediction, first 'B'\.$"
    ):
        ErrorRates.of({"A": ["X"]}, {"A": [("X",)], "B": [("Y",)], "C": [("Z",)]})


def test_a_key_without_a_reference_is_named():
    with pytest.raises(ValueError, match=r"^'B' has no reference sequence\.$"):
        ErrorRates.of({"A": ["X"], "B": ["Y"]}, {"A": [("X",)], "B": []})
    with pytest.raises(ValueError, match=r"Expected at least one reference sequence\. "):
        sequence_errors(["X"], [])


def test_score_decodings_scores_each_decoding_overall_and_by_length():
    references = {"AB": [("a", "b")], "ABCDE": [("a", "b", "c", "d", "e")], "X": [("x",)]}
    outputs = {  # per beam width: greedy misses one phone of ABCDE, beam 2 none
        None: {"AB": ["a", "b"], "ABCDE": ["a", "b", "c", "d"], "X": ["x"]},
        2: {"AB": ["a", "b"], "ABCDE": ["a", "b", "c", "d", "e"], "X": ["y"]},
    }
    reported = []
    results, by_length = score_decodings(
        outputs.__getitem__,
        references,
        {"greedy": None, "beam 2": 2},
        ((1, 2), (3, 4), (5, 9)),
        G2P,
        unit="letters",
        report=reported.append,
    )
    assert list(results) == ["greedy", "beam 2"]
    for label, width in (("greedy", None), ("beam 2", 2)):
        expected = ErrorRates.of(outputs[width], references, G2P).as_dict()
        assert {k: results[label][k] for k in expected} == expected
        assert results[label]["seconds"] >= 0.0
    assert results["greedy"]["wer"] == pytest.approx(100 / 3)
    assert results["greedy"]["phone_errors"] == 1 and results["beam 2"]["phone_errors"] == 1
    # The bucket of 3-4 letters holds no word: in the rows as None, not in the results.
    assert [rates is None for _, rates in by_length["greedy"]] == [False, True, False]
    assert [row["letters"] for row in results["greedy"]["by_length"]] == [[1, 2], [5, 9]]
    assert [row["wer"] for row in results["beam 2"]["by_length"]] == [50.0, 0.0]
    assert [line.split(" in ")[0] for line in reported] == [
        ErrorRates.of(outputs[None], references, G2P).summary("greedy"),
        ErrorRates.of(outputs[2], references, G2P).summary("beam 2"),
    ]


def test_score_decodings_refuses_a_decoding_that_misses_a_sequence():
    with pytest.raises(ValueError, match=r"1 of the 2 references have no prediction, first 'B'"):
        score_decodings(lambda _: {"A": []}, {"A": [()], "B": [()]}, {"greedy": None}, ((1, 1),))


def test_the_error_rate_plot_draws_a_line_per_decoding(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from keras_attention.scoring import plots

    drawn = {}
    monkeypatch.setattr(plots, "plot_lines", lambda *a, **k: drawn.update(args=a))
    rows = [
        ((1, 4), ErrorRates(10, 1, 2, 40, G2P)),
        ((5, 6), None),
        ((7, 8), ErrorRates(4, 2, 3, 30, G2P)),
    ]
    plot_error_rates_by_length(tmp_path / "a.png", {"greedy": rows}, "letters", "a title")
    path, series, xlabel, ylabel, title = drawn["args"]
    assert series == {"greedy WER": (["1-4", "7-8"], [10.0, 50.0])}
    assert (xlabel, ylabel, title) == ("letters", "word error rate (%)", "a title")
    monkeypatch.undo()
    plot_error_rates_by_length(tmp_path / "b.png", {"greedy": rows}, "letters")
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
