"""`keras_attention.text.symbol_vocabulary.SymbolVocabulary`: symbols and ids,
specials first; encode names what it cannot encode, decode stops at END."""

import numpy as np
import pytest

from keras_attention.text.symbol_vocabulary import SymbolVocabulary

PHONES = ["<pad>", "<s>", "</s>", "AE", "K", "T"]


def test_from_sequences_sorts_the_symbols_after_the_specials():
    letters = SymbolVocabulary.from_sequences(["CAT", "TAB", "A'"])
    assert letters.symbols == ["<pad>", "'", "A", "B", "C", "T"]
    assert len(letters) == 6
    phones = SymbolVocabulary.from_sequences([("K", "AE", "T")], ["<pad>", "<s>", "</s>"])
    assert phones.symbols == PHONES


def test_encode_gives_each_symbols_index():
    letters = SymbolVocabulary(["<pad>", "A", "B", "T"])
    assert letters.encode("BAT") == [2, 1, 3]
    assert letters.encode("") == []


def test_specials_are_never_encoded():
    phones = SymbolVocabulary(PHONES, specials=3, end_id=2, kind="phone")
    assert phones.unknown(["<s>", "K", "X"]) == ["<s>", "X"]
    with pytest.raises(
        ValueError,
        match=r"^The pronunciation \['K', '</s>'\] has phones outside the vocabulary: "
        r"\['</s>'\] \(known: \['AE', 'K', 'T'\]\)$",
    ):
        phones.encode(["K", "</s>"], "pronunciation")


def test_an_unknown_character_is_named_with_the_word_and_the_known_ones():
    letters = SymbolVocabulary(["<pad>", "'", "A", "B"], kind="character")
    with pytest.raises(
        ValueError,
        match=r"^The word 'BAÉ-' has characters outside the vocabulary: '-É' "
        r"\(known: \"'AB\"\)$",
    ):
        letters.encode("BAÉ-", "word")


def test_a_large_vocabulary_does_not_list_its_symbols():
    words = SymbolVocabulary(["<pad>"] + [f"w{i}" for i in range(200)], kind="word")
    with pytest.raises(ValueError, match=r"outside the vocabulary: \['x'\]$"):
        words.encode(["w1", "x"], "sentence")


def test_decode_stops_at_end_and_drops_the_other_specials():
    phones = SymbolVocabulary(PHONES, specials=3, end_id=2)
    assert phones.decode([1, 4, 0, 3, 5, 2, 4]) == ["K", "AE", "T"]
    assert phones.decode(np.array([4, 3], "int32")) == ["K", "AE"]
    assert SymbolVocabulary(PHONES, specials=3).decode([4, 2, 3]) == ["K", "AE"]


def test_encode_then_decode_is_the_sequence():
    phones = SymbolVocabulary(PHONES, specials=3, end_id=2)
    sequence = ["T", "AE", "K", "K"]
    assert phones.decode(phones.encode(sequence) + [2]) == sequence


@pytest.mark.parametrize(
    "args, message",
    [
        ((["<pad>", "A", "A"],), r"Expected each symbol once\. Received: \['A'\] more than once"),
        ((["<pad>"], 2), r"Expected 0 to len\(symbols\)=1\. Received: specials=2"),
        ((PHONES, 3, 3), r"Expected a special id, 0 to 2\. Received: end_id=3"),
    ],
)
def test_bad_arguments_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        SymbolVocabulary(*args)


def test_a_sequence_longer_than_max_length_is_named_with_its_length():
    letters = SymbolVocabulary(["<pad>", "A", "B"], kind="character")
    assert letters.encode("AB" * 3, "word", max_length=6) == [1, 2] * 3
    with pytest.raises(
        ValueError, match=r"^The word 'ABABABA' has 7 characters, more than the 6 it may have$"
    ):
        letters.encode("ABABABA", "word", max_length=6)


def test_a_long_sequence_is_named_by_its_first_40_symbols():
    letters = SymbolVocabulary(["<pad>", "A", "B"], kind="character")
    long = "A" * 100_000 + "Z"
    with pytest.raises(ValueError) as error:
        letters.encode(long, "line")
    assert str(error.value).startswith(f"The line {'A' * 40!r}... has characters outside")
    assert len(str(error.value)) < 200  # not the whole line
