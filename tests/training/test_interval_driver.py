"""One `model.fit` cut into intervals (`IntervalDriver`) trains as one `fit` per interval did."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bert4rec_tf.training.callbacks import IntervalDriver, PaceMeter

FEATURES = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
TARGETS = FEATURES @ np.array([[1.0], [-2.0], [0.5]], dtype="float32")


def stream(start: int = 0) -> tf.data.Dataset:
    """Batches of 4 from row `start` on, forever (as a training stream resumed at an instance)."""
    rows = tf.data.Dataset.from_tensor_slices((FEATURES, TARGETS)).repeat()
    return rows.skip(start).batch(4)


def linear_model() -> keras.Model:
    keras.utils.set_random_seed(1)
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


class Plan:
    """Plans the given intervals' steps, then 0; counts how often it was asked. A mark is due at the
    steps of `due_at` (`step()` gives the steps done), as `IntervalPlan.mark_due` says when a mark's
    seconds have passed."""

    def __init__(self, steps: list[int], due_at: tuple[int, ...] = (), step=None):
        self.steps, self.asked, self.due_at, self.step = list(steps), 0, due_at, step

    def next_steps(self) -> int:
        self.asked += 1
        return self.steps.pop(0) if self.steps else 0

    def mark_due(self) -> bool:
        return self.step is not None and self.step() in self.due_at


class Checkpoints:
    """Records (step, loss) and the seconds in steps at each interval's end; stops training after
    `stop_after` intervals."""

    def __init__(self, stop_after: int | None = None):
        self.points, self.seconds, self.stop_after = [], [], stop_after

    def set_model(self, model):
        self.model = model

    def end_interval(self, logs=None, training_seconds=None):
        self.seconds.append(training_seconds)
        self.points.append((int(self.model.optimizer.iterations.numpy()), float(logs["loss"])))
        if len(self.points) == self.stop_after:
            self.model.stop_training = True


def test_one_fit_in_intervals_gives_the_losses_and_weights_of_one_fit_per_interval():
    model, checkpoints, plan = linear_model(), Checkpoints(), Plan([5, 3])
    driver = IntervalDriver(plan, 4, checkpoints, PaceMeter(), progress=False)
    model.fit(stream(), epochs=1, steps_per_epoch=100, callbacks=[driver], verbose=0, shuffle=False)

    reference, losses, done = linear_model(), [], 0
    for steps in (4, 5, 3):   # a fit per interval, its stream resumed where the last one ended
        history = reference.fit(stream(done * 4), epochs=1, steps_per_epoch=steps, verbose=0, shuffle=False)
        done += steps
        losses.append((done, history.history["loss"][-1]))

    assert [step for step, _ in checkpoints.points] == [4, 9, 12]   # stopped at 12 of the 100 steps
    np.testing.assert_allclose([loss for _, loss in checkpoints.points], [loss for _, loss in losses], rtol=1e-6)
    for mine, theirs in zip(model.get_weights(), reference.get_weights(), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6)
    assert plan.asked == 3 and all(seconds > 0 for seconds in checkpoints.seconds)


def test_a_stop_at_an_interval_end_is_not_followed_by_another_interval():
    model, checkpoints, plan = linear_model(), Checkpoints(stop_after=2), Plan([5, 5, 5])
    pace = PaceMeter()
    model.fit(stream(), epochs=1, steps_per_epoch=100,
              callbacks=[IntervalDriver(plan, 5, checkpoints, pace, progress=False)], verbose=0, shuffle=False)
    assert [step for step, _ in checkpoints.points] == [5, 10]
    assert plan.asked == 1              # after the first interval only: the second one stopped training
    assert pace.pace is not None and pace.pace > 0 and pace.overhead >= 0


def test_the_progress_bar_is_one_per_interval(capsys):
    model = linear_model()
    model.fit(stream(), epochs=1, steps_per_epoch=100,
              callbacks=[IntervalDriver(Plan([2]), 3, Checkpoints(), PaceMeter(), progress=True)], verbose=0, shuffle=False)
    out = capsys.readouterr().out
    assert "3/3" in out and "2/2" in out and "/100" not in out


def test_an_interval_ends_at_the_step_a_mark_comes_due():
    # Intervals of 5 steps; marks due at steps 3 and 12: the first interval ends at 3, and the one
    # running at step 12 (from 8) ends there; the plan is asked after each.
    model, checkpoints = linear_model(), Checkpoints()
    plan = Plan([5, 5, 5], due_at=(3, 12), step=lambda: int(model.optimizer.iterations.numpy()))
    model.fit(stream(), epochs=1, steps_per_epoch=100,
              callbacks=[IntervalDriver(plan, 5, checkpoints, PaceMeter(), progress=False)], verbose=0, shuffle=False)
    assert [step for step, _ in checkpoints.points] == [3, 8, 12, 17]
    assert plan.asked == 4
