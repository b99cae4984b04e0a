"""Running an exported TFLite model: `warm_up`, one call at the largest source
before the app's first.

Models written by this release need no warm-up. LiteRT's default CPU path
(the XNNPACK delegate, on in Python LiteRT and on Android) returned wrong
tokens now and then on the first call whose source was longer than any
earlier call of the same interpreter, when the model's search loop carried
tensors sized by the source (its body was resized then, and read memory
nobody wrote: all-0 tokens with a NaN log-probability, or another sentence).
`export_tflite` now pads the search's state to a static width, and
`benchmarks/lite_first_growth.py` measures both graphs (docs/benchmarks.md).

`warm_up` stays for models exported by earlier releases: one call at the
largest length the app will send, made once and thrown away, leaves every
later call within the sizes already allocated.

Needs only numpy, and imports nothing of the package: an app that runs the
model without Keras loads this file by its path (as
`examples/tflite_translate.py` does). It takes an interpreter the app made
(`ai_edge_litert`'s `Interpreter`, or `tf.lite.Interpreter`).
"""

import numbers

import numpy as np

# The id the warm-up source repeats: any id but padding (0) is one the
# model's vocabulary has (START, END and padding come first).
_WARM_UP_ID = 1

# The models' default max_source_length (`search_defaults.MAX_SOURCE_LENGTH`,
# not imported: this file needs numpy only). A model reads no more positions
# than its manifest's max_source_length, so a longer warm-up is refused.
MAX_SOURCE_LENGTH = 512


def warm_up(interpreter, source_length=None, max_source_length=MAX_SOURCE_LENGTH):
    """Calls every signature of `interpreter` once at `source_length`.

    Each signature with one input (`generate`, `generate_beam`, `encode`,
    the translator's `translate`) gets a source of `source_length` positions,
    none of them padding; `decode_step` gets `encode`'s outputs with a zero
    token. The outputs are thrown away.

    Args:
        interpreter: a LiteRT `Interpreter` of a model written by
            `export_tflite`, `export_folder` or the translator's export.
        source_length: the most source positions the app will send. None for
            a model of a static source length (`source_length=N` at export):
            N. A model of dynamic length needs it (its manifest's
            `max_source_length` is the most the model reads).
        max_source_length: the model's manifest's `max_source_length`, the
            most `source_length` may be (default 512, the models' default).

    Returns:
        `interpreter`, ready for the app's calls.

    Raises:
        ValueError: the model has no signature with a source, `source_length`
            or `max_source_length` is not a positive integer, `source_length`
            is None for a model of dynamic length,
            differs from a static length, or is above `max_source_length`.
    """
    for name, value in (("source_length", source_length), ("max_source_length", max_source_length)):
        if (value is not None or name == "max_source_length") and (
            isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1
        ):
            none = " or None" if name == "source_length" else ""
            raise ValueError(
                f"Invalid value for argument `{name}`. Expected a positive integer{none}. "
                f"Received: {name}={value!r}"
            )
    if source_length is not None and source_length > max_source_length:
        raise ValueError(
            "Invalid value for argument `source_length`. Expected at most "
            f"max_source_length={max_source_length} (the manifest's max_source_length: the "
            "model reads no more positions; pass `max_source_length` for a model exported "
            f"with a larger bound). Received: source_length={source_length}"
        )
    signatures = interpreter.get_signature_list()
    encoded = None
    warmed = []
    for name in sorted(signatures, key=lambda n: n != "encode"):  # encode first
        runner = interpreter.get_signature_runner(name)
        details = runner.get_input_details()
        if len(details) != 1:
            continue
        ((key, detail),) = details.items()
        source = _warm_up_source(name, key, detail, source_length)
        outputs = runner(**{key: source})
        if name == "encode":
            encoded = outputs
        warmed.append(name)
    if not warmed:
        raise ValueError(
            "The interpreter's model has no signature of one source input "
            f"(signatures: {sorted(signatures)}); warm_up needs a model written by "
            "export_tflite, export_folder or the translator's export."
        )
    if encoded is not None and "decode_step" in signatures:
        runner = interpreter.get_signature_runner("decode_step")
        inputs = {}
        for key, detail in runner.get_input_details().items():
            if key in encoded:
                inputs[key] = encoded[key]
            else:  # the token: any id
                shape = [max(int(d), 1) for d in detail["shape_signature"]]
                inputs[key] = np.zeros(shape, detail["dtype"])
        runner(**inputs)
    return interpreter


def _warm_up_source(signature, key, detail, source_length):
    """A source of `source_length` positions for the signature's one input,
    no position padding: (1, N) ids, or (1, N, F) features of ones."""
    shape = [int(d) for d in detail["shape_signature"]]
    if len(shape) < 2:
        raise ValueError(
            f"Signature {signature!r}: its input {key!r} has shape {shape}; warm_up expects "
            "a source (1, S) or (1, S, F)."
        )
    static = shape[1] if shape[1] > 0 else None
    if static is None and source_length is None:
        raise ValueError(
            "Invalid value for argument `source_length`. The model reads sources of any "
            f"length (signature {signature!r}); give the most positions the app will send "
            "(at most the manifest's max_source_length). Received: source_length=None"
        )
    if static is not None and source_length not in (None, static):
        raise ValueError(
            "Invalid value for argument `source_length`. The model's sources have a static "
            f"length of {static} (signature {signature!r}); give None or {static}. "
            f"Received: source_length={source_length}"
        )
    shape[0], shape[1] = 1, static or source_length
    if any(d < 1 for d in shape[2:]):
        raise ValueError(
            f"Signature {signature!r}: its input {key!r} has a dynamic feature size "
            f"{shape}; warm_up needs the feature sizes."
        )
    return np.full(shape, _WARM_UP_ID, detail["dtype"])
