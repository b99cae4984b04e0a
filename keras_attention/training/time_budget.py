"""`TimeBudget`: a learning rate decayed over a time budget step by step, and
training stopped within it, across resumed runs."""

import json
import os
import time

import keras

from keras_attention.files.atomic import write_json
from keras_attention.files.reading import read_text
from keras_attention.training.schedules import check_max_minutes
from keras_attention.training.schedules import cosine_to_budget


class TimeBudget(keras.callbacks.Callback):
    """Cosine learning-rate decay over a time budget or a step count, and stopping within it.

    The rate falls from `peak` to `floor` on a cosine (`cosine_to_budget`) as
    training goes from its start to its end, after a linear warm-up over the
    first `warmup_steps` steps; it is set every 10 batches. The end is
    whichever comes first: the training time (summed over resumed runs, kept
    in `state_path`) reaching `max_minutes`, or the step count reaching
    `total_steps` (an epoch limit): the schedule follows the larger of the two
    fractions. So a run whose epochs end before its time budget still decays
    to the floor, and the same seed and step count give the same schedule
    however busy the machine is. Training stops at the end of an epoch when
    one more epoch, as long as the last, would pass the time budget (`fit`
    itself stops at the last epoch), and within an epoch at the first batch
    that starts past the budget: an epoch slower than the one before it (a
    busy machine) cuts that epoch short instead of overrunning the budget.
    The partial epoch is saved and counted like any other.

    The budget means what `TrainingRun.fit(max_minutes=...)` means: the
    training time of the whole run across its resumes, of the epochs it
    holds. `CosineToBudget`, which `TrainingRun.fit(learning_rate=...)` adds,
    sets the rate once per epoch from the run's `training_time`; this
    callback is for runs of few, long epochs, and keeps its own count (it
    works outside a run too). Give it to `TrainingRun.fit` in
    `callbacks`, its state file among the run's `files`; `run.time_budget`
    makes one over the run's progress.json and forgets the epochs a kill did
    not back up (`keep_epochs`):

    ```python
    with TrainingRun(run_dir, options, files=("progress.json",)) as run:
        budget = run.time_budget(60, 3e-3, 1e-4, total_steps=5000)
        run.fit(build_model, dataset, epochs=100, callbacks=[budget], monitor=None)
    ```

    Args:
        max_minutes: the time budget of the whole run, in minutes
            (`check_max_minutes`).
        peak: the rate after the warm-up.
        floor: the rate at the end.
        state_path: a JSON file of the time spent and of each epoch's
            seconds, loss and rate (written atomically after every epoch,
            read back by a resumed run).
        warmup_steps: steps of linear warm-up.
        total_steps: the steps of the whole training, or None (the time alone).
        clock: the clock of this session, in seconds (tests inject one).

    Attributes:
        state: `{"seconds": total training time, "epochs": [{"epoch",
            "seconds", "loss", "learning_rate"[, "batches" when the budget
            cut it short]}, ...]}`.
    """

    def __init__(
        self,
        max_minutes,
        peak,
        floor,
        state_path,
        warmup_steps=300,
        total_steps=None,
        clock=time.perf_counter,
    ):
        super().__init__()
        self.clock = clock
        self.max_minutes = check_max_minutes(max_minutes, allow_none=False)
        self._budget_s = max_minutes * 60
        self.peak = peak
        self.floor = floor
        self.state_path = state_path
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.state = {"seconds": 0.0, "epochs": []}
        if os.path.exists(state_path):
            self.state = json.loads(read_text(state_path, "progress file"))  # not a FIFO

    def keep_epochs(self, count):
        """Forgets the epochs after the first `count`: those a killed run
        recorded here but had not backed up (they run again)."""
        kept = self.state["epochs"][:count]
        if len(kept) < len(self.state["epochs"]):
            self.state = {"seconds": sum(e["seconds"] for e in kept), "epochs": kept}

    def finished(self):
        """Whether an earlier run already spent the budget."""
        epochs = self.state["epochs"]
        return bool(epochs) and self.state["seconds"] + epochs[-1]["seconds"] > self._budget_s

    def on_train_begin(self, logs=None):
        self._started = self.clock()
        self._base = self.state["seconds"]

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_started = self.clock()
        self._cut_at = None  # the batches of an epoch the budget cut short

    def rate(self, step, elapsed_s):
        """The learning rate at optimizer step `step` after `elapsed_s` seconds of training."""
        fraction = elapsed_s / self._budget_s
        if self.total_steps:
            fraction = max(fraction, step / self.total_steps)
        rate = cosine_to_budget(self.peak, self.floor, fraction)
        if step < self.warmup_steps:
            rate *= (step + 1) / self.warmup_steps
        return rate

    def on_train_batch_begin(self, batch, logs=None):
        if self.elapsed_now() >= self._budget_s:
            self.model.stop_training = True  # `fit` stops after this batch
            self._cut_at = batch + 1
        if batch % 10:
            return
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        self.model.optimizer.learning_rate.assign(self.rate(step, self.elapsed_now()))

    def elapsed_now(self):
        """The training time so far, earlier runs included, in seconds."""
        return self._base + self.clock() - self._started

    def on_epoch_end(self, epoch, logs=None):
        seconds = self.clock() - self._epoch_started
        self.state["seconds"] = self.elapsed_now()
        rate = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        entry = {
            "epoch": epoch + 1,
            "seconds": round(seconds, 1),
            "loss": float(logs["loss"]),
            "learning_rate": rate,
        }
        if self._cut_at is not None:
            entry["batches"] = self._cut_at  # cut short by the budget
        self.state["epochs"].append(entry)
        write_json(self.state_path, self.state)  # atomically
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(
            f"\nepoch {epoch + 1}: {seconds:.0f} s, {self.state['seconds'] / 60:.1f} of "
            f"{self.max_minutes:g} minutes, learning rate {rate:.2e}, "
            f"load average {load:.2f}"
            + (f"; the time budget ran out after {self._cut_at} batches" if self._cut_at else "")
        )
        if self.state["seconds"] + seconds > self._budget_s:
            self.model.stop_training = True
