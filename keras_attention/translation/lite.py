"""The translator's TFLite models and what an app needs around them.

`export_translator_tflite` writes, in one folder, the files `tflite_files()`
lists: a model per variant (`translator_float32.tflite`, `_float16`,
`_int8`), the two vocabularies and `translator.json`.

The models hold ids in, ids out, in TFLite builtin ops only, with static
batch 1 and a dynamic source length (or, with `source_length=N`, a static one
that the app pads to with id 0, for runtimes such as LiteRT.js that refuse a
dynamic dimension):

- `translate(source_ids (1, S) int32)` → `tokens` (1, L), `lengths` (1,),
  `log_probs` (1,), `attention` (1, L, S): the greedy loop runs inside the model
  (a `WHILE`). A source longer than `max_source_length` is truncated to it
  (the app should refuse it first: a model cannot raise); S = 0 gives an empty
  output. Ids must be in [0, source vocab_size): the model does not check.
- with `beam_width`, `translate_beam(source_ids)`: the same outputs and
  `scores`, beam search with its GNMT length penalty inside the model.
- `encode(source_ids)` → the decoder's first state (named tensors, listed in
  `translator.json`); the source mask is derived from the ids (0 = padding).
- `decode_step(token (1,), **state)` → `logits` (1, V), `attention` (1, S) and
  the new values of the recurrent state entries (`h`, and `c` / `attentional`
  where the decoder has them); the other state entries stay as `encode` gave
  them. For apps with their own loop (beam search, sampling, streaming).

Tokenization happens on the device, in the app's language, from the vocabulary
files and `translator.json` (`examples/tflite_translate.py` is a pure-Python
version).

The functions, their conversion and the writing of each model are those of
the generic export (`keras_attention.export.LiteGenerator` over the
translator's `Seq2SeqGenerator`, weights frozen into constants, and
`keras_attention.export.tflite.write_tflite`); this module adds the text
side: the vocabularies and `translator.json`.
"""

import time
from pathlib import Path

from keras_attention.export import tflite as generic_tflite
from keras_attention.export.folder import check_variants
from keras_attention.export.tflite import VARIANTS
from keras_attention.files.atomic import write_json
from keras_attention.files.atomic import write_text
from keras_attention.translation.tokenizer import RESERVED_TOKENS
from keras_attention.translation.tokenizer import SUFFIX_INDICATOR

# What each of `VARIANTS` (the spelling of every export) holds, for --help.
_VARIANT_NOTES = {
    "float32": "builtin ops only (no Flex, no custom ops)",
    "float16": "float16 weights",
    "int8": "dynamic-range int8 weights",
}
# The stem of the file names, `export_folder`'s `name`: translator_VARIANT.tflite,
# translator.json.
TFLITE_NAME = "translator"
TFLITE_CONFIG_FILE = f"{TFLITE_NAME}.json"
SOURCE_VOCAB_FILE = "source_vocab.txt"
TARGET_VOCAB_FILE = "target_vocab.txt"
# FastWordpieceTokenizer's default: a longer word becomes one [UNK].
MAX_BYTES_PER_WORD = 100
PRE_TOKENIZATION = (
    "split on Unicode White_Space, then make every punctuation character "
    "(ASCII punctuation, Unicode category P*) and CJK ideograph a word of "
    "its own, as tensorflow_text.FastWordpieceTokenizer does"
)


def tflite_filename(variant):
    """`translator_{variant}.tflite`."""
    return f"{TFLITE_NAME}_{variant}.tflite"


def tflite_files(variants=VARIANTS):
    """The files `export_translator_tflite(..., variants)` writes: {name: what
    it holds}."""
    files = {tflite_filename(v): _VARIANT_NOTES[v] for v in check_variants(variants)}
    files[SOURCE_VOCAB_FILE] = "one WordPiece token per line, id = line number"
    files[TARGET_VOCAB_FILE] = "the same for the target language"
    files[TFLITE_CONFIG_FILE] = (
        "reserved ids, normalization, lowercasing, signatures and decoder-state names"
    )
    return files


def lite_translator(translator, max_length=None, source_length=None, beam=None):
    """The TFLite functions of a `Translator`: a `LiteGenerator` of its
    generator, with the signature `translate` (greedy) and the input
    `source_ids`.

    Args:
        translator: a `Translator`.
        max_length: int or None (min(2 * S + 10, the generator's cap)), the
            most output tokens of `translate`.
        source_length: None (a dynamic source length) or N, a static one:
            sources padded with id 0 to N; S above counts the real tokens.
        beam: None, or a `search_defaults.BeamSettings`: add the signature
            `translate_beam`, a beam search with these settings.
    """
    beam_arguments = {"beam_width": None} if beam is None else beam.arguments()
    return generic_tflite.LiteGenerator(
        translator.generator,
        names={
            "generate": "translate",
            "generate_beam": "translate_beam",
            "source": "source_ids",
        },
        source_length=source_length,
        max_length=max_length,
        **beam_arguments,
    )


def tflite_config(translator, lite, variants, attention=None):
    """The dict of `translator.json`: the generic manifest of `lite` (ids,
    bounds, signatures, decoder state) with the text side added (vocabulary
    files, normalization, reserved tokens) and the model file of each variant.
    """
    source = translator.source_tokenizer
    target = translator.target_tokenizer
    config = lite.manifest()
    # "source" names the source tokenizer here: an app reads text, not a spec.
    del config["source"]
    config.update(
        {
            "attention": attention,
            "models": {v: tflite_filename(v) for v in variants},
            "source": _tokenizer_config(source, SOURCE_VOCAB_FILE),
            "target": _tokenizer_config(target, TARGET_VOCAB_FILE),
            "reserved_tokens": list(RESERVED_TOKENS),
            "pad_id": source.pad_id,
            "unk_id": source.unk_id,
            "start_id": target.start_id,
            "end_id": target.end_id,
            "suffix_indicator": SUFFIX_INDICATOR,
            "unknown_token": RESERVED_TOKENS[source.unk_id],
            "max_bytes_per_word": MAX_BYTES_PER_WORD,
            "pre_tokenization": PRE_TOKENIZATION,
            "token_ids": "source ids must be in [0, source.vocab_size); the model does not check",
        }
    )
    return config


def _tokenizer_config(tokenizer, vocab_file):
    return {
        "vocab_file": vocab_file,
        "vocab_size": tokenizer.vocab_size,
        "normalization": "NFKC",
        "lower_case": tokenizer.lower_case,
    }


def export_translator_tflite(
    translator,
    folder,
    variants=VARIANTS,
    max_length=None,
    attention=None,
    written=None,
    **lite_options,
):
    """Writes the TFLite variants, the vocabularies and `translator.json`.

    The models go through the generic export's skeleton
    (`keras_attention.export.tflite.write_tflite`: conversion, float16 or
    int8 weights, the builtin-operator check), traced once for every
    variant. Every file is written whole or not at all (a temporary file
    renamed over it).

    Args:
        translator: a `Translator`.
        folder: the output folder (e.g. `OUT_DIR/tflite`), created if needed.
        variants: a subset of `VARIANTS`: "float32"; "float16" (float16
            weights, dequantized at load); "int8" (dynamic-range
            quantization: int8 weights, float activations).
        max_length: see `lite_translator`.
        attention: the run's attention name, recorded in `translator.json`.
        written: None, or a function called as each variant is written, with
            the variant, the path of its file and the seconds it took.
        **lite_options: `source_length` and `beam` of `lite_translator`
            (recorded in `translator.json`).

    Returns:
        dict: variant → path of its `.tflite` file.

    Raises:
        ValueError: an unknown variant, or a converted model that still holds
            a Flex, custom or variable operator (named).
    """
    variants = check_variants(variants)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lite = lite_translator(translator, max_length, **lite_options)
    paths = {}
    for variant in variants:
        started = time.perf_counter()
        path = folder / tflite_filename(variant)
        paths[variant] = generic_tflite.write_tflite(lite, path, variant)
        if written is not None:
            written(variant, paths[variant], time.perf_counter() - started)
    write_vocabularies(translator, folder)
    config = tflite_config(translator, lite, variants, attention)
    write_json(folder / TFLITE_CONFIG_FILE, config)
    return paths


def write_vocabularies(translator, folder):
    """Writes `source_vocab.txt` and `target_vocab.txt` into `folder`: one
    token per line, the id its line number."""
    for tokenizer, name in (
        (translator.source_tokenizer, SOURCE_VOCAB_FILE),
        (translator.target_tokenizer, TARGET_VOCAB_FILE),
    ):
        write_text(Path(folder) / name, "".join(t + "\n" for t in tokenizer.vocab))
