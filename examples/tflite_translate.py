"""English to French with the exported TFLite translator, as an app would run it.

What it shows: everything on the device side, with only the LiteRT interpreter
(`ai_edge_litert`), numpy and the standard library, no TensorFlow:

- WordPiece tokenization in plain Python from `source_vocab.txt` and
  `translator.json` (NFKC, lowercasing, whitespace and punctuation split,
  greedy longest-match-first), giving the same ids as the training tokenizer
  (tensorflow-text's `FastWordpieceTokenizer`);
- the `translate` signature (greedy search inside the model), or, with
  `--loop app`, the app's own greedy loop over `encode` and `decode_step`;
- detokenization from `target_vocab.txt`, then the command line's
  `postprocess` (Moses' French rules through sacremoses, a capital).

The output is the text the command line prints, `Un homme fait du vélo.`:
`postprocess` is read from the installed package's file
(keras_attention/translation/postprocess.py) without importing the package,
so neither Keras nor TensorFlow is loaded. `--raw` prints the tokenizer's text
instead (lowercased, punctuation split off: `un homme fait du vélo .`) and
needs neither the package nor sacremoses. `--attention` adds, for each output
piece, the source piece it attended to most.

First export a trained run (see docs/export.md):

    python -m keras_attention.translation.export runs/bahdanau exported
    python examples/tflite_translate.py exported/tflite "A man is riding a bike."
    echo "Two dogs play in the snow." | python examples/tflite_translate.py exported/tflite

Input: UTF-8 text; a line that is not UTF-8, or a sentence of more source
tokens than the model's `max_source_length` (512, in translator.json), stops
it with an error naming the line, before anything is translated. A blank line
gives an empty line.

Time on a 2-core CPU: about a second to start, then a few milliseconds per
sentence for the default model. Prints one translation per input line.
"""

import argparse
import importlib.util
import json
import sys
import unicodedata
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter

CONFIG_FILE = "translator.json"
# Exports that predate these fields in translator.json had the same bounds.
DEFAULT_MAX_SOURCE_LENGTH = 512
DEFAULT_MAX_OUTPUT_LENGTH = 1034

# Unicode's White_Space property: the characters FastWordpieceTokenizer splits
# words on (Python's str.isspace() differs: it includes U+001C..U+001F).
WHITE_SPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)
# CJK ideographs, which BERT-style tokenizers make words of their own.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_punctuation(char):
    """A character that becomes a word of its own: ASCII punctuation (so `$`, `+`,
    `^` too), Unicode category P*, or a CJK ideograph."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    if unicodedata.category(char).startswith("P"):
        return True
    return any(low <= cp <= high for low, high in CJK_RANGES)


class WordpieceTokenizer:
    """The training tokenizer's twin in pure Python: text → ids → text.

    Args:
        vocab: list of tokens, id = index (reserved tokens first).
        lower_case: bool, lowercase after NFKC.
        reserved_ids: the ids of `[PAD]`, `[UNK]`, `[START]`, `[END]`, in order.
        suffix_indicator: prefix of a piece that continues a word.
        max_bytes_per_word: a longer word (UTF-8) becomes one `[UNK]`.
    """

    def __init__(
        self,
        vocab,
        lower_case,
        reserved_ids=(0, 1, 2, 3),
        suffix_indicator="##",
        max_bytes_per_word=100,
    ):
        self.vocab = list(vocab)
        self.ids = {token: i for i, token in enumerate(self.vocab)}
        self.lower_case = lower_case
        self.pad_id, self.unk_id, self.start_id, self.end_id = reserved_ids
        self.suffix_indicator = suffix_indicator
        self.max_bytes_per_word = max_bytes_per_word
        self.reserved = len(reserved_ids)

    @classmethod
    def from_export(cls, folder, side):
        """The tokenizer of `side` ("source" or "target") of an exported folder."""
        folder = Path(folder)
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        entry = config[side]
        vocab = (folder / entry["vocab_file"]).read_text(encoding="utf-8").split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
        return cls(
            vocab,
            lower_case=entry["lower_case"],
            reserved_ids=(
                config["pad_id"],
                config["unk_id"],
                config["start_id"],
                config["end_id"],
            ),
            suffix_indicator=config["suffix_indicator"],
            max_bytes_per_word=config["max_bytes_per_word"],
        )

    def normalize(self, text):
        """NFKC, then lowercasing (full Unicode case mapping, as ICU's)."""
        text = unicodedata.normalize("NFKC", text)
        return text.lower() if self.lower_case else text

    def words(self, text):
        """Splits normalized text on white space and around punctuation."""
        words, current = [], []
        for char in text:
            if char in WHITE_SPACE or is_punctuation(char):
                if current:
                    words.append("".join(current))
                    current = []
                if char not in WHITE_SPACE:
                    words.append(char)
            else:
                current.append(char)
        if current:
            words.append("".join(current))
        return words

    def word_ids(self, word):
        """Greedy longest-match-first pieces of one word; one `[UNK]` if it fails."""
        if len(word.encode("utf-8")) > self.max_bytes_per_word:
            return [self.unk_id]
        ids, start = [], 0
        while start < len(word):
            prefix = self.suffix_indicator if start else ""
            for end in range(len(word), start, -1):
                piece = self.ids.get(prefix + word[start:end])
                if piece is not None:
                    ids.append(piece)
                    start = end
                    break
            else:
                return [self.unk_id]
        return ids

    def tokenize(self, text):
        """Raw text → list of ids (no `[START]` / `[END]`)."""
        return [i for word in self.words(self.normalize(text)) for i in self.word_ids(word)]

    def detokenize(self, ids):
        """Ids → text: stops at `[END]`, drops reserved ids, glues `##` pieces."""
        words = []
        for i in ids:
            i = int(i)
            if i == self.end_id:
                break
            if i < self.reserved or i >= len(self.vocab):
                continue
            token = self.vocab[i]
            if token.startswith(self.suffix_indicator) and words:
                words[-1] += token[len(self.suffix_indicator) :]
            else:
                words.append(token)
        return " ".join(words)

    def pieces(self, ids):
        return [self.vocab[int(i)] for i in ids]


class LiteTranslator:
    """Runs an exported `.tflite` translator.

    Args:
        folder: the export's `tflite/` folder.
        variant: "float32", "float16" or "int8".
        num_threads: interpreter threads.

    The model truncates a source longer than `max_source_length` and does
    not check its ids; `check_ids` does both, before any signature runs.
    """

    def __init__(self, folder, variant="float32", num_threads=1):
        folder = Path(folder)
        self.config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        model = folder / self.config["models"][variant]
        self.interpreter = Interpreter(model_path=str(model), num_threads=num_threads)
        self.source = WordpieceTokenizer.from_export(folder, "source")
        self.target = WordpieceTokenizer.from_export(folder, "target")
        self._translate = self.interpreter.get_signature_runner("translate")
        self._encode = self.interpreter.get_signature_runner("encode")
        self._decode_step = self.interpreter.get_signature_runner("decode_step")
        self.max_source_length = self.config.get("max_source_length", DEFAULT_MAX_SOURCE_LENGTH)
        self.max_output_length = self.config.get("max_output_length", DEFAULT_MAX_OUTPUT_LENGTH)

    def warm_up(self, source_length):
        """Runs every signature once at `source_length` tokens (the most the
        app will send; the static length of a static export), so no later
        call is the interpreter's first at a new largest length, where
        LiteRT can go wrong (`keras_attention.runtime.litert`)."""
        (detail,) = self._translate.get_input_details().values()
        static = detail["shape_signature"][1] > 0  # exported with a source_length
        length = None if static else min(source_length, self.max_source_length)
        litert = _package_module("runtime/litert.py", "warming the interpreter up")
        litert.warm_up(self.interpreter, length)

    def check_ids(self, source_ids):
        """Raises ValueError unless the ids fit the model: at most
        `max_source_length` of them, each in [0, source vocabulary)."""
        if len(source_ids) > self.max_source_length:
            raise ValueError(
                f"The source has {len(source_ids)} tokens, more than "
                f"max_source_length={self.max_source_length}; split it."
            )
        vocabulary = len(self.source.vocab)
        for position, i in enumerate(source_ids):
            if not 0 <= int(i) < vocabulary:
                raise ValueError(
                    f"Invalid token id in the source: {int(i)} at position {position}. "
                    f"Ids must be in [0, {vocabulary})."
                )

    def translate_ids(self, source_ids):
        """Source ids → (output ids without `[END]`, attention (len, S)), with
        the `translate` signature: the greedy loop runs inside the model."""
        self.check_ids(source_ids)
        if not source_ids:
            return [], np.zeros((0, 0), np.float32)
        out = self._translate(source_ids=np.array([source_ids], np.int32))
        n = int(out["lengths"][0])
        tokens = out["tokens"][0, :n].tolist()
        if tokens and tokens[-1] == self.target.end_id:
            n -= 1
        return tokens[:n], out["attention"][0, :n]

    def encode(self, source_ids):
        """Source ids → the decoder's first state, a dict of named arrays."""
        self.check_ids(source_ids)
        return self._encode(source_ids=np.array([source_ids], np.int32))

    def decode_step(self, token, state):
        """Previous token, state → (logits (V,), attention (S,), next state)."""
        out = self._decode_step(token=np.array([token], np.int32), **state)
        # Only the recurrent entries change; memory and mask stay as they are.
        state = dict(state)
        for name in self.config["decode_state"]["recurrent"]:
            state[name] = out[name]
        return out["logits"][0], out["attention"][0], state

    def translate_ids_app_loop(self, source_ids):
        """`translate_ids` with the greedy loop here, over `encode` and
        `decode_step`: the place for an app's own search."""
        if not source_ids:
            return [], np.zeros((0, 0), np.float32)
        state = self.encode(source_ids)  # checks the ids
        max_length = self.config["max_length"] or min(
            2 * len(source_ids) + 10, self.max_output_length
        )
        token, tokens, attention = self.target.start_id, [], []
        for _ in range(max_length):
            logits, weights, state = self.decode_step(token, state)
            token = int(np.argmax(logits))
            if token == self.target.end_id:
                break
            tokens.append(token)
            attention.append(weights)
        return tokens, np.array(attention, np.float32).reshape(len(tokens), len(source_ids))

    def translate(self, sentence, app_loop=False):
        """English text → (French text, source pieces, output pieces, attention)."""
        source_ids = self.source.tokenize(sentence)
        run = self.translate_ids_app_loop if app_loop else self.translate_ids
        tokens, attention = run(source_ids)
        return (
            self.target.detokenize(tokens),
            self.source.pieces(source_ids),
            self.target.pieces(tokens),
            attention,
        )


def _package_module(relative, what):
    """A module of the installed package loaded from its file, since
    importing `keras_attention` would import Keras and TensorFlow."""
    spec = importlib.util.find_spec("keras_attention")  # finds; does not import
    path = None
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / relative
    if path is None or not path.is_file():
        raise SystemExit(
            f"tflite_translate.py: {what} needs keras_attention/{relative}: "
            "pip install keras-seq2seq-attention"
        )
    module_spec = importlib.util.spec_from_file_location(Path(relative).stem, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def load_postprocess():
    """The command line's `postprocess(text, lang, capitalize)`, one
    implementation for both."""
    what = "the text (pass --raw for the tokenizer's text; postprocessing also needs sacremoses)"
    return _package_module("translation/postprocess.py", what).postprocess


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tflite_dir", help="the export's tflite/ folder")
    parser.add_argument("sentences", nargs="*", help="English sentences (default: stdin)")
    parser.add_argument("--variant", choices=("float32", "float16", "int8"), default="int8")
    parser.add_argument("--threads", type=int, default=1, help="interpreter threads")
    parser.add_argument(
        "--loop",
        choices=("model", "app"),
        default="model",
        help="greedy loop inside the model (`translate`) or here (`encode`, `decode_step`)",
    )
    parser.add_argument(
        "--attention", action="store_true", help="show the most attended source piece"
    )
    parser.add_argument(
        "--raw", action="store_true", help="the tokenizer's text, without postprocess"
    )
    return parser.parse_args(argv)


def read_inputs(arguments):
    """`(label, sentence)` pairs: the arguments, or one per line of stdin,
    decoded line by line so that bytes that are not UTF-8 stop the script with
    an error naming their line. Blank lines are kept."""
    if arguments:
        inputs = [(f"argument {i}", text) for i, text in enumerate(arguments, 1)]
        for label, text in inputs:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:  # undecodable bytes in argv
                raise SystemExit(
                    f"tflite_translate.py: {label} is not valid UTF-8 (character {error.start})"
                ) from None
        return inputs
    inputs = []
    # Lines end at b"\n" only, as `wc -l` counts them: bytes.splitlines would
    # also split at a lone \r and put every later output beside the wrong input.
    lines = sys.stdin.buffer.read().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for number, line in enumerate(lines, 1):
        line = line.removesuffix(b"\r")  # CRLF
        try:
            inputs.append((f"line {number} of standard input", line.decode("utf-8")))
        except UnicodeDecodeError as error:
            raise SystemExit(
                f"tflite_translate.py: line {number} of standard input is not valid "
                f"UTF-8 (byte 0x{line[error.start]:02x} at byte {error.start}); convert "
                "the file to UTF-8, e.g. with iconv"
            ) from None
    return inputs


def main(argv=None):
    args = parse_args(argv)
    translator = LiteTranslator(args.tflite_dir, args.variant, args.threads)
    postprocess = None if args.raw else load_postprocess()
    inputs = read_inputs(args.sentences)
    sentences = [text for _, text in inputs]
    limit = translator.max_source_length
    longest = 0
    for label, sentence in inputs:  # all checked before any output
        n = len(translator.source.tokenize(sentence))
        longest = max(longest, n)
        if n > limit:
            raise SystemExit(
                f"tflite_translate.py: {label} has {n} source tokens, more than the "
                f"model's max_source_length={limit}; split it into shorter sentences"
            )
    # LiteRT can go wrong on the first call longer than any before it
    # (keras_attention/runtime/litert.py): one call at the longest first.
    if longest:
        translator.warm_up(longest)
    outputs = []
    for sentence in sentences:
        text, source, target, attention = translator.translate(sentence, args.loop == "app")
        if postprocess is not None:
            text = postprocess(text, "fr", capitalize=True)
        outputs.append(text)
        print(text)
        if args.attention:
            for piece, row in zip(target, attention, strict=True):
                print(f"    {piece:>12} <- {source[int(np.argmax(row))]}")
    return outputs


if __name__ == "__main__":
    main()
