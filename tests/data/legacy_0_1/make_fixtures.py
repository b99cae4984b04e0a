"""Writes the `.keras` files of this folder, once, with keras_attention 0.1.0.

They are kept as saved: `tests/test_legacy_files.py` loads them with today's
code and compares the outputs with the ones stored beside them (`*.npz`),
computed when they were saved. Re-running this script with a later version
would defeat that test; it is here to say how the files were made:

    python tests/data/legacy_0_1/make_fixtures.py tests/data/legacy_0_1
"""

import sys
from pathlib import Path

import keras
import numpy as np

import keras_attention as ka

VOCAB, T_ENC, T_DEC, BATCH = 13, 6, 5, 3


def attention(kind):
    return {
        "bahdanau": lambda: ka.BahdanauAttention(8, normalize=True),
        "luong_general_heads": lambda: ka.LuongAttention(
            score_mode="general", num_heads=2, use_scale=True
        ),
        "luong_concat": lambda: ka.LuongAttention(score_mode="concat", units=8),
        "location": lambda: ka.LocationSensitiveAttention(
            8, filters=4, kernel_size=3, cumulative=True
        ),
        "bahdanau_monotonic": lambda: ka.BahdanauMonotonicAttention(8, score_bias_init=-1.0),
        "luong_monotonic": lambda: ka.LuongMonotonicAttention(score_bias_init=-1.0),
    }[kind]()


def model(decoder_kind, kind):
    keras.utils.set_random_seed(7)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    x = keras.layers.Embedding(VOCAB, 6, mask_zero=True)(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True))(x)
    y = keras.layers.Embedding(VOCAB, 5, mask_zero=True)(target_in)
    if decoder_kind == "bahdanau":
        decoder = ka.BahdanauDecoder(8, attention(kind))
    else:
        decoder = ka.LuongDecoder(8, attention(kind), cell_type="lstm")
    outputs, weights, _ = decoder(y, memory)
    logits = keras.layers.Dense(VOCAB)(outputs)
    return keras.Model([source, target_in], [logits, weights])


def main(folder):
    folder = Path(folder)
    rng = np.random.default_rng(0)
    src = rng.integers(3, VOCAB, (BATCH, T_ENC)).astype("int32")
    src[0, 4:] = 0
    tgt = rng.integers(3, VOCAB, (BATCH, T_DEC)).astype("int32")
    tgt[1, 3:] = 0
    for decoder_kind in ("bahdanau", "luong"):
        for kind in (
            "bahdanau",
            "luong_general_heads",
            "luong_concat",
            "location",
            "bahdanau_monotonic",
            "luong_monotonic",
        ):
            m = model(decoder_kind, kind)
            logits, weights = m.predict([src, tgt], verbose=0)
            name = f"{decoder_kind}_decoder_{kind}"
            m.save(folder / f"{name}.keras")
            np.savez(folder / f"{name}.npz", source=src, target=tgt, logits=logits, weights=weights)
            print(name, logits.shape, weights.shape)


if __name__ == "__main__":
    main(sys.argv[1])
