"""A TensorFlow SavedModel of a `Seq2SeqGenerator`: ids in, ids out."""

import tensorflow as tf

from keras_attention.export.tflite import GENERATE_OUTPUTS
from keras_attention.export.tflite import check_captured_variables
from keras_attention.export.tflite import source_signature


class ServingGenerator(tf.Module):
    """Greedy (`serving_default`) and beam (`beam`) signatures over a batch.

    Args:
        generator: a `Seq2SeqGenerator` (its layers keep their variables).
        max_length: most output tokens, END included; None for
            min(2·S + 10, generator.max_output_length).
        beam_width: the `beam` signature's width.
        length_penalty: its GNMT length penalty.
        coverage_penalty: its GNMT coverage penalty.
        source_spec: see `keras_attention.export.tflite.source_signature`.

    Sources longer than `generator.max_source_length` are truncated to it.
    """

    def __init__(
        self,
        generator,
        max_length=None,
        beam_width=4,
        length_penalty=0.6,
        coverage_penalty=0.0,
        source_spec=None,
    ):
        super().__init__(name="serving_generator")
        if max_length is not None:
            generator.resolve_max_length(None, max_length)  # checks it
        self.generator = generator
        # Tracked here, so the SavedModel holds the weights.
        self.weights = list(generator.variables())
        spec = source_signature(generator, source_spec)
        batch_spec = tf.TensorSpec([None, *spec.shape[1:]], spec.dtype, name="source")
        limit = generator.max_source_length

        def greedy(source):
            result = generator.greedy_graph(source[:, :limit], max_length=max_length)
            return {k: result[k] for k in GENERATE_OUTPUTS}

        def beam(source):
            result = generator.beam_graph(
                source[:, :limit],
                beam_width=beam_width,
                length_penalty=length_penalty,
                coverage_penalty=coverage_penalty,
                max_length=max_length,
            )
            return {k: result[k] for k in (*GENERATE_OUTPUTS, "scores")}

        self.greedy = tf.function(greedy, input_signature=[batch_spec])
        self.beam = tf.function(beam, input_signature=[batch_spec])
        check_captured_variables(
            [self.greedy.get_concrete_function(), self.beam.get_concrete_function()],
            [getattr(v, "value", v) for v in self.weights],
            generator,
        )


def export_saved_model(
    generator,
    path,
    max_length=None,
    beam_width=4,
    length_penalty=0.6,
    coverage_penalty=0.0,
    source_spec=None,
):
    """Writes a SavedModel with `serving_default` (greedy) and `beam` signatures.

    Both take `source` (batch, S) int32 ids (or (batch, S, F) features) and
    return `tokens` (batch, L), `lengths` (batch,), `log_probs` (batch,) and
    `attention` (batch, L, S); `beam` also `scores`. Loading needs TensorFlow
    only. For text in, text out with tokenizers in the graph, see
    `keras_attention.translation.serving`.

    Args:
        generator: a `Seq2SeqGenerator`.
        path: the folder to write.
        max_length: as `ServingGenerator`.
        beam_width: as `ServingGenerator`.
        length_penalty: as `ServingGenerator`.
        coverage_penalty: as `ServingGenerator`.
        source_spec: as `ServingGenerator`.

    Returns:
        The `ServingGenerator` that was saved.
    """
    module = ServingGenerator(
        generator,
        max_length=max_length,
        beam_width=beam_width,
        length_penalty=length_penalty,
        coverage_penalty=coverage_penalty,
        source_spec=source_spec,
    )
    tf.saved_model.save(
        module,
        str(path),
        signatures={"serving_default": module.greedy, "beam": module.beam},
    )
    return module
