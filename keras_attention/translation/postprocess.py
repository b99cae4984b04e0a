"""Tokenizer output back to ordinary text: `postprocess`, the text users read.

`SubwordTokenizer.detokenize` (and the page's and the LiteRT app's
tokenizers) give punctuation-split text, `"un homme en t - shirt bleu ."`;
`postprocess` rejoins hyphens, decimals and elisions, lets sacremoses' Moses
detokenizer attach the rest of the punctuation and capitalizes:
`"Un homme en t-shirt bleu."`. The command line, the scores and the Python
LiteRT app (examples/tflite_translate.py) use it; web/src/postprocess.js is
the page's copy of the French rules, tested equal on the test sets
(tests/test_web_postprocess.py).

Standard library and sacremoses only, no TensorFlow or Keras: the LiteRT app
loads this file on its own.
"""

from __future__ import annotations

import functools
import re

_WORD_CHAR = r"[^\W_]"  # A letter or a digit.
# "base - ball" -> "base-ball": a hyphen between two word characters. In Multi30k
# the spaced dash " - " is rare (6 of 3,100 French hyphens in train).
_HYPHEN = re.compile(rf"(?<={_WORD_CHAR}) - (?={_WORD_CHAR})")
# "12 , 5" -> "12,5", "1 . 5" -> "1.5".
_DECIMAL = re.compile(r"(?<=\d) ([.,]) (?=\d)")
# French elision and compounds: "l ' homme", "aujourd ' hui".
_FR_APOSTROPHE = re.compile(rf"(?<={_WORD_CHAR}) (['’]) (?={_WORD_CHAR})")
# English clitics: "woman ' s", "don ' t", "they ' re". Other apostrophes
# ("dogs ' tails", quotes) are left to Moses' quote rules.
_EN_APOSTROPHE = re.compile(rf"(?<={_WORD_CHAR}) (['’]) (?=(?:s|t|re|ve|ll|d|m)\b)", re.IGNORECASE)


@functools.lru_cache(maxsize=8)
def _moses_detokenizer(lang: str):
    try:
        from sacremoses import MosesDetokenizer
    except ImportError as error:
        raise ImportError(
            "postprocess needs the `sacremoses` package. Install it with "
            "`pip install keras-seq2seq-attention[tensorflow]` (or `pip install sacremoses`)."
        ) from error
    return MosesDetokenizer(lang=lang)


def postprocess(text: str | bytes, lang: str, capitalize: bool = False) -> str:
    """Turns `detokenize` output back into ordinary text (for detokenized BLEU).

    Rejoins what the punctuation split separated: hyphenated words and decimal
    numbers, French elisions (`l ' homme` -> `l'homme`), English clitics
    (`woman ' s` -> `woman's`), then lets sacremoses' Moses detokenizer attach
    the remaining punctuation (`homme .` -> `homme.`, quotes, brackets; in
    French it keeps the space before `: ; ! ?`).

    Args:
        text: str, or UTF-8 bytes as they come out of a string tensor.
        lang: "en", "fr" or another Moses language code.
        capitalize: bool, upper-case the first letter (for a lowercasing
            tokenizer; Multi30k sentences start with a capital).

    Returns:
        str.

    Raises:
        ImportError: sacremoses is not installed (`tensorflow` extra).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    detokenizer = _moses_detokenizer(lang)
    text = " ".join(text.split())
    text = _HYPHEN.sub("-", text)
    text = _DECIMAL.sub(r"\1", text)
    if lang == "fr":
        text = _FR_APOSTROPHE.sub(r"\1", text)
    elif lang == "en":
        text = _EN_APOSTROPHE.sub(r"\1", text)
    text = detokenizer.detokenize(text.split(), unescape=False)
    if capitalize:
        for index, char in enumerate(text):
            if char.isalpha():
                text = text[:index] + char.upper() + text[index + 1 :]
                break
    return text
