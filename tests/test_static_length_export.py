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
from keras_attention.export.operators import tflite_subgraph_operators
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
def exported_file(generator, tmp_path_factory):
    path = tmp_path_factory.mktemp("static") / "model.tflite"
    manifest = export.export_tflite(generator, path, beam_width=BEAM, source_length=N)
    return path, manifest


@pytest.fixture(scope="module")
def exported(exported_file):
    path, manifest = exported_file
    return Interpreter(model_path=str(path)), manifest


def test_the_search_loops_copy_nothing_at_each_step(exported_file):
    # The step of a loop runs its operators once per output token: a strided
    # slice there (what `x[:, None]` indexing becomes) copies element by
    # element at every step. One transpose of the values stays (the context's
    # einsum; see ContentAttention._context for why not a plain matmul).
    path, _ = exported_file
    bodies = {
        name: ops
        for name, ops in tflite_subgraph_operators(path).items()
        if "TOPK_V2" in ops  # the greedy and beam loops, not the encoder's
    }
    assert len(bodies) == 2, list(bodies)
    for name, ops in bodies.items():
        assert "STRIDED_SLICE" not in ops, f"{name}: {ops}"
        assert ops.get("TRANSPOSE", 0) <= 1, f"{name}: {ops}"


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


def _decodes_as_unpadded(generator, interpreter, search, source, padded):
    """Runs the TFLite search on `padded` and checks it against Keras on the
    unpadded `source`: tokens, lengths, attention, zero padding columns.
    Returns the TFLite outputs and Keras' number of rows (its bound)."""
    name = "generate" if search == "greedy" else "generate_beam"
    lite = interpreter.get_signature_runner(name)(source=padded)
    if search == "greedy":
        expected = generator.greedy(source)
    else:
        expected = generator.beam(source, beam_width=BEAM, length_penalty=0.6)
    rows, s = expected["tokens"].shape[1], source.shape[1]  # Keras' bound, 2·S + 10
    np.testing.assert_array_equal(lite["tokens"][:, :rows], expected["tokens"])
    np.testing.assert_array_equal(lite["lengths"], expected["lengths"])
    np.testing.assert_allclose(lite["attention"][:, :rows, :s], expected["attention"], atol=1e-5)
    assert not lite["attention"][:, :, s:].any()  # the padding is masked
    return lite, rows


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_padded_source_gives_the_keras_tokens_of_the_unpadded_one(generator, exported, search):
    interpreter, _ = exported
    for source in _sources():
        lite, rows = _decodes_as_unpadded(generator, interpreter, search, source, _padded(source))
        assert not lite["tokens"][:, rows:].any()  # nothing past the bound


@pytest.fixture(scope="module")
def unmasked(tmp_path_factory):
    """A model whose encoder reads the padding: no `mask_zero`, so a
    backward GRU that ran over the padding would start from a different
    state, and the attention would have N columns to spread over."""
    keras.utils.set_random_seed(2)
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, 8)(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))(x)
    y = keras.layers.Embedding(VOCAB, 8, mask_zero=True)(target_in)
    outputs, _, _ = BahdanauDecoder(16, BahdanauAttention(16))(y, memory)
    model = keras.Model([source, target_in], keras.layers.Dense(VOCAB)(outputs))
    generator = Seq2SeqGenerator.from_model(model, start_id=START, end_id=END)
    path = tmp_path_factory.mktemp("unmasked") / "model.tflite"
    export.export_tflite(generator, path, beam_width=BEAM, source_length=N)
    return generator, Interpreter(model_path=str(path))


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_only_the_real_positions_are_encoded_and_attended(unmasked, search):
    # The searches cut a padded source to its real positions before the
    # encoder: the padding costs no encoder step and no attention column,
    # and even an encoder that does not mask it decodes as on the unpadded
    # source.
    generator, interpreter = unmasked
    for source in _sources()[:-1]:  # shorter than N: padded
        lite, _ = _decodes_as_unpadded(generator, interpreter, search, source, _padded(source))
        assert lite["attention"].shape == (1, 2 * N + 10, N)


@pytest.mark.parametrize("name", ["generate", "generate_beam"])
def test_the_output_bound_counts_the_real_tokens_not_the_padded_length(generator, exported, name):
    interpreter, _ = exported
    runner = interpreter.get_signature_runner(name)
    unended = 0
    for source in _sources():
        s = source.shape[1]
        lite = runner(source=_padded(source))
        # Static shapes: rows for the largest bound, 2·N + 10.
        assert lite["tokens"].shape == (1, 2 * N + 10)
        assert lite["attention"].shape == (1, 2 * N + 10, N)
        length = int(lite["lengths"][0])
        assert length <= 2 * s + 10
        if END not in lite["tokens"][0, :length]:
            # END never came: the search stopped at the bound of the real tokens.
            assert length == 2 * s + 10
            unended += 1
    assert unended >= 2  # random weights: the bound, not END, ends most outputs


def test_all_padding_gives_an_empty_output(exported):
    interpreter, _ = exported
    lite = interpreter.get_signature_runner("generate")(source=np.zeros((1, N), np.int32))
    assert int(lite["lengths"][0]) == 0
    assert not lite["tokens"].any()


def test_an_explicit_max_length_stays_fixed(generator, tmp_path):
    path = tmp_path / "fixed.tflite"
    manifest = export.export_tflite(generator, path, max_length=7, source_length=N)
    runner = Interpreter(model_path=str(path)).get_signature_runner("generate")
    source = _sources()[1]
    lite = runner(source=_padded(source))
    assert lite["tokens"].shape == (1, 7)
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


# ------------------------------------------------------ the translator's export


@pytest.fixture(scope="module")
def translator_export(tmp_path_factory):
    """A translator run folder (random weights, vocabularies from 500 training
    pairs) exported as the browser page wants it: static length, beam."""
    from _data_paths import multi30k_dir

    from keras_attention.training.run_folder import CONFIG_FILE
    from keras_attention.translation import SubwordTokenizer
    from keras_attention.translation import load_multi30k
    from keras_attention.translation.export import export_run
    from keras_attention.translation.model import build_translator
    from keras_attention.translation.translator import MODEL_FILE
    from keras_attention.translation.translator import SOURCE_VOCAB
    from keras_attention.translation.translator import TARGET_VOCAB
    from keras_attention.translation.translator import load_run

    folder = multi30k_dir()
    if not (folder / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {folder} (see tests/_data_paths.py)")
    train = load_multi30k("train", folder)["train"]
    keras.utils.set_random_seed(0)
    run = tmp_path_factory.mktemp("run") / "bahdanau"
    run.mkdir()
    source = SubwordTokenizer.build(train.en[:500], vocab_size=300, lower_case=True)
    target = SubwordTokenizer.build(train.fr[:500], vocab_size=300, lower_case=True)
    model = build_translator(
        source.vocab_size, target.vocab_size, embedding_dim=8, units=16, dropout=0.0, seed=0
    )
    model.save(run / MODEL_FILE)
    source.save(run / SOURCE_VOCAB)
    target.save(run / TARGET_VOCAB)
    (run / CONFIG_FILE).write_text(json.dumps({"attention": "bahdanau"}))
    out = tmp_path_factory.mktemp("export")
    manifest = export_run(
        run, out, variants=("float32",), saved_model=False, source_length=N, tflite_beam=True
    )
    translator, _ = load_run(run)
    return out / "tflite", manifest, translator, train.en[500:505]


def test_translator_export_has_the_static_length_and_a_beam_signature(translator_export):
    folder, manifest, _, _ = translator_export
    assert manifest["source_length"] == N and manifest["tflite_beam"] is True
    config = json.loads((folder / "translator.json").read_text())
    assert config["source_length"] == N
    assert config["signatures"]["translate_beam"]["search"] == "beam"
    assert config["signatures"]["translate_beam"]["beam_width"] == 4
    runner = Interpreter(model_path=str(folder / "translator_float32.tflite"))
    shape = runner.get_signature_runner("translate").get_input_details()["source_ids"]["shape"]
    assert list(shape) == [1, N]


def test_translator_export_translates_padded_ids_as_keras(translator_export):
    folder, _, translator, sentences = translator_export
    interpreter = Interpreter(model_path=str(folder / "translator_float32.tflite"))
    greedy = interpreter.get_signature_runner("translate")
    beam = interpreter.get_signature_runner("translate_beam")
    generator = translator.generator
    for sentence in sentences:
        ids = translator.source_tokenizer.tokenize([sentence]).to_list()[0][:N]
        source = np.array([ids], np.int32)
        expected = generator.greedy(source)["tokens"]
        lite = greedy(source_ids=_padded(source))["tokens"]
        np.testing.assert_array_equal(lite[:, : expected.shape[1]], expected)
        expected = generator.beam(source, beam_width=4, length_penalty=0.6)["tokens"]
        lite = beam(source_ids=_padded(source))["tokens"]
        np.testing.assert_array_equal(lite[:, : expected.shape[1]], expected)


def test_export_cli_takes_a_source_length(tmp_path, capsys):
    from keras_attention.translation import export as translation_export

    with pytest.raises(SystemExit) as info:
        translation_export.main(["run", str(tmp_path), "--source-length", "0"])
    assert info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.endswith("argument --source-length: expected a positive integer, got 0")
    args = translation_export.parse_args(["run", "out", "--source-length", "64"])
    assert args.source_length == 64


# ------------------------------------------- other encoders: frames, Conv1D


@pytest.mark.parametrize("name", ["bahdanau_lstm_features", "luong_concat_lstm_conv"])
def test_padded_frames_and_conv_encoders_decode_as_unpadded(name, tmp_path):
    # Frames of features (padded with zero frames) and a Conv1D encoder, whose
    # window would mix the padding into the last real positions: the search
    # reads the real positions only, so both give Keras's unpadded output.
    from test_seq2seq_generator import LENGTHS
    from test_seq2seq_generator import case

    c = case(name)
    n = max(LENGTHS) + 3
    path = tmp_path / "model.tflite"
    manifest = export.export_tflite(c.generator, path, beam_width=BEAM, source_length=n)
    assert manifest["source"]["shape"][:2] == [1, n]
    interpreter = Interpreter(model_path=str(path))
    for search in ("greedy", "beam"):
        for row in range(len(LENGTHS)):
            source = np.asarray(c.single(row))
            padded = np.zeros((1, n, *source.shape[2:]), source.dtype)
            padded[:, : source.shape[1]] = source
            _decodes_as_unpadded(c.generator, interpreter, search, source, padded)
