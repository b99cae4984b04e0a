"""Decoders survive get_config, a `.keras` file and mixed precision.

The `.keras` files are loaded in a fresh Python process that imports nothing but
`keras_attention` and Keras, so a layer that is not registered, a config that
misses an argument or a weight that is built lazily shows up as an error or a
different output there.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_attention
from keras_attention import BahdanauAttention
from keras_attention import BahdanauDecoder
from keras_attention import LuongAttention
from keras_attention import LuongDecoder

VOCAB = 13
EMBED = 4
ENCODER_UNITS = 3  # a bidirectional encoder: memory size 2·3
MEMORY = 2 * ENCODER_UNITS
UNITS = MEMORY  # the "dot" score needs d_q == d_k

# Decoder variants, each with another attention layer so that every attention
# config travels through the file too.
VARIANTS = {
    "bahdanau_gru": lambda **kw: BahdanauDecoder(
        UNITS, BahdanauAttention(5, normalize=True, **kw), cell_type="gru", **kw
    ),
    "bahdanau_lstm_output_units": lambda **kw: BahdanauDecoder(
        UNITS,
        LuongAttention("general", use_scale=True, **kw),
        cell_type="lstm",
        output_units=7,
        **kw,
    ),
    "bahdanau_conditional_gru": lambda **kw: BahdanauDecoder(
        UNITS, BahdanauAttention(4, **kw), cell_type="gru", conditional=True, **kw
    ),
    "bahdanau_conditional_lstm": lambda **kw: BahdanauDecoder(
        UNITS, BahdanauAttention(4, **kw), cell_type="lstm", conditional=True, seed=2, **kw
    ),
    "luong_gru_feeding": lambda **kw: LuongDecoder(
        UNITS, LuongAttention("dot", **kw), cell_type="gru", output_units=5, **kw
    ),
    "luong_lstm_no_feeding": lambda **kw: LuongDecoder(
        UNITS,
        LuongAttention("concat", units=4, **kw),
        cell_type="lstm",
        input_feeding=False,
        seed=7,
        **kw,
    ),
}


def randomize(layer, rng):
    """Random weights of either sign, so a weight lost on the way shows."""
    for weight in layer.weights:
        values = rng.uniform(0.2, 0.8, size=weight.shape)
        values *= rng.choice([-1.0, 1.0], size=weight.shape)
        weight.assign(values.astype(weight.dtype))


def decoder_inputs(rng, batch=2, t_dec=4, t_enc=6):
    memory_mask = np.ones((batch, t_enc), bool)
    memory_mask[1, -2:] = False
    return {
        "target_embeddings": rng.normal(size=(batch, t_dec, EMBED)).astype("float32"),
        "memory": rng.normal(size=(batch, t_enc, MEMORY)).astype("float32"),
        "memory_mask": memory_mask,
    }


def seq2seq(decoder):
    """ids → Embedding(mask_zero) → BiGRU → decoder → Dense(vocab)."""
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    memory = keras.layers.Bidirectional(keras.layers.GRU(ENCODER_UNITS, return_sequences=True))(
        keras.layers.Embedding(VOCAB, EMBED, mask_zero=True)(source)
    )
    embedded = keras.layers.Embedding(VOCAB, EMBED, mask_zero=True)(target)
    outputs, weights, state = decoder(embedded, memory)
    logits = keras.layers.Dense(VOCAB, name="logits")(outputs)
    return keras.Model([source, target], [logits, weights, state])


def token_batch(rng):
    source = rng.integers(1, VOCAB, size=(3, 7)).astype("int32")
    source[1, 5:] = 0
    target = rng.integers(1, VOCAB, size=(3, 5)).astype("int32")
    target[2, 3:] = 0
    return source, target


def flat(outputs):
    return [np.asarray(x) for x in keras.tree.flatten(outputs)]


# --------------------------------------------------------------- config


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_config_round_trip(variant):
    rng = np.random.default_rng(0)
    decoder = VARIANTS[variant]()
    inputs = decoder_inputs(rng)
    decoder(**inputs)
    randomize(decoder, rng)
    config = decoder.get_config()
    restored = decoder.__class__.from_config(config)
    assert restored.get_config() == config
    # Through Keras' own (de)serialization, as the file format does.
    serialized = keras.saving.serialize_keras_object(decoder)
    json.dumps(serialized)  # a config is plain JSON
    again = keras.saving.deserialize_keras_object(serialized)
    assert type(again) is type(decoder)
    assert again.get_config() == config
    restored(**inputs)
    restored.set_weights(decoder.get_weights())
    for got, want in zip(flat(restored(**inputs)), flat(decoder(**inputs)), strict=True):
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------- .keras in a fresh process

_LOAD_SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    import keras
    import numpy as np

    import keras_attention  # noqa: F401  registers the layers, nothing else

    folder = sys.argv[1]
    inputs = np.load(f"{folder}/inputs.npz")
    results = {}
    for name in json.loads(open(f"{folder}/names.json").read()):
        model = keras.saving.load_model(f"{folder}/{name}.keras")
        outputs = model([inputs["source"], inputs["target"]])
        for i, x in enumerate(keras.tree.flatten(outputs)):
            results[f"{name}/{i}"] = keras.ops.convert_to_numpy(x)
    np.savez(f"{folder}/outputs.npz", **results)
    """
)


# Keras' own `model.save` converts variables with `np.array(x)` (numpy 2 notice).
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_models_load_in_a_fresh_process_with_identical_outputs(tmp_path):
    rng = np.random.default_rng(1)
    source, target = token_batch(rng)
    expected = {}
    for name, make in VARIANTS.items():
        model = seq2seq(make())
        randomize(model, rng)
        expected[name] = flat(model([source, target]))
        model.save(tmp_path / f"{name}.keras")
    np.savez(tmp_path / "inputs.npz", source=source, target=target)
    (tmp_path / "names.json").write_text(json.dumps(list(VARIANTS)))
    # The child imports the same keras_attention as this process, from its
    # own working directory, so nothing from tests/ is importable there.
    package_root = str(Path(keras_attention.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=package_root, TF_CPP_MIN_LOG_LEVEL="3")
    completed = subprocess.run(
        [sys.executable, "-c", _LOAD_SCRIPT, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    loaded = np.load(tmp_path / "outputs.npz")
    for name, outputs in expected.items():
        assert any(np.any(x != 0) for x in outputs)
        for i, want in enumerate(outputs):
            np.testing.assert_allclose(
                loaded[f"{name}/{i}"], want, rtol=1e-6, atol=1e-7, err_msg=name
            )


# ----------------------------------------------------------- mixed precision

# Against float32 on the same weights, after 4 recurrent steps with outputs and
# weights in [-1, 1]: about five roundings of the compute dtype (float16 keeps
# 11 significant bits, eps ≈ 1e-3; bfloat16 8, eps ≈ 8e-3), the few per step
# compounding over the steps.
MIXED_ATOL = {"mixed_float16": 5e-3, "mixed_bfloat16": 5e-2}
COMPUTE_DTYPE = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


def _float32_and_mixed(variant, policy, how, dtype_policy):
    rng = np.random.default_rng(2)
    inputs = decoder_inputs(rng)
    reference = VARIANTS[variant]()
    reference(**inputs)
    randomize(reference, rng)
    if how == "argument":
        mixed = VARIANTS[variant](dtype=policy)
    else:
        dtype_policy(policy)
        mixed = VARIANTS[variant]()
    mixed(**inputs)
    mixed.set_weights(reference.get_weights())
    return reference, mixed, inputs


# Each policy through the layer's `dtype=` argument; the global policy once.
MIXED_CASES = [(policy, "argument") for policy in MIXED_ATOL]
MIXED_CASES += [("mixed_float16", "global")]


@pytest.mark.parametrize("policy, how", MIXED_CASES)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_mixed_precision_is_finite_and_close_to_float32(variant, policy, how, dtype_policy):
    reference, mixed, inputs = _float32_and_mixed(variant, policy, how, dtype_policy)
    assert mixed.compute_dtype == COMPUTE_DTYPE[policy]
    assert all(w.dtype == "float32" for w in mixed.weights)  # float32 variables
    got = flat(mixed(**inputs))
    want = flat(reference(**inputs))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == COMPUTE_DTYPE[policy]
        g = g.astype("float32")
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, w, rtol=0, atol=MIXED_ATOL[policy])
    weights = got[1].astype("float32")
    assert np.all(weights[1, :, ~inputs["memory_mask"][1]] == 0.0)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_mixed_float16_step_matches_float32_step(variant, dtype_policy):
    policy = "mixed_float16"
    reference, mixed, inputs = _float32_and_mixed(variant, policy, "argument", dtype_policy)
    first = inputs["target_embeddings"][:, 0]
    states = [
        model.get_decode_state(inputs["memory"], memory_mask=inputs["memory_mask"])
        for model in (reference, mixed)
    ]
    for _ in range(2):
        want_output, want_weights, states[0] = reference.step(first, states[0])
        got_output, got_weights, states[1] = mixed.step(first, states[1])
        for g, w in ((got_output, want_output), (got_weights, want_weights)):
            g = np.asarray(g)
            assert g.dtype == COMPUTE_DTYPE[policy]
            g = g.astype("float32")
            assert np.all(np.isfinite(g))
            np.testing.assert_allclose(g, w, rtol=0, atol=MIXED_ATOL[policy])
