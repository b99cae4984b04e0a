"""What the SavedModel and the TFLite modules of a generator share."""

from keras_attention.backend.precision import float32_generator
from keras_attention.export.backend import ExportModule
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import COVERAGE_PENALTY
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import BeamSettings


class GeneratorModule(ExportModule):
    """An export of a `Seq2SeqGenerator`: the generator, its output bound and
    its beam settings, checked before anything is traced.

    `ServingGenerator` and `LiteGenerator` take these arguments by keyword;
    the search defaults are those of `keras_attention.generation.search_defaults`,
    so an exported beam ranks its hypotheses as `Seq2SeqGenerator.beam` does.

    A generator whose model computes in float16 or bfloat16 (trained under
    `mixed_float16` or `mixed_bfloat16`) is exported through a float32 copy
    with the same weights (`keras_attention.backend.precision.float32_generator`):
    `self.generator` is that copy, and the export computes in float32 as the
    model's float32 twin does in Keras.

    Args:
        what: the export, for the errors ("TFLite export").
        name: the module's name.
        generator: a `Seq2SeqGenerator` (its layers keep their variables).
        max_length: most output tokens, END included; None for
            min(2·S + 10, generator.max_output_length).
        beam_width: the beam's width, at most `search_defaults.MAX_BEAM_WIDTH`
            and the target vocabulary; None (where the subclass allows it,
            `beam_optional`) for no beam.
        length_penalty: the beam's GNMT length penalty.
        coverage_penalty: the beam's GNMT coverage penalty.
    """

    beam_optional = False

    def __init__(
        self,
        what,
        name,
        generator,
        max_length=None,
        beam_width=BEAM_WIDTH,
        length_penalty=LENGTH_PENALTY,
        coverage_penalty=COVERAGE_PENALTY,
    ):
        super().__init__(what, name=name)
        # Here, once for every export: float16 ops are not TFLite builtins,
        # and a phone computes in float32 anyway.
        generator = float32_generator(generator)
        self.beam_settings = None
        if beam_width is not None or not self.beam_optional:
            settings = BeamSettings(beam_width, length_penalty, coverage_penalty)
            self.beam_settings = settings.checked(generator.target_vocabulary_size)
        self.generator = generator
        self.max_length = generator.check_max_length(max_length)
