"""A TensorFlow SavedModel of a `Seq2SeqGenerator`: ids in, ids out."""

import tensorflow as tf

from keras_attention.arguments.validation import check_positive_int
from keras_attention.export.generator_module import GeneratorModule
from keras_attention.export.tflite import GENERATE_OUTPUTS
from keras_attention.export.tflite import check_captured_variables
from keras_attention.export.tflite import source_signature
from keras_attention.generation.search_defaults import MAX_BATCH

# The signatures of every SavedModel export: greedy search, beam search.
SIGNATURES = ("serving_default", "beam")


class ServingGenerator(GeneratorModule):
    """Greedy (`serving_default`) and beam (`beam`) signatures over a batch.

    Args:
        generator: a `Seq2SeqGenerator` (its layers keep their variables).
        source_spec: see `keras_attention.export.tflite.source_signature`.
        max_batch: the most sources in one request (default
            `search_defaults.MAX_BATCH`, 64); a larger batch fails with
            `InvalidArgumentError` before any work: split it.
        **search: `max_length`, `beam_width`, `length_penalty` and
            `coverage_penalty` of `GeneratorModule`: the output bound, and the
            `beam` signature's width (at most `search_defaults.MAX_BEAM_WIDTH`
            and the target vocabulary) and GNMT penalties.

    The search defaults are those of `Seq2SeqGenerator.beam` and the TFLite
    export (`keras_attention.generation.search_defaults`). Sources longer than
    `generator.max_source_length` are truncated to it, so one request's work
    is bounded by max_batch × beam_width × max_output_length ×
    max_source_length.
    """

    def __init__(self, generator, source_spec=None, max_batch=MAX_BATCH, **search):
        super().__init__("SavedModel export", "serving_generator", generator, **search)
        generator = self.generator  # a float32 copy of a mixed-precision one
        check_positive_int("max_batch", max_batch)
        self.max_batch = int(max_batch)
        # Tracked here, so the SavedModel holds the weights.
        self.weights = list(generator.variables())
        spec = source_signature(generator, source_spec)
        batch_spec = tf.TensorSpec([None, *spec.shape[1:]], spec.dtype, name="source")
        limit = generator.max_source_length

        vocabulary = generator.source_vocabulary_size  # None: unknown

        def bounded(source):
            checks = [
                tf.debugging.assert_less_equal(
                    tf.shape(source)[0],
                    self.max_batch,
                    message=f"The batch holds more than max_batch={self.max_batch} sources: "
                    "split it",
                )
            ]
            source = source[:, :limit]
            if source.dtype.is_integer:
                # In the graph, so the SavedModel refuses them too: a negative
                # id would read the last embedding rows, one past the
                # vocabulary zeros (GPU) or fail deep in a gather (CPU).
                bound = f"[0, {vocabulary})" if vocabulary else "[0, vocabulary)"
                message = f"Invalid token id in `source`: ids must be in {bound}"
                checks.append(tf.debugging.assert_non_negative(source, message=message))
                if vocabulary:
                    size = tf.constant(vocabulary, source.dtype)
                    checks.append(tf.debugging.assert_less(source, size, message=message))
            with tf.control_dependencies(checks):
                return tf.identity(source)

        def greedy(source):
            result = generator.greedy_graph(bounded(source), max_length=self.max_length)
            return {k: result[k] for k in GENERATE_OUTPUTS}

        def beam(source):
            result = generator.beam_graph(bounded(source), self.beam_settings, self.max_length)
            return {k: result[k] for k in (*GENERATE_OUTPUTS, "scores")}

        self.greedy = tf.function(greedy, input_signature=[batch_spec])
        self.beam = tf.function(beam, input_signature=[batch_spec])
        check_captured_variables(
            [self.greedy.get_concrete_function(), self.beam.get_concrete_function()],
            [getattr(v, "value", v) for v in self.weights],
            generator,
        )


def export_saved_model(generator, path, **options):
    """Writes a SavedModel with `serving_default` (greedy) and `beam` signatures.

    Both take `source` (batch, S) int32 ids (or (batch, S, F) features), at
    most `max_batch` sources per call (a larger batch is refused; so is an
    id outside [0, source vocabulary), negative ones too, with
    `InvalidArgumentError` naming `source` and the range), and
    return `tokens` (batch, L), `lengths` (batch,), `log_probs` (batch,) and
    `attention` (batch, L, S); `beam` also `scores`. Loading needs TensorFlow
    only. For text in, text out with tokenizers in the graph, see
    `keras_attention.translation.serving`.

    Args:
        generator: a `Seq2SeqGenerator`.
        path: the folder to write.
        **options: the keyword arguments of `ServingGenerator`: `max_length`,
            `beam_width`, `length_penalty`, `coverage_penalty` (defaults from
            `keras_attention.generation.search_defaults`), `source_spec` and
            `max_batch`.

    Returns:
        The `ServingGenerator` that was saved.
    """
    module = ServingGenerator(generator, **options)
    write_saved_model(module, path)
    return module


def write_saved_model(module, path):
    """Saves an export module as a SavedModel whose signatures are its greedy
    search, `serving_default`, and its beam search, `beam` (`SIGNATURES`).
    The step every SavedModel export shares: `export_saved_model` and the
    translator's (`keras_attention.translation.serving`).

    Args:
        module: a `tf.Module` with `greedy` and `beam`, `tf.function`s of one
            input signature each (`ServingGenerator`, `ServingTranslator`).
        path: the folder to write.
    """
    functions = (module.greedy, module.beam)
    signatures = {
        name: function.get_concrete_function()
        for name, function in zip(SIGNATURES, functions, strict=True)
    }
    tf.saved_model.save(module, str(path), signatures=signatures)
