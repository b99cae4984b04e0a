"""`ascii_upper`: a word spelt in ASCII, upper-cased, or one line naming the character that is not.

Python's `str.upper` folds some letters that are not ASCII into ASCII ones:
"straße" becomes "STRASSE", the ligature "ﬁsh" becomes "FISH", the dotless
"ıt" becomes "IT", while "café" stays "CAFÉ". A vocabulary of the letters A-Z
(the G2P example's) would then take the first three and refuse the fourth,
by an accident of Unicode's case tables. The rule here is one: after NFC (so
that an accent typed as a combining mark counts as the letter it makes), a
word with any character that is not ASCII is refused, naming the word and
the character; an ASCII word is upper-cased by ASCII's rules.

Standard library only.
"""

import unicodedata

__all__ = ["ascii_upper"]


def ascii_upper(word, name="word"):
    """`word` upper-cased, when it is spelt in ASCII.

    Args:
        word: a str.
        name: what the word is, for the message ("word").

    Returns:
        `word` in NFC with a-z upper-cased (`str.upper` of ASCII text).

    Raises:
        ValueError: a character of `word` (in NFC) is not ASCII; the message
            names the word, the character, its code point and its place.
            No character is folded into another ("café" is refused, not
            read as "CAFE"; "straße", "ﬁsh" and "ıt" are refused too).
    """
    text = unicodedata.normalize("NFC", word)
    for place, character in enumerate(text, 1):
        if not character.isascii():
            what = unicodedata.name(character, "unnamed")
            raise ValueError(
                f"The {name} {word!r} has a character that is not ASCII: {character!r} "
                f"(U+{ord(character):04X} {what}, character {place}); spell it in ASCII "
                "letters (no letter is folded into another)"
            )
    return text.upper()
