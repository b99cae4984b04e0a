"""Trains a decoder model under `keras.distribution.DataParallel` on JAX host
devices and on one device; prints what each gave as JSON.

Launched by tests/test_distributed.py in a fresh process, because JAX reads
the device count once, at its start:

    XLA_FLAGS=--xla_force_host_platform_device_count=N KERAS_BACKEND=jax \\
        python _data_parallel_worker.py OUT_DIR

Every run starts from the same weights and reads the same global batches:
ROWS rows in batches of BATCH, so the last batch (5 rows) divides by neither
2 nor 4 devices. The N-device runs pad it with `keras_attention.training.distribution`;
the one-device runs read it as it is. Plain SGD, no dropout: a row dropped,
counted twice or weighted wrong shows in the losses.

Nothing but its weight of 0 hides a padding row from the loss and the metric:
the target embedding has no `mask_zero` (so the outputs carry no mask), the
loss no `ignore_class` (a padding target is class 0, scored as any other),
and the target padding of the real rows is taken out by token weights, under
`reduction="mean_with_sample_weight"`. A padding row of weight 1 moves the
loss of the last step and the accuracy. Writes OUT_DIR/model.keras
(trained on N devices), OUT_DIR/sources.npy and OUT_DIR/greedy.npy (its greedy
tokens on them). On 2 devices it also trains under `ModelParallel` with the
vocabulary's Embedding and Dense sharded. The last line of stdout is one JSON
object.
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attention import BahdanauAttention  # noqa: E402
from keras_attention import BahdanauDecoder  # noqa: E402
from keras_attention import Seq2SeqGenerator  # noqa: E402
from keras_attention.training import distribution  # noqa: E402

VOCAB, START, END = 24, 1, 23  # END: an id the model rarely emits
ROWS, BATCH = 29, 8  # batches of 8, 8, 8 and 5 rows
LEARNING_RATE = 0.5


def build():
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    x = keras.layers.Embedding(VOCAB, 8, mask_zero=True, name="source_embedding")(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))(x)
    # No mask_zero: no output mask hides a padding row from the loss (above).
    y = keras.layers.Embedding(VOCAB, 8, name="target_embedding")(target)
    outputs, _, _ = BahdanauDecoder(16, BahdanauAttention(8), name="decoder")(y, memory)
    logits = keras.layers.Dense(VOCAB, name="logits")(outputs)
    model = keras.Model([source, target], logits)
    rng = np.random.default_rng(0)
    model.set_weights([rng.uniform(-0.8, 0.8, w.shape).astype(w.dtype) for w in model.weights])
    model.compile(
        optimizer=keras.optimizers.SGD(LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"
        ),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    return model


def data():
    """Sources of 3 to 7 tokens; targets their first tokens shifted by 5 (a
    task to learn), START in, END out, padded with 0."""
    rng = np.random.default_rng(1)
    source = np.zeros((ROWS, 7), "int32")
    target_in = np.zeros((ROWS, 6), "int32")
    target_out = np.zeros((ROWS, 6), "int32")
    for row in range(ROWS):
        n = rng.integers(3, 8)
        source[row, :n] = rng.integers(3, VOCAB, size=n)
        words = (source[row, : min(n, 5)] + 5 - 3) % (VOCAB - 3) + 3
        target_in[row, : len(words) + 1] = [START, *words]
        target_out[row, : len(words) + 1] = [*words, 2]
    return source, target_in, target_out


def token_weights(target_out):
    """1 on each target token, 0 on the target padding of a real row."""
    return (target_out != 0).astype("float32")


def batches():
    source, target_in, target_out = data()
    for start in range(0, ROWS, BATCH):
        rows = slice(start, start + BATCH)
        yield [source[rows], target_in[rows]], target_out[rows]


def step_losses(model):
    """One `train_on_batch` per global batch, on one device, unpadded."""
    return [
        float(model.train_on_batch(x, y, sample_weight=token_weights(y), return_dict=True)["loss"])
        for x, y in batches()
    ]


class RunningLosses(keras.callbacks.Callback):
    """The `loss` of `fit`'s logs after each step: the mean so far, each step
    weighted by the rows of its batch (padding rows included)."""

    def __init__(self):
        super().__init__()
        self.means = []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append(float(logs["loss"]))


def one_device(fn):
    """`fn()` with no distribution set: one device."""
    previous = keras.distribution.distribution()
    keras.distribution.set_distribution(None)
    try:
        return fn()
    finally:
        keras.distribution.set_distribution(previous)


def indivisible_error(model, x, y):
    """The error of `fit` on the last batch (5 rows) unpadded, or None."""
    x, y = [a[-5:] for a in x], y[-5:]
    try:
        model.fit(x, y, batch_size=5, epochs=1, shuffle=False, verbose=0)
    except Exception as error:  # JAX's IndivisibleError, by name
        return type(error).__name__
    return None


def run(out_dir, devices):
    source, target_in, target_out = data()
    result = {"devices": devices}
    # One device: a step per global batch, the last one of 5 rows.
    reference = one_device(build)
    result["one_device_steps"] = one_device(lambda: step_losses(reference))
    result["one_device_evaluate"] = one_device(
        lambda: reference.evaluate(
            [source, target_in],
            target_out,
            sample_weight=token_weights(target_out),
            batch_size=ROWS,
            verbose=0,
            return_dict=True,
        )
    )
    with distribution.data_parallel().scope():
        model = build()
        result["unpadded_error"] = indivisible_error(build(), [source, target_in], target_out)
        x, y, weight = distribution.pad_arrays(
            [source, target_in],
            target_out,
            token_weights(target_out),
            multiple=devices,
            batch_size=BATCH,
            model=model,
        )
        running = RunningLosses()
        model.fit(
            x,
            y,
            sample_weight=weight,
            batch_size=BATCH,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[running],
        )
        result["data_parallel_running_means"] = running.means
        # The same epoch from a tf.data pipeline, padded batch by batch.
        import tensorflow as tf

        batched = tf.data.Dataset.from_tensor_slices(
            ((source, target_in), target_out, token_weights(target_out))
        )
        from_dataset = build()
        padded_batches = distribution.pad_dataset(batched.batch(BATCH), model=from_dataset)
        from_dataset.fit(padded_batches, epochs=1, verbose=0)
        result["dataset_weight_difference"] = max(
            float(np.max(np.abs(a - b)))
            for a, b in zip(from_dataset.get_weights(), model.get_weights(), strict=True)
        )
        result["padded_rows"] = len(y)
        # One evaluation batch of all the rows, padded.
        result["evaluate"] = model.evaluate(
            x, y, sample_weight=weight, batch_size=len(y), verbose=0, return_dict=True
        )
        # An END the model rarely emits: outputs of several tokens to compare.
        generator = Seq2SeqGenerator.from_model(model, START, END)
        padded, rows = distribution.pad_rows(source, devices)
        greedy = distribution.unpad(generator.greedy(padded, max_length=6), rows)
        beam = distribution.unpad(generator.beam(padded, beam_width=3, max_length=6), rows)
    try:
        distribution.data_parallel(devices + 1)
    except distribution.DistributionError as error:
        result["too_many_devices"] = str(error)
    result["weight_difference"] = max(
        float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-12))
        for a, b in zip(model.get_weights(), reference.get_weights(), strict=True)
    )
    expected = one_device(lambda: Seq2SeqGenerator.from_model(reference, START, END))
    expected_greedy = one_device(lambda: expected.greedy(source, max_length=6))
    expected_beam = one_device(lambda: expected.beam(source, beam_width=3, max_length=6))
    result["greedy_equal"] = bool(np.array_equal(greedy["tokens"], expected_greedy["tokens"]))
    result["beam_equal"] = bool(np.array_equal(beam["tokens"], expected_beam["tokens"]))
    result["distinct_tokens"] = len(set(greedy["tokens"].ravel().tolist()))
    out_dir = Path(out_dir)
    model.save(out_dir / "model.keras")
    np.save(out_dir / "sources.npy", source)
    np.save(out_dir / "greedy.npy", greedy["tokens"])
    return result


def model_parallel():
    """Three steps with the target Embedding and the logits Dense sharded along
    the vocabulary over 2 devices (`ModelParallel`), against one device."""
    x, y = list(batches())[0]
    weight = token_weights(y)
    reference = one_device(build)

    def steps(model):
        return [
            float(model.train_on_batch(x, y, sample_weight=weight, return_dict=True)["loss"])
            for _ in range(3)
        ]

    expected = one_device(lambda: steps(reference))
    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh((1, len(devices)), ["batch", "model"], devices=devices)
    layout = keras.distribution.LayoutMap(mesh)
    layout["target_embedding/embeddings"] = ("model", None)  # (V, E): rows split
    layout["logits/kernel"] = (None, "model")  # (units, V): columns split
    layout["logits/bias"] = ("model",)
    sharded = keras.distribution.ModelParallel(layout_map=layout, batch_dim_name="batch")
    with sharded.scope():
        model = build()
        specs = {
            v.path: list(v.value.sharding.spec)
            for v in model.weights
            if v.path.startswith(("target_embedding", "logits"))
        }
        losses = steps(model)
        tokens = Seq2SeqGenerator.from_model(model, START, END).greedy(x[0], max_length=6)
    expected_tokens = one_device(
        lambda: Seq2SeqGenerator.from_model(reference, START, END).greedy(x[0], max_length=6)
    )
    return {
        "specs": specs,
        "losses": losses,
        "one_device": expected,
        "greedy_equal": bool(np.array_equal(tokens["tokens"], expected_tokens["tokens"])),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir")
    args = parser.parse_args(argv)
    devices = len(keras.distribution.list_devices())
    result = run(args.out_dir, devices)
    if devices == 2:
        result["model_parallel"] = model_parallel()
    result["backend"] = keras.backend.backend()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
