"""The one search: it converts to builtin-only TFLite as it is, every entry
point ranks beams with the same defaults, and the bounds on beam width and
batch are enforced with messages that name the argument.

The TFLite checks run `keras_attention.generation.search` itself (no
generator around it) on the `keras.ops` attentional RNN step of
`test_decoding.py`, converted with the TensorFlow converter restricted to
builtin operators, against the same search run by Keras.
"""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from test_decoding import END
from test_decoding import START
from test_decoding import RnnStep
from test_seq2seq_generator import TARGET_VOCAB
from test_seq2seq_generator import case

from keras_attention import Seq2SeqGenerator
from keras_attention.export import LiteGenerator
from keras_attention.export import ServingGenerator
from keras_attention.export import export_saved_model
from keras_attention.export import export_tflite
from keras_attention.export import non_builtin_operators
from keras_attention.export import tflite_operators
from keras_attention.export.generator_module import GeneratorModule
from keras_attention.generation import search
from keras_attention.generation import search_defaults
from keras_attention.generation import step_search
from keras_attention.generation.search_defaults import MAX_BEAM_WIDTH
from keras_attention.generation.search_defaults import BeamSettings
from keras_attention.translation import lite

pytestmark = pytest.mark.tensorflow

MAX_LENGTH = 9
SEARCH_BEAM = 3


def _search_model(rnn):
    """A module whose `generate` / `generate_beam` call the search directly."""

    specs = [
        tf.TensorSpec([1, rnn.hidden], tf.float32, name="h0"),
        tf.TensorSpec([1, None, rnn.hidden], tf.float32, name="memory"),
    ]

    def run(fn, h0, memory, **kwargs):
        state = {"h": h0, "memory": memory}
        start = tf.fill([1], START)
        result = fn(rnn.step, state, start, END, MAX_LENGTH, tf.shape(memory)[1], **kwargs)
        return {k: result[k] for k in ("tokens", "lengths", "log_probs", "scores", "attention")}

    def generate(h0, memory):
        return run(search.greedy_search, h0, memory)

    def generate_beam(h0, memory):
        return run(
            search.beam_search,
            h0,
            memory,
            beam_width=SEARCH_BEAM,
            length_penalty=0.6,
            coverage_penalty=0.2,
        )

    return [
        tf.function(fn, input_signature=specs, autograph=False).get_concrete_function()
        for fn in (generate, generate_beam)
    ]


@pytest.fixture(scope="module")
def search_tflite():
    rnn = RnnStep(seed=5)
    functions = _search_model(rnn)
    converter = tf.lite.TFLiteConverter.from_concrete_functions(functions, tf.Module())
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = False
    return rnn, converter.convert()


def test_the_search_converts_to_builtin_operators_only(search_tflite):
    _, data = search_tflite
    assert non_builtin_operators(data) == {}
    operators = tflite_operators(data)
    assert operators["WHILE"] == 2  # the search loops stay loops
    assert "TOPK_V2" in operators


@pytest.mark.parametrize("signature", ["generate", "generate_beam"])
def test_the_search_in_tflite_gives_the_tokens_of_keras(search_tflite, signature):
    rnn, data = search_tflite
    runner = Interpreter(model_content=data).get_signature_runner(signature)
    kwargs = {}
    fn = search.greedy_search
    if signature == "generate_beam":
        fn = search.beam_search
        kwargs = dict(beam_width=SEARCH_BEAM, length_penalty=0.6, coverage_penalty=0.2)
    finished = 0
    for seed, source_length in enumerate([1, 4, 6, 11]):
        h0, memory = rnn.inputs(1, source_length, seed=seed)
        state = {
            "h": keras.ops.convert_to_tensor(h0),
            "memory": keras.ops.convert_to_tensor(memory),
        }
        start = np.full((1,), START, np.int32)
        expected = fn(rnn.step, state, start, END, MAX_LENGTH, source_length, **kwargs)
        expected = {k: keras.ops.convert_to_numpy(v) for k, v in expected.items()}
        got = runner(h0=h0, memory=memory)
        np.testing.assert_array_equal(got["tokens"], expected["tokens"])
        np.testing.assert_array_equal(got["lengths"], expected["lengths"])
        np.testing.assert_allclose(got["scores"], expected["scores"], atol=1e-5)
        np.testing.assert_allclose(got["log_probs"], expected["log_probs"], atol=1e-5)
        np.testing.assert_allclose(got["attention"], expected["attention"], atol=1e-6)
        finished += int(expected["lengths"][0] < MAX_LENGTH)
    assert finished > 0  # some outputs end with END before the bound


def test_the_generator_runs_this_search():
    # Seq2SeqGenerator and EnsembleGenerator search through their StepSearch.
    assert step_search.greedy_search is search.greedy_search
    assert step_search.beam_search is search.beam_search


# ----------------------------------------------------------------- defaults


def _defaults(fn):
    parameters = inspect.signature(fn).parameters
    return {
        name: parameters[name].default
        for name in ("beam_width", "length_penalty", "coverage_penalty")
        if name in parameters
    }


# Where the defaults are written: `BeamSettings` carries them to
# `Seq2SeqGenerator.beam_graph`, the exports and the translator;
# `GeneratorModule` to `ServingGenerator`, `export_saved_model`,
# `LiteGenerator` and `export_tflite` (the TFLite ones override only the beam
# width: no beam by default).
ENTRY_POINTS = {
    "search.beam_search": search.beam_search,
    "Seq2SeqGenerator.beam": Seq2SeqGenerator.beam,
    "BeamSettings": search_defaults.BeamSettings,
    "GeneratorModule": GeneratorModule.__init__,
    "LiteGenerator (export_tflite)": LiteGenerator.__init__,
}


@pytest.mark.parametrize("where", sorted(ENTRY_POINTS))
def test_every_entry_point_has_the_search_defaults(where):
    defaults = _defaults(ENTRY_POINTS[where])
    if not where.startswith("LiteGenerator"):  # its penalties are GeneratorModule's
        assert defaults["length_penalty"] == search_defaults.LENGTH_PENALTY
        assert defaults["coverage_penalty"] == search_defaults.COVERAGE_PENALTY
    # The TFLite beam signature is optional (None: none); elsewhere the width
    # is the generator's.
    optional = where.startswith("LiteGenerator")
    assert defaults["beam_width"] == (None if optional else search_defaults.BEAM_WIDTH)


@pytest.mark.parametrize(
    "make",
    [
        lambda g: ServingGenerator(g).beam_settings,
        lambda g: LiteGenerator(g, beam_width=search_defaults.BEAM_WIDTH).beam_settings,
        lambda g: lite.lite_translator(_translator_of(g), beam=BeamSettings()).beam_settings,
    ],
    ids=["ServingGenerator", "LiteGenerator", "lite_translator"],
)
def test_every_export_module_holds_the_default_settings(generator_case, make):
    assert make(generator_case.generator) == BeamSettings()


def _translator_of(generator):
    class Stub:  # `lite_translator` reads only the generator
        pass

    stub = Stub()
    stub.generator = generator
    return stub


def test_the_defaults_are_the_published_ones():
    # GNMT's alpha, no coverage penalty, beam 4, and the bound 2 S + 10.
    assert search_defaults.BEAM_WIDTH == 4
    assert search_defaults.LENGTH_PENALTY == 0.6
    assert search_defaults.COVERAGE_PENALTY == 0.0
    assert search_defaults.default_max_length(7) == 24
    cap = search_defaults.MAX_OUTPUT_LENGTH
    assert (
        search_defaults.default_max_length(10**6)
        == cap
        == 2 * search_defaults.MAX_SOURCE_LENGTH + 10
    )


@pytest.fixture(scope="module")
def generator_case():
    return case("bahdanau_gru")


def test_tflite_beam_with_defaults_ranks_as_the_generators_beam(generator_case, tmp_path):
    c = generator_case
    manifest = export_tflite(c.generator, tmp_path / "m.tflite", beam_width=4)
    signature = manifest["signatures"]["generate_beam"]
    assert signature["length_penalty"] == search_defaults.LENGTH_PENALTY
    assert signature["coverage_penalty"] == search_defaults.COVERAGE_PENALTY
    runner = Interpreter(model_path=str(tmp_path / "m.tflite")).get_signature_runner(
        "generate_beam"
    )
    for row in range(len(c.lengths)):
        source = c.single(row)
        expected = c.generator.beam(source)  # every default
        got = runner(source=source)
        np.testing.assert_array_equal(got["tokens"], expected["tokens"])
        np.testing.assert_allclose(got["scores"], expected["scores"], atol=1e-4)


def test_lite_generator_ranks_as_export_tflite(generator_case):
    lite = LiteGenerator(generator_case.generator, beam_width=4)
    signature = lite.manifest()["signatures"]["generate_beam"]
    assert signature["length_penalty"] == search_defaults.LENGTH_PENALTY
    assert signature["coverage_penalty"] == search_defaults.COVERAGE_PENALTY


def test_saved_model_beam_with_defaults_ranks_as_the_generators_beam(generator_case):
    c = generator_case
    module = ServingGenerator(c.generator)
    got = module.beam(tf.constant(c.source))
    expected = c.generator.beam(c.source)
    np.testing.assert_array_equal(got["tokens"].numpy(), expected["tokens"])
    np.testing.assert_allclose(got["scores"].numpy(), expected["scores"], atol=1e-5)


# ------------------------------------------------------------------- bounds


def test_beam_width_above_the_maximum_is_refused_with_the_bound(generator_case):
    message = (
        rf"argument `beam_width`. Expected at most {TARGET_VOCAB} "
        rf"\(MAX_BEAM_WIDTH = {MAX_BEAM_WIDTH}, target vocabulary size {TARGET_VOCAB}\)"
    )
    generator = generator_case.generator
    assert generator.target_vocabulary_size == TARGET_VOCAB
    with pytest.raises(ValueError, match=message + r".*Received: beam_width=16"):
        generator.beam(generator_case.source, beam_width=TARGET_VOCAB + 1)
    with pytest.raises(ValueError, match=message):
        ServingGenerator(generator, beam_width=TARGET_VOCAB + 1)
    with pytest.raises(ValueError, match=message):
        LiteGenerator(generator, beam_width=TARGET_VOCAB + 1)


@pytest.mark.parametrize(
    "call",
    [
        lambda g, tmp: g.beam(np.ones((1, 3), np.int32), beam_width=10**6),
        lambda g, tmp: export_tflite(g, tmp / "m.tflite", beam_width=10**6),
        lambda g, tmp: export_saved_model(g, tmp / "saved", beam_width=10**6),
        lambda g, tmp: search.beam_search(None, None, [START], END, 4, 3, beam_width=10**6),
    ],
    ids=["generator", "export_tflite", "export_saved_model", "beam_search"],
)
def test_a_huge_beam_width_is_refused_before_any_work(generator_case, tmp_path, call):
    with pytest.raises(ValueError, match=r"`beam_width`\. Expected at most .*MAX_BEAM_WIDTH"):
        call(generator_case.generator, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_beam_width_bound_without_a_vocabulary_is_max_beam_width():
    assert search_defaults.check_beam_width(MAX_BEAM_WIDTH) == MAX_BEAM_WIDTH
    with pytest.raises(ValueError, match=rf"at most {MAX_BEAM_WIDTH} \(MAX_BEAM_WIDTH"):
        search_defaults.check_beam_width(MAX_BEAM_WIDTH + 1)
    assert search_defaults.check_beam_width(5, vocabulary_size=5) == 5


def test_saved_model_refuses_a_batch_above_max_batch(generator_case, tmp_path):
    c = generator_case
    export_saved_model(c.generator, tmp_path / "saved", max_batch=2)
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    ok = loaded.signatures["serving_default"](source=tf.constant(c.source[:2]))
    expected = c.generator.greedy(c.source[:2])
    np.testing.assert_array_equal(ok["tokens"].numpy(), expected["tokens"])
    for signature in ("serving_default", "beam"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="max_batch=2"):
            loaded.signatures[signature](source=tf.constant(c.source[:3]))


def test_max_batch_is_a_positive_int(generator_case):
    with pytest.raises(ValueError, match="argument `max_batch`"):
        ServingGenerator(generator_case.generator, max_batch=0)
