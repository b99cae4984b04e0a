"""The guard against random draws inside an attention step, and Keras left as it was.

A draw inside a step is found by a probe of the step in a `keras.StatelessScope`
(`keras_attention.attention.step_guard`), not by wrapping Keras' functions:
importing and using the package changes nothing of `keras.random`. The draws
of `tests/test_custom_attention.py` (`DrawingAttention`) are refused when the
layer is built, called, fitted and exported; here the rest, on the backend of
the run.
"""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention import GMMAttention
from keras_attention import LuongAttention
from keras_attention.attention.step_guard import RandomDrawInStepError
from keras_attention.attention.step_guard import no_random_draws

B, T_Q, T_V, D = 2, 3, 4, 5

# Imports Keras first, records what `keras.random` and its `SeedGenerator`
# hold, then imports keras_attention and uses it: fit, greedy and beam
# generation, a refused draw and, on TensorFlow, the TFLite export. Prints the
# names whose value is no longer the object Keras defined.
_USE_THE_PACKAGE = """
import json, sys, tempfile
import keras
import numpy as np

watched = {
    "keras.random": keras.random,
    "keras.random.SeedGenerator": keras.random.SeedGenerator,
    "keras.layers.Dropout": keras.layers.Dropout,
}
before = {name: dict(vars(owner)) for name, owner in watched.items()}

import keras_attention
from keras_attention import BahdanauDecoder, BahdanauMonotonicAttention, GMMAttention
from keras_attention import LuongAttention, LuongDecoder, Seq2SeqGenerator
from keras_attention.attention.step_guard import RandomDrawInStepError

keras.utils.set_random_seed(0)
VOCAB = 7


def model_with(decoder):
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    memory = keras.layers.Embedding(VOCAB, 4, mask_zero=True)(source)
    memory = keras.layers.GRU(4, return_sequences=True)(memory)
    embedded = keras.layers.Embedding(VOCAB, 4, mask_zero=True)(target_in)
    outputs, _, _ = decoder(embedded, memory)
    return keras.Model([source, target_in], keras.layers.Dense(VOCAB)(outputs))


rng = np.random.default_rng(0)
source = rng.integers(3, VOCAB, (8, 4)).astype("int32")
target_in = rng.integers(3, VOCAB, (8, 5)).astype("int32")
for decoder in (
    BahdanauDecoder(4, BahdanauMonotonicAttention(4, sigmoid_noise=1.0)),
    LuongDecoder(4, LuongAttention(dropout=0.3)),
):
    model = model_with(decoder)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit([source, target_in], target_in, batch_size=4, epochs=1, verbose=0)
    generator = Seq2SeqGenerator.from_model(model, start_id=1, end_id=2)
    generator.greedy(source[:2], max_length=4)
    generator.beam(source[:2], beam_width=2, max_length=4)
    if keras.backend.backend() == "tensorflow":
        from keras_attention.export import export_tflite

        with tempfile.TemporaryDirectory() as folder:
            export_tflite(generator, folder + "/model.tflite", max_length=4)


class Drawing(GMMAttention):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(1)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        query = query + keras.random.uniform(keras.ops.shape(query), seed=self.seed_generator)
        return super().step_weights(query, processed_keys, state, value_mask, training, noise)


try:
    Drawing(num_mixtures=2)(np.zeros((1, 3, 4), "float32"), np.zeros((1, 5, 4), "float32"))
    refused = False
except RandomDrawInStepError:
    refused = True

changed = {
    name: sorted(
        key
        for key in set(before[name]) | set(vars(owner))
        if before[name].get(key, None) is not vars(owner).get(key, None)
    )
    for name, owner in watched.items()
}
print(json.dumps({"changed": changed, "refused": refused}))
"""


def test_using_the_package_leaves_keras_random_as_keras_defined_it():
    run = subprocess.run(
        [sys.executable, "-c", _USE_THE_PACKAGE], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["refused"], "the drawing layer of the script was not refused"
    assert report["changed"] == {
        "keras.random": [],
        "keras.random.SeedGenerator": [],
        "keras.layers.Dropout": [],
    }


@keras.saving.register_keras_serializable(package="test_step_guard")
class DrawingGMM(GMMAttention):
    """GMM attention whose `step_weights` draws with its SeedGenerator while `drawing`."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.drawing = True
        self.seed_generator = keras.random.SeedGenerator(1)

    def step_weights(self, query, processed_keys, state, value_mask, training, noise):
        if self.drawing:
            query = query + keras.random.uniform(ops.shape(query), seed=self.seed_generator)
        return super().step_weights(query, processed_keys, state, value_mask, training, noise)


@keras.saving.register_keras_serializable(package="test_step_guard")
class DrawingLuong(LuongAttention):
    """Luong attention whose `score` draws through a Dropout layer of its own."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.score_dropout = keras.layers.Dropout(0.5, seed=3)

    def score(self, query, processed_keys):
        return self.score_dropout(super().score(query, processed_keys), training=True)


def _inputs():
    rng = np.random.default_rng(0)
    query = rng.normal(size=(B, T_Q, D)).astype("float32")  # (B, T_q, d_q)
    value = rng.normal(size=(B, T_V, D)).astype("float32")  # (B, T_v, d_v)
    return query, value


def _built_drawing_gmm():
    """A built `DrawingGMM` that does not draw yet (the build's probe passes)."""
    query, value = _inputs()
    layer = DrawingGMM(num_mixtures=2)
    layer.drawing = False
    layer.build(query.shape, value.shape)
    layer.drawing = True
    return layer


def test_a_random_draw_in_score_is_an_error_naming_score():
    query, value = _inputs()
    with pytest.raises(RandomDrawInStepError, match=r"DrawingLuong\.score drew.*step_noise"):
        DrawingLuong()(query, value)


@pytest.mark.parametrize("training", [False, True])
def test_a_random_draw_is_an_error_at_every_call_not_only_the_first(training):
    query, value = _inputs()
    layer = _built_drawing_gmm()
    for _ in range(2):
        with pytest.raises(RandomDrawInStepError, match=r"DrawingGMM\.step_weights drew"):
            layer(query, value, training=training)


def test_the_error_names_the_attribute_that_holds_the_generator():
    query, value = _inputs()
    with pytest.raises(RandomDrawInStepError, match=r"SeedGenerator `self\.seed_generator`"):
        _built_drawing_gmm()(query, value)


def test_a_refused_draw_leaves_the_seed_generator_as_it_was():
    query, value = _inputs()
    layer = _built_drawing_gmm()
    state = layer.seed_generator.state.numpy()
    with pytest.raises(RandomDrawInStepError):
        layer(query, value)
    after = layer.seed_generator.state.numpy()
    np.testing.assert_array_equal(after, state)


def test_a_step_that_draws_nothing_passes_and_gives_the_step_s_results():
    query, value = _inputs()
    layer = _built_drawing_gmm()
    layer.drawing = False
    expected = np.asarray(layer(query, value))  # (B, T_q, d_v)
    # The probe ran (the first call) and changed nothing: a second call agrees.
    np.testing.assert_array_equal(np.asarray(layer(query, value)), expected)


def test_a_draw_outside_the_layer_is_seen_through_keras_global_generator():
    query, value = _inputs()
    layer = _built_drawing_gmm()
    layer.drawing = False
    with pytest.raises(RandomDrawInStepError, match=r"global SeedGenerator"):
        with no_random_draws("Outside.step_weights", layer):
            keras.random.uniform((2,))  # seed=None: Keras' global generator


def test_the_probe_discards_what_its_block_assigns():
    layer = _built_drawing_gmm()
    kernel = layer.kernel.numpy()
    with no_random_draws("Assigning.step_weights", layer):
        layer.kernel.assign(ops.zeros(layer.kernel.shape))  # a weight: no draw, discarded
    np.testing.assert_array_equal(layer.kernel.numpy(), kernel)
