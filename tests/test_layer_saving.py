"""Config round trips, `.keras` files (same and fresh process) and SavedModel export."""

import inspect
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from reference import VARIANTS
from reference import build
from reference import dims
from reference import make_inputs
from reference import make_layer

from keras_attention import BahdanauAttention
from keras_attention import LuongAttention

ALL = list(VARIANTS)
VOCAB = 9
QUERY_IDS = np.array([[3, 1, 0], [2, 5, 8], [7, 0, 0]], "int32")
VALUE_IDS = np.array([[1, 2, 3, 0, 0], [4, 6, 0, 0, 0], [0, 0, 0, 0, 0]], "int32")

# Options other than the variant's own, each different from its default.
OPTIONS = {
    "dropout": {"dropout": 0.25, "seed": 11},
    "initializer": {"kernel_initializer": keras.initializers.RandomNormal(stddev=0.3, seed=5)},
    "dtype": {"dtype": "mixed_float16", "name": "attention_fp16"},
}


def _constructor_arguments(cls):
    """The named arguments of `cls.__init__` (not `self`, not `**kwargs`)."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return [
        p.name
        for p in parameters
        if p.name != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD
    ]


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("variant", ALL)
def test_config_round_trip_keeps_every_argument(variant, option):
    cls, kwargs = VARIANTS[variant]
    given = {**kwargs, **OPTIONS[option]}
    layer = cls(**given)
    config = layer.get_config()
    arguments = _constructor_arguments(cls)
    assert set(arguments) <= set(config), set(arguments) - set(config)
    for name in ("units", "normalize", "score_mode", "use_scale", "num_heads"):
        if name in given:
            assert config[name] == given[name], name
    assert config["dropout"] == given.get("dropout", 0.0)
    assert config["seed"] == given.get("seed")

    restored = cls.from_config(config)
    assert restored.get_config() == config
    initializer = restored.kernel_initializer
    if option == "initializer":
        assert isinstance(initializer, keras.initializers.RandomNormal)
        assert initializer.stddev == 0.3 and initializer.seed == 5
    if option == "dtype":
        assert restored.dtype_policy.name == "mixed_float16"
        assert restored.name == "attention_fp16"


@pytest.mark.parametrize("variant", ALL)
def test_from_config_layer_gives_same_outputs(variant):
    inputs = make_inputs(variant, np.random.default_rng(0))
    layer = build(make_layer(variant), inputs)
    restored = layer.__class__.from_config(layer.get_config())
    restored(**inputs)
    restored.set_weights(layer.get_weights())
    value_mask = np.array([[True, True, False, True, False], [True] * 5])
    expected = layer(**inputs, value_mask=value_mask, return_attention_scores=True)
    actual = restored(**inputs, value_mask=value_mask, return_attention_scores=True)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, e)


def _token_model(variants):
    """Token ids → masked embeddings → one attention layer per variant.

    Outputs each layer's context and weights; masks reach the layers
    automatically from `Embedding(mask_zero=True)`.
    """
    query_ids = keras.Input((None,), dtype="int32", name="query_ids")
    value_ids = keras.Input((None,), dtype="int32", name="value_ids")
    outputs = []
    for variant in variants:
        d_q, d_k, d_v = dims(variant)
        query = keras.layers.Embedding(VOCAB, d_q, mask_zero=True)(query_ids)
        value = keras.layers.Embedding(VOCAB, d_v, mask_zero=True)(value_ids)
        key = keras.layers.Embedding(VOCAB, d_k)(value_ids)
        # Non-default options, so that a load that drops them shows.
        layer = make_layer(variant, dropout=0.1, seed=3, name=f"attention_{variant}")
        outputs += list(layer(query, value, key=key, return_attention_scores=True))
    model = keras.Model([query_ids, value_ids], outputs)
    _randomize(model)
    return model


def _outputs(model, ids):
    """The model's outputs as NumPy arrays (an eager call: no tracing to wait for)."""
    return [np.asarray(x) for x in model(ids)]


def _randomize(model):
    rng = np.random.default_rng(1)
    for weight in model.weights:
        if weight.trainable:
            weight.assign(rng.normal(scale=0.7, size=weight.shape).astype(weight.dtype))


@pytest.mark.parametrize("variant", ALL)
def test_keras_file_round_trip_after_clear_session(variant, tmp_path):
    model = _token_model([variant])
    expected = _outputs(model, [QUERY_IDS, VALUE_IDS])
    path = str(tmp_path / "model.keras")
    model.save(path)
    keras.backend.clear_session()
    loaded = keras.saving.load_model(path)
    layer = loaded.get_layer(f"attention_{variant}")
    assert type(layer) is VARIANTS[variant][0]
    assert layer.get_config() == model.get_layer(f"attention_{variant}").get_config()
    actual = _outputs(loaded, [QUERY_IDS, VALUE_IDS])
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, e)


_FRESH_PROCESS = textwrap.dedent(
    """
    import sys

    import keras
    import numpy as np

    import keras_attention  # registers the layers; no custom_objects below

    model_path, inputs_path, outputs_path = sys.argv[1:]
    model = keras.saving.load_model(model_path)
    inputs = np.load(inputs_path)
    outputs = model([inputs["query_ids"], inputs["value_ids"]])
    np.savez(outputs_path, *[keras.ops.convert_to_numpy(x) for x in outputs])
    """
)


def test_keras_file_loads_in_fresh_process_without_custom_objects(tmp_path):
    model = _token_model(ALL)
    expected = _outputs(model, [QUERY_IDS, VALUE_IDS])
    model.save(tmp_path / "model.keras")
    np.savez(tmp_path / "inputs.npz", query_ids=QUERY_IDS, value_ids=VALUE_IDS)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _FRESH_PROCESS,
            str(tmp_path / "model.keras"),
            str(tmp_path / "inputs.npz"),
            str(tmp_path / "outputs.npz"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    # Loads cleanly: no Keras warning (an unbuilt sub-layer, a dropped argument).
    assert "Warning" not in result.stderr, result.stderr
    actual = np.load(tmp_path / "outputs.npz")
    assert len(actual.files) == len(expected)
    for i, e in enumerate(expected):
        np.testing.assert_array_equal(actual[f"arr_{i}"], e)


@pytest.mark.tensorflow
def test_exported_saved_model_serves_same_outputs(tmp_path):
    import tensorflow as tf

    variants = ["bahdanau_normalize", "luong_general_heads", "luong_concat"]
    model = _token_model(variants)
    path = str(tmp_path / "exported")
    model.export(path, verbose=False)
    reloaded = tf.saved_model.load(path)
    # Another batch and other lengths than traced with: dynamic shapes.
    query_ids = np.array([[1, 2, 3, 4], [5, 0, 0, 0]], "int32")
    value_ids = np.array([[1, 2, 0, 0, 0, 0, 0], [3, 4, 5, 6, 7, 8, 1]], "int32")
    for ids in ([QUERY_IDS, VALUE_IDS], [query_ids, value_ids]):
        expected = _outputs(model, ids)
        served = reloaded.serve([tf.constant(x) for x in ids])
        served = [served] if isinstance(served, tf.Tensor) else list(served)
        assert len(served) == len(expected)
        for s, e in zip(served, expected, strict=True):
            np.testing.assert_allclose(s.numpy(), e, rtol=1e-6, atol=1e-7)


def test_luong_and_bahdanau_are_registered_under_package_name():
    for cls in (BahdanauAttention, LuongAttention):
        name = keras.saving.get_registered_name(cls)
        assert name == f"keras_attention>{cls.__name__}"
        assert keras.saving.get_registered_object(name) is cls
