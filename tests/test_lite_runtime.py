"""`runtime.litert.warm_up`: one call of each signature at the largest source.

Python LiteRT's default CPU path gave wrong tokens now and then on the first
call whose source was longer than any earlier call of the interpreter, with
models of earlier releases (`benchmarks/lite_first_growth.py`; the export
now avoids it: tests/test_lite_static_search.py). `warm_up` stays for those
models. These tests check what it does: every signature has run at the
given length (the interpreter's input shapes say so), the tokens of later
calls, shorter and as long, equal Keras', a length above max_source_length
is refused before any call, and bad arguments are named.
"""

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from test_seq2seq_generator import LENGTHS
from test_seq2seq_generator import case

from keras_attention.export import export_tflite
from keras_attention.runtime.litert import warm_up

LONGEST = max(LENGTHS)  # 7


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """kind → path: a dynamic-length model with beam, a static-length one
    (7 positions) and a model of feature sources."""
    folder = tmp_path_factory.mktemp("lite_runtime")
    paths = {
        "dynamic": folder / "dynamic.tflite",
        "static": folder / "static.tflite",
        "features": folder / "features.tflite",
    }
    export_tflite(case("bahdanau_gru").generator, paths["dynamic"], beam_width=2)
    export_tflite(case("bahdanau_gru").generator, paths["static"], source_length=LONGEST)
    export_tflite(case("bahdanau_lstm_features").generator, paths["features"])
    return paths


def _input_shape(interpreter, signature, name):
    details = interpreter.get_signature_runner(signature).get_input_details()
    return details[name]["shape"].tolist()


def test_every_signature_has_run_at_the_given_length(exported):
    interpreter = warm_up(Interpreter(model_path=str(exported["dynamic"])), 9)
    for signature in ("generate", "generate_beam", "encode"):
        assert _input_shape(interpreter, signature, "source") == [1, 9]
    # decode_step took encode's outputs: a memory of 9 positions.
    assert _input_shape(interpreter, "decode_step", "memory")[:2] == [1, 9]


def test_a_static_model_warms_up_at_its_own_length(exported):
    interpreter = warm_up(Interpreter(model_path=str(exported["static"])))
    assert _input_shape(interpreter, "generate", "source") == [1, LONGEST]
    assert _input_shape(interpreter, "encode", "source") == [1, LONGEST]


def test_feature_sources_warm_up_with_their_feature_size(exported):
    interpreter = warm_up(Interpreter(model_path=str(exported["features"])), 9)
    shape = _input_shape(interpreter, "generate", "source")
    assert shape[:2] == [1, 9] and len(shape) == 3 and shape[2] > 0


@pytest.mark.parametrize("kind", ["dynamic", "features"])
def test_later_calls_shorter_or_as_long_equal_keras(exported, kind):
    name = "bahdanau_gru" if kind == "dynamic" else "bahdanau_lstm_features"
    c = case(name)
    interpreter = warm_up(Interpreter(model_path=str(exported[kind])), LONGEST)
    generate = interpreter.get_signature_runner("generate")
    for row in sorted(range(len(LENGTHS)), key=lambda r: LENGTHS[r]):  # growing
        source = c.single(row)
        expected = c.generator.greedy(source)
        got = generate(source=source)
        np.testing.assert_array_equal(got["tokens"], expected["tokens"])
        np.testing.assert_array_equal(got["lengths"], expected["lengths"])


def test_a_static_model_after_warm_up_decodes_padded_sources_as_keras(exported):
    c = case("bahdanau_gru")
    interpreter = warm_up(Interpreter(model_path=str(exported["static"])))
    generate = interpreter.get_signature_runner("generate")
    for row in sorted(range(len(LENGTHS)), key=lambda r: LENGTHS[r]):
        source = c.single(row)
        padded = np.pad(source, [(0, 0), (0, LONGEST - source.shape[1])])
        expected = c.generator.greedy(source)["tokens"][0]
        got = generate(source=padded)["tokens"][0]
        np.testing.assert_array_equal(got[: len(expected)], expected)
        assert not got[len(expected) :].any()


def test_a_dynamic_model_needs_the_length(exported):
    interpreter = Interpreter(model_path=str(exported["dynamic"]))
    with pytest.raises(ValueError, match=r"`source_length`.*any length.*source_length=None"):
        warm_up(interpreter)


def test_a_static_model_refuses_another_length(exported):
    interpreter = Interpreter(model_path=str(exported["static"]))
    with pytest.raises(ValueError, match=rf"static length of {LONGEST}.*source_length=9"):
        warm_up(interpreter, 9)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "7"])
def test_a_length_that_is_not_a_positive_int_is_named(exported, bad):
    interpreter = Interpreter(model_path=str(exported["dynamic"]))
    with pytest.raises((ValueError, TypeError), match="source_length"):
        warm_up(interpreter, bad)


def test_a_model_without_a_source_signature_is_refused(tmp_path):
    module = tf.Module()
    module.add = tf.function(
        lambda a, b: {"sum": a + b},
        input_signature=[tf.TensorSpec([1], tf.float32), tf.TensorSpec([1], tf.float32)],
    )
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [module.add.get_concrete_function()], module
    )
    path = tmp_path / "add.tflite"
    path.write_bytes(converter.convert())
    with pytest.raises(ValueError, match="no signature of one source input"):
        warm_up(Interpreter(model_path=str(path)), 4)


@pytest.mark.parametrize(
    ("length", "bound"), [(10**7, None), (513, None), (9, 8)], ids=["huge", "above_512", "given"]
)
def test_a_length_above_max_source_length_is_refused_before_any_call(exported, length, bound):
    # The model reads at most its manifest's max_source_length positions: a
    # longer warm-up would only allocate (10**7 positions ran unbounded).
    interpreter = Interpreter(model_path=str(exported["dynamic"]))
    options = {} if bound is None else {"max_source_length": bound}
    limit = bound or 512
    with pytest.raises(ValueError, match=rf"at most max_source_length={limit}.*={length}$"):
        warm_up(interpreter, length, **options)
    # Nothing ran: the input keeps the shape of the model's signature.
    assert _input_shape(interpreter, "generate", "source") == [1, 1]


def test_a_length_up_to_the_given_max_source_length_warms_up(exported):
    interpreter = warm_up(Interpreter(model_path=str(exported["dynamic"])), 8, max_source_length=8)
    assert _input_shape(interpreter, "generate", "source") == [1, 8]


@pytest.mark.parametrize("bad", [0, None, 2.5, True])
def test_a_max_source_length_that_is_not_a_positive_int_is_named(exported, bad):
    interpreter = Interpreter(model_path=str(exported["dynamic"]))
    with pytest.raises(ValueError, match="`max_source_length`"):
        warm_up(interpreter, 4, max_source_length=bad)
