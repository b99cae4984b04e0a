"""Exports a trained translator: a SavedModel for servers, builtin-only TFLite for phones.

    python -m keras_attention.translation.export RUN_DIR OUT_DIR

writes

    OUT_DIR/
      export.json                     what was exported, from which run, with what settings
      saved_model/1/                  TensorFlow Serving layout (model name / version)
      tflite/
        translator_float32.tflite     builtin ops only (no Flex, no custom ops)
        translator_float16.tflite     float16 weights
        translator_int8.tflite        dynamic-range int8 weights
        source_vocab.txt              one WordPiece token per line, id = line number
        target_vocab.txt
        translator.json               reserved ids, normalization, lowercasing,
                                      signatures and decoder-state names

The SavedModel is text in, text out. Its `serving_default` signature takes a
batch of English sentences (tf.string, shape (batch,)) and tokenizes them
(tensorflow-text), decodes greedily and detokenizes inside the graph; `beam`
does the same with beam search. The output `translation` is the tokenizer's
text: lowercased (for a lowercasing vocabulary) with punctuation split off by
spaces, `"un homme fait du vélo ."`; `keras_attention.translation.postprocess`
turns it into ordinary text on the host if wanted. A sentence longer than
`max_source_length` source tokens (512) is truncated to it, and the output
`truncated` says so; an empty or blank sentence gives an empty translation.
Loading needs TensorFlow and `import tensorflow_text` (which registers the
tokenizer ops), not keras_attention.

The TFLite models hold ids in, ids out, in TFLite builtin ops only, with static
batch 1 and a dynamic source length:

- `translate(source_ids (1, S) int32)` → `tokens` (1, L), `lengths` (1,),
  `log_probs` (1,), `attention` (1, L, S): the greedy loop runs inside the model
  (a `WHILE`). A source longer than `max_source_length` is truncated to it
  (the app should refuse it first: a model cannot raise); S = 0 gives an empty
  output. Ids must be in [0, source vocab_size): the model does not check.
- `encode(source_ids)` → the decoder's first state (named tensors, listed in
  `translator.json`); the source mask is derived from the ids (0 = padding).
- `decode_step(token (1,), **state)` → `logits` (1, V), `attention` (1, S) and
  the new values of the recurrent state entries (`h`, and `c` / `attentional`
  where the decoder has them); the other state entries stay as `encode` gave
  them. For apps with their own loop (beam search, sampling, streaming).

Tokenization happens on the device, in the app's language, from the vocabulary
files and `translator.json` (`examples/tflite_translate.py` is a pure-Python
version).

The TFLite functions are those of the generic export
(`keras_attention.export.LiteGenerator` over the translator's
`Seq2SeqGenerator`, weights frozen into constants); this module adds the text
side: vocabularies, `translator.json` and the text signatures of the SavedModel.
"""

import argparse
import datetime
import json
import os
import shutil
import sys
from pathlib import Path

import keras
import tensorflow as tf

from keras_attention.export import tflite as generic_tflite
from keras_attention.export.operators import tflite_operators  # noqa: F401 (public here too)
from keras_attention.export.operators import tflite_subgraph_operators  # noqa: F401
from keras_attention.export.tflite import LiteGenerator
from keras_attention.translation.tokenizer import RESERVED_TOKENS
from keras_attention.translation.tokenizer import SUFFIX_INDICATOR
from keras_attention.translation.translator import load_run

VARIANTS = ("float32", "float16", "int8")
SAVED_MODEL_DIR = "saved_model"
TFLITE_DIR = "tflite"
MANIFEST_FILE = "export.json"
TFLITE_CONFIG_FILE = "translator.json"
SOURCE_VOCAB_FILE = "source_vocab.txt"
TARGET_VOCAB_FILE = "target_vocab.txt"
# FastWordpieceTokenizer's default: a longer word becomes one [UNK].
MAX_BYTES_PER_WORD = 100
_FORMAT_VERSION = 1


def tflite_filename(variant):
    """`translator_{variant}.tflite`."""
    return f"translator_{variant}.tflite"


# ------------------------------------------------------------- SavedModel


class ServingTranslator(tf.Module):
    """Text in, text out: tokenization, search and detokenization in one graph.

    Args:
        translator: a `Translator` (its model keeps its variables).
        max_length: int, the most output tokens (END included), or None for
            min(2 * S + 10, the generator's `max_output_length`) with S the
            longest (truncated) source in the batch.
        beam_width: int, the beam of the `beam` signature.
        length_penalty: float, its GNMT length penalty.

    Bounds: a sentence of more than `translator.max_source_length` source
    tokens (512 by default) is truncated to its first ones; the output
    `truncated` (batch,) bool says which were, `source_ids` holds what was
    read. An empty or blank sentence gives an empty translation, and a batch
    of 0 sentences 0 translations.
    """

    def __init__(self, translator, max_length=None, beam_width=4, length_penalty=0.6):
        super().__init__(name="serving_translator")
        self.translator = translator
        self.max_length = max_length
        self.beam_width = beam_width
        self.length_penalty = length_penalty

    def _source_ids(self, sentences):
        """(B,) strings → (B, S) int32 ids, 0-padded, S ≤ max_source_length,
        and (B,) bool, the sentences cut to that length."""
        limit = self.translator.max_source_length
        ragged = self.translator.source_tokenizer.tokenize(sentences)  # (B, None)
        truncated = ragged.row_lengths() > limit  # (B,)
        return tf.cast(ragged[:, :limit].to_tensor(), tf.int32), truncated

    def _outputs(self, source_ids, truncated, result):
        outputs = {
            "translation": self.translator.target_tokenizer.detokenize(result["tokens"]),
            "tokens": result["tokens"],  # (B, L)
            "lengths": result["lengths"],  # (B,)
            "log_probs": result["log_probs"],  # (B,)
            "attention": result["attention"],  # (B, L, S)
            "source_ids": source_ids,  # (B, S)
            "truncated": truncated,  # (B,)
        }
        if "all_scores" in result:
            outputs["scores"] = result["scores"]
        return outputs

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def greedy(self, sentences):
        """(B,) English strings → dict: `translation` (B,) French strings, ..."""
        source_ids, truncated = self._source_ids(sentences)
        result = self.translator.greedy(source_ids, max_length=self.max_length)
        return self._outputs(source_ids, truncated, result)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def beam(self, sentences):
        """`greedy` with beam search; adds `scores` (the ranking score)."""
        source_ids, truncated = self._source_ids(sentences)
        result = self.translator.beam(
            source_ids,
            beam_width=self.beam_width,
            length_penalty=self.length_penalty,
            max_length=self.max_length,
        )
        return self._outputs(source_ids, truncated, result)


def export_saved_model(translator, path, max_length=None, beam_width=4, length_penalty=0.6):
    """Writes the text-in, text-out SavedModel (signatures `serving_default`, `beam`).

    Args:
        translator: a `Translator`.
        path: the SavedModel folder (e.g. `OUT_DIR/saved_model/1`).
        max_length: see `ServingTranslator`.
        beam_width: see `ServingTranslator`.
        length_penalty: see `ServingTranslator`.

    Returns:
        `path`, as a `Path`.
    """
    module = ServingTranslator(translator, max_length, beam_width, length_penalty)
    signatures = {
        "serving_default": module.greedy.get_concrete_function(),
        "beam": module.beam.get_concrete_function(),
    }
    tf.saved_model.save(module, str(path), signatures=signatures)
    return Path(path)


# ------------------------------------------------------------------ TFLite


def lite_translator(translator, max_length=None):
    """The TFLite functions of a `Translator`: a `LiteGenerator` of its
    generator, with the signature `translate` (greedy) and the input
    `source_ids`.

    Args:
        translator: a `Translator`.
        max_length: int or None (min(2 * S + 10, the generator's cap)), the
            most output tokens of `translate`.
    """
    return LiteGenerator(
        translator.generator,
        max_length=max_length,
        names={"generate": "translate", "source": "source_ids"},
    )


def convert(lite, variant="float32"):
    """Converts the functions of `lite_translator` to a builtin-ops-only
    flatbuffer (bytes).

    Args:
        lite: a `LiteGenerator`.
        variant: "float32"; "float16" (float16 weights, dequantized at load);
            "int8" (dynamic-range quantization: int8 weights, float
            activations).
    """
    if variant not in VARIANTS:
        raise ValueError(
            f"Invalid value for argument `variant`. Expected one of {VARIANTS}. "
            f"Received: variant={variant!r}"
        )
    return generic_tflite.convert(lite, None if variant == "float32" else variant)


def _tflite_config(translator, lite, variants, max_length, attention=None):
    """The dict of `translator.json`: what an app needs around the model."""
    source = translator.source_tokenizer
    target = translator.target_tokenizer
    return {
        "format_version": _FORMAT_VERSION,
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
        "pre_tokenization": (
            "split on Unicode White_Space, then make every punctuation character "
            "(ASCII punctuation, Unicode category P*) and CJK ideograph a word of "
            "its own, as tensorflow_text.FastWordpieceTokenizer does"
        ),
        "max_length": max_length,
        "max_length_rule": lite.manifest()["max_length_rule"],
        "max_source_length": translator.generator.max_source_length,
        "longer_sources": "truncated to max_source_length inside the model",
        "max_output_length": translator.generator.max_output_length,
        "token_ids": "source ids must be in [0, source.vocab_size); the model does not check",
        "signatures": {
            "translate": {
                "inputs": ["source_ids"],
                "outputs": ["tokens", "lengths", "log_probs", "attention"],
            },
            "encode": {"inputs": ["source_ids"], "outputs": lite.state_names},
            "decode_step": {
                "inputs": ["token", *lite.state_names],
                "outputs": ["logits", "attention", *lite.recurrent_names],
            },
        },
        "decode_state": {
            "names": lite.state_names,
            "recurrent": lite.recurrent_names,
        },
    }


def _tokenizer_config(tokenizer, vocab_file):
    return {
        "vocab_file": vocab_file,
        "vocab_size": tokenizer.vocab_size,
        "normalization": "NFKC",
        "lower_case": tokenizer.lower_case,
    }


def export_tflite(translator, folder, variants=VARIANTS, max_length=None, attention=None):
    """Writes the TFLite variants, the vocabularies and `translator.json`.

    Args:
        translator: a `Translator`.
        folder: the output folder (e.g. `OUT_DIR/tflite`), created if needed.
        variants: a subset of `VARIANTS`.
        max_length: see `lite_translator`.
        attention: the run's attention name, recorded in `translator.json`.

    Returns:
        dict: variant → path of its `.tflite` file.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lite = lite_translator(translator, max_length)
    paths = {}
    for variant in variants:
        paths[variant] = folder / tflite_filename(variant)
        paths[variant].write_bytes(convert(lite, variant))
    for tokenizer, name in (
        (translator.source_tokenizer, SOURCE_VOCAB_FILE),
        (translator.target_tokenizer, TARGET_VOCAB_FILE),
    ):
        text = "".join(token + "\n" for token in tokenizer.vocab)
        (folder / name).write_text(text, encoding="utf-8")
    config = _tflite_config(translator, lite, variants, max_length, attention)
    (folder / TFLITE_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return paths


# ------------------------------------------------------------------ a run


def export_run(
    run_dir,
    out_dir,
    variants=VARIANTS,
    max_length=None,
    beam_width=4,
    length_penalty=0.6,
    saved_model=True,
    version=1,
):
    """Exports a training run's model as a SavedModel and TFLite variants.

    Args:
        run_dir: a finished training run (model.keras, config.json,
            source_vocab/, target_vocab/).
        out_dir: the output folder (created; files of an earlier export are
            replaced).
        variants: the TFLite variants, a subset of `VARIANTS`; empty for none.
        max_length: int, the most output tokens (END included), or None for
            `2 * S + 10` (S: source length), which never cuts a Multi30k
            sentence.
        beam_width: the beam width of the SavedModel's `beam` signature.
        length_penalty: its GNMT length penalty.
        saved_model: bool, write the SavedModel.
        version: int, the SavedModel's version folder (TensorFlow Serving).

    Returns:
        The manifest dict, also written to `out_dir/export.json`.

    Raises:
        FileNotFoundError: the run folder is incomplete (from `load_run`).
        ValueError: an unknown variant.
    """
    variants = tuple(variants)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(
            f"Invalid value for argument `variants`. Expected a subset of {VARIANTS}. "
            f"Received: variants={variants!r}"
        )
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
    ):
        raise ValueError(
            "Invalid value for argument `max_length`. Expected a positive int or "
            f"None. Received: max_length={max_length!r}"
        )
    translator, config = load_run(run_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {
        "format_version": _FORMAT_VERSION,
        "run_dir": str(Path(run_dir).resolve()),
        "attention": config.get("attention"),
        "exported": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "max_length": max_length,
    }
    if saved_model:
        path = out_dir / SAVED_MODEL_DIR / str(version)
        if path.exists():
            shutil.rmtree(path)
        export_saved_model(translator, path, max_length, beam_width, length_penalty)
        manifest["saved_model"] = {
            "path": str(path.relative_to(out_dir)),
            "signatures": ["serving_default", "beam"],
            "beam_width": beam_width,
            "length_penalty": length_penalty,
        }
    if variants:
        folder = out_dir / TFLITE_DIR
        paths = export_tflite(translator, folder, variants, max_length, config.get("attention"))
        manifest["tflite"] = {
            v: {"path": str(p.relative_to(out_dir)), "bytes": p.stat().st_size}
            for v, p in paths.items()
        }
    (out_dir / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m keras_attention.translation.export",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "run_dir", help="a finished training run (python -m keras_attention.translation train)"
    )
    parser.add_argument("out_dir", help="output folder")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated TFLite variants among %(default)s; '' for none",
    )
    parser.add_argument(
        "--max-length",
        type=int,
        help="most output tokens, END included (default: 2 * source length + 10)",
    )
    parser.add_argument("--beam-width", type=int, default=4, help="SavedModel `beam`")
    parser.add_argument("--length-penalty", type=float, default=0.6, help="SavedModel `beam`")
    parser.add_argument("--no-saved-model", action="store_true", help="TFLite only")
    parser.add_argument("--version", type=int, default=1, help="SavedModel version folder")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    variants = tuple(v for v in args.variants.split(",") if v)
    try:
        manifest = export_run(
            args.run_dir,
            args.out_dir,
            variants=variants,
            max_length=args.max_length,
            beam_width=args.beam_width,
            length_penalty=args.length_penalty,
            saved_model=not args.no_saved_model,
            version=args.version,
        )
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if "saved_model" in manifest:
        print(f"SavedModel: {os.path.join(args.out_dir, manifest['saved_model']['path'])}")
    for variant, info in manifest.get("tflite", {}).items():
        path = os.path.join(args.out_dir, info["path"])
        print(f"TFLite {variant}: {path} ({info['bytes'] / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
