"""The search's defaults and bounds, in one place.

Every entry point reads them here: `Seq2SeqGenerator.greedy` / `beam`, the
SavedModel (`export_saved_model`), the TFLite model (`export_tflite`) and its
runner `LiteGenerator`, the translator and its command line. A beam exported
to TFLite therefore ranks its hypotheses as the generator's `beam` does when
both are called with their defaults.

- `BEAM_WIDTH`, `LENGTH_PENALTY`, `COVERAGE_PENALTY`: the beam search of
  Wu et al. 2016 (GNMT), score = log P / lp(Y) + cp(X; Y) with
  lp(Y) = ((5 + |Y|) / 6)^alpha (alpha = `LENGTH_PENALTY`) and
  cp = beta · Σ_j log(min(Σ_t a_tj, 1)) (beta = `COVERAGE_PENALTY`). GNMT
  found alpha in [0.6, 0.7] best; beta = 0 leaves coverage out, since it
  helps only models whose attention sums to about one per source token.
- `MAX_SOURCE_LENGTH`: the longest source accepted, in tokens.
- The output bound when none is given, `default_max_length(S)`:
  min(2·S + 10, `MAX_OUTPUT_LENGTH`) tokens, END included. A translation is
  rarely more than twice its source; the 10 covers short sources. S is each
  source's own length, `source_lengths`: its positions up to the last one
  that is not padding. One rule in Keras and on the device: a source in a
  padded batch gets the bound it gets alone in the exported model.
  `MAX_OUTPUT_LENGTH` = 2 · `MAX_SOURCE_LENGTH` + 10 is also the largest
  `max_length` a caller may ask for.
- `MAX_BEAM_WIDTH`: the widest beam accepted. Memory grows as
  batch × beam × output length × source length (the attention history kept
  for every hypothesis), and quality stops improving long before 64 (GNMT
  and later work use 4 to 12). The target vocabulary is the natural cap as
  well: the first step can only open `vocabulary_size` distinct hypotheses,
  so a wider beam only repeats dead ones.
- `BeamSettings`: one beam search's width and penalties, as the exports and
  the translator hand them to `Seq2SeqGenerator.beam_graph`.
- `MAX_BATCH`: the most sources in one SavedModel request. With the longest
  sources and outputs, one request of 64 × beam 4 keeps about 0.5 GB of
  attention history; a larger batch is refused with a message (split it).
"""

import dataclasses
import math
import numbers

from keras import ops

from keras_attention.arguments.validation import check_positive_int

BEAM_WIDTH = 4
LENGTH_PENALTY = 0.6
COVERAGE_PENALTY = 0.0

MAX_SOURCE_LENGTH = 512
MAX_OUTPUT_LENGTH = 2 * MAX_SOURCE_LENGTH + 10

MAX_BEAM_WIDTH = 64
MAX_BATCH = 64


def default_max_length(source_length, cap=MAX_OUTPUT_LENGTH):
    """The output bound when none is given: min(2·S + 10, cap), S the source length.

    `source_length` may be a Python int or a scalar tensor (a dynamic length).
    """
    if isinstance(source_length, numbers.Integral):
        return min(2 * int(source_length) + 10, cap)
    return ops.minimum(2 * source_length + 10, cap)


def source_lengths(source):
    """Each source's S for `default_max_length`: (batch,) int32.

    The positions up to the last one that is not padding (id 0, or a frame
    of zeros), as the exported models count a source the app padded.

    Args:
        source: (batch, S) token ids or (batch, S, F) features.
    """
    present = ops.not_equal(source, ops.zeros((), dtype=source.dtype))  # (B, S[, F])
    if len(source.shape) == 3:
        present = ops.any(present, axis=-1)  # (B, S)
    positions = ops.arange(1, ops.shape(source)[1] + 1, dtype="int32")  # (S,)
    at = ops.where(present, positions[None, :], 0)  # (B, S)
    # A column of zeros first: a source of no positions (S = 0) has length 0,
    # where a max over nothing fails on JAX and PyTorch.
    return ops.max(ops.pad(at, ((0, 0), (1, 0))), axis=-1)  # (B,)


def check_max_length(max_length, cap=MAX_OUTPUT_LENGTH):
    """`max_length` checked: None (the default bound), a tensor (checked where
    it is made), or an int in [1, cap], returned as a Python int."""
    tensor = not isinstance(max_length, numbers.Integral) and hasattr(max_length, "dtype")
    if max_length is None or tensor:
        return max_length
    check_positive_int("max_length", max_length)
    if max_length > cap:
        raise ValueError(
            f"Invalid value for argument `max_length`. Expected at most "
            f"max_output_length={cap}. Received: max_length={max_length}"
        )
    return int(max_length)


def check_penalty(name, value):
    """A GNMT penalty (`length_penalty`, `coverage_penalty`) checked: a finite
    number >= 0, returned as a Python float.

    A negative alpha favours short hypotheses without bound (an empty output
    wins), a negative beta rewards ignoring the source, and NaN ranks every
    hypothesis equal: none of them is a search anyone asked for. A tensor is
    returned as it is (checked where it is made).

    Raises:
        ValueError: "Invalid value for argument `name`. Expected a finite
            number >= 0. Received: name=value".
    """
    if not isinstance(value, numbers.Number) and hasattr(value, "dtype"):
        return value
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (real and math.isfinite(value) and value >= 0):
        raise ValueError(
            f"Invalid value for argument `{name}`. Expected a finite number >= 0. "
            f"Received: {name}={value!r}"
        )
    return float(value)


def check_beam_width(beam_width, vocabulary_size=None, name="beam_width"):
    """Raises `ValueError` unless `beam_width` is an integer in [1, bound].

    The bound is `MAX_BEAM_WIDTH`, or the target vocabulary size when that is
    smaller (see the module docstring).

    Args:
        beam_width: the value received.
        vocabulary_size: the target vocabulary size, or None when unknown.
        name: the argument's name, as the message prints it.

    Returns:
        `beam_width` as a Python int.
    """
    check_positive_int(name, beam_width)
    bound = MAX_BEAM_WIDTH
    if vocabulary_size is not None:
        bound = min(bound, int(vocabulary_size))
    if beam_width > bound:
        vocabulary = ""
        if vocabulary_size is not None:
            vocabulary = f", target vocabulary size {vocabulary_size}"
        raise ValueError(
            f"Invalid value for argument `{name}`. Expected at most {bound} "
            f"(MAX_BEAM_WIDTH = {MAX_BEAM_WIDTH}{vocabulary}): a wider beam costs "
            f"memory and finds nothing new. Received: {name}={beam_width!r}"
        )
    return int(beam_width)


@dataclasses.dataclass(frozen=True)
class BeamSettings:
    """How one beam search ranks its hypotheses: its width and GNMT penalties.

    The exports and the translator hand one of these to
    `Seq2SeqGenerator.beam_graph`, so the three values travel together and
    take their defaults from this module only. The penalties are checked when
    the settings are made (`check_penalty`): every beam search, whichever
    entry point it comes from, refuses a negative, NaN or infinite one.

    Args:
        beam_width: hypotheses kept per source.
        length_penalty: the GNMT alpha; 0 ranks by log-probability.
        coverage_penalty: the GNMT beta; 0 disables it.
    """

    beam_width: int = BEAM_WIDTH
    length_penalty: float = LENGTH_PENALTY
    coverage_penalty: float = COVERAGE_PENALTY

    def __post_init__(self):
        for name in ("length_penalty", "coverage_penalty"):
            object.__setattr__(self, name, check_penalty(name, getattr(self, name)))

    def checked(self, vocabulary_size=None):
        """These settings with an int width; `ValueError` for a width out of
        [1, bound] (see `check_beam_width`). The penalties were checked when
        the settings were made."""
        return dataclasses.replace(
            self, beam_width=check_beam_width(self.beam_width, vocabulary_size)
        )

    def arguments(self):
        """The settings as keyword arguments of `search.beam_search`."""
        return dataclasses.asdict(self)


DEFAULT_BEAM = BeamSettings()
