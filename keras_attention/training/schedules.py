"""The learning rate over a time budget, and the callbacks of a run's epochs.

`cosine_to_budget` is the one cosine decay of the package: the translator's
`CosineToBudget` (per epoch) and `time_budget.TimeBudget` (per step, after a
warm-up) both compute their rate with it.
"""

import math
import time

import keras

from keras_attention.training import averaging
from keras_attention.training.run_folder import save_weights


def cosine_to_budget(peak, floor, fraction):
    """The learning rate after `fraction` of a training: a cosine from `peak`
    (fraction 0) to `floor` (fraction 1 and beyond).

    Args:
        peak: the rate at the start.
        floor: the rate at the end.
        fraction: how much of the training is done: the larger of the
            fraction of steps (or epochs) and the fraction of the time budget
            spent, so that a run cut short by its budget still ends low.
    """
    fraction = min(fraction, 1.0)
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * fraction))


class CosineToBudget(keras.callbacks.Callback):
    """Cosine decay of the learning rate over the epochs or the time budget.

    Before each epoch the rate is set from the run's progress: the larger of the
    fraction of epochs done and the fraction of the wall-clock budget spent, so
    that a run cut short by its budget still ends at a low rate instead of
    stopping at a high one. The rate falls from ``learning_rate`` to
    ``learning_rate * final_fraction`` (`cosine_to_budget`). A resumed run
    counts its epochs from the backup but its time from the restart, like the
    time limit itself.

    Args:
        learning_rate: the rate of the first epoch.
        epochs: the epochs of the whole run.
        budget_seconds: the wall-clock budget; None: the epochs alone.
        final_fraction: the last rate, as a fraction of `learning_rate`.
        clock: the clock the budget is read on (seconds).
    """

    def __init__(
        self, learning_rate, epochs, budget_seconds=None, final_fraction=0.05, clock=time.monotonic
    ):
        super().__init__()
        if learning_rate <= 0 or epochs < 1:
            raise ValueError(
                f"CosineToBudget: learning_rate must be > 0 and epochs >= 1, got "
                f"{learning_rate} and {epochs}"
            )
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.budget_seconds = budget_seconds
        self.final_fraction = final_fraction
        self.clock = clock
        self.start = clock()

    def rate(self, epoch):
        """The rate of the 0-based `epoch`, at the clock's present time."""
        progress = epoch / self.epochs
        if self.budget_seconds:
            progress = max(progress, (self.clock() - self.start) / self.budget_seconds)
        low = self.learning_rate * self.final_fraction
        return cosine_to_budget(self.learning_rate, low, progress)

    def on_epoch_begin(self, epoch, logs=None):
        self.model.optimizer.learning_rate = self.rate(epoch)

    def on_epoch_end(self, epoch, logs=None):
        # Recorded in history.csv, as ReduceLROnPlateau does.
        if logs is not None:
            logs["learning_rate"] = float(
                keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)
            )


class TimeLimit(keras.callbacks.Callback):
    """Stops training after the epoch that passes a wall-clock budget."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.start = time.time()

    def on_epoch_end(self, epoch, logs=None):
        if time.time() - self.start > self.seconds:
            print(f"time limit reached after epoch {epoch + 1}")
            self.model.stop_training = True


class EpochWeights(keras.callbacks.Callback):
    """Saves the weights after every epoch in `RUN_DIR/epochs`, atomically,
    for checkpoint averaging (`keras_attention.training.averaging`)."""

    def __init__(self, run_dir):
        super().__init__()
        self.run_dir = run_dir

    def on_epoch_end(self, epoch, logs=None):
        path = averaging.epoch_weight_path(self.run_dir, epoch + 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_weights(self.model, path)
