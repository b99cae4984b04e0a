"""The command-line options every export command shares, defined once.

`add_export_arguments(parser)` adds them to the three export commands:
`python -m keras_attention.export` (a `.keras` file), the translator's
`export` (`keras_attention.translation.export`, also
`keras-attention-translate export`) and the G2P example's `export`
(`examples/g2p_cmudict.py`). Each command adds only its own options (its
positional arguments, the translator's `--tflite-beam`, `--max-batch`, ...),
so an option means the same, reads the same values and refuses the same
ones, with the same message, in all three. `beam_width` and `penalty` are
also the types of the translator's `translate` and `evaluate` options and of
the G2P example's `pronounce --beam-width`:

    --variants        comma-separated among float32,float16,int8; '' for none
    --beam-width      the exported beam searches' width, 1 to MAX_BEAM_WIDTH (default 4)
    --length-penalty  their GNMT length penalty, a finite number >= 0 (default 0.6)
    --max-length      most output tokens, END included (default: 2 * S + 10)
    --source-length   a static source length for the TFLite models (default: dynamic)
"""

import argparse

from keras_attention.arguments.cli_types import comma_separated
from keras_attention.arguments.cli_types import positive_int
from keras_attention.arguments.cli_types import positive_int_up_to
from keras_attention.export.tflite import VARIANTS
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import MAX_BEAM_WIDTH
from keras_attention.generation.search_defaults import check_penalty

# The `dest` of each option `add_export_arguments` adds: the keyword
# arguments of `export_folder` of the same names.
EXPORT_OPTIONS = ("variants", "beam_width", "length_penalty", "max_length", "source_length")

# The type of --variants: some of `VARIANTS`, the one spelling of every export.
variant_list = comma_separated(VARIANTS)
# The type of every --beam-width that names a width: 1 to MAX_BEAM_WIDTH (the
# target vocabulary, the other bound, is checked once the model is loaded).
beam_width = positive_int_up_to(MAX_BEAM_WIDTH, "the widest beam")


def penalty(text):
    """The type of a GNMT penalty option (`--length-penalty`): what
    `search_defaults.check_penalty` accepts, a finite number >= 0, said in
    one line."""
    try:
        return check_penalty("penalty", float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}") from None


def add_export_arguments(parser):
    """Adds the options every export command shares to `parser`.

    They parse into the keyword arguments of `export_folder` of the same
    names (`EXPORT_OPTIONS`): `variants` a list of `VARIANTS` (all three by
    default; `--variants ''` for none), `beam_width` and `length_penalty`
    (`search_defaults`' defaults), `max_length` and `source_length` (None by
    default). A bad value is refused by argparse in one line naming the
    option, exit status 2.

    Args:
        parser: an `argparse.ArgumentParser`, or a subcommand's.

    Returns:
        `parser`.
    """
    parser.add_argument(
        "--variants",
        type=variant_list,
        default=list(VARIANTS),
        help=f"comma-separated TFLite variants among {','.join(VARIANTS)}; '' for none "
        "(default: all three)",
    )
    parser.add_argument(
        "--beam-width",
        type=beam_width,
        default=BEAM_WIDTH,
        help="the width of the exported beam searches (the SavedModel's `beam`, the TFLite "
        f"beam signature), at most {MAX_BEAM_WIDTH} and the target vocabulary "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--length-penalty",
        type=penalty,
        default=LENGTH_PENALTY,
        help="their GNMT length penalty, a number >= 0; 0: none (default: %(default)s)",
    )
    parser.add_argument(
        "--max-length",
        type=positive_int,
        help="most output tokens, END included (default: 2 * source length + 10)",
    )
    parser.add_argument(
        "--source-length",
        type=positive_int,
        help="a static source length for the TFLite models, sources padded to it "
        "(LiteRT.js in the browser needs one; default: dynamic)",
    )
    return parser
