"""Exporting any `Seq2SeqGenerator`: builtin-only TFLite and SavedModel.

Six of the models of `test_seq2seq_generator.py` (one per decoder family, with
LSTM, conditional, feature-source, Conv1D and tied models among them) are
exported once per module with `generate`, `encode`, `decode_step` and
`generate_beam` (width 3). Each signature must give what Keras gives on every
test input: the TFLite model has a static batch of 1, so each source is fed
alone at its real length, against Keras on the same (1, S) source.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from test_seq2seq_generator import LENGTHS
from test_seq2seq_generator import PAD
from test_seq2seq_generator import START
from test_seq2seq_generator import case
from test_seq2seq_generator import explicit_generator
from test_seq2seq_generator import pick_end_id

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import Seq2SeqGenerator
from keras_attention.export import export_saved_model
from keras_attention.export import export_tflite
from keras_attention.export import non_builtin_operators
from keras_attention.export import tflite_operators

TFLITE_NAMES = [
    "bahdanau_gru",
    "bahdanau_lstm_features",
    "conditional_gru_bidirectional_tied",
    "luong_dot_gru_feeding_tied",
    "luong_general_lstm_tied",
    "luong_concat_lstm_conv",
]
BEAM_WIDTH = 3
LENGTH_PENALTY = 0.6
COVERAGE_PENALTY = 0.2
# Float32 TFLite kernels against float32 Keras: a few roundings per layer.
LOGIT_ATOL = 1e-4


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name → (path of the .tflite file, manifest), float32, with a beam."""
    folder = tmp_path_factory.mktemp("generic_tflite")
    out = {}
    for name in TFLITE_NAMES:
        path = folder / f"{name}.tflite"
        manifest = export_tflite(
            case(name).generator,
            path,
            beam_width=BEAM_WIDTH,
            length_penalty=LENGTH_PENALTY,
            coverage_penalty=COVERAGE_PENALTY,
        )
        out[name] = (path, manifest)
    return out


def _runner(path, signature):
    return Interpreter(model_path=str(path)).get_signature_runner(signature)


def _sources(name):
    c = case(name)
    return [c.single(row) for row in range(len(LENGTHS))]


# ------------------------------------------------------------------- TFLite


@pytest.mark.parametrize("name", TFLITE_NAMES)
def test_tflite_generate_equals_keras_greedy(name, exported):
    path, _ = exported[name]
    generate = _runner(path, "generate")
    generator = case(name).generator
    for source in _sources(name):
        expected = generator.greedy(source)  # default max_length: 2 S + 10
        got = generate(source=source)
        np.testing.assert_array_equal(got["tokens"], expected["tokens"])
        np.testing.assert_array_equal(got["lengths"], expected["lengths"])
        np.testing.assert_allclose(got["log_probs"], expected["log_probs"], atol=LOGIT_ATOL)
        np.testing.assert_allclose(got["attention"], expected["attention"], atol=1e-5)


@pytest.mark.parametrize("name", TFLITE_NAMES)
def test_tflite_first_step_logits_equal_the_keras_model(name, exported):
    path, manifest = exported[name]
    interpreter = Interpreter(model_path=str(path))
    encode = interpreter.get_signature_runner("encode")
    decode_step = interpreter.get_signature_runner("decode_step")
    c = case(name)
    for source in _sources(name):
        state = encode(source=source)
        assert sorted(state) == manifest["decode_state"]["names"]
        out = decode_step(token=np.array([START], np.int32), **state)
        first = c.model([source, np.full((1, 1), START, np.int32)], training=False)
        expected = keras.ops.convert_to_numpy(first)[:, 0]  # (1, V)
        np.testing.assert_allclose(out["logits"], expected, atol=LOGIT_ATOL, rtol=0)
        assert out["attention"].shape == (1, source.shape[1])
        assert set(out) == {"logits", "attention", *manifest["decode_state"]["recurrent"]}


@pytest.mark.parametrize("name", TFLITE_NAMES)
def test_tflite_step_loop_equals_generate(name, exported):
    """An app's own greedy loop over `encode` / `decode_step` gives `generate`."""
    path, manifest = exported[name]
    interpreter = Interpreter(model_path=str(path))
    encode = interpreter.get_signature_runner("encode")
    decode_step = interpreter.get_signature_runner("decode_step")
    generate = interpreter.get_signature_runner("generate")
    end_id = manifest["end_id"]
    source = _sources(name)[0]
    state, token, tokens = encode(source=source), START, []
    for _ in range(2 * source.shape[1] + 10):
        out = decode_step(token=np.array([token], np.int32), **state)
        state.update({k: out[k] for k in manifest["decode_state"]["recurrent"]})
        token = int(np.argmax(out["logits"][0]))
        tokens.append(token)
        if token == end_id:
            break
    expected = generate(source=source)
    np.testing.assert_array_equal(tokens, expected["tokens"][0, : expected["lengths"][0]])


@pytest.mark.parametrize("name", TFLITE_NAMES)
def test_tflite_generate_beam_equals_keras_beam(name, exported):
    path, _ = exported[name]
    generate_beam = _runner(path, "generate_beam")
    generator = case(name).generator
    for source in _sources(name):
        expected = generator.beam(
            source,
            beam_width=BEAM_WIDTH,
            length_penalty=LENGTH_PENALTY,
            coverage_penalty=COVERAGE_PENALTY,
        )
        got = generate_beam(source=source)
        np.testing.assert_array_equal(got["tokens"], expected["tokens"])
        np.testing.assert_array_equal(got["lengths"], expected["lengths"])
        np.testing.assert_allclose(got["scores"], expected["scores"], atol=LOGIT_ATOL)


@pytest.mark.parametrize("name", TFLITE_NAMES)
def test_tflite_model_has_builtin_operators_only(name, exported):
    path, manifest = exported[name]
    assert non_builtin_operators(path) == {}
    operators = tflite_operators(path)
    assert "WHILE" in operators  # the search loop is inside the model
    assert not [op for op in operators if "Flex" in op or op.startswith("CUSTOM")]
    written = json.loads(path.with_suffix(".json").read_text())
    assert written == json.loads(json.dumps(manifest))
    assert written["model_file"] == path.name


@pytest.mark.parametrize("name", ["bahdanau_gru", "bahdanau_lstm_features"])
def test_manifest_describes_the_source_and_the_state(name, exported):
    _, manifest = exported[name]
    c = case(name)
    if c.config["source"] == "ids":
        assert manifest["source"] == {"shape": [1, None], "dtype": "int32", "kind": "token ids"}
    else:
        assert manifest["source"] == {"shape": [1, None, 5], "dtype": "float32", "kind": "features"}
    assert (manifest["start_id"], manifest["end_id"], manifest["pad_id"]) == (START, c.end_id, PAD)
    # Bahdanau decoders carry h (and c for LSTM) from step to step.
    recurrent = ["c", "h"] if c.config["cell"] == "lstm" else ["h"]
    assert manifest["decode_state"]["recurrent"] == recurrent
    assert manifest["signatures"]["generate_beam"]["beam_width"] == BEAM_WIDTH


# -------------------------------------------------- the operator check fails


def _convert(concrete, trackable=None, resource_variables=False):
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], trackable)
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS,
        tf.lite.OpsSet.SELECT_TF_OPS,
    ]
    converter.experimental_enable_resource_variables = resource_variables
    return converter.convert()


def test_non_builtin_operators_reports_a_flex_operator():
    fn = tf.function(
        lambda text: tf.strings.lower(text), input_signature=[tf.TensorSpec([None], tf.string)]
    )
    data = _convert(fn.get_concrete_function())
    assert non_builtin_operators(data) == {"CUSTOM:FlexStringLower": 1}
    assert tflite_operators(data) == {"CUSTOM:FlexStringLower": 1}


def test_non_builtin_operators_reports_resource_variables(tmp_path):
    module = tf.Module()
    module.total = tf.Variable(tf.zeros([3]))
    module.add = tf.function(
        lambda x: module.total.assign_add(x), input_signature=[tf.TensorSpec([3], tf.float32)]
    )
    data = _convert(module.add.get_concrete_function(), module, resource_variables=True)
    path = tmp_path / "variables.tflite"
    path.write_bytes(data)
    found = non_builtin_operators(path)
    assert {"VAR_HANDLE", "ASSIGN_VARIABLE"} <= set(found), found


# ------------------------------------------------------------- quantization

BIG_VOCAB = 48
BIG_UNITS = 48
BIG_MAX_LENGTH = 20


@pytest.fixture(scope="module")
def big_generator():
    """A Bahdanau model with kernels above the converter's 1,024-element
    quantization threshold, its logits peaked, END an id it emits at
    different steps for different sources."""
    keras.utils.set_random_seed(3)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    normal = keras.initializers.RandomNormal(stddev=1.0)
    x = keras.layers.Embedding(BIG_VOCAB, 32, mask_zero=True, embeddings_initializer=normal)(source)
    memory, state = keras.layers.GRU(BIG_UNITS, return_sequences=True, return_state=True)(x)
    y = keras.layers.Embedding(BIG_VOCAB, 32, mask_zero=True, embeddings_initializer=normal)(
        target_in
    )
    decoder = BahdanauDecoder(BIG_UNITS, BahdanauAttention(units=32), name="decoder")
    outputs, _, _ = decoder(y, memory, initial_state=state)
    final = keras.layers.Dense(BIG_VOCAB, name="logits")
    model = keras.Model([source, target_in], final(outputs))
    bias = np.zeros(BIG_VOCAB, np.float32)
    bias[PAD] = -50.0
    final.kernel.assign(6.0 * final.kernel.numpy())
    final.bias.assign(bias)
    # An END it never emits: PAD's logit is -50 (an id past the vocabulary is refused).
    probe = Seq2SeqGenerator.from_model(model, START, PAD)
    rows = [probe.greedy(x, max_length=BIG_MAX_LENGTH)["tokens"][0] for x in _big_sources()]
    end_id = pick_end_id(np.stack(rows))
    return Seq2SeqGenerator.from_model(model, START, end_id)


def _big_sources():
    rng = np.random.default_rng(5)
    return [rng.integers(3, BIG_VOCAB, size=(1, n)).astype(np.int32) for n in (9, 5, 3, 12)]


@pytest.fixture(scope="module")
def quantized(tmp_path_factory, big_generator):
    folder = tmp_path_factory.mktemp("quantized")
    paths = {}
    for quantization in (None, "float16", "int8"):
        path = folder / f"model_{quantization or 'float32'}.tflite"
        manifest = export_tflite(
            big_generator, path, quantization=quantization, max_length=BIG_MAX_LENGTH
        )
        assert manifest["quantization"] == (quantization or "float32")
        paths[quantization or "float32"] = path
    return paths


def test_quantized_models_are_smaller_and_builtin(quantized):
    sizes = {k: p.stat().st_size for k, p in quantized.items()}
    # The graph itself (loops, small tensors) is not quantized: the saving is
    # in the weights, about half of the float32 file here.
    assert sizes["float16"] < 0.8 * sizes["float32"], sizes
    assert sizes["int8"] < sizes["float16"], sizes
    for path in quantized.values():
        assert non_builtin_operators(path) == {}


def test_float16_and_int8_models_generate_like_float32(quantized, big_generator):
    runners = {k: _runner(p, "generate") for k, p in quantized.items()}
    lengths, int8_same = [], 0
    for source in _big_sources():
        expected = big_generator.greedy(source, max_length=BIG_MAX_LENGTH)
        outputs = {k: run(source=source) for k, run in runners.items()}
        np.testing.assert_array_equal(outputs["float32"]["tokens"], expected["tokens"])
        np.testing.assert_array_equal(outputs["float16"]["tokens"], expected["tokens"])
        for out in outputs.values():
            n = int(out["lengths"][0])
            assert 1 <= n <= BIG_MAX_LENGTH
            assert np.all((out["tokens"][0, :n] > PAD) & (out["tokens"][0, :n] < BIG_VOCAB))
            assert np.all(out["tokens"][0, n:] == PAD)
            assert np.isfinite(out["log_probs"][0]) and out["log_probs"][0] <= 0.0
        lengths.append(int(expected["lengths"][0]))
        int8_same += np.array_equal(outputs["int8"]["tokens"], expected["tokens"])
    assert len(set(lengths)) > 1 and max(lengths) > 3, lengths  # not all END at once
    # Int8 weights (dynamic range) move the logits by ~1 %: one near tie may flip.
    assert int8_same >= len(lengths) - 1, int8_same


# ---------------------------------------------------------------- SavedModel


def test_saved_model_signatures_equal_keras_on_a_padded_batch(tmp_path):
    c = case("luong_dot_lstm_features")  # features, LSTM, Luong without feeding
    export_saved_model(c.generator, tmp_path / "model", beam_width=BEAM_WIDTH)
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    assert set(loaded.signatures) == {"serving_default", "beam"}
    source = tf.constant(c.source)
    greedy = loaded.signatures["serving_default"](source=source)
    expected = c.generator.greedy(c.source)
    np.testing.assert_array_equal(greedy["tokens"].numpy(), expected["tokens"])
    np.testing.assert_array_equal(greedy["lengths"].numpy(), expected["lengths"])
    np.testing.assert_allclose(greedy["log_probs"].numpy(), expected["log_probs"], atol=1e-5)
    beam = loaded.signatures["beam"](source=source)
    expected = c.generator.beam(c.source, beam_width=BEAM_WIDTH, length_penalty=0.6)
    np.testing.assert_array_equal(beam["tokens"].numpy(), expected["tokens"])
    np.testing.assert_allclose(beam["scores"].numpy(), expected["scores"], atol=1e-5)


@pytest.mark.parametrize("bad", ["negative", "vocabulary"])
def test_saved_model_refuses_ids_outside_the_source_vocabulary(tmp_path, bad):
    # The check is in the graph: it survives the save, for both signatures.
    c = case("bahdanau_gru")
    vocabulary = c.generator.source_vocabulary_size
    export_saved_model(c.generator, tmp_path / "model", beam_width=BEAM_WIDTH)
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    value = -3 if bad == "negative" else vocabulary
    source = np.array(c.source, np.int32)
    source[0, 0] = value
    for signature in ("serving_default", "beam"):
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=rf"Invalid token id in `source`: ids must be in \[0, {vocabulary}\)",
        ):
            loaded.signatures[signature](source=tf.constant(source))
    source[0, 0] = vocabulary - 1  # the largest id is read
    assert loaded.signatures["serving_default"](source=tf.constant(source))["tokens"].shape[0]


# -------------------------------------------------------- explicit generator


def test_explicit_generator_of_unlisted_functions_names_the_variables_it_missed(tmp_path):
    generator = explicit_generator(case("bahdanau_gru"), "function")
    for export in (
        lambda: export_tflite(generator, tmp_path / "x.tflite", source_spec=((None,), "int32")),
        lambda: export_saved_model(generator, tmp_path / "sm", source_spec=((None,), "int32")),
    ):
        with pytest.raises(ValueError, match=r"does not list: .*source_embedding.*`variables`"):
            export()


@pytest.mark.parametrize("form", ["models", "listed"])
def test_explicit_generator_exports_with_a_source_spec(tmp_path, form):
    c = case("bahdanau_gru")
    generator = explicit_generator(c, form)
    path = tmp_path / "explicit.tflite"
    manifest = export_tflite(generator, path, source_spec=((None,), "int32"))
    assert manifest["source"]["kind"] == "token ids"
    assert non_builtin_operators(path) == {}
    generate = _runner(path, "generate")
    for source in _sources("bahdanau_gru"):
        expected = c.generator.greedy(source)
        np.testing.assert_array_equal(generate(source=source)["tokens"], expected["tokens"])


def test_explicit_generator_without_source_spec_is_refused(tmp_path):
    generator = explicit_generator(case("bahdanau_gru"))
    with pytest.raises(
        ValueError, match=r"explicit constructor.*source_spec=\(\(None,\), 'int32'\)"
    ):
        export_tflite(generator, tmp_path / "explicit.tflite")
    with pytest.raises(ValueError, match="source_spec"):
        export_saved_model(generator, tmp_path / "saved")
    assert not (tmp_path / "explicit.tflite").exists()


def test_export_refuses_bad_arguments(tmp_path):
    generator = case("bahdanau_gru").generator
    with pytest.raises(ValueError, match="argument `quantization`"):
        export_tflite(generator, tmp_path / "a.tflite", quantization="int4")
    with pytest.raises(ValueError, match="argument `beam_width`"):
        export_tflite(generator, tmp_path / "a.tflite", beam_width=0)
    with pytest.raises(ValueError, match="max_output_length"):
        export_tflite(generator, tmp_path / "a.tflite", max_length=generator.max_output_length + 1)
