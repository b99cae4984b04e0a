"""`TiedEmbedding` against float64 NumPy, and the translator that ties its output layer."""

import json
import zipfile

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attention.translation import model as model_lib
from keras_attention.translation.model import build_translator
from keras_attention.translation.tied_embedding import TiedEmbedding
from keras_attention.translation.translator import Translator

V, E = 11, 4


def _layer(use_output_bias=True, seed=0, **kwargs):
    layer = TiedEmbedding(V, E, use_output_bias=use_output_bias, mask_zero=True, **kwargs)
    layer.build()
    rng = np.random.default_rng(seed)
    layer.embeddings.assign(rng.normal(size=(V, E)).astype("float32"))
    if use_output_bias:
        layer.output_bias.assign(rng.normal(size=(V,)).astype("float32"))
    return layer


def _reference_logits(vectors, embeddings, bias=None):
    """o · Eᵀ + b, one position at a time in float64."""
    vectors = np.asarray(vectors, "float64")
    out = np.zeros((*vectors.shape[:-1], V))
    for index in np.ndindex(*vectors.shape[:-1]):
        for v in range(V):
            out[index + (v,)] = np.dot(vectors[index], embeddings[v].astype("float64"))
            if bias is not None:
                out[index + (v,)] += bias[v]
    return out


@pytest.mark.parametrize("use_output_bias", [True, False])
def test_reverse_call_matches_reference(use_output_bias):
    layer = _layer(use_output_bias)
    vectors = np.random.default_rng(1).normal(size=(2, 3, E)).astype("float32")
    bias = layer.output_bias.numpy() if use_output_bias else None
    want = _reference_logits(vectors, layer.embeddings.numpy(), bias)
    np.testing.assert_allclose(np.asarray(layer(vectors, reverse=True)), want, rtol=1e-5, atol=1e-5)


def test_forward_call_is_a_plain_embedding_lookup():
    layer = _layer()
    ids = np.array([[1, 5, 0], [10, 2, 3]])
    np.testing.assert_array_equal(np.asarray(layer(ids)), layer.embeddings.numpy()[ids])
    np.testing.assert_array_equal(np.asarray(layer.compute_mask(ids)), ids != 0)


def test_default_initializer_gives_logits_of_unit_scale(seed):
    # Normal(0, 1/√E): the logits of a ±1 output vector have standard deviation 1.
    layer = TiedEmbedding(2000, 64)
    layer.build()
    np.testing.assert_allclose(float(np.std(layer.embeddings.numpy())), 64**-0.5, rtol=0.02)
    logits = np.asarray(layer(np.ones((1, 64), "float32"), reverse=True))
    np.testing.assert_allclose(float(np.std(logits)), 1.0, rtol=0.1)
    # An explicit initializer is kept, and survives the config.
    uniform = TiedEmbedding(2000, 64, embeddings_initializer="uniform")
    uniform.build()
    assert float(np.abs(uniform.embeddings.numpy()).max()) <= 0.05
    restored = TiedEmbedding.from_config(uniform.get_config())
    restored.build()
    assert float(np.abs(restored.embeddings.numpy()).max()) <= 0.05


def test_without_bias_has_only_the_embedding_matrix():
    assert [w.name for w in _layer(use_output_bias=False).weights] == ["embeddings"]
    assert [w.name for w in _layer().weights] == ["embeddings", "output_bias"]


def test_reverse_call_keeps_the_mask_of_its_input():
    ids = keras.Input((None,), dtype="int32")
    layer = TiedEmbedding(V, E, mask_zero=True)
    logits = layer(keras.layers.Dense(E)(layer(ids)), reverse=True)
    model = keras.Model(ids, logits)
    batch = np.array([[3, 4, 0, 0], [5, 0, 0, 0]])
    out = model(batch)
    np.testing.assert_array_equal(np.asarray(out._keras_mask), batch != 0)
    assert tuple(out.shape) == (2, 4, V)


def test_gradient_of_the_shared_matrix_sums_both_uses():
    """d/dE of sum(c · logits(E[ids])) has a lookup part and a scoring part."""
    layer = _layer()
    ids = np.array([[1, 4, 4]])
    weights = np.random.default_rng(2).normal(size=(1, 3, V))
    with tf.GradientTape() as tape:
        logits = layer(layer(ids), reverse=True)
        objective = tf.reduce_sum(tf.cast(logits, "float64") * weights)
    got = tape.gradient(objective, layer.embeddings)
    got = tf.convert_to_tensor(got).numpy()  # IndexedSlices from the lookup → dense

    emb = layer.embeddings.numpy().astype("float64")
    want = np.zeros_like(emb)
    for t, token in enumerate(ids[0]):
        # logits[t, v] = E[token] · E[v] + b[v]
        for v in range(V):
            want[v] += weights[0, t, v] * emb[token]  # scoring use
            want[token] += weights[0, t, v] * emb[v]  # lookup use
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_bad_reverse_input_names_the_expected_shape():
    layer = _layer()
    with pytest.raises(ValueError, match=r"target_embedding.*\(\.\.\., 4\).*\(2, 3, 5\)"):
        TiedEmbedding(V, E, name="target_embedding")(np.zeros((2, 3, 5), "float32"), reverse=True)
    with pytest.raises(ValueError, match=r"\(\.\.\., 4\)"):
        layer(np.zeros((2, 7), "float32"), reverse=True)


def test_mixed_precision_keeps_float32_weights(dtype_policy, seed):
    dtype_policy("mixed_float16")
    layer = TiedEmbedding(V, E)
    vectors = np.random.default_rng(3).normal(size=(2, E)).astype("float32")
    logits = layer(vectors, reverse=True)
    assert layer.embeddings.dtype == "float32"
    assert keras.backend.standardize_dtype(logits.dtype) == "float16"
    want = _reference_logits(vectors, layer.embeddings.numpy(), layer.output_bias.numpy())
    np.testing.assert_allclose(np.asarray(logits, "float64"), want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("use_output_bias", [True, False])
def test_config_and_saving_round_trip(tmp_path, use_output_bias):
    ids = keras.Input((None,), dtype="int32")
    layer = TiedEmbedding(V, E, use_output_bias=use_output_bias, mask_zero=True)
    model = keras.Model(ids, layer(layer(ids), reverse=True))
    batch = np.array([[1, 2, 3], [4, 0, 0]])
    if use_output_bias:
        layer.output_bias.assign(np.arange(V, dtype="float32"))
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(np.asarray(loaded(batch)), np.asarray(model(batch)))
    config = layer.get_config()
    assert config["use_output_bias"] is use_output_bias
    assert TiedEmbedding.from_config(config).get_config() == config


# The layer's config before it was built on `keras.layers.ReversibleEmbedding`:
# what a `.keras` file saved then holds for TiedEmbedding(V, E, mask_zero=True).
EARLIER_CONFIG = {
    "name": "tied_embedding",
    "trainable": True,
    "dtype": {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": {"name": "float32"},
        "registered_name": None,
    },
    "input_dim": V,
    "output_dim": E,
    "embeddings_initializer": {
        "module": "keras.initializers",
        "class_name": "RandomNormal",
        "config": {"seed": None, "mean": 0.0, "stddev": E**-0.5},
        "registered_name": None,
    },
    "embeddings_regularizer": None,
    "activity_regularizer": None,
    "embeddings_constraint": None,
    "mask_zero": True,
    "quantization_config": None,
    "use_output_bias": True,
}


def test_is_a_tied_reversible_embedding():
    layer = TiedEmbedding(V, E)
    assert isinstance(layer, keras.layers.ReversibleEmbedding)
    assert layer.tie_weights is True and layer.logit_soft_cap is None


@pytest.mark.parametrize(
    "name, value", [("tie_weights", False), ("logit_soft_cap", 30.0), ("reverse_dtype", "float32")]
)
def test_fixed_reversible_embedding_arguments_are_refused(name, value):
    with pytest.raises(ValueError, match=f"`{name}`.*Received: {name}="):
        TiedEmbedding(V, E, **{name: value})


def test_config_keys_and_weights_are_those_of_earlier_versions():
    layer = _layer()
    assert sorted(layer.get_config()) == sorted(EARLIER_CONFIG)
    assert [(w.path, tuple(w.shape), w.dtype) for w in layer.weights] == [
        (f"{layer.name}/embeddings", (V, E), "float32"),
        (f"{layer.name}/output_bias", (V,), "float32"),
    ]
    assert layer.variable_serialization_spec[None] == ["embeddings", "output_bias"]
    restored = TiedEmbedding.from_config(EARLIER_CONFIG)
    restored.build()
    assert restored.get_config() == EARLIER_CONFIG
    assert [w.path for w in restored.weights] == [
        "tied_embedding/embeddings",
        "tied_embedding/output_bias",
    ]


def test_file_with_the_earlier_config_loads_with_identical_outputs(tmp_path):
    ids = keras.Input((None,), dtype="int32")
    layer = TiedEmbedding(V, E, mask_zero=True, name="tied_embedding")
    model = keras.Model(ids, layer(layer(ids), reverse=True))
    layer.output_bias.assign(np.arange(V, dtype="float32"))
    batch = np.array([[1, 2, 3], [4, 0, 0]])
    want = np.asarray(model(batch))
    model.save(tmp_path / "new.keras")
    # An earlier file: the same weights file (its layout is checked below) and
    # the layer config written out above.
    with zipfile.ZipFile(tmp_path / "new.keras") as new:
        files = {name: new.read(name) for name in new.namelist()}
    config = json.loads(files["config.json"])
    (saved,) = [c for c in config["config"]["layers"] if c["class_name"] == "TiedEmbedding"]
    assert saved["registered_name"] == "keras_attention>TiedEmbedding"
    saved["config"] = EARLIER_CONFIG
    files["config.json"] = json.dumps(config)
    with zipfile.ZipFile(tmp_path / "earlier.keras", "w") as earlier:
        for name, data in files.items():
            earlier.writestr(name, data)
    keras.backend.clear_session()
    loaded = keras.saving.load_model(tmp_path / "earlier.keras")
    np.testing.assert_array_equal(np.asarray(loaded(batch)), want)


def test_saved_weights_keep_their_earlier_layout(tmp_path):
    ids = keras.Input((None,), dtype="int32")
    layer = TiedEmbedding(V, E, mask_zero=True, name="tied_embedding")
    keras.Model(ids, layer(layer(ids), reverse=True)).save_weights(tmp_path / "m.weights.h5")
    shapes = {}
    with h5py.File(tmp_path / "m.weights.h5") as f:
        f.visititems(lambda name, item: shapes.update({name: getattr(item, "shape", None)}))
    assert {name: shape for name, shape in shapes.items() if shape is not None} == {
        "layers/tied_embedding/vars/0": (V, E),  # embeddings
        "layers/tied_embedding/vars/1": (V,),  # output_bias
    }


def test_mixed_precision_logits_are_float16_inside_a_model_too(dtype_policy, seed):
    # Inside a model Keras does not autocast the layer's float32 matrix; the
    # reverse product still runs in the compute dtype.
    dtype_policy("mixed_float16")
    vectors = keras.Input((E,))
    layer = TiedEmbedding(V, E)
    model = keras.Model(vectors, layer(vectors, reverse=True))
    batch = np.random.default_rng(4).normal(size=(2, E)).astype("float32")
    logits = model(batch)
    assert keras.backend.standardize_dtype(logits.dtype) == "float16"
    assert keras.backend.standardize_dtype(model.outputs[0].dtype) == "float16"
    want = _reference_logits(batch, layer.embeddings.numpy(), layer.output_bias.numpy())
    np.testing.assert_allclose(np.asarray(logits, "float64"), want, rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------ the translator


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general", "none"])
def test_tied_translator_scores_with_its_target_embedding(attention):
    kwargs = dict(attention=attention, embedding_dim=8, units=16, dropout=0.0, seed=1)
    untied = build_translator(30, 40, **kwargs)
    tied = build_translator(30, 40, tie_embeddings=True, **kwargs)
    assert model_lib.LOGITS not in {layer.name for layer in tied.layers}
    embedding = tied.get_layer(model_lib.TARGET_EMBEDDING)
    assert isinstance(embedding, TiedEmbedding)
    # The (16 → 40) output Dense is gone, 40 output biases remain; the decoder
    # output shrinks to the embedding size (a readout does it for "none").
    if attention == "none":
        change = 16 * 8 + 8
    else:
        change = (
            tied.get_layer(model_lib.DECODER).count_params()
            - untied.get_layer(model_lib.DECODER).count_params()
        )
        if attention == "bahdanau":  # deep output W_o [s; c; y] + b: 16 → 8 units
            assert change == -8 * (16 + 16 + 8 + 1)
        else:  # W_c [c; s] (no bias): 16 → 8 units; input feeding: GRU kernel 8 rows fewer
            assert change == -8 * (16 + 16) - 8 * 3 * 16
    assert tied.count_params() == untied.count_params() - (16 * 40 + 40) + 40 + change

    source = np.array([[3, 4, 5, 0], [6, 7, 0, 0]])
    target = np.array([[1, 2, 3], [1, 5, 0]])
    logits = np.asarray(tied([source, target]))
    # By hand: the (dropout-free) decoder output o times Eᵀ plus the bias.
    outputs = keras.Model(tied.inputs, tied.get_layer("output_dropout").output)
    o = np.asarray(outputs([source, target]), "float64")
    want = o @ embedding.embeddings.numpy().astype("float64").T + embedding.output_bias.numpy()
    np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5)

    translator = Translator(tied, None, None)
    real = target != 0  # padded positions are not scored
    np.testing.assert_allclose(
        np.asarray(translator.teacher_forced_logits(source, target))[real],
        logits[real],
        atol=1e-6,
    )
    step_logits, _, _ = translator.step(tf.constant([1, 1]), translator.encode(source))
    np.testing.assert_allclose(np.asarray(step_logits), logits[:, 0], atol=1e-5)
