"""Float16 weights written into the float32 conversion (`export.float16`).

References: the float32 flatbuffer itself (each float16 weight is its float32
weight rounded once), a float64 numpy product with the rounded weights, and
the converter's own float16 option (same tokens). The structural check is the
reason the module exists: the search loops of a float16 model carry exactly
the values the float32 model's loops carry, no weight among them.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import Seq2SeqGenerator
from keras_attention.export import convert
from keras_attention.export import export_tflite
from keras_attention.export import non_builtin_operators
from keras_attention.export.float16 import MIN_ELEMENTS
from keras_attention.export.float16 import float16_weights
from keras_attention.export.tflite import LiteGenerator

pytestmark = pytest.mark.tensorflow

VOCAB, START, END = 300, 1, 2
MAX_LENGTH = 12


def _model(data):
    return schema.ModelT.InitFromPackedBuf(bytearray(data), 0)


def _opname(model, op):
    code = model.operatorCodes[op.opcodeIndex]
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    return names[max(code.builtinCode, code.deprecatedBuiltinCode)]


def _buffer_values(model, tensor, dtype):
    return np.frombuffer(bytes(model.buffers[tensor.buffer].data), dtype)


@pytest.fixture(scope="module")
def generator():
    keras.utils.set_random_seed(3)
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, 16, mask_zero=True)(source)  # 4,800 weights
    memory = keras.layers.Bidirectional(keras.layers.GRU(16, return_sequences=True))(x)
    y = keras.layers.Embedding(VOCAB, 16, mask_zero=True)(target_in)
    outputs, _, _ = BahdanauDecoder(32, BahdanauAttention(32))(y, memory)
    model = keras.Model([source, target_in], keras.layers.Dense(VOCAB)(outputs))
    # Biases start at zero, and the converter drops a zero bias; a trained
    # model has biases, which float16 must convert with their weights.
    rng = np.random.default_rng(3)
    for weight in model.weights:
        if "bias" in weight.path:
            weight.assign(rng.normal(size=weight.shape).astype("float32") / 10)
    return Seq2SeqGenerator.from_model(model, start_id=START, end_id=END)


@pytest.fixture(scope="module")
def models(generator, tmp_path_factory):
    lite = LiteGenerator(generator, beam_width=3, max_length=MAX_LENGTH)
    float32 = convert(lite)
    folder = tmp_path_factory.mktemp("float16")
    path = folder / "model_float16.tflite"
    export_tflite(generator, path, quantization="float16", beam_width=3, max_length=MAX_LENGTH)
    # The converter's own float16 option, as a second way to run the model.
    converter = tf.lite.TFLiteConverter.from_concrete_functions(lite.concrete_functions(), lite)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
    return {"float32": float32, "float16": path.read_bytes(), "converter": converter.convert()}


def _while_inputs(data):
    model = _model(data)
    return {
        (s, (sg.name or b"").decode()): [
            len(op.inputs) for op in sg.operators if _opname(model, op) == "WHILE"
        ]
        for s, sg in enumerate(model.subgraphs)
    }


def test_float16_loops_carry_what_float32_loops_carry(models):
    float32, float16 = _while_inputs(models["float32"]), _while_inputs(models["float16"])
    assert float16 == float32
    assert sum(len(v) for v in float32.values()) >= 3  # the encoder's and the searches' loops


def _product_biases(model):
    """{(subgraph, tensor): number of weights} of the biases of FULLY_CONNECTED operators."""
    biases = {}
    for s, subgraph in enumerate(model.subgraphs):
        for op in subgraph.operators:
            inputs = list(op.inputs)
            if _opname(model, op) == "FULLY_CONNECTED" and len(inputs) > 2 and inputs[2] >= 0:
                biases[(s, inputs[2])] = int(np.prod(subgraph.tensors[inputs[1]].shape))
    return biases


def test_each_float16_weight_is_its_float32_weight_rounded_and_read_through_dequantize(models):
    before, after = _model(models["float32"]), _model(models["float16"])
    biases = _product_biases(before)
    converted = kept = small_biases = 0
    saved = {}  # buffer → bytes saved (buffers may be shared between subgraphs)
    for s, (old, new) in enumerate(zip(before.subgraphs, after.subgraphs, strict=True)):
        for t, tensor in enumerate(old.tensors):
            if tensor.type != schema.TensorType.FLOAT32 or not tensor.buffer:
                continue
            data = before.buffers[tensor.buffer].data
            if data is None or len(data) == 0:
                continue
            weights = _buffer_values(before, tensor, "<f4")
            moved = new.tensors[t]
            # A bias is float16 exactly when its product's weights are.
            if biases.get((s, t), weights.size) < MIN_ELEMENTS:
                assert moved.type == schema.TensorType.FLOAT32, (s, tensor.name)
                kept += 1
                continue
            assert moved.type == schema.TensorType.FLOAT16, (s, tensor.name)
            small_biases += weights.size < MIN_ELEMENTS
            half = _buffer_values(after, moved, "<f2")
            np.testing.assert_array_equal(half, weights.astype(np.float16))
            readers = [op for op in new.operators if t in list(op.inputs)]
            if not any(t in list(op.inputs) for op in old.operators):
                assert not readers  # a constant nothing reads (left by the converter)
                continue
            assert {_opname(after, op) for op in readers} == {"DEQUANTIZE"}, (s, tensor.name)
            converted += 1
            saved[tensor.buffer] = 2 * weights.size
    assert converted >= 5 and kept >= 1 and small_biases >= 1, (converted, kept, small_biases)
    names = [m.name for m in after.metadata]
    assert b"reduced_precision_support" in names
    assert non_builtin_operators(models["float16"]) == {}
    # Two bytes saved per weight, at most a few hundred spent per DEQUANTIZE.
    spent = len(models["float16"]) - (len(models["float32"]) - sum(saved.values()))
    assert spent < 400 * converted, (spent, converted)
    assert len(models["float16"]) < 1.05 * len(models["converter"])


@pytest.mark.parametrize("signature", ["generate", "generate_beam"])
def test_float16_model_decodes_like_the_converters_float16_and_keras(models, generator, signature):
    runners = {
        k: Interpreter(model_content=models[k]).get_signature_runner(signature)
        for k in ("float16", "converter")
    }
    rng = np.random.default_rng(7)
    for length in (1, 4, 9):
        source = rng.integers(3, VOCAB, (1, length)).astype(np.int32)
        ours, theirs = (runners[k](source=source) for k in ("float16", "converter"))
        np.testing.assert_array_equal(ours["tokens"], theirs["tokens"])
        np.testing.assert_allclose(ours["log_probs"], theirs["log_probs"], atol=1e-3)
        if signature == "generate":
            expected = generator.greedy(source, max_length=MAX_LENGTH)
        else:
            expected = generator.beam(source, beam_width=3, max_length=MAX_LENGTH)
        np.testing.assert_array_equal(ours["tokens"], expected["tokens"])


def _two_products_model(weights, bias, big):
    """A builtin-only model of x → (x W + b, x[:, :1] · big), from a TensorFlow function."""

    @tf.function(input_signature=[tf.TensorSpec((1, weights.shape[0]), tf.float32)])
    def fn(x):
        return {
            "product": tf.matmul(x, tf.constant(weights)) + tf.constant(bias),
            "scaled": x[:, :1] * tf.constant(big),
        }

    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def _constant_kinds(data):
    """{number of values: tensor type} of the float constants of subgraph 0."""
    model = _model(data)
    kinds = {}
    for tensor in model.subgraphs[0].tensors:
        data_of = model.buffers[tensor.buffer].data if tensor.buffer else None
        floats = (schema.TensorType.FLOAT32, schema.TensorType.FLOAT16)
        if data_of is not None and len(data_of) and tensor.type in floats:
            kinds[int(np.prod(tensor.shape))] = tensor.type
    return kinds


def test_small_and_out_of_range_constants_stay_float32_a_bias_follows_its_weights():
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(64, 48)).astype(np.float32)  # 3,072 values: float16
    # 48 values, below MIN_ELEMENTS, but the bias of float16 weights: float16.
    bias = rng.normal(size=(48,)).astype(np.float32)
    big = rng.uniform(7e4, 1e6, size=(1, 2048)).astype(np.float32)  # beyond ±65,504: stays
    data = float16_weights(_two_products_model(weights, bias, big))
    assert _constant_kinds(data) == {
        64 * 48: schema.TensorType.FLOAT16,
        48: schema.TensorType.FLOAT16,
        2048: schema.TensorType.FLOAT32,
    }
    x = rng.normal(size=(1, 64)).astype(np.float32)
    interpreter = Interpreter(model_content=data)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    out = {}
    for detail in interpreter.get_output_details():  # told apart by their shapes
        name = "product" if detail["shape"][-1] == 48 else "scaled"
        out[name] = interpreter.get_tensor(detail["index"])
    rounded = weights.astype(np.float16).astype(np.float64)
    rounded_bias = bias.astype(np.float16).astype(np.float64)
    expected = x.astype(np.float64) @ rounded + rounded_bias
    np.testing.assert_allclose(out["product"], expected, rtol=1e-5, atol=1e-5)
    # The rounding is there: float32 weights give another product.
    unrounded = x.astype(np.float64) @ weights.astype(np.float64) + bias
    assert np.abs(out["product"] - unrounded).max() > 1e-3
    np.testing.assert_allclose(out["scaled"], x[:, :1].astype(np.float64) * big, rtol=1e-6)


def test_weights_whose_bias_cannot_be_float16_stay_float32():
    # LiteRT.js runs a product of float16 weights and a float32 bias slowly:
    # a bias beyond float16's range keeps its weights float32 as well.
    rng = np.random.default_rng(1)
    weights = rng.normal(size=(64, 48)).astype(np.float32)
    bias = np.full((48,), 1e5, np.float32)
    data = float16_weights(_two_products_model(weights, bias, np.ones((1, 2048), np.float32)))
    assert _constant_kinds(data) == {
        64 * 48: schema.TensorType.FLOAT32,
        48: schema.TensorType.FLOAT32,
        2048: schema.TensorType.FLOAT16,
    }
    # Small weights with a small bias: both stay float32.
    small = float16_weights(
        _two_products_model(weights[:16, :8], bias[:8] / 1e5, np.ones((1, 8), np.float32))
    )
    assert set(_constant_kinds(small).values()) == {schema.TensorType.FLOAT32}


def _shared_table_model(table):
    """ids, x → (table[ids], x tableᵀ): one constant read by GATHER and FULLY_CONNECTED."""

    @tf.function(
        input_signature=[
            tf.TensorSpec((1, 3), tf.int32, name="ids"),
            tf.TensorSpec((1, table.shape[1]), tf.float32, name="x"),
        ]
    )
    def fn(ids, x):
        constant = tf.constant(table)
        return {
            "looked_up": tf.gather(constant, ids),
            "logits": tf.matmul(x, constant, transpose_b=True),
        }

    module = tf.Module()
    module.serving_default = fn
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [fn.get_concrete_function()], module
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def test_a_weight_read_by_a_product_and_a_lookup_gets_a_dequantize_for_each():
    # A dequantized weight that only products read is one XNNPACK can treat as
    # constant; shared with a GATHER, LiteRT.js reads it anew at each call.
    rng = np.random.default_rng(2)
    table = rng.normal(size=(300, 16)).astype(np.float32)
    float32 = _shared_table_model(table)
    before = _model(float32)
    readers_before = {
        _opname(before, op) for op in before.subgraphs[0].operators if len(op.inputs) > 1
    }
    assert {"GATHER", "FULLY_CONNECTED"} <= readers_before
    data = float16_weights(float32)
    model = _model(data)
    subgraph = model.subgraphs[0]
    dequantized = [op for op in subgraph.operators if _opname(model, op) == "DEQUANTIZE"]
    assert len({int(op.inputs[0]) for op in dequantized}) == 1  # one float16 table
    readers = {
        int(op.outputs[0]): {
            _opname(model, r) for r in subgraph.operators if int(op.outputs[0]) in list(r.inputs)
        }
        for op in dequantized
    }
    assert sorted(map(sorted, readers.values())) == [["FULLY_CONNECTED"], ["GATHER"]], readers
    ids = np.array([[4, 0, 299]], np.int32)
    x = rng.normal(size=(1, 16)).astype(np.float32)
    runner = Interpreter(model_content=data).get_signature_runner()
    out = runner(ids=ids, x=x)
    rounded = table.astype(np.float16).astype(np.float64)
    np.testing.assert_array_equal(out["looked_up"], rounded[ids].astype(np.float32))
    expected = x.astype(np.float64) @ rounded.T
    np.testing.assert_allclose(out["logits"], expected, rtol=1e-5, atol=1e-5)


def test_a_file_that_is_not_tflite_is_refused():
    with pytest.raises(ValueError, match="Not a TFLite flatbuffer"):
        float16_weights(b"\x00" * 64)
