"""WordPiece subword tokenizer that runs inside TensorFlow graphs.

The text path, all TensorFlow ops so that it runs in a `tf.function`, a SavedModel
and (with host-side normalization, see below) a TFLite model:

1. `normalize`: Unicode NFKC (`tensorflow_text.normalize_utf8`), then, only with
   `lower_case=True`, lowercasing (`tf.strings.lower` with UTF-8 semantics, so
   "É" becomes "é"). Accents are kept: French needs them. The default is cased
   (`lower_case=False`): on Multi30k a cased vocabulary is barely larger (3,125
   vs 2,881 French pieces) and sentences no longer (16.6 vs 16.7 pieces), while
   lowercased output caps detokenized, cased BLEU at about 98 even after
   re-capitalizing the first letter (proper nouns stay lowercase).
2. `tokenize`: `tensorflow_text.FastWordpieceTokenizer` in its end-to-end mode. It
   splits on whitespace and on every punctuation character (ASCII punctuation and
   Unicode category P*, the BERT definition: `l'homme` -> `l ' homme`,
   `base-ball` -> `base - ball`), then cuts each word into WordPiece subwords
   (`##` marks a piece that continues a word). A word with a character that the
   vocabulary lacks becomes one `[UNK]`.
3. `detokenize`: drops `[PAD]`, `[UNK]`, `[START]` and everything from the first
   `[END]` on, glues `##` pieces back onto their word and joins words with single
   spaces: `"l ' homme porte un t - shirt ."`.
4. `postprocess` (Python, sacremoses): turns that punctuation-split text back
   into ordinary text, `"l'homme porte un t-shirt."`, for detokenized BLEU.

`NormalizeUTF8` and `StringLower` are not TFLite builtins (they need the Flex
delegate); `FastWordpieceTokenizer` has a TFLite kernel. A TFLite export can
normalize on the host with `normalize_text` (same result on Multi30k) and use
`tokenize_normalized`, whose graph has no normalization op.

The vocabulary is learned with `tensorflow_text.tools.wordpiece_vocab
.bert_vocab_from_dataset` on normalized text, splitting words exactly as the
tokenizer does.
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Iterable
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attention.arguments.validation import check_positive_int
from keras_attention.files.atomic import write_text
from keras_attention.files.reading import read_text

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")
PAD_ID = 0
UNK_ID = 1
START_ID = 2
END_ID = 3

SUFFIX_INDICATOR = "##"
VOCAB_FILE = "vocab.txt"
CONFIG_FILE = "tokenizer.json"
_FORMAT_VERSION = 1


def normalize_text(text: str, lower_case: bool = False) -> str:
    """Python twin of `SubwordTokenizer.normalize` (NFKC, optional lowercase).

    Use it to normalize on the host when the graph cannot (TFLite without Flex).
    Python's and ICU's Unicode tables can differ on rare characters; on the
    Multi30k files both give the same text.
    """
    text = unicodedata.normalize("NFKC", text)
    return text.lower() if lower_case else text


def _normalize(strings: tf.Tensor, lower_case: bool) -> tf.Tensor:
    strings = tf_text.normalize_utf8(strings, "NFKC")
    if lower_case:
        strings = tf.strings.lower(strings, encoding="utf-8")
    return strings


class SubwordTokenizer(tf.Module):
    """WordPiece tokenizer with fixed reserved ids, usable inside graphs.

    Reserved tokens and ids: `[PAD]`=0, `[UNK]`=1, `[START]`=2, `[END]`=3; the
    vocabulary must start with them in this order. Build one with
    `SubwordTokenizer.build(sentences, vocab_size=8000)`, store it with `save` and
    restore it with `SubwordTokenizer.load`. The instance is a `tf.Module`: its
    `normalize`, `tokenize`, `detokenize` and `lookup` are `tf.function`s with
    input signatures and survive `tf.saved_model.save`, as does
    `tokenize_normalized`.

    Args:
        vocab: sequence of token strings, reserved tokens first. Continuation
            pieces start with `##`.
        lower_case: bool, lowercase text before tokenizing (default `False`:
            cased). Outputs are then lowercase; `postprocess(...,
            capitalize=True)` restores the sentence-initial capital.
        name: optional module name.

    Example:

    ```python
    tokenizer = SubwordTokenizer.build(train_fr, vocab_size=8000)
    ids = tokenizer.tokenize(["Un homme lit."], add_start_end=True)
    # <tf.RaggedTensor [[2, ..., 3]]>, int32
    text = tokenizer.detokenize(ids.to_tensor())  # [b"Un homme lit ."]
    postprocess(text[0], "fr")                    # "Un homme lit."
    ```
    """

    def __init__(self, vocab: Sequence[str], lower_case: bool = False, name=None):
        super().__init__(name=name)
        vocab = tuple(vocab)
        if vocab[: len(RESERVED_TOKENS)] != RESERVED_TOKENS:
            raise ValueError(
                "Invalid value for argument `vocab`. Expected it to start with "
                f"{RESERVED_TOKENS}. Received: vocab[:4]={vocab[:4]!r}"
            )
        if len(vocab) == len(RESERVED_TOKENS):
            raise ValueError(
                "Invalid value for argument `vocab`. Expected at least one token "
                f"besides {RESERVED_TOKENS}. Received: vocab={vocab!r}"
            )
        bad = [token for token in vocab if not token or token != "".join(token.split())]
        if bad:
            raise ValueError(
                "Invalid value for argument `vocab`. Expected non-empty tokens "
                f"without whitespace. Received: {bad[:5]!r}"
            )
        if len(set(vocab)) != len(vocab):
            seen = set()
            repeated = [t for t in vocab if t in seen or seen.add(t)]
            raise ValueError(
                "Invalid value for argument `vocab`. Expected distinct tokens. "
                f"Received repeated tokens: {repeated[:5]!r}"
            )
        if not isinstance(lower_case, bool):
            raise ValueError(
                "Invalid value for argument `lower_case`. Expected a bool. "
                f"Received: lower_case={lower_case!r}"
            )
        self._vocab = vocab
        self._lower_case = lower_case
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=list(vocab),
            suffix_indicator=SUFFIX_INDICATOR,
            token_out_type=tf.int32,
            unknown_token=RESERVED_TOKENS[UNK_ID],
            no_pretokenization=False,
            support_detokenization=True,
        )
        self._vocab_tensor = tf.constant(vocab, dtype=tf.string)

    @property
    def vocab(self) -> tuple[str, ...]:
        """The tokens, indexed by id."""
        return self._vocab

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def lower_case(self) -> bool:
        return self._lower_case

    # The reserved ids: the same in every vocabulary, read-only.
    pad_id = property(lambda self: PAD_ID)
    unk_id = property(lambda self: UNK_ID)
    start_id = property(lambda self: START_ID)
    end_id = property(lambda self: END_ID)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def normalize(self, strings):
        """NFKC and (if `lower_case`) lowercase. (batch,) string -> (batch,)."""
        return _normalize(strings, self._lower_case)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.bool)])
    def tokenize(self, strings, add_start_end=False):
        """Text to subword ids.

        Args:
            strings: (batch,) string tensor (or list of str), raw text.
            add_start_end: scalar bool, wrap each row in `[START]` ... `[END]`.

        Returns:
            int32 `tf.RaggedTensor` of shape (batch, None).
        """
        return self._ids(_normalize(strings, self._lower_case), add_start_end)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.bool)])
    def tokenize_normalized(self, strings, add_start_end=False):
        """`tokenize` for text already normalized (`normalize_text`, `normalize`).

        Its graph holds no normalization op, only the WordPiece op (which has a
        TFLite kernel) and ragged bookkeeping.
        """
        return self._ids(strings, add_start_end)

    def _ids(self, strings, add_start_end):
        ids = self._wordpiece.tokenize(strings)  # (B, None) ragged int32
        # A (B, 0) or (B, 1) block chosen by the flag: no ragged tf.cond needed.
        width = tf.cast(add_start_end, tf.int32)
        batch = tf.shape(strings)[0]
        starts = tf.RaggedTensor.from_tensor(tf.fill([batch, width], START_ID))
        ends = tf.RaggedTensor.from_tensor(tf.fill([batch, width], END_ID))
        return tf.concat([starts, ids, ends], axis=1)  # (B, None)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def detokenize(self, ids):
        """Subword ids to text with words separated by single spaces.

        Reads each row up to its first `[END]`, drops reserved ids (`[PAD]`,
        `[UNK]`, `[START]`) and ids outside the vocabulary, and joins `##`
        pieces onto the preceding piece. Punctuation stays split off by spaces;
        `postprocess` undoes that in Python.

        Args:
            ids: (batch, length) int32 tensor, e.g. padded decoder output. Cast
                int64 ids (from `argmax`) first; for a `tf.RaggedTensor` pass
                `ids.to_tensor()`.

        Returns:
            (batch,) string tensor.
        """
        is_end = tf.equal(ids, END_ID)
        before_end = tf.equal(tf.cumsum(tf.cast(is_end, tf.int32), axis=1), 0)
        keep = before_end & (ids >= len(RESERVED_TOKENS)) & (ids < len(self._vocab))
        kept = tf.ragged.boolean_mask(ids, keep)  # (B, None)
        return self._wordpiece.detokenize(kept)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)])
    def lookup(self, ids):
        """Ids to token strings, e.g. axis labels of an attention plot.

        (batch, length) int32 -> (batch, length) string. Ids must be in
        `[0, vocab_size)`.
        """
        return tf.gather(self._vocab_tensor, ids)

    @classmethod
    def build(
        cls,
        sentences: Iterable[str],
        vocab_size: int = 8000,
        lower_case: bool = False,
        learn_params: dict | None = None,
    ) -> SubwordTokenizer:
        """Learns a WordPiece vocabulary from `sentences`.

        Learn it from the training split only. Words are split exactly as
        `tokenize` splits them (whitespace, then punctuation), after the same
        normalization. Every character seen in `sentences` (up to 1,000 distinct)
        gets a token, so `[UNK]` only stands for unseen characters.

        Args:
            sentences: iterable of str (raw text).
            vocab_size: int, the vocabulary size aimed at, reserved tokens
                included. The learner's binary search over a count threshold
                stops between 95% and 100% of it, or where the threshold reaches
                `lower_thresh` (default: pieces seen 10 times). On the Multi30k
                training split the latter comes first for any larger
                `vocab_size`: about 2,900 tokens lowercased, 3,000 (English) to
                3,100 (French) cased. `learn_params={"lower_thresh": 5}` gives
                about 5,000 French tokens; with `lower_thresh` 2 the search ends
                above the target (11,517 tokens for `vocab_size=8000`).
            lower_case: bool, see the class.
            learn_params: optional dict passed to
                `tensorflow_text.tools.wordpiece_vocab.wordpiece_tokenizer_learner_lib.learn`
                (e.g. `lower_thresh`, the smallest count a piece needs).

        Returns:
            A `SubwordTokenizer`.
        """
        # Imported here: the learner pulls in modules that tokenizing never needs.
        from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

        check_positive_int("vocab_size", vocab_size)
        if vocab_size <= len(RESERVED_TOKENS):
            raise ValueError(
                "Invalid value for argument `vocab_size`. Expected an int larger "
                f"than {len(RESERVED_TOKENS)} (the reserved tokens). "
                f"Received: vocab_size={vocab_size}"
            )
        sentences = list(sentences)
        if not sentences:
            raise ValueError(
                "Invalid value for argument `sentences`. Expected at least one "
                "sentence. Received an empty iterable."
            )
        normalized = _normalize(tf.constant(sentences, dtype=tf.string), lower_case)
        dataset = tf.data.Dataset.from_tensor_slices(normalized).batch(1024)
        vocab = bert_vocab_from_dataset.bert_vocab_from_dataset(
            dataset,
            vocab_size=vocab_size,
            reserved_tokens=list(RESERVED_TOKENS),
            # lower_case=False: BERT's lowercasing also strips accents. The
            # text is already normalized; only the word split is wanted here.
            bert_tokenizer_params={"lower_case": False},
            learn_params=learn_params or {},
        )
        return cls(vocab, lower_case=lower_case)

    def save(self, path: str | os.PathLike) -> None:
        """Writes `vocab.txt` (one token per line) and `tokenizer.json`.

        `path` is a folder; it is created if needed.
        """
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        # Each file is written whole or not at all (see `atomic.atomic_path`).
        write_text(folder / VOCAB_FILE, "".join(token + "\n" for token in self._vocab))
        config = {
            "format_version": _FORMAT_VERSION,
            "lower_case": self._lower_case,
            "normalization": "NFKC",
            "reserved_tokens": list(RESERVED_TOKENS),
            "suffix_indicator": SUFFIX_INDICATOR,
            "vocab_size": self.vocab_size,
        }
        write_text(folder / CONFIG_FILE, json.dumps(config, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> SubwordTokenizer:
        """Restores a tokenizer written by `save`.

        A path that is not a regular file (a FIFO, a device) is refused
        before it is opened (`NotARegularFileError`, naming it).
        """
        folder = Path(path)
        # A FIFO or a device in place of a file is refused, not waited on.
        config = json.loads(read_text(folder / CONFIG_FILE, "tokenizer file"))
        if config.get("format_version") != _FORMAT_VERSION:
            raise ValueError(
                f"{folder / CONFIG_FILE}: unsupported format_version "
                f"{config.get('format_version')!r}; expected {_FORMAT_VERSION}."
            )
        vocab = read_text(folder / VOCAB_FILE, "vocabulary file").split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
        if len(vocab) != config["vocab_size"]:
            raise ValueError(
                f"{folder / VOCAB_FILE} has {len(vocab)} tokens; "
                f"{folder / CONFIG_FILE} says {config['vocab_size']}."
            )
        return cls(vocab, lower_case=config["lower_case"])
