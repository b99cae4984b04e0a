"""The translator's learning-rate schedule: cosine decay over the epochs or the
time budget, whichever ends first, checked against the formula in float64.
The clocks are injected: the tests never wait."""

import math

import keras
import pytest

from keras_attention.training.schedules import CosineToBudget
from keras_attention.translation import training


class FakeClock:
    """The training time so far, in seconds, as `TrainingTime` gives it."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _cosine(lr, progress, final_fraction=0.05):
    low = lr * final_fraction
    return low + 0.5 * (lr - low) * (1 + math.cos(math.pi * min(progress, 1.0)))


def test_without_budget_the_rate_follows_the_epochs():
    schedule = CosineToBudget(2e-3, 20)
    assert schedule.rate(0) == pytest.approx(2e-3, rel=1e-12)
    assert schedule.rate(10) == pytest.approx(0.5 * (2e-3 + 1e-4), rel=1e-12)
    assert schedule.rate(20) == pytest.approx(1e-4, rel=1e-12)
    rates = [schedule.rate(e) for e in range(21)]
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))
    for epoch in (3, 7, 15):
        assert schedule.rate(epoch) == pytest.approx(_cosine(2e-3, epoch / 20), rel=1e-12)


def test_the_time_budget_wins_when_it_runs_out_first():
    clock = FakeClock()
    schedule = CosineToBudget(2e-3, 30, max_minutes=10, clock=clock)
    assert schedule.rate(0) == pytest.approx(2e-3, rel=1e-12)
    clock.now += 300  # half the budget spent after 2 of 30 epochs
    assert schedule.rate(2) == pytest.approx(_cosine(2e-3, 0.5), rel=1e-12)
    clock.now += 290
    assert schedule.rate(4) == pytest.approx(_cosine(2e-3, 590 / 600), rel=1e-12)
    clock.now += 100  # past the budget: the floor, not a rate that rises again
    assert schedule.rate(5) == pytest.approx(1e-4, rel=1e-12)


def test_the_epochs_win_when_they_run_out_first():
    clock = FakeClock()
    schedule = CosineToBudget(1e-3, 4, max_minutes=60, clock=clock)
    clock.now += 60
    assert schedule.rate(2) == pytest.approx(_cosine(1e-3, 0.5), rel=1e-12)


def test_the_callback_sets_the_optimizer_rate():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(2e-3), loss="mse")
    schedule = CosineToBudget(2e-3, 4)
    schedule.set_model(model)
    schedule.on_epoch_begin(2)
    got = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
    assert got == pytest.approx(_cosine(2e-3, 0.5), rel=1e-6)


@pytest.mark.parametrize(("lr", "epochs"), [(0.0, 10), (-1e-3, 10), (1e-3, 0)])
def test_bad_arguments_are_named(lr, epochs):
    with pytest.raises(ValueError, match="learning_rate must be > 0 and epochs >= 1"):
        CosineToBudget(lr, epochs)


def test_plateau_keeps_the_old_recipe():
    callback = training.learning_rate_schedule(
        {"lr_schedule": "plateau", "learning_rate": 2e-3, "epochs": 30}, 55
    )
    assert isinstance(callback, keras.callbacks.ReduceLROnPlateau)
    callback = training.learning_rate_schedule(
        {"lr_schedule": "cosine", "learning_rate": 2e-3, "epochs": 30}, 55
    )
    assert isinstance(callback, CosineToBudget)
    assert callback.max_minutes == 55


def test_a_resumed_run_goes_on_where_its_time_left_the_rate():
    # The clock of a run resumed after 300 s of a 600 s budget: its first
    # epoch starts half-way down the cosine, not back at the peak.
    clock = FakeClock()
    clock.now = 300.0
    schedule = CosineToBudget(2e-3, 30, max_minutes=10, clock=clock)
    assert schedule.rate(2) == pytest.approx(_cosine(2e-3, 0.5), rel=1e-12)


@pytest.mark.parametrize("max_minutes", [0, -1, float("nan"), float("inf"), True, "5"])
def test_a_budget_that_is_not_a_positive_finite_number_is_refused(max_minutes):
    with pytest.raises(ValueError, match=r"Invalid value for argument `max_minutes`. Expected"):
        CosineToBudget(2e-3, 30, max_minutes=max_minutes)
