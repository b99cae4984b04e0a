"""A user's own small model trained with `TrainingRun`: the trainer that
tests/test_training_run_kill.py kills and starts again.

    python tests/_own_model_trainer.py RUN_DIR [UNITS]

Exits 0 when the run is finished; a run folder error is one line on stderr
and exit status 1.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attention.training import RunFolderError  # noqa: E402
from keras_attention.training import TrainingRun  # noqa: E402

EPOCHS = 3
# The first rows are the validation data.
VALIDATION = 64


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32"))[:, None]
    return x, y


def build(units):
    def compiled():
        init = keras.initializers.GlorotUniform(seed=1)
        model = keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(units, activation="tanh", kernel_initializer=init),
                keras.layers.Dense(1, kernel_initializer=init),
            ]
        )
        model.compile(optimizer=keras.optimizers.Adam(5e-2), loss="mse")
        return model

    return compiled


def main(run_dir, units=8):
    x, y = data()
    run = TrainingRun(run_dir, options={"units": units, "epochs": EPOCHS})
    run.fit(
        build(units),
        x,
        y,
        validation_data=(x[:VALIDATION], y[:VALIDATION]),
        epochs=EPOCHS,
        batch_size=16,
        learning_rate=5e-2,
        verbose=0,
    )


if __name__ == "__main__":
    try:
        main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
    except RunFolderError as error:
        raise SystemExit(f"train: {error}") from None
