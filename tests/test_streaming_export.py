"""The simultaneous decoder as a builtin-only TFLite model (`start`, `read`, `write`).

The reference is the Keras `SimultaneousGenerator` of the same model, driven
token by token as `SimultaneousLite` drives the exported model; with a layer
that is no policy (k = infinity) also the greedy `generate` signature of
`export_tflite`.
"""

import keras
import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import MonotonicInfiniteLookbackAttention
from keras_attention import WaitKAttention
from keras_attention.export import export_simultaneous_tflite
from keras_attention.export import export_tflite
from keras_attention.export import non_builtin_operators
from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator
from keras_attention.generation.simultaneous_generator import SimultaneousGenerator
from keras_attention.runtime.streaming import SimultaneousLite

SOURCE_VOCAB = 13
TARGET_VOCAB = 11
START, END = 1, 2
WIDTH = 7
SOURCES = 30


def _attention(policy):
    if policy == "wait-1":
        return WaitKAttention(BahdanauAttention(8), k=1)
    if policy == "wait-3":
        return WaitKAttention(BahdanauAttention(8), k=3)
    if policy == "milk":
        return MonotonicInfiniteLookbackAttention(8, mode="hard")
    return BahdanauAttention(8)  # no policy: k = infinity


def _model(policy, seed=0):
    """Embedding → unidirectional GRU → BahdanauDecoder with the policy's attention.

    Random weights scaled so that the tokens follow the source, and a bias
    towards END in the readout so that about half the outputs end before
    their bound: both kinds of `done` are met.
    """
    keras.utils.set_random_seed(seed)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    init = keras.initializers.RandomNormal(stddev=1.0)
    embedded = keras.layers.Embedding(SOURCE_VOCAB, 6, mask_zero=True, embeddings_initializer=init)(
        source
    )
    memory = keras.layers.GRU(8, return_sequences=True)(embedded)
    target = keras.layers.Embedding(TARGET_VOCAB, 5, mask_zero=True, embeddings_initializer=init)(
        target_in
    )
    outputs, _, _ = BahdanauDecoder(8, attention=_attention(policy))(target, memory)
    readout = keras.layers.Dense(
        TARGET_VOCAB, kernel_initializer=keras.initializers.RandomNormal(stddev=2.0)
    )
    model = keras.Model([source, target_in], readout(outputs))
    bias = np.zeros(TARGET_VOCAB, "float32")
    bias[END] = 2.0
    readout.bias.assign(bias)
    return model


def _sources(count, seed=1):
    rng = np.random.default_rng(seed)
    return [
        [int(t) for t in rng.integers(1, SOURCE_VOCAB, size=rng.integers(1, WIDTH + 1))]
        for _ in range(count)
    ]


_EXPORTS = {}


def _export(policy, tmp_path_factory, max_length=None):
    """(the SimultaneousGenerator, the .tflite path, the manifest), once per
    policy and `max_length`."""
    key = (policy, max_length)
    if key not in _EXPORTS:
        generator = Seq2SeqGenerator.from_model(_model(policy), START, END)
        simultaneous = SimultaneousGenerator(generator, max_source_length=WIDTH)
        path = tmp_path_factory.mktemp("streaming") / f"{policy}.tflite"
        manifest = export_simultaneous_tflite(simultaneous, path, max_length=max_length)
        _EXPORTS[key] = (simultaneous, path, manifest)
    return _EXPORTS[key]


@pytest.mark.parametrize("policy", ["wait-1", "wait-3", "milk", "consecutive"])
def test_litert_gives_the_keras_tokens_and_trace(policy, tmp_path_factory):
    simultaneous, path, _ = _export(policy, tmp_path_factory)
    lite = SimultaneousLite(path)
    for source in _sources(SOURCES, seed=11):
        expected = simultaneous.translate(source)
        tokens, actions = lite.translate(source)
        assert tokens == expected.tokens, source
        assert actions == expected.actions, source
        np.testing.assert_allclose(
            np.asarray(lite.attention)[:, : len(source)], expected.attention, atol=1e-5
        )
        np.testing.assert_allclose(lite.log_prob, expected.log_prob, atol=1e-4)


@pytest.mark.parametrize("policy", ["wait-3", "milk"])
def test_a_max_length_bounds_the_output_as_the_keras_streams(policy, tmp_path_factory):
    simultaneous, path, manifest = _export(policy, tmp_path_factory, max_length=4)
    assert manifest["max_length"] == 4
    lite = SimultaneousLite(path)
    for source in _sources(SOURCES // 2, seed=13):
        expected = simultaneous.translate(source, max_length=4)
        assert lite.translate(source) == (expected.tokens, expected.actions), source


@pytest.mark.parametrize("policy", ["wait-1", "milk"])
def test_the_model_holds_builtin_operators_only(policy, tmp_path_factory):
    _, path, _ = _export(policy, tmp_path_factory)
    assert non_builtin_operators(path) == {}


def test_with_no_policy_the_tokens_are_the_exported_greedy_models(tmp_path_factory):
    simultaneous, path, _ = _export("consecutive", tmp_path_factory)
    greedy_path = path.parent / "greedy.tflite"
    export_tflite(simultaneous.generator, greedy_path)
    runner = Interpreter(model_path=str(greedy_path)).get_signature_runner("generate")
    lite = SimultaneousLite(path)
    for source in _sources(SOURCES, seed=12):
        out = runner(source=np.asarray([source], np.int32))
        greedy = tuple(int(t) for t in out["tokens"][0, : int(out["lengths"][0])])
        assert lite.translate(source)[0] == greedy


def test_a_write_before_any_read_answers_read_first(tmp_path_factory):
    _, path, manifest = _export("wait-1", tmp_path_factory)
    lite = SimultaneousLite(path)
    assert lite.write() is None
    assert not lite.done
    assert lite.actions == ""
    assert lite.read(3)
    assert lite.write() is not None  # wait-1: one token read is enough


def test_a_source_that_ended_empty_is_done_with_no_token(tmp_path_factory):
    _, path, _ = _export("wait-1", tmp_path_factory)
    lite = SimultaneousLite(path)
    lite.end_source()
    assert lite.write() is None
    assert lite.done
    assert lite.tokens == []


@pytest.mark.parametrize("token", [0, -1, SOURCE_VOCAB, SOURCE_VOCAB + 100])
def test_a_token_outside_the_vocabulary_is_refused_and_changes_nothing(token, tmp_path_factory):
    _, path, _ = _export("wait-3", tmp_path_factory)
    lite = SimultaneousLite(path)
    lite.read(4)
    before = {k: v.copy() for k, v in lite.state.items()}
    assert not lite.read(token)
    assert lite.actions == "R"
    for key, value in before.items():
        np.testing.assert_array_equal(lite.state[key], value, err_msg=key)


def test_a_read_past_the_width_is_refused_and_the_output_still_finishes(tmp_path_factory):
    simultaneous, path, manifest = _export("wait-3", tmp_path_factory)
    assert manifest["width"] == WIDTH
    source = [5, 6, 7, 8, 9, 10, 11][:WIDTH]
    expected = simultaneous.translate(source)
    lite = SimultaneousLite(path)
    for token in source:
        assert lite.read(token)
        while not lite.done and lite.write() is not None:
            pass
    assert not lite.read(12)
    assert lite.read_count == WIDTH
    lite.end_source()
    while not lite.done:
        lite.write()
    assert tuple(lite.tokens) == expected.tokens
    assert lite.actions == expected.actions


def test_translate_names_the_token_past_the_width(tmp_path_factory):
    _, path, _ = _export("wait-3", tmp_path_factory)
    with pytest.raises(ValueError, match=f"position {WIDTH}"):
        SimultaneousLite(path).translate([5] * (WIDTH + 1))


def test_a_write_after_done_writes_nothing_and_changes_nothing(tmp_path_factory):
    simultaneous, path, _ = _export("milk", tmp_path_factory)
    lite = SimultaneousLite(path)
    tokens, _ = lite.translate([3, 4, 5])
    assert lite.done
    before = {k: v.copy() for k, v in lite.state.items()}
    assert lite.write() is None
    lite.source_ended = False  # what the model answers whatever the app says
    assert lite.write() is None
    assert lite.tokens == list(tokens)
    for key, value in before.items():
        np.testing.assert_array_equal(lite.state[key], value, err_msg=key)


def test_a_read_after_the_source_ended_is_refused_by_the_runtime(tmp_path_factory):
    _, path, _ = _export("wait-1", tmp_path_factory)
    lite = SimultaneousLite(path)
    lite.read(3)
    lite.end_source()
    with pytest.raises(ValueError, match="source has ended"):
        lite.read(4)
    assert lite.read_count == 1


def test_the_manifest_describes_the_state_start_gives(tmp_path_factory):
    _, path, manifest = _export("milk", tmp_path_factory)
    state = SimultaneousLite(path).state
    assert sorted(state) == sorted(manifest["state"]) == manifest["signatures"]["start"]["outputs"]
    for name, value in state.items():
        assert list(value.shape) == manifest["state"][name]["shape"], name
        assert value.dtype.name == manifest["state"][name]["dtype"], name
    assert state["last_token"].tolist() == [START]
    assert not state["done"][0]


def test_a_json_path_is_refused_before_any_work(tmp_path, tmp_path_factory):
    simultaneous, _, _ = _export("wait-1", tmp_path_factory)
    with pytest.raises(ValueError, match=r"the manifest goes beside it as x\.json"):
        export_simultaneous_tflite(simultaneous, tmp_path / "x.json")
    assert list(tmp_path.iterdir()) == []


def test_a_generator_that_is_not_simultaneous_is_refused(tmp_path, tmp_path_factory):
    simultaneous, _, _ = _export("wait-1", tmp_path_factory)
    with pytest.raises(ValueError, match="Expected a SimultaneousGenerator"):
        export_simultaneous_tflite(simultaneous.generator, tmp_path / "x.tflite")
