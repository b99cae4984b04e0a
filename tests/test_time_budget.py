"""`keras_attention.training.TimeBudget`: the rate decayed step by step over a
time budget or a step count, and training stopped within the budget."""

import math

import keras
import numpy as np
import pytest

from keras_attention.training import CosineToBudget
from keras_attention.training import TimeBudget
from keras_attention.training import cosine_to_budget


def cosine(peak, floor, fraction):
    """The schedule written out: cos(pi * f) from 1 to -1 as f goes 0 to 1."""
    return floor + (peak - floor) * (1 + np.cos(np.pi * fraction)) / 2


def recorded_rate(peak, floor, budget_s, total_steps, warmup_steps, step, elapsed_s):
    """The rate as the G2P example computed it when its figures were recorded,
    operation for operation (Python floats), so equal bits mean the same runs."""
    fraction = elapsed_s / budget_s
    if total_steps:
        fraction = max(fraction, step / total_steps)
    fraction = min(fraction, 1.0)
    rate = floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * fraction))
    if step < warmup_steps:
        rate *= (step + 1) / warmup_steps
    return rate


@pytest.mark.parametrize("total_steps", [None, 834 * 20])
def test_the_rates_are_bit_identical_to_the_recorded_recipe(tmp_path, total_steps):
    # The G2P recipe: peak 3e-3, floor peak / 30, 60 minutes, 300 warm-up steps.
    peak, floor, budget_s = 3e-3, 3e-3 / 30, 3600.0
    budget = TimeBudget(budget_s / 60, peak, floor, str(tmp_path / "p.json"), 300, total_steps)
    for step in (0, 1, 9, 150, 299, 300, 301, 1000, 5000, 16679, 16680, 20000):
        for elapsed in (0.0, 0.5, 59.9, 1234.5, 3599.9, 3600.0, 4000.0):
            expected = recorded_rate(peak, floor, budget_s, total_steps, 300, step, elapsed)
            assert budget.rate(step, elapsed) == expected, (step, elapsed)


def test_the_rate_follows_whichever_end_comes_first(tmp_path):
    budget = TimeBudget(
        100.0 / 60, 1.0, 0.1, str(tmp_path / "progress.json"), warmup_steps=0, total_steps=1000
    )
    # Time ahead of steps: 75 s of 100 and 100 steps of 1000 is 3/4 of the way.
    np.testing.assert_allclose(budget.rate(100, 75.0), cosine(1.0, 0.1, 0.75))
    # Steps ahead of time: a quiet machine, 500 steps of 1000 in 10 s.
    np.testing.assert_allclose(budget.rate(500, 10.0), 0.55)
    # Past either end the rate stays at the floor.
    assert budget.rate(1000, 1.0) == pytest.approx(0.1)
    assert budget.rate(10, 500.0) == pytest.approx(0.1)
    # With no step count the time alone sets it.
    timed = TimeBudget(100.0 / 60, 1.0, 0.1, str(tmp_path / "p2.json"), warmup_steps=0)
    np.testing.assert_allclose(timed.rate(999_999, 50.0), 0.55)


def test_the_rate_is_the_packages_one_cosine_decay(tmp_path):
    budget = TimeBudget(
        100.0 / 60, 3e-3, 1e-4, str(tmp_path / "progress.json"), warmup_steps=0, total_steps=400
    )
    epochs = CosineToBudget(3e-3, 4, final_fraction=1e-4 / 3e-3)
    for step in (0, 37, 100, 250, 399, 400, 1000):
        assert budget.rate(step, 0.0) == cosine_to_budget(3e-3, 1e-4, step / 400)
    for epoch in range(5):
        assert epochs.rate(epoch) == cosine_to_budget(3e-3, 3e-3 * (1e-4 / 3e-3), epoch / 4)
        np.testing.assert_allclose(epochs.rate(epoch), budget.rate(epoch * 100, 0.0), rtol=1e-12)


def test_the_warm_up_scales_the_first_steps(tmp_path):
    budget = TimeBudget(
        100.0 / 60, 2.0, 0.2, str(tmp_path / "progress.json"), warmup_steps=10, total_steps=100
    )
    np.testing.assert_allclose(budget.rate(0, 0.0), 2.0 / 10)
    np.testing.assert_allclose(budget.rate(4, 0.0), cosine(2.0, 0.2, 0.04) * 5 / 10)
    np.testing.assert_allclose(budget.rate(10, 0.0), cosine(2.0, 0.2, 0.1))


def test_fit_sets_the_rate_every_ten_steps_and_records_each_epoch(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(1.0), "mse")
    x, y = np.ones((200, 3), "float32"), np.ones((200, 1), "float32")  # 25 batches of 8
    path = tmp_path / "progress.json"
    budget = TimeBudget(60.0, 1e-2, 1e-3, str(path), warmup_steps=5, total_steps=50)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[budget])
    epochs = budget.state["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2]
    # The last rate set in epoch 2 is at its batch 20, optimizer step 45; the
    # elapsed time (under a second of an hour) moves it by less than 1e-6.
    expected = cosine(1e-2, 1e-3, 45 / 50)
    np.testing.assert_allclose(epochs[-1]["learning_rate"], expected, rtol=1e-4)
    resumed = TimeBudget(60.0, 1e-2, 1e-3, str(path), warmup_steps=5, total_steps=50)
    assert resumed.state == budget.state  # read back by a resumed run
    resumed.keep_epochs(1)
    assert [e["epoch"] for e in resumed.state["epochs"]] == [1]
    assert resumed.state["seconds"] == epochs[0]["seconds"]


def test_a_slow_epoch_is_cut_short_at_the_time_budget(tmp_path):
    clock = [0.0]

    class Slow(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            clock[0] += 1 / 64  # each batch takes 1/64 s on this clock (exact sums)

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(1e-3), "mse")
    x, y = np.zeros((400, 3), "float32"), np.zeros((400, 1), "float32")  # 50 batches of 8
    budget = TimeBudget(
        0.5 / 60,
        1e-3,
        1e-4,
        str(tmp_path / "progress.json"),
        warmup_steps=0,
        clock=lambda: clock[0],
    )
    model.fit(x, y, batch_size=8, epochs=3, verbose=0, callbacks=[budget, Slow()])
    epochs = budget.state["epochs"]
    # One epoch, cut short by the first batch that starts with the 0.5 s
    # spent (the 33rd, after 32 of 1/64 s): not three epochs of 50 batches.
    assert len(epochs) == 1 and epochs[0]["batches"] == 33, epochs
    assert budget.state["seconds"] == 33 / 64
    assert budget.finished()


@pytest.mark.parametrize("max_minutes", [0, -1, float("nan"), float("inf"), None])
def test_a_budget_that_is_not_a_positive_finite_number_is_refused(tmp_path, max_minutes):
    with pytest.raises(ValueError, match=r"Invalid value for argument `max_minutes`. Expected"):
        TimeBudget(max_minutes, 1e-3, 1e-4, str(tmp_path / "progress.json"))
