"""`ascii_upper`: one rule for the letters of a word (the G2P example's input)."""

import re
import unicodedata

import pytest

from keras_attention.text.ascii_spelling import ascii_upper


@pytest.mark.parametrize("word", ["keras", "O'Neil", "TensorFlow", "a", ""])
def test_an_ascii_word_is_upper_cased_as_str_upper(word):
    assert ascii_upper(word) == word.upper()


# Each of these upper-cases to ASCII with `str.upper` ("STRASSE", "FISH",
# "IT") except "café": the rule refuses all four.
@pytest.mark.parametrize(
    "word, character",
    [("straße", "ß"), ("\ufb01sh", "\ufb01"), ("\u0131t", "\u0131"), ("café", "é"), ("Zoë", "ë")],
)
def test_a_word_with_a_character_that_is_not_ascii_is_refused_naming_both(word, character):
    code = f"U+{ord(character):04X} {unicodedata.name(character)}"
    message = f"The word '{word}' has a character that is not ASCII: '{character}' ({code},"
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        ascii_upper(word)


def test_an_accent_typed_as_a_combining_mark_is_the_letter_it_makes():
    with pytest.raises(ValueError, match=r"'é' \(U\+00E9 LATIN SMALL LETTER E WITH ACUTE, char"):
        ascii_upper("cafe\u0301")
