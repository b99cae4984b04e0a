"""The translator's SavedModel: text in, text out, tokenizers inside the graph.

Its `serving_default` signature takes a batch of English sentences (tf.string,
shape (batch,)), tokenizes them (tensorflow-text), decodes greedily and
detokenizes, all in the graph; `beam` does the same with beam search. The
output `translation` is the tokenizer's text: lowercased (for a lowercasing
vocabulary) with punctuation split off by spaces, `"un homme fait du vélo ."`;
`keras_attention.translation.postprocess` turns it into ordinary text on the
host if wanted. Loading needs TensorFlow and `import tensorflow_text` (which
registers the tokenizer ops), not keras_attention.

The bounds of a request (`ServingTranslator`) make its work at most
max_batch × beam × max_length × max_source_length.

The ids-in, ids-out SavedModel of any generator is
`keras_attention.export.export_saved_model`; this module adds the text. Both
are a `keras_attention.export.GeneratorModule`: the float32 copy of a
mixed-precision model, the checked output bound and beam settings are its.
"""

from pathlib import Path

import tensorflow as tf

from keras_attention.arguments.validation import check_positive_int
from keras_attention.export.generator_module import GeneratorModule
from keras_attention.export.saved_model import write_saved_model
from keras_attention.export.tflite import GENERATE_OUTPUTS
from keras_attention.export.tflite import check_captured_variables
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import MAX_BATCH


class ServingTranslator(GeneratorModule):
    """Text in, text out: tokenization, search and detokenization in one graph.

    A `GeneratorModule` of the translator's generator (as the ids-in
    `ServingGenerator` is) with the tokenizers around its searches.

    Args:
        translator: a `Translator` (its model keeps its variables; a model
            that computes in float16 or bfloat16 is served by a float32
            copy with the same weights, `GeneratorModule`'s).
        max_length: int, the most output tokens (END included), or None for
            min(2 * S + 10, the generator's `max_output_length`) with S each
            (truncated) source's length.
        beam_width: int, the beam of the `beam` signature, at most
            `MAX_BEAM_WIDTH` and the target vocabulary.
        length_penalty: float, its GNMT length penalty.
        max_batch: int, the most sentences in one request; a larger batch
            fails with `InvalidArgumentError` naming both numbers.

    Bounds: a batch of more than `max_batch` sentences is refused, and so is
    a sentence that is not valid UTF-8 (`InvalidArgumentError` naming
    `sentences` and the indices of those sentences). A
    sentence of more than `translator.max_source_length` source tokens (512
    by default) is truncated to its first ones; the output `truncated`
    (batch,) bool says which were, `source_ids` holds what was read. An empty
    or blank sentence gives an empty translation, and a batch of 0 sentences
    0 translations.
    """

    def __init__(
        self,
        translator,
        max_length=None,
        beam_width=BEAM_WIDTH,
        length_penalty=LENGTH_PENALTY,
        max_batch=MAX_BATCH,
    ):
        check_positive_int("max_batch", max_batch)
        super().__init__(
            "SavedModel export",
            "serving_translator",
            translator.generator,
            max_length=max_length,
            beam_width=beam_width,
            length_penalty=length_penalty,
        )
        self.max_batch = int(max_batch)
        # Tracked here, so the SavedModel holds the tokenizers' tables and the
        # weights (of the float32 copy that `self.generator` may be).
        self.source_tokenizer = translator.source_tokenizer
        self.target_tokenizer = translator.target_tokenizer
        self.weights = list(self.generator.variables())
        check_captured_variables(
            [self.greedy.get_concrete_function(), self.beam.get_concrete_function()],
            [getattr(v, "value", v) for v in self.weights],
            self.generator,
        )

    def _source_ids(self, sentences):
        """(B,) strings → (B, S) int32 ids, 0-padded, S ≤ max_source_length,
        and (B,) bool, the sentences cut to that length. Fails for B >
        max_batch."""
        batch = tf.size(sentences)
        check = tf.debugging.Assert(
            batch <= self.max_batch,
            [
                "The request holds a batch of",
                batch,
                f"sentences, more than max_batch={self.max_batch}: split it.",
            ],
        )
        # Bytes that are not UTF-8 are refused, as the command line refuses
        # them, not read as unknown pieces: a sentence is valid when
        # replacing its invalid bytes changes nothing.
        valid = tf.equal(
            tf.strings.unicode_transcode(sentences, "UTF-8", "UTF-8", errors="replace"),
            sentences,
        )  # (B,)
        utf8 = tf.debugging.Assert(
            tf.reduce_all(valid),
            [
                "Invalid value for `sentences`: not valid UTF-8 (convert it to UTF-8). "
                "Indices of the sentences:",
                tf.reshape(tf.where(tf.logical_not(valid)), [-1]),
            ],
        )
        with tf.control_dependencies([check, utf8]):
            sentences = tf.identity(sentences)
        limit = self.generator.max_source_length
        ragged = self.source_tokenizer.tokenize(sentences)  # (B, None)
        truncated = ragged.row_lengths() > limit  # (B,)
        return tf.cast(ragged[:, :limit].to_tensor(), tf.int32), truncated

    def _outputs(self, source_ids, truncated, result, keys=GENERATE_OUTPUTS):
        # tokens (B, L), lengths (B,), log_probs (B,), attention (B, L, S)
        # and the beam's scores (B,), as the ids-in SavedModel returns them.
        outputs = {"translation": self.target_tokenizer.detokenize(result["tokens"])}
        outputs.update({k: result[k] for k in keys})
        outputs.update(source_ids=source_ids, truncated=truncated)  # (B, S), (B,)
        return outputs

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def greedy(self, sentences):
        """(B,) English strings, B ≤ max_batch → dict: `translation` (B,)
        French strings, ..."""
        source_ids, truncated = self._source_ids(sentences)
        result = self.generator.greedy_graph(source_ids, max_length=self.max_length)
        return self._outputs(source_ids, truncated, result)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def beam(self, sentences):
        """`greedy` with beam search; adds `scores` (the ranking score)."""
        source_ids, truncated = self._source_ids(sentences)
        result = self.generator.beam_graph(source_ids, self.beam_settings, self.max_length)
        return self._outputs(source_ids, truncated, result, (*GENERATE_OUTPUTS, "scores"))


def export_translator_saved_model(
    translator,
    path,
    max_length=None,
    beam_width=BEAM_WIDTH,
    length_penalty=LENGTH_PENALTY,
    max_batch=MAX_BATCH,
):
    """Writes the text-in, text-out SavedModel (signatures `serving_default`,
    `beam`), through the generic export's
    `keras_attention.export.saved_model.write_saved_model`.

    Args:
        translator: a `Translator`.
        path: the SavedModel folder (e.g. `OUT_DIR/saved_model/1`).
        max_length: see `ServingTranslator`.
        beam_width: see `ServingTranslator`.
        length_penalty: see `ServingTranslator`.
        max_batch: see `ServingTranslator`.

    Returns:
        `path`, as a `Path`.
    """
    module = ServingTranslator(translator, max_length, beam_width, length_penalty, max_batch)
    write_saved_model(module, path)
    return Path(path)
