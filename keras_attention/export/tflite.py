"""Builtin-only TFLite models of a `Seq2SeqGenerator`, with the decode loop inside.

Why the weights are frozen, and how: TFLite's converter keeps the weights that a
`WHILE` body reads (a recurrent encoder, the decoder step) as resource
variables; the model then converts with builtin ops only but fails at
`invoke()` (`READ_VARIABLE ... variable != nullptr`). Here the functions are
traced inside a `keras.StatelessScope` that maps every variable the generator
reads to a constant tensor of its current value: Keras layers read a variable
through that mapping, so the traced functions capture constants and hold no
variable at all. This uses only public API (`keras.StatelessScope`, the
mechanism of `Layer.stateless_call`) and leaves the Keras model untouched.

The search loops keep fixed-size buffers written through `where` instead of
`tf.TensorArray` (whose TensorList ops need the Flex delegate), and a static
batch of 1 lets the Keras recurrent encoders convert to a builtin `WHILE`.
"""

from pathlib import Path

import keras
import tensorflow as tf

from keras_attention.arguments.validation import check_positive_int
from keras_attention.export.backend import check_tensorflow_backend
from keras_attention.export.float16 import float16_weights
from keras_attention.export.generator_module import GeneratorModule
from keras_attention.export.operators import non_builtin_operators
from keras_attention.files.atomic import write_bytes
from keras_attention.files.atomic import write_json
from keras_attention.generation.search import beam_search
from keras_attention.generation.search import greedy_search
from keras_attention.generation.search_defaults import check_beam_width
from keras_attention.generation.step_search import StepSearch
from keras_attention.generation.step_search import at_least_one_position

# The TFLite variants, one spelling for every export (`quantization` here,
# `variants` of `export_folder` and the translator's export, `--variants` of
# the commands): float32 weights, float16 weights, dynamic-range int8.
VARIANTS = ("float32", "float16", "int8")
GENERATE_OUTPUTS = ("tokens", "lengths", "log_probs", "attention")
_FORMAT_VERSION = 1


def check_quantization(quantization):
    """`quantization` as a variant name: one of `VARIANTS`, None read as
    "float32" (the default of earlier releases); `ValueError` naming
    `VARIANTS` otherwise."""
    if quantization is None:
        return "float32"
    if quantization not in VARIANTS:
        raise ValueError(
            "Invalid value for argument `quantization`. Expected one of "
            f"{VARIANTS} (None: float32). Received: quantization={quantization!r}"
        )
    return quantization


def source_signature(generator, source_spec=None, name="source", source_length=None):
    """The `tf.TensorSpec` of the exported source: batch 1, dynamic length, or
    `source_length` positions.

    Args:
        generator: a `Seq2SeqGenerator`.
        source_spec: `(shape without batch, dtype)`, e.g. `((None,), "int32")`
            for token ids or `((None, 40), "float32")` for 40 features per
            frame; taken from the model when the generator came from
            `from_model`.
        name: the input's name in the signatures.
        source_length: None (any length), or a static length N, at most
            `generator.max_source_length`, for runtimes that refuse a dynamic
            dimension (LiteRT.js): the app pads every source to N.
    """
    check_positive_int("source_length", source_length, allow_none=True)
    if source_length is not None and source_length > generator.max_source_length:
        raise ValueError(
            "Invalid value for argument `source_length`. Expected at most "
            f"max_source_length={generator.max_source_length}. "
            f"Received: source_length={source_length}"
        )
    spec = source_spec or generator.source_spec
    if spec is None:
        raise ValueError(
            "The generator was built with the explicit constructor, so the shape "
            "of its source is unknown: pass `source_spec=((None,), 'int32')` for "
            "token ids or `((None, F), 'float32')` for F features per position."
        )
    shape, dtype = spec
    shape = list(shape)
    if not shape or len(shape) > 2:
        raise ValueError(
            "Invalid value for argument `source_spec`. Expected the shape of one "
            f"source without the batch, (S,) or (S, F). Received: {spec!r}"
        )
    shape[0] = source_length  # None: any source length
    return tf.TensorSpec([1, *shape], tf.as_dtype(dtype), name=name)


def real_length(source):
    """The positions up to the last one that is not padding (id 0, or a frame
    of zeros), a scalar int32: the length S of the source before the app
    padded it. (1, N) or (1, N, F) -> ()."""
    present = tf.not_equal(source, tf.zeros_like(source))  # (1, N[, F])
    if present.shape.rank == 3:
        present = tf.reduce_any(present, axis=-1)  # (1, N)
    positions = tf.range(1, tf.shape(source)[1] + 1)[tf.newaxis]  # (1, N)
    return tf.reduce_max(tf.where(present, positions, 0))


class LiteGenerator(GeneratorModule):
    """The concrete functions of a generator's TFLite model, weights frozen.

    Args:
        generator: a `Seq2SeqGenerator`.
        beam_width: also trace `generate_beam` with this width (None: no
            beam), at most `search_defaults.MAX_BEAM_WIDTH` and the target
            vocabulary.
        source_spec: see `source_signature`.
        names: rename signatures, e.g. `{"generate": "translate"}`, and the
            source input (`{"source": "source_ids"}`).
        source_length: see `source_signature`. With a static length N the
            default bound counts the real positions S (up to the last one that
            is not padding), min(2·S + 10, generator.max_output_length), not N,
            so a padded source decodes as the unpadded one does: `generate`
            and `generate_beam` cut it to those S positions before encoding
            (the padding costs no encoder step), `encode` keeps all N. The
            outputs then have static shapes too: `tokens` (1, R) and
            `attention` (1, R, N), R = `max_length` or min(2·N + 10, cap),
            zero after the bound and on the padding columns; `lengths` counts
            the tokens.

    Sources longer than `generator.max_source_length` are truncated to it
    inside the model (a TFLite model cannot raise); the app should check the
    length first (the manifest gives the bound); the attention output has one
    column per source position read. An empty source (S = 0) gives an empty
    output (length 0) and one zero attention column (a TFLite model cannot
    return an empty tensor).

    The other keyword arguments (`**search`) are `GeneratorModule`'s:
    `max_length`, the most output tokens of `generate` (END included; None
    for min(2·S + 10, generator.max_output_length)), and `generate_beam`'s
    GNMT `length_penalty` and `coverage_penalty`, whose defaults are
    `Seq2SeqGenerator.beam`'s (`keras_attention.generation.search_defaults`),
    so the model ranks beams as the generator does.
    """

    beam_optional = True

    def __init__(
        self, generator, beam_width=None, source_spec=None, names=None, source_length=None, **search
    ):
        super().__init__(
            "TFLite export", "lite_generator", generator, beam_width=beam_width, **search
        )
        names = dict(names or {})
        self.names = {n: names.get(n, n) for n in ("generate", "encode", "decode_step")}
        self.names["generate_beam"] = names.get("generate_beam", "generate_beam")
        self.source_name = names.get("source", "source")
        self.source_spec = source_signature(generator, source_spec, self.source_name, source_length)
        self.source_length = source_length
        self._trace(_search_functions(self))
        check_captured_variables(self.concrete_functions(), [], self.generator)
        check_float32(self.concrete_functions())
        outputs = self.decode_step.structured_outputs
        self.recurrent_names = sorted(set(outputs) - {"logits", "attention"})

    def _trace(self, functions):
        """Traces the signatures from `_search_functions`, and `decode_step`,
        with every variable of the generator read as a constant of its value."""
        spec = self.source_spec
        frozen = [(v, tf.constant(v.numpy())) for v in self.generator.variables()]
        with keras.StatelessScope(state_mapping=frozen):
            self.generate = _concrete(functions["generate"], self.names["generate"], [spec])
            self.encode = _concrete(functions["encode"], self.names["encode"], [spec])
            state_specs = self.encode.structured_outputs
            self.state_names = sorted(state_specs)
            step_specs = [tf.TensorSpec([1], tf.int32, name="token")] + [
                tf.TensorSpec(state_specs[k].shape, state_specs[k].dtype, name=k)
                for k in self.state_names
            ]
            self.decode_step = _concrete(
                _decode_step_fn(self.generator, self.state_names),
                self.names["decode_step"],
                step_specs,
            )
            self.generate_beam = None
            if self.beam_settings is not None:
                self.generate_beam = _concrete(
                    functions["generate_beam"], self.names["generate_beam"], [spec]
                )

    def concrete_functions(self):
        """The functions to convert, one signature each."""
        functions = [self.generate, self.encode, self.decode_step]
        if self.generate_beam is not None:
            functions.append(self.generate_beam)
        return functions

    def manifest(self):
        """What an app needs around the model: ids, bounds, signatures, state."""
        g = self.generator
        spec = self.source_spec
        signatures = {
            self.names["generate"]: {
                "inputs": [self.source_name],
                "outputs": list(GENERATE_OUTPUTS),
                "search": "greedy",
            },
            self.names["encode"]: {"inputs": [self.source_name], "outputs": self.state_names},
            self.names["decode_step"]: {
                "inputs": ["token", *self.state_names],
                "outputs": ["logits", "attention", *self.recurrent_names],
            },
        }
        if self.generate_beam is not None:
            signatures[self.names["generate_beam"]] = {
                "inputs": [self.source_name],
                "outputs": [*GENERATE_OUTPUTS, "scores"],
                "search": "beam",
                **self.beam_settings.arguments(),
            }
        return {
            "format_version": _FORMAT_VERSION,
            "source": {
                "shape": [d if d is None else int(d) for d in spec.shape],
                "dtype": spec.dtype.name,
                "kind": "token ids" if spec.dtype.is_integer else "features",
            },
            "pad_id": 0,
            "start_id": g.start_id,
            "end_id": g.end_id,
            "max_source_length": g.max_source_length,
            "longer_sources": "truncated to max_source_length inside the model",
            "max_output_length": g.max_output_length,
            "max_length": self.max_length,
            "max_length_rule": (
                f"min(2 * source_length + 10, {g.max_output_length})"
                if self.max_length is None
                else None
            ),
            "source_length": self.source_length,
            "source_length_rule": (
                None
                if self.source_length is None
                else (
                    f"pad every source with pad_id to {self.source_length} positions; "
                    "source_length in max_length_rule counts the positions up to the "
                    "last one that is not padding; tokens and attention have a static "
                    "number of rows, zero after `lengths`"
                )
            ),
            "token_ids": "source ids must be in [0, vocabulary); the model does not check",
            # The vocabularies to check ids against (None: unknown, e.g. features).
            "source_vocabulary_size": getattr(g, "source_vocabulary_size", None),
            "target_vocabulary_size": getattr(g, "target_vocabulary_size", None),
            "signatures": signatures,
            "decode_state": {"names": self.state_names, "recurrent": self.recurrent_names},
        }


def _search_functions(lite):
    """The functions of `generate`, `generate_beam` and `encode` (by those
    names) of a `LiteGenerator`, each of a (1, S) or (1, S, F) source, before
    tracing."""
    generator, max_length, source_length = lite.generator, lite.max_length, lite.source_length
    limit = generator.max_source_length

    def bounded(source):
        return source[:, :limit]  # (1, min(S, max_source_length), ...)

    def searched(source):
        # A padded static source: the searches read its real positions only
        # (at least one), as Keras reads the unpadded source, so the default
        # bound min(2·S + 10, cap) counts S, and the padding costs no encoder
        # step and no attention column (masked or not, an encoder's loop
        # would step through it: 64 steps for a 12-token sentence padded to
        # 64).
        source = bounded(source)
        if source_length is None:
            return source
        return source[:, : tf.maximum(real_length(source), 1)]  # (1, S or 1[, F])

    # With a static source, the outputs get static shapes too (LiteRT.js
    # allocates outputs from the model's shapes and fails on a dynamic
    # one): rows up to the largest bound, zero past the real one, and one
    # attention column for each of the N positions, zero on the padding.
    rows = None
    if source_length is not None:
        rows = max_length or generator.resolve_max_length(source_length, None)

    # The loops search a state of a static width (see `StaticWidth`): the
    # static length N, or max_source_length. With a static source, the output
    # buffers have their static number of rows too (`rows`); with a dynamic
    # one they keep min(2·S + 10, cap) rows (a buffer of the largest bound,
    # 1,034 x 512 weights for the defaults, would cost more at each step
    # than the search; buffers that grow did not meet the defect:
    # docs/benchmarks.md).
    search = StepSearch(StaticWidth(generator, source_length or limit))

    def generate(source):
        source = searched(source)
        result = search.run(greedy_search, source, max_length, False, buffer=rows)
        result["attention"] = _read_columns(result["attention"], source, source_length)
        return _static_rows(result, GENERATE_OUTPUTS, rows, source_length)

    def generate_beam(source):
        source = searched(source)
        options = search.beam_options(lite.beam_settings)
        result = search.run(beam_search, source, max_length, False, buffer=rows, **options)
        result["attention"] = _read_columns(result["attention"], source, source_length)
        return _static_rows(result, (*GENERATE_OUTPUTS, "scores"), rows, source_length)

    def encode(source):
        state, _ = generator.encode(at_least_one_position(bounded(source)))
        return dict(state)

    return {"generate": generate, "generate_beam": generate_beam, "encode": encode}


class StaticWidth:
    """A generator whose `encode` pads the decode state to `width` source
    positions, so the search loops of an exported model see no shape that
    depends on the source.

    Why: in LiteRT's default CPU path (the XNNPACK delegate, Python LiteRT
    2.3.0), a `WHILE` body whose inputs grow with the source is resized and
    re-planned when a call brings a source longer than any before it, and
    that first call now and then reads memory nobody wrote: all-0 tokens
    with a NaN log-probability, or another sentence
    (`benchmarks/lite_first_growth.py`: about 3 in 100 such calls when the
    app had just dropped another interpreter, 1 in 1,000 otherwise). A body
    of static shapes is planned once, when the interpreter is made, and
    never again. The encoder's own loops do not meet it (the `encode`
    signature alone gave none wrong).

    The padding is masked: the state's entries that have a source axis
    (memory, processed keys, mask, an attention's alignment state) get
    zeros after the S real positions, the mask False, so each step's
    weights there are exactly 0 (the attention contract) and the context,
    the tokens and the scores are those of the unpadded state. The cost:
    every step attends over `width` positions instead of S.

    Every other name is the generator's (`step`, `start_id`, `end_id`,
    `max_output_length`, `variables`, ...), so a `StepSearch` of it
    searches as the generator's does.
    """

    def __init__(self, generator, width):
        self.generator = generator
        self.width = width

    def __getattr__(self, name):
        return getattr(self.generator, name)

    def encode(self, source):
        """`generator.encode(source)`, each entry with a source axis padded
        to `width` positions. Traced with a source of unknown length (as the
        export traces it): that unknown axis tells the entries apart from
        the recurrent ones (1, units)."""
        state, mask = self.generator.encode(source)  # mask (1, S)
        if mask.shape[1] is not None:
            raise ValueError(
                f"StaticWidth needs a source of unknown length (traced as (1, None)); "
                f"the mask has shape {tuple(mask.shape)}."
            )
        padding = self.width - tf.shape(mask)[1]
        return (
            {k: self._padded(v, padding) for k, v in state.items()},
            self._padded(mask, padding),
        )

    def _padded(self, value, padding):
        """`value` (1, S, ...) with `padding` zero (False) positions after S,
        (1, width, ...) static; an entry without a source axis as it is."""
        if value.shape.rank < 2 or value.shape[1] is not None:
            return value  # (1, units): h, c, attentional
        pad = [[0, 0], [0, padding]] + [[0, 0]] * (value.shape.rank - 2)
        if value.dtype == tf.bool:
            # TensorFlow 2.16's converter has no builtin PAD of booleans.
            padded = tf.cast(tf.pad(tf.cast(value, tf.int32), pad), tf.bool)
        else:
            padded = tf.pad(value, pad)
        return tf.reshape(padded, [value.shape[0], self.width, *value.shape[2:]])


def _read_columns(attention, source, columns):
    """The attention (1, L, width) of a `StaticWidth` search cut to the
    source's S positions (a dynamic export), or kept at `columns` (N, a
    static export: zero past S already)."""
    if columns is not None:
        return attention
    return attention[:, :, : tf.maximum(tf.shape(source)[1], 1)]  # (1, L, S)


def _static_rows(result, keys, rows, columns):
    """The outputs `keys` of a search; with `rows`, `tokens` and `attention`
    padded with zeros (or cut) to that many rows, and `attention` to
    `columns` columns (the static source length), static shapes."""
    out = {k: result[k] for k in keys}
    if rows is None:
        return out
    tokens = result["tokens"]  # (1, L), L <= rows
    padded = tf.concat([tokens, tf.zeros([1, rows], tokens.dtype)], axis=1)[:, :rows]
    out["tokens"] = tf.reshape(padded, [1, rows])  # static
    weights = result["attention"]  # (1, L, S), S <= columns
    zeros = tf.zeros(tf.stack([1, tf.shape(weights)[1], columns]), weights.dtype)
    padded = tf.concat([weights, zeros], axis=2)[:, :, :columns]  # (1, L, columns)
    padded = tf.concat([padded, tf.zeros([1, rows, columns], weights.dtype)], axis=1)[:, :rows]
    out["attention"] = tf.reshape(padded, [1, rows, columns])  # static
    for k in keys:
        if k not in ("tokens", "attention"):  # lengths, log_probs, scores: (1,)
            out[k] = _computed_copy(result[k])
    return out


def _computed_copy(value):
    """`value` (1, ...) written by an operator of its own, a static shape.

    A search over a cut source leaves the loop's outputs with shapes known
    only at run time, and LiteRT.js 2.5.3 then hands the app stale memory for
    an output that is the `WHILE`'s own (a length of 1,215,320 for 3), though
    Python LiteRT reads it right. Written again by a concatenation and a
    slice, which the converter does not fold away, the output is a tensor of
    its own."""
    copied = tf.concat([value, tf.zeros_like(value)], axis=-1)[..., : value.shape[-1]]
    return tf.reshape(copied, value.shape)


def check_captured_variables(functions, allowed, generator):
    """Raises if traced functions read variables outside `allowed` (tf.Variables):
    variables the generator's `variables()` did not list, so that the export
    could neither freeze nor save them."""
    allowed = {id(v) for v in allowed}
    missed = {}
    for function in functions:
        for v in function.variables:
            if id(v) not in allowed:
                missed.setdefault(id(v), v.name)
    if missed:
        names = ", ".join(sorted(missed.values()))
        raise ValueError(
            f"The generator reads variables that its `variables()` does not list: "
            f"{names}. A piece given to Seq2SeqGenerator as a plain function must "
            "list the variables it reads in a `variables` attribute (e.g. "
            "`encoder.variables = layer_a.variables + layer_b.variables`), or be a "
            f"Keras layer or model. Listed: {len(generator.variables())} variables."
        )


def check_float32(functions):
    """Raises if traced functions compute in float16 or bfloat16: TFLite has no
    builtin float16 `MatMul`, `AddV2`, `BatchMatMulV2` (its float16 models
    store float16 weights and compute in float32), and the converter's own
    error lists every such op of the graph. `float32_generator` copies a
    `from_model` generator to float32 before this; one built with the
    explicit constructor from reduced-precision layers gets here."""
    reduced = {}
    for function in functions:
        graph = function.graph.as_graph_def()
        nodes = list(graph.node)
        for body in graph.library.function:
            nodes += list(body.node_def)
        for node in nodes:
            for value in node.attr.values():
                if value.type in (tf.float16.as_datatype_enum, tf.bfloat16.as_datatype_enum):
                    reduced.setdefault(node.op, (node.name, tf.as_dtype(value.type).name))
    if reduced:
        examples = ", ".join(
            f"{op} ({name}, {dtype})" for op, (name, dtype) in sorted(reduced.items())[:5]
        )
        raise ValueError(
            f"The generator computes in reduced precision ({examples}, "
            f"{len(reduced)} kinds of op), which builtin-only TFLite cannot run. "
            "Build it with `Seq2SeqGenerator.from_model` (exported through a "
            "float32 copy), or from float32 copies of its layers "
            "(`keras_attention.backend.precision.float32_copy(layer)`)."
        )


def _concrete(fn, name, specs):
    fn.__name__ = name  # the converter names each signature after its function
    return tf.function(fn, input_signature=specs, autograph=False).get_concrete_function()


def _decode_step_fn(generator, state_names):
    # One positional argument per state entry: a TFLite signature's inputs are
    # named after the TensorSpecs of flat arguments.
    def decode_step(token, *values):
        state = dict(zip(state_names, values, strict=True))
        logits, weights, new_state = generator.step(token, state)
        outputs = {"logits": logits, "attention": weights}  # (1, V), (1, S)
        # Only what a step changes goes out (h, c, attentional); memory,
        # processed keys and mask stay as `encode` gave them.
        outputs.update({k: v for k, v in new_state.items() if v is not state[k]})
        return outputs

    return decode_step


def convert(lite_generator, quantization="float32"):
    """Converts a `LiteGenerator` to a builtin-ops-only flatbuffer (bytes).

    Args:
        lite_generator: a `LiteGenerator`.
        quantization: one of `VARIANTS`: "float32" (None too); "float16"
            (float16 weights, dequantized at load, written into the float32
            conversion by `float16.float16_weights` so the loops read them
            where the float32 model does); "int8" (dynamic range: int8
            weights, float activations).

    Raises:
        ValueError: an unknown quantization, or a converted model that still
            holds a Flex, custom or variable operator (named).
    """
    check_tensorflow_backend("TFLite export")
    quantization = check_quantization(quantization)
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        lite_generator.concrete_functions(), lite_generator
    )
    # Builtins only: a Flex or custom op fails the conversion instead of
    # slipping into the model.
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = False
    if quantization == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    data = converter.convert()
    if quantization == "float16":
        data = float16_weights(data)
    # The converter refuses Flex and custom ops, but not the variable ops of
    # weights it failed to freeze, which only fail at `invoke()`.
    forbidden = non_builtin_operators(data)
    if forbidden:
        raise ValueError(
            f"The converted model needs operators outside TFLite's builtins: {forbidden}."
        )
    return data


def write_tflite(lite_generator, path, quantization="float32"):
    """Converts a `LiteGenerator` (`convert`) and writes the model to `path`,
    whole or not at all (`keras_attention.files.atomic`), creating the
    folder if needed. The step every TFLite export shares: `export_tflite`,
    `export_folder` and the translator's (`keras_attention.translation.lite`).

    Args:
        lite_generator: a `LiteGenerator`.
        path: the `.tflite` file to write.
        quantization: see `convert`.

    Returns:
        `path`, as a `Path`.
    """
    path = Path(path)
    data = convert(lite_generator, quantization)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(path, data)
    return path


def export_tflite(generator, path, quantization="float32", **options):
    """Writes a builtin-ops-only TFLite model of a generator, and its manifest.

    The model has static batch 1 and a dynamic source length (or, with
    `source_length`, a static one), and the signatures

    - `generate(source)` → `tokens` (1, L) int32, `lengths` (1,), `log_probs`
      (1,), `attention` (1, L, S): greedy search inside the model (a `WHILE`);
    - `encode(source)` → the decoder's first state, one named tensor each;
    - `decode_step(token (1,), **state)` → `logits` (1, V), `attention` (1, S)
      and the new values of the recurrent entries (`h`, `c`, `attentional`);
      the other entries stay as `encode` gave them. For an app's own loop;
    - with `beam_width`, `generate_beam(source)`: beam search with its
      penalties inside the model, the outputs of `generate` plus `scores`.

    `path` with the suffix `.json` receives the manifest: the source spec, the
    ids, the bounds, the signatures and the state names. Each file is written
    whole or not at all (`keras_attention.files.atomic`); the folder is
    created if needed.

    Args:
        generator: a `Seq2SeqGenerator`.
        path: the `.tflite` file to write.
        quantization: one of `VARIANTS`: "float32" (None too), "float16" or
            "int8" (dynamic range) weights.
        **options: the keyword arguments of `LiteGenerator`:
            - `max_length`: most output tokens, END included; None for
              min(2·S + 10, generator.max_output_length);
            - `beam_width`: add `generate_beam` with this many hypotheses
              (None, the default: no beam; `search_defaults.BEAM_WIDTH` is the
              generator's default), at most `search_defaults.MAX_BEAM_WIDTH`
              and the target vocabulary;
            - `length_penalty`, `coverage_penalty`: `generate_beam`'s GNMT
              penalties, by default `Seq2SeqGenerator.beam`'s
              (`keras_attention.generation.search_defaults`);
            - `source_spec`: see `source_signature` (needed for a generator
              built with the explicit constructor);
            - `source_length`: None (dynamic), or a static source length N for
              runtimes that refuse a dynamic dimension (LiteRT.js): the app
              pads each source with id 0 to N; the default output bound counts
              the real tokens (see `LiteGenerator`).

    Returns:
        The manifest dict.

    Raises:
        ValueError: a bad argument, or a converted model that still holds a
            Flex, custom or variable operator (named).
    """
    check_tensorflow_backend("TFLite export")
    quantization = check_quantization(quantization)
    if options.get("beam_width") is not None:  # before any work, whatever the generator
        check_beam_width(options["beam_width"], getattr(generator, "target_vocabulary_size", None))
    path = tflite_model_path(path)
    lite = LiteGenerator(generator, **options)
    write_tflite(lite, path, quantization)
    return write_model_manifest(lite, path, quantization)


def write_model_manifest(lite_generator, path, quantization):
    """Writes the manifest of the model at `path` beside it (`path` with the
    suffix .json): `lite_generator.manifest()` with `quantization` (the
    variant) and `model_file`; returns it."""
    manifest = lite_generator.manifest()
    manifest["quantization"] = check_quantization(quantization)
    manifest["model_file"] = Path(path).name
    write_json(Path(path).with_suffix(".json"), manifest)
    return manifest


def tflite_model_path(path):
    """`path` as a `Path`; `ValueError` for a `.json` one, which the manifest
    (written to `path` with the suffix .json) would replace. The check of
    every export that writes a model and its manifest beside it."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        raise ValueError(
            "Invalid value for argument `path`. Expected the .tflite file to write; "
            f"the manifest goes beside it as {path.with_suffix('.json').name}. "
            f"Received: path={str(path)!r}"
        )
    return path
