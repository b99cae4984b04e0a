"""Trains the tiny translator through its command line on JAX, under
`--distribution data-parallel` over the host devices and on one device, from
the same seed and data; prints what each gave as JSON.

Launched by tests/test_distributed.py in a fresh process, because JAX reads
the device count once, at its start:

    XLA_FLAGS=--xla_force_host_platform_device_count=2 KERAS_BACKEND=jax \\
        python _translator_data_parallel_worker.py DATA_DIR OUT_DIR

Writes OUT_DIR/data_parallel and OUT_DIR/one_device, two run folders. The
same global batches reach both runs: `--batch-size` is per device, so the
one-device run gets the data-parallel run's global batch.

For speed (compiling the training step, once per batch shape, is most of
the time of so small a run):
- `make_dataset` gets one length bucket, `bucket_boundaries=BUCKETS`: every
  batch is padded to 127 subwords, one shape, where the default buckets give
  four shapes here (how many shapes the buckets give is tested in
  tests/test_pipeline.py);
- the validation split is cut to its first VAL_PAIRS pairs (the translator
  validates on all 1,014 otherwise);
- XLA_FLAGS may lower XLA's CPU optimization level.

The last line of stdout is one
JSON object: each run's batch shapes (those `make_dataset` gave, train and
validation) and the devices JAX saw. OUT_DIR/inputs.npz holds a batch of
validation pairs and OUT_DIR/logits.npy the data-parallel run's model's
logits on it, computed on JAX, for the test to compare on TensorFlow.
"""

import json
import sys

import keras
import numpy as np

from keras_attention.translation import cli
from keras_attention.translation import training
from keras_attention.translation.pipeline import make_dataset
from keras_attention.translation.runs import SOURCE_VOCAB
from keras_attention.translation.runs import TARGET_VOCAB
from keras_attention.translation.tokenizer import SubwordTokenizer

TRAIN_PAIRS = 24
VAL_PAIRS = 32
EPOCHS = 2
PER_DEVICE_BATCH = 8
# One bucket: these pairs are 26 to 91 subwords long (a WordPiece vocabulary
# learned from 24 pairs is nearly one of characters), padded to 127.
BUCKETS = (128,)


def _recording(shapes):
    """`training.make_dataset` with one length bucket, which also records the
    shapes of its batches."""
    make_dataset = training.make_dataset

    def make(*args, **kwargs):
        kwargs["bucket_boundaries"] = BUCKETS
        # A copy is read: reading the dataset itself would move its shuffle on.
        copy = make_dataset(*args, **kwargs).as_numpy_iterator()
        shapes.append(sorted({(*x[0].shape, *x[1].shape, *y.shape) for x, y in copy}))
        return make_dataset(*args, **kwargs)

    return make


def _with_short_validation(load_multi30k):
    def load(*args, **kwargs):
        corpus = load_multi30k(*args, **kwargs)
        corpus["val"] = corpus["val"].head(VAL_PAIRS)
        return corpus

    return load


def main(data_dir, out_dir):
    devices = len(keras.distribution.list_devices())
    training.load_multi30k = _with_short_validation(training.load_multi30k)
    result = {"backend": keras.backend.backend(), "devices": devices}
    for name, batch_size, extra in (
        ("data_parallel", PER_DEVICE_BATCH, ["--distribution", "data-parallel"]),
        ("one_device", PER_DEVICE_BATCH * devices, []),
    ):
        shapes = []
        training.make_dataset = _recording(shapes)
        cli.main(
            ["--data-dir", data_dir, "train", "--preset", "tiny"]
            + ["--max-train-examples", str(TRAIN_PAIRS), "--epochs", str(EPOCHS)]
            + ["--batch-size", str(batch_size), "--run-dir", f"{out_dir}/{name}", *extra]
        )
        result[name] = {"train_shapes": shapes[0], "val_shapes": shapes[1]}
    _save_logits(data_dir, f"{out_dir}/data_parallel", out_dir)
    print(json.dumps(result))


def _save_logits(data_dir, run_dir, out_dir):
    """The run's model's logits on 8 validation pairs, padded to their longest."""
    tokenizers = [SubwordTokenizer.load(f"{run_dir}/{n}") for n in (SOURCE_VOCAB, TARGET_VOCAB)]
    val = training.load_multi30k(("val",), data_dir)["val"].head(8)
    dataset = make_dataset(
        val.en, val.fr, *tokenizers, batch_size=8, shuffle=False, bucket_boundaries=None
    )
    (source, decoder_input), _ = next(dataset.as_numpy_iterator())
    model = keras.saving.load_model(f"{run_dir}/model.keras")
    logits = model.predict([source, decoder_input], verbose=0)  # (8, T, V)
    np.savez(f"{out_dir}/inputs.npz", source=source, decoder_input=decoder_input)
    np.save(f"{out_dir}/logits.npy", keras.ops.convert_to_numpy(logits))


if __name__ == "__main__":
    main(*sys.argv[1:])
