"""`StepSearch`: greedy and beam search over a generator's step, compiled for the backend.

The search that `Seq2SeqGenerator` and `EnsembleGenerator` share. Each holds
one, made from itself, and the search reads it through public names only:

    model.check_source(source)      # the source, checked, as the search reads it
    model.encode(source)            # → (decode_state, source_mask (batch, S))
    model.step(tokens, state)       # → (logits (batch, V), weights (batch, S), state)
    model.start_id, model.end_id, model.max_output_length,
    model.target_vocabulary_size, model.variables()

so one model decodes as several do. The loops are those of
`keras_attention.generation.search`; this class adds the bounds, the empty
source, and the compiled search of each setting, kept for the next call.
"""

import numbers

import keras
from keras import ops

from keras_attention.generation.compiled import compile_search
from keras_attention.generation.search import beam_search
from keras_attention.generation.search import greedy_search
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import COVERAGE_PENALTY
from keras_attention.generation.search_defaults import DEFAULT_BEAM
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import BeamSettings
from keras_attention.generation.search_defaults import check_beam_width
from keras_attention.generation.search_defaults import check_max_length
from keras_attention.generation.search_defaults import default_max_length
from keras_attention.generation.search_defaults import source_lengths


class StepSearch:
    """Greedy and beam search over the step of `model`, compiled once per setting.

    Args:
        model: what is searched: a `Seq2SeqGenerator`, an `EnsembleGenerator`,
            or any object with the public names of the module docstring.

    `greedy` and `beam` check the source (`model.check_source`), compile the
    search for the backend on their first call with a setting and keep it;
    `greedy_graph` and `beam_graph` are the same searches as traced code, for
    an export or a graph of one's own. The arguments and results are those
    of `Seq2SeqGenerator.greedy`, `beam`, `greedy_graph` and `beam_graph`.
    """

    def __init__(self, model):
        self.model = model
        self.compiled = {}  # the compiled searches, by setting

    def check_max_length(self, max_length):
        """See `Searching.check_max_length`."""
        return check_max_length(max_length, self.model.max_output_length)

    def resolve_max_length(self, source_length, max_length):
        """See `Searching.resolve_max_length`."""
        max_length = self.check_max_length(max_length)
        if max_length is None:
            return default_max_length(source_length, self.model.max_output_length)
        return max_length

    def greedy_graph(self, source, max_length=None, empty_columns=True):
        """Greedy search as traced code: see `Seq2SeqGenerator.greedy_graph`."""
        return self.run(greedy_search, source, max_length, empty_columns)

    def beam_graph(self, source, settings=None, max_length=None, empty_columns=True):
        """Beam search as traced code: see `Seq2SeqGenerator.beam_graph`."""
        # Plain attribute reads: AutoGraph, tracing this, mistranslates calls
        # into a dataclass.
        return self.run(
            beam_search, source, max_length, empty_columns, **self.beam_options(settings)
        )

    def run(self, search, source, max_length, empty_columns, buffer=None, **options):
        """Encodes `source` and runs `search` (greedy or beam) from START.

        max_length None: each source stops at its own default bound,
        min(2·S + 10, max_output_length) with S its positions up to the last
        one that is not padding (`search_defaults.source_lengths`), as alone
        in the exported models; the buffers then have `buffer` rows (default:
        the bound of the padded width, at least every source's).
        """
        model = self.model
        length = ops.shape(source)[1]
        state, mask = model.encode(at_least_one_position(source))
        batch = ops.shape(mask)[0]
        start = ops.full((batch,), model.start_id, dtype="int32")
        max_length = self.check_max_length(max_length)
        if max_length is None:
            cap = model.max_output_length
            options["row_max_length"] = default_max_length(source_lengths(source), cap)  # (B,)
            max_length = default_max_length(length, cap) if buffer is None else buffer
        result = search(
            model.step,
            state,
            start,
            model.end_id,
            max_length,
            ops.shape(mask)[1],
            source_mask=mask,
            **options,
        )
        if empty_columns:
            result["attention"] = result["attention"][:, :, :length]  # (B, L, S)
        return result

    def beam_options(self, settings):
        """`beam_search`'s keyword arguments for a `BeamSettings` (None: the defaults)."""
        settings = settings or DEFAULT_BEAM
        return {
            "beam_width": check_beam_width(settings.beam_width, self.model.target_vocabulary_size),
            "length_penalty": settings.length_penalty,
            "coverage_penalty": settings.coverage_penalty,
        }

    def run_compiled(self, key, search, source, max_length, **options):
        """`search` compiled (kept under `key`) and run on a checked source.

        max_length is checked here, once; None gives each source its own
        default bound inside the search (`run`), with buffers of the padded
        width's bound, a Python int (JAX compiles per buffer size).

        TensorFlow: a `tf.function`, max_length a tensor (no retracing per
        length). JAX: `jax.jit`, compiled once per source shape and
        max_length, the variables' current values passed in at every call, so
        weights trained after the first call are used. PyTorch: eager.
        """
        max_length = self.check_max_length(max_length)
        default = max_length is None
        rows = max_length
        if default:
            rows = default_max_length(source.shape[1], self.model.max_output_length)

        def run(s, n):
            return self.run(search, s, None if default else n, True, buffer=n, **options)

        key = tuple(str(k) for k in (*key, "default" if default else "given"))
        if key not in self.compiled:
            self.compiled[key] = compile_search(run, self.model.variables)
        return self.compiled[key](source, rows)

    def greedy(self, source, max_length=None):
        """Greedy decoding of a batch: see `Seq2SeqGenerator.greedy`."""
        source = self.model.check_source(source)
        return _public(self.run_compiled(("greedy",), greedy_search, source, max_length))

    def beam(self, source, settings, max_length=None):
        """Beam search of a batch with `settings` (a `BeamSettings`): see
        `Searching.beam`."""
        settings = settings.checked(self.model.target_vocabulary_size)
        source = self.model.check_source(source)
        key = ("beam", *settings.arguments().values())
        options = self.beam_options(settings)
        result = self.run_compiled(key, beam_search, source, max_length, **options)
        out = _public(result)
        for name in ("scores", "all_tokens", "all_scores"):
            out[name] = keras.ops.convert_to_numpy(result[name])
        return out


class Searching:
    """The searches of a generator that holds a `StepSearch` as `search`
    (`Seq2SeqGenerator`, `EnsembleGenerator`): each method hands its
    arguments to it, so both generators search alike, by one code.
    """

    def check_max_length(self, max_length):
        """`max_length` checked against `max_output_length`; None stays None
        (each source's default bound, resolved once, in the search)."""
        return self.search.check_max_length(max_length)

    def resolve_max_length(self, source_length, max_length):
        """`max_length`, checked, or the default bound of a source of
        `source_length` positions: min(2·S + 10, max_output_length)."""
        return self.search.resolve_max_length(source_length, max_length)

    def greedy_graph(self, source, max_length=None, empty_columns=True):
        """Greedy search as traced code (no `tf.function` around it): for
        exporting or wrapping in a graph of one's own.

        `empty_columns=False` keeps one (zero) attention column for an empty
        source instead of none: a TFLite model cannot return an empty tensor.
        """
        return self.search.greedy_graph(source, max_length, empty_columns)

    def beam_graph(self, source, settings=None, max_length=None, empty_columns=True):
        """Beam search as traced code; see `beam` and `greedy_graph`.

        Args:
            source: as in `greedy_graph`.
            settings: a `search_defaults.BeamSettings` (width and penalties);
                None for the defaults.
            max_length: as in `greedy_graph`.
            empty_columns: as in `greedy_graph`.
        """
        return self.search.beam_graph(source, settings, max_length, empty_columns)

    def greedy(self, source, max_length=None):
        """Greedy decoding of a batch.

        Args:
            source: (batch, S) token ids or (batch, S, F) features.
            max_length: the most output tokens, END included; default, for
                each source, min(2·S + 10, max_output_length), S its positions
                up to the last one that is not padding (the exported models'
                bound for it alone).

        Returns:
            dict: "tokens" (batch, L) int32, END included then 0; "lengths"
            (batch,) int32; "log_probs" (batch,) float32; "attention" (batch,
            L, S) float32; L = max_length (by default, the bound of the
            padded width S, zeros after each source's `lengths`).
        """
        return self.search.greedy(source, max_length)

    def beam(
        self,
        source,
        beam_width=BEAM_WIDTH,
        length_penalty=LENGTH_PENALTY,
        coverage_penalty=COVERAGE_PENALTY,
        max_length=None,
    ):
        """Beam search (GNMT length and coverage penalties) of a batch.

        Args:
            source: (batch, S) token ids or (batch, S, F) features.
            beam_width: hypotheses kept per source, at most
                `search_defaults.MAX_BEAM_WIDTH` and the target vocabulary.
            length_penalty: the GNMT alpha; 0 ranks by log-probability.
            coverage_penalty: the GNMT beta; 0 disables it.
            max_length: as in `greedy`.

        The defaults are those of `keras_attention.generation.search_defaults`,
        shared with the SavedModel and TFLite exports.

        Returns:
            The dict of `greedy` for the best hypothesis, plus "scores"
            (batch,), "all_tokens" (batch, beam_width, L) and "all_scores"
            (batch, beam_width).
        """
        settings = BeamSettings(beam_width, length_penalty, coverage_penalty)
        return self.search.beam(source, settings, max_length)


def at_least_one_position(source):
    """A source of length 0 gets one padding position (id 0, or a zero frame):
    a recurrent encoder cannot run over zero steps. Its mask is then all False
    (for a mask from `Embedding(mask_zero=True)` or `Masking(0.0)`), and the
    search gives that row an empty output."""
    shape = ops.shape(source)
    length = shape[1]
    if isinstance(length, numbers.Integral):  # a static length: nothing to trace
        if length > 0:
            return source
        return ops.zeros((shape[0], 1, *shape[2:]), dtype=source.dtype)
    padding = ops.zeros((shape[0], 1, *shape[2:]), dtype=source.dtype)  # (B, 1[, F])
    return ops.concatenate([source, padding], axis=1)[:, : ops.maximum(length, 1)]


def _public(result):
    return {
        k: keras.ops.convert_to_numpy(result[k])
        for k in ("tokens", "lengths", "log_probs", "attention")
    }
