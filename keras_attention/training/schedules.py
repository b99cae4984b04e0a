"""The learning rate over a time budget, and the callbacks of a run's epochs.

The time budget is `max_minutes`, one name and one meaning throughout the
package: the training time of the whole run in minutes, summed over the
sessions a killed run resumes in (`TrainingTime`), checked by
`check_max_minutes`. A user who kills a run and resumes it expects the
budget they gave the run, not a fresh one per process; and the rate then
follows the same curve whether or not the run was killed. Only the time of
the epochs the run holds counts: an epoch a kill lost runs again, and its
time with it.

`cosine_to_budget` is the one cosine decay of the package: the translator's
`CosineToBudget` (per epoch) and `time_budget.TimeBudget` (per step, after a
warm-up) both compute their rate with it.
"""

import math
import numbers
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


def check_max_minutes(max_minutes, allow_none=True):
    """The time budget, checked: a finite number of minutes above 0, or None
    (no budget) when `allow_none`. Returns it.

    Raises:
        ValueError: "Invalid value for argument `max_minutes`. Expected ...
            Received: max_minutes=..." (0, a negative number, NaN, infinity,
            a bool or a string).
    """
    if max_minutes is None and allow_none:
        return None
    if (
        isinstance(max_minutes, bool)
        or not isinstance(max_minutes, numbers.Real)
        or not 0 < max_minutes < math.inf
    ):
        expected = "a finite number of minutes above 0"
        if allow_none:
            expected += ", or None for no time budget"
        raise ValueError(
            f"Invalid value for argument `max_minutes`. Expected {expected}. "
            f"Received: max_minutes={max_minutes!r}"
        )
    return max_minutes


class TrainingTime:
    """The training time of a run, in seconds, summed over its sessions.

    Calling it reads the time: `spent_s` (what the earlier sessions of the run
    spent on the epochs it holds, from its backup) plus the time since
    `start()` in this session (0 before it).

    Args:
        spent_s: the training time of the earlier sessions, in seconds.
        clock: the clock of this session (seconds; tests inject one).
    """

    def __init__(self, spent_s=0.0, clock=time.monotonic):
        self.spent_s = float(spent_s)
        self.clock = clock
        self._started = None

    def start(self):
        """Starts this session's count (`model.fit` begins)."""
        self._started = self.clock()

    def __call__(self):
        if self._started is None:
            return self.spent_s
        return self.spent_s + self.clock() - self._started


class CosineToBudget(keras.callbacks.Callback):
    """Cosine decay of the learning rate over the epochs or the time budget.

    Before each epoch the rate is set from the run's progress: the larger of the
    fraction of epochs done and the fraction of `max_minutes` spent, so that a
    run cut short by its budget still ends at a low rate instead of stopping at
    a high one. The rate falls from ``learning_rate`` to
    ``learning_rate * final_fraction`` (`cosine_to_budget`). With a run's
    `TrainingRun.training_time` as `clock`, a resumed run counts its epochs
    from the backup and its time over all its sessions, so its rate goes on
    where the killed session left it.

    Args:
        learning_rate: the rate of the first epoch.
        epochs: the epochs of the whole run.
        max_minutes: the time budget, in minutes (`check_max_minutes`); None:
            the epochs alone.
        final_fraction: the last rate, as a fraction of `learning_rate`.
        clock: a function of no arguments returning the training time so far,
            in seconds (a `TrainingTime`); None: the time since `model.fit`
            began in this process.
    """

    def __init__(self, learning_rate, epochs, max_minutes=None, final_fraction=0.05, clock=None):
        super().__init__()
        if learning_rate <= 0 or epochs < 1:
            raise ValueError(
                f"CosineToBudget: learning_rate must be > 0 and epochs >= 1, got "
                f"{learning_rate} and {epochs}"
            )
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.max_minutes = check_max_minutes(max_minutes)
        self.final_fraction = final_fraction
        self._own_clock = clock is None
        self.clock = TrainingTime() if clock is None else clock

    def on_train_begin(self, logs=None):
        if self._own_clock:
            self.clock.start()

    def rate(self, epoch):
        """The rate of the 0-based `epoch`, at the clock's present time."""
        progress = epoch / self.epochs
        if self.max_minutes:
            progress = max(progress, self.clock() / (self.max_minutes * 60))
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
    """Stops training after the epoch that spends the time budget.

    Args:
        max_minutes: the time budget, in minutes.
        clock: the run's training time so far, in seconds (a `TrainingTime`).
    """

    def __init__(self, max_minutes, clock):
        super().__init__()
        self.max_minutes = check_max_minutes(max_minutes, allow_none=False)
        self.clock = clock

    def on_epoch_end(self, epoch, logs=None):
        if self.clock() >= self.max_minutes * 60:
            print(
                f"time budget of {self.max_minutes:g} minutes spent after epoch {epoch + 1}",
                flush=True,
            )
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
