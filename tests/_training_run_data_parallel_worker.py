"""A user's own tiny model trained through `TrainingRun` on one device and
under `distribution="data-parallel"` (KERAS_BACKEND=jax, host devices from
XLA_FLAGS), on 7 rows in batches of 4: the last batch (3 rows) does not
divide by 2 devices. Prints one JSON line: each run's mean squared error on
all rows after training (float64 NumPy, from its predictions), and the
device count it recorded; and the error of a data-parallel run of the same
model compiled with Keras' default reduction, which the padding would change.

Usage: python _training_run_data_parallel_worker.py FOLDER
"""

import json
import sys

import keras
import numpy as np
import tensorflow as tf

from keras_attention.training import TrainingRun
from keras_attention.training.distribution import DistributionError


def build(reduction="mean_with_sample_weight"):
    inputs = keras.Input((3,))
    tanh = keras.layers.Dense(
        5, activation="tanh", kernel_initializer=keras.initializers.GlorotUniform(seed=1)
    )
    hidden = tanh(inputs)
    outputs = keras.layers.Dense(1, kernel_initializer=keras.initializers.GlorotUniform(seed=2))(
        hidden
    )
    model = keras.Model(inputs, outputs)
    # Padding rows weigh 0 and leave a mean over the weights' sum.
    loss = keras.losses.MeanSquaredError(reduction=reduction)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    return model


def main(folder):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 3)).astype("float32")
    y = rng.normal(size=(7, 1)).astype("float32")
    result = {}
    for name, distribution in (("one_device", None), ("data_parallel", "data-parallel")):
        run = TrainingRun(f"{folder}/{name}", {"units": 5}, distribution=distribution)
        data = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
        model = run.fit(build, data, validation_data=data, epochs=3, verbose=0, monitor=None)
        predicted = np.asarray(model.predict(x, verbose=0), "float64")
        result[name] = {
            "loss": float(np.mean((predicted - y) ** 2)),
            "devices": run.options["devices"],
            "keras_devices": len(keras.distribution.list_devices()),
        }
    run = TrainingRun(f"{folder}/refused", {"units": 5}, distribution="data-parallel")
    try:
        run.fit(lambda: build("sum_over_batch_size"), data, epochs=1, verbose=0, monitor=None)
    except DistributionError as error:
        result["refused"] = str(error)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
