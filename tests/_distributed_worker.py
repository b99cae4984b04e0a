"""Trains the translator a few steps under `tf.distribute`; prints the losses as JSON.

Launched in a fresh process by tests/test_distributed.py, because devices and
the cluster must be configured before TensorFlow initializes:

    python _distributed_worker.py replicas
        splits the CPU into 2 logical devices, then trains the same steps on
        one device and under `MirroredStrategy` on both devices, and once
        more under `MirroredStrategy` with `global_clipnorm`, next to a plain
        TensorFlow loop that clips each replica's gradient (`clip_per_replica`).
    python _distributed_worker.py worker [--run-dir DIR]
        one worker of a `MultiWorkerMirroredStrategy` cluster described by
        TF_CONFIG, training the same steps; `--run-dir` then saves the model
        where `distribute.worker_run_dir` says.

Every run starts from the same weights (`initial_weights`) and reads the same
global batches: sentences of one fixed length (no padding), in order, no
dropout, plain SGD, so that a wrong gradient scale or a replica reading the
wrong part of a batch shows in the losses. The last line of stdout is one JSON
object: {"replicas": ..., "runs": {name: [loss of step 1, step 2, ...]}, ...}.
"""

import argparse
import functools
import json
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

WORDS = 24  # per language, one token each
SOURCE_WORDS = 5  # every source: 5 tokens
TARGET_WORDS = 4  # every target: [START] + 4 tokens in, 4 tokens + [END] out
PER_REPLICA_BATCH = 4
REPLICAS = 2
GLOBAL_BATCH = PER_REPLICA_BATCH * REPLICAS
STEPS = 4
LEARNING_RATE = 0.5
# Below the norm of each replica's gradient on these batches (about 0.14),
# so that clipping acts at every step.
CLIPNORM = 0.1
MODEL = dict(attention="bahdanau", embedding_dim=8, units=16, dropout=0.0)


def sentences():
    """Aligned (english, french) lists, one global batch per step.

    The target maps the first source words through a fixed permutation, so the
    loss falls as the model learns.
    """
    rng = np.random.default_rng(0)
    source = rng.integers(0, WORDS, size=(STEPS * GLOBAL_BATCH, SOURCE_WORDS))
    english = [" ".join(f"e{i}" for i in row) for row in source]
    french = [" ".join(f"f{(7 * i) % WORDS}" for i in row[:TARGET_WORDS]) for row in source]
    return english, french


@functools.cache
def tokenizers():
    from keras_attention.translation import RESERVED_TOKENS
    from keras_attention.translation import SubwordTokenizer

    # Whole words as tokens: a sentence has exactly as many ids as words.
    return tuple(
        SubwordTokenizer(RESERVED_TOKENS + tuple(f"{lang}{i}" for i in range(WORDS)))
        for lang in "ef"
    )


@functools.cache
def dataset():
    """The package pipeline in global batches, sharded as the script shards it.

    Built once: every run iterates the same dataset from its start.
    """
    from keras_attention.translation import make_dataset
    from keras_attention.translation.distribute import shard_by_data

    data = make_dataset(*sentences(), *tokenizers(), batch_size=GLOBAL_BATCH, shuffle=False)
    return shard_by_data(data)


def initial_weights(model):
    """Uniform in [-0.1, 0.1] (the classic seq2seq initialization), from a
    fixed seed: the same numbers in every process and under every strategy."""
    rng = np.random.default_rng(0)
    return [rng.uniform(-0.1, 0.1, w.shape).astype(w.dtype) for w in model.get_weights()]


def new_model():
    from keras_attention.translation import RESERVED_TOKENS
    from keras_attention.translation.model import build_translator

    vocab_size = len(RESERVED_TOKENS) + WORDS
    model = build_translator(vocab_size, vocab_size, **MODEL)
    model.set_weights(initial_weights(model))
    return model


def loss_function():
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)


def train(strategy, clipnorm=None):
    """The model and its per-step training losses under `strategy`."""
    import keras

    with strategy.scope():
        model = new_model()
        model.compile(
            optimizer=keras.optimizers.SGD(LEARNING_RATE, global_clipnorm=clipnorm),
            loss=loss_function(),
        )
    # One step per epoch: the loss logged for an epoch is then the loss of one
    # step (Keras resets its loss tracker every epoch, not the iterator).
    history = model.fit(dataset(), epochs=STEPS, steps_per_epoch=1, shuffle=False, verbose=0)
    return model, [float(x) for x in history.history["loss"]]


def clip_per_replica(clipnorm):
    """What Keras 3 does with `global_clipnorm` under a strategy, in plain
    TensorFlow on one device.

    Each replica's loss is its own half of the batch divided by the number of
    replicas; the optimizer clips the gradient of that loss, on the replica,
    then sums the clipped gradients across replicas. Returns the per-step
    losses and the norms of the replica gradients before clipping.
    """
    model = new_model()
    loss_fn = loss_function()
    losses, norms = [], []
    for (source, decoder_input), target in dataset().take(STEPS):
        total, step_loss = None, 0.0
        for replica in range(REPLICAS):
            rows = slice(replica * PER_REPLICA_BATCH, (replica + 1) * PER_REPLICA_BATCH)
            with tf.GradientTape() as tape:
                logits = model((source[rows], decoder_input[rows]), training=True)
                loss = loss_fn(target[rows], logits) / REPLICAS
            # Dense: the embedding gradients arrive as IndexedSlices.
            grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_weights)]
            norms.append(float(tf.linalg.global_norm(grads)))
            grads, _ = tf.clip_by_global_norm(grads, clipnorm)
            total = grads if total is None else [a + b for a, b in zip(total, grads, strict=True)]
            step_loss += float(loss)
        for weight, grad in zip(model.trainable_weights, total, strict=True):
            weight.assign_sub(LEARNING_RATE * grad)
        losses.append(step_loss)
    return losses, norms


def replicas(args):
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * REPLICAS
    )
    mirrored = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(REPLICAS)])
    with tf.device("/cpu:0"):
        clipped_per_replica, norms = clip_per_replica(CLIPNORM)
    runs = {
        "one-device": train(tf.distribute.OneDeviceStrategy("/cpu:0"))[1],
        "mirrored": train(mirrored)[1],
        "mirrored-clipped": train(mirrored, clipnorm=CLIPNORM)[1],
        "clipped-per-replica": clipped_per_replica,
    }
    return {
        "replicas": mirrored.num_replicas_in_sync,
        "runs": runs,
        "replica_gradient_norms": norms,
    }


def worker(args):
    from keras_attention.translation import distribute

    # First, before any other TensorFlow work: it starts this worker's server.
    strategy = distribute.make_strategy("multi-worker")
    model, losses = train(strategy)
    result = {
        "replicas": strategy.num_replicas_in_sync,
        "task": distribute.task_index(),
        "chief": distribute.is_chief(),
        "runs": {"multi-worker": losses},
    }
    if args.run_dir:
        # Every worker saves (reading the metric variables is an all-reduce);
        # only the chief into the run folder itself.
        folder = distribute.worker_run_dir(args.run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        model.save(folder / "model.keras")
        result["saved"] = str(Path(folder, "model.keras"))
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=("replicas", "worker"))
    parser.add_argument("--run-dir", help="worker: save the model under this folder")
    args = parser.parse_args(argv)
    result = replicas(args) if args.mode == "replicas" else worker(args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
