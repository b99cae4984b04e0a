"""Saves or loads decoder models on the Keras backend of its environment.

Launched in fresh processes by tests/test_cross_backend_saving.py, one per
backend and task, because a process runs one Keras backend:

    KERAS_BACKEND=jax python _cross_backend_worker.py save FOLDER
        builds the models of MODELS (random weights, attention dropout on),
        writes FOLDER/NAME.keras, the token ids FOLDER/inputs.npz and the
        inference outputs FOLDER/outputs.npz.
    KERAS_BACKEND=torch python _cross_backend_worker.py load FOLDER OUT.npz [FOLDER OUT.npz ...]
        loads every FOLDER/NAME.keras and writes its outputs on
        FOLDER/inputs.npz to OUT.npz, for each pair.

Its last line of stdout is the backend and whether importing Keras and
keras_attention imported TensorFlow (Keras' own file utilities import it
later, when installed).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attention import BahdanauAttention  # noqa: E402
from keras_attention import BahdanauDecoder  # noqa: E402
from keras_attention import LuongAttention  # noqa: E402
from keras_attention import LuongDecoder  # noqa: E402

IMPORTED_TENSORFLOW = "tensorflow" in sys.modules

VOCAB = 13
EMBED = 4
ENCODER_UNITS = 3  # a bidirectional encoder: memory size 2·3
UNITS = 5

# Dropout in the attention: its seed generator travels through the file, and
# inference must drop nothing on the loading backend.
MODELS = {
    "bahdanau_gru": lambda: BahdanauDecoder(
        UNITS, BahdanauAttention(4, normalize=True, dropout=0.2, seed=1), cell_type="gru"
    ),
    "luong_lstm": lambda: LuongDecoder(
        UNITS, LuongAttention("general", use_scale=True, dropout=0.2, seed=3), cell_type="lstm"
    ),
}


def seq2seq(decoder):
    """ids → Embedding(mask_zero) → BiGRU → decoder → Dense(vocab)."""
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    memory = keras.layers.Bidirectional(keras.layers.GRU(ENCODER_UNITS, return_sequences=True))(
        keras.layers.Embedding(VOCAB, EMBED, mask_zero=True)(source)
    )
    embedded = keras.layers.Embedding(VOCAB, EMBED, mask_zero=True)(target)
    outputs, weights, _ = decoder(embedded, memory)
    logits = keras.layers.Dense(VOCAB, name="logits")(outputs)
    return keras.Model([source, target], [logits, weights])


def outputs_of(model, inputs):
    # `predict`: compiled in one piece (op by op, eager JAX takes minutes here).
    logits, weights = model.predict([inputs["source"], inputs["target"]], verbose=0)
    return {"logits": logits, "weights": weights}


def save(folder):
    rng = np.random.default_rng(0)
    source = rng.integers(1, VOCAB, size=(3, 7)).astype("int32")
    source[1, 5:] = 0
    target = rng.integers(1, VOCAB, size=(3, 5)).astype("int32")
    target[2, 3:] = 0
    inputs = {"source": source, "target": target}
    np.savez(os.path.join(folder, "inputs.npz"), **inputs)
    results = {}
    for name, make in MODELS.items():
        model = seq2seq(make())
        for weight in model.weights:
            if weight.dtype.startswith("float"):  # not a seed generator's state
                weight.assign(rng.uniform(-0.8, 0.8, size=weight.shape).astype(weight.dtype))
        for key, value in outputs_of(model, inputs).items():
            results[f"{name}/{key}"] = value
        model.save(os.path.join(folder, f"{name}.keras"))
    np.savez(os.path.join(folder, "outputs.npz"), **results)


def load(*folders_and_outs):
    for folder, out in zip(folders_and_outs[::2], folders_and_outs[1::2], strict=True):
        load_one(folder, out)


def load_one(folder, out):
    inputs = np.load(os.path.join(folder, "inputs.npz"))
    results = {}
    for name in MODELS:
        model = keras.saving.load_model(os.path.join(folder, f"{name}.keras"))
        for key, value in outputs_of(model, inputs).items():
            results[f"{name}/{key}"] = value
    np.savez(out, **results)


if __name__ == "__main__":
    task, *arguments = sys.argv[1:]
    {"save": save, "load": load}[task](*arguments)
    print(keras.backend.backend(), IMPORTED_TENSORFLOW)
