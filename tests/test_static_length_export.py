"""A TFLite export with a static source length (`source_length=N`).

Runtimes such as LiteRT.js refuse an input with a dynamic dimension, so the
app pads each source with id 0 to N. The padded source must decode exactly as
Keras decodes the unpadded one: same tokens, the padding masked, and the
default output bound 2·S + 10 counted from the real tokens S, not from N.
The reference is `Seq2SeqGenerator.greedy` / `.beam` on the unpadded source.
"""

import json

import keras
import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import Seq2SeqGenerator
from keras_attention import export
from keras_attention.export.tflite import LiteGenerator
from keras_attention.export.tflite import source_signature

pytestmark = pytest.mark.tensorflow

PAD, START, END = 0, 1, 2
VOCAB = 23
N = 12  # the static length
BEAM = 3


@pytest.fixture(scope="module")
def generator():
    keras.utils.set_random_seed(0)
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, 8, mask_zero=True)(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))(x)
    y = keras.layers.Embedding(VOCAB, 8, mask_zero=True)(target_in)
    outputs, _, _ = BahdanauDecoder(16, BahdanauAttention(16))(y, memory)
    model = keras.Model([source, target_in], keras.layers.Dense(VOCAB)(outputs))
    # Random weights: END comes late or never, so the outputs fill the bound.
    return Seq2SeqGenerator.from_model(model, start_id=START, end_id=END)


@pytest.fixture(scope="module")
def exported(generator, tmp_path_factory):
    path = tmp_path_factory.mktemp("static") / "model.tflite"
    manifest = export.export_tflite(generator, path, beam_width=BEAM, source_length=N)
    return Interpreter(model_path=str(path)), manifest


def _sources():
    rng = np.random.default_rng(1)
    return [rng.integers(3, VOCAB, (1, s)).astype("int32") for s in (1, 2, 5, 9, N)]


def _padded(source):
    out = np.zeros((1, N), np.int32)
    out[:, : source.shape[1]] = source
    return out


def test_the_source_input_has_the_static_shape(exported):
    interpreter, manifest = exported
    for name in ("generate", "generate_beam", "encode"):
        inputs = interpreter.get_signature_runner(name).get_input_details()
        assert list(inputs["source"]["shape"]) == [1, N]
        assert list(inputs["source"]["shape_signature"]) == [1, N]
    assert manifest["source"]["shape"] == [1, N]
    assert manifest["source_length"] == N


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_padded_source_gives_the_keras_tokens_of_the_unpadded_one(generator, exported, search):
    interpreter, _ = exported
    name = "generate" if search == "greedy" else "generate_beam"
    runner = interpreter.get_signature_runner(name)
    for source in _sources():
        if search == "greedy":
            expected = generator.greedy(source)
        else:
            expected = generator.beam(source, beam_width=BEAM, length_penalty=0.6)
        lite = runner(source=_padded(source))
        np.testing.assert_array_equal(lite["tokens"], expected["tokens"])
        np.testing.assert_array_equal(lite["lengths"], expected["lengths"])
        s = source.shape[1]
        np.testing.assert_allclose(lite["attention"][:, :, :s], expected["attention"], atol=1e-5)
        assert not lite["attention"][:, :, s:].any()  # the padding is masked


@pytest.mark.parametrize("name", ["generate", "generate_beam"])
def test_the_output_bound_counts_the_real_tokens_not_the_padded_length(exported, name):
    interpreter, _ = exported
    runner = interpreter.get_signature_runner(name)
    for source in _sources():
        s = source.shape[1]
        lite = runner(source=_padded(source))
        # The buffers have one row per allowed output token: the bound itself.
        assert lite["tokens"].shape == (1, 2 * s + 10)
        assert lite["attention"].shape == (1, 2 * s + 10, N)


def test_all_padding_gives_an_empty_output(exported):
    interpreter, _ = exported
    lite = interpreter.get_signature_runner("generate")(source=np.zeros((1, N), np.int32))
    assert int(lite["lengths"][0]) == 0
    assert lite["tokens"].shape == (1, 10)
    assert not lite["tokens"].any()


def test_an_explicit_max_length_stays_fixed(generator, tmp_path):
    path = tmp_path / "fixed.tflite"
    manifest = export.export_tflite(generator, path, max_length=7, source_length=N)
    runner = Interpreter(model_path=str(path)).get_signature_runner("generate")
    source = _sources()[1]
    lite = runner(source=_padded(source))
    np.testing.assert_array_equal(lite["tokens"], generator.greedy(source, max_length=7)["tokens"])
    assert manifest["max_length"] == 7
    assert json.loads(path.with_suffix(".json").read_text())["source_length"] == N


def test_dynamic_export_keeps_a_dynamic_length(generator):
    lite = LiteGenerator(generator)
    assert lite.source_spec.shape.as_list() == [1, None]
    assert lite.manifest()["source_length"] is None


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_source_length_must_be_a_positive_int(generator, bad):
    with pytest.raises(ValueError, match="source_length"):
        source_signature(generator, source_length=bad)


def test_source_length_above_max_source_length_is_refused(generator):
    with pytest.raises(ValueError, match="max_source_length=512"):
        source_signature(generator, source_length=513)
