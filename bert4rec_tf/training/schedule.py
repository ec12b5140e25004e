"""How many steps to train, interval by interval: a fixed number of steps, or a time budget."""

from __future__ import annotations

import sys
from typing import Callable, Sequence

from bert4rec_tf.config import TrainConfig


def budget_plan(done: int, elapsed: float, budget: float, cap: int, every: int, probe: int,
                scheduled: int | None, pace: float | None, overhead: float = 0.0) -> tuple[int, int]:
    """The next interval under a time budget: (its steps, the total steps the budget affords).

    Until the pace is measured, a first interval of `probe` steps measures it: on a fresh run the
    warm-up, whose rates do not depend on the total; on a resumed run (`scheduled` set, the pace
    unknown to the new process) the rates of the plan it was following, so the rate goes on
    decaying. Afterwards the total is the steps done plus what the time left affords at `pace`
    seconds a step and `overhead` seconds (validation, checkpoint) an interval of `every` steps, at
    most `cap`; the next interval is `every` steps or what is left of that total. Training stops
    (0 steps) at the deadline, at `cap`, or once the schedule's end `scheduled` has been reached, so
    the rate never rises again.

    Examples: budget_plan(100, 60.0, 600.0, 10_000, 500, 100, None, 0.5, 50.0) == (500, 1000);
    resumed at step 900 of a 1,000-step plan: budget_plan(900, 540.0, 600.0, 10_000, 500, 100, 1000, None)
    == (100, 1000).
    """
    if elapsed >= budget or done >= cap or (scheduled is not None and done >= scheduled):
        return 0, done
    if pace is None:
        total = cap if scheduled is None else min(cap, scheduled)
        return min(probe, total - done), total
    total = min(cap, done + int((budget - elapsed) / (pace + overhead / every)))
    return min(every, total - done), total


def warmup_warning(total: int, warmup_steps: int, budget: float, cap: int | None = None) -> str | None:
    """The warning for a time-budgeted run of fewer steps than the warm-up, else None: `total` steps,
    which the budget affords, or the step cap `cap` (`--train_steps`) when it is what limits them.

    Such a run ends during the warm-up, with the rate rising, not at 0.
    """
    if total >= warmup_steps:
        return None
    limit = (f"--train_steps {cap} is" if cap is not None and total >= cap else
             f"the {budget:g} s budget affords about {total} steps,")
    return (f"warning: {limit} fewer than the {warmup_steps} warm-up steps: training ends during the warm-up, "
            "with the rate not at 0 (lower --config train.warmup_steps)")


def patience_spent(state: dict, patience: int | None) -> bool:
    """Whether a run in resume state `state` has had `patience` validations without improvement (never
    without a patience): it stops early, and a run resumed with the same patience stays stopped."""
    return patience is not None and state["since_best"] >= patience


def finished(state: dict, train: TrainConfig, stopped_early: bool) -> str | None:
    """Why a run in resume state `state` has nothing left to train under `train`, or None when it has:
    its steps are done, its time budget is spent, or it stopped early (`stopped_early`)."""
    if stopped_early:
        count = state["since_best"]
        return (f"it stopped early at step {state['step']:,}, after {count} validation{'s' * (count != 1)} without "
                "improvement")
    if state["step"] >= train.train_steps:
        return f"it has trained its {train.train_steps:,} steps"
    if train.time_budget and state.get("budget_spent"):
        return f"its {train.time_budget:g} s time budget is spent, at step {state['step']:,}"
    if limit_reached(state, train):
        return (f"it has trained the {train.stop_after:g} s of its stop_after, at step {state['step']:,} (a larger "
                "--config stop_after trains it on)")
    return None


def limit_reached(state: dict, train: TrainConfig) -> bool:
    """Whether a run in resume state `state` has had the `train.stop_after` seconds it may train."""
    return bool(train.stop_after) and state.get("seconds", 0.0) >= train.stop_after


def cut_to_limit(steps: int, elapsed: float, limit: float, pace: float | None, overhead: float, every: int) -> int:
    """`steps`, or fewer once the pace is known: as many as end by `limit` seconds (at least 1) at
    `pace` seconds a step and `overhead` an interval of `every` steps; all of them without a limit
    (and 0 stays 0).

    Example: cut_to_limit(500, 550.0, 600.0, 0.09, 5.0, 500) == 500; cut_to_limit(500, 580.0, 600.0,
    0.09, 5.0, 500) == 200.
    """
    if not limit or pace is None or not steps:
        return steps
    return max(1, min(steps, int((limit - elapsed) / (pace + overhead / every))))


class IntervalPlan:
    """Plans training interval after interval until `train.train_steps` or the time budget is spent.

    Without a budget, intervals of `eval_every` steps up to `train.train_steps` (the last one shorter).
    With one (`train.time_budget` seconds), `budget_plan` picks each interval, `set_total_steps` moves
    the schedule's end to the total the budget affords (so the rate reaches 0 at the deadline), and
    `state["scheduled"]` keeps that total once the pace is measured (a resumed run follows it until it
    has measured its own pace), and `state["budget_spent"]` that the budget is used up (the deadline
    passed, or the schedule planned for it ended); a budget that ends within the warm-up is warned
    about once. With `train.stop_after`, training stops at that many seconds (the last interval cut
    to end there), the schedule's end still where the whole budget puts it. With `marks` (seconds of
    training and validation), an interval also ends at the first step that ends past a mark not yet
    validated at (`mark_due`, asked after every step), so that a validation falls there whatever the
    pace: a tuner's trials are judged at the same seconds.

    `next_steps()` is asked before the first interval and after each interval's checkpoint, which
    advances `state["step"]` (the trainer asks it from inside its one `model.fit`,
    `callbacks.IntervalDriver`).

    Args:
        state: the run's resume state (`step`, `scheduled`).
        train: the training section.
        eval_every: steps per interval.
        pace: the pace meter: `.pace` seconds a step (None until measured) and `.overhead` seconds an
            interval (`bert4rec_tf.training.callbacks.PaceMeter`); unused without a budget.
        clock: seconds of training and validation the run has had, over all its processes.
        set_total_steps: moves the learning-rate schedule's last step.
        stopped: whether training stopped early (patience).
        marks: seconds at which a validation should fall (none: every `eval_every` steps only).
    """

    def __init__(self, state: dict, train: TrainConfig, eval_every: int, pace, clock: Callable[[], float] | None,
                 set_total_steps: Callable[[int], None] | None, stopped: Callable[[], bool],
                 marks: Sequence[float] = ()):
        self.state, self.train, self.eval_every, self.pace = state, train, eval_every, pace
        self.clock, self.set_total_steps, self.stopped = clock, set_total_steps, stopped
        self.pending = sorted(marks)
        self.probe = min(eval_every, train.warmup_steps or eval_every)
        self.warned = False

    def mark_due(self) -> bool:
        """Whether a mark has passed since the last validation: the interval ends at this step."""
        return bool(self.pending) and self.clock is not None and self.clock() >= self.pending[0]

    def next_steps(self) -> int:
        """The steps of the next interval; 0 when training ends (steps done, budget spent, stopped early)."""
        state, train = self.state, self.train
        # A mark is validated at once a validation's seconds, as reported (whole seconds), reach it;
        # one whose validation fell just short stays due, and the next interval ends after a step.
        if self.pending:
            curve = state.get("curve") or []
            last = curve[-1].get("seconds") if curve else state.get("seconds")
            if last is not None:
                self.pending = [mark for mark in self.pending if int(last) < mark]
        if self.stopped():
            return 0
        if not train.time_budget:
            return min(self.eval_every, max(0, train.train_steps - state["step"]))
        if state.get("budget_spent"):
            return 0
        # The seconds of the last checkpoint decide, as in `finished`; not spent: a larger stop_after trains on.
        if limit_reached(state, train):
            return 0
        pace, elapsed = self.pace, self.clock()
        steps, total = budget_plan(state["step"], elapsed, train.time_budget, train.train_steps, self.eval_every,
                                   self.probe, state["scheduled"], pace.pace, pace.overhead)
        steps = cut_to_limit(steps, elapsed, train.stop_after, pace.pace, pace.overhead, self.eval_every)
        # Warned once the total is planned from the measured pace, or when the budget runs out (no
        # steps, and `total` is the steps done): also inside the first interval, before the pace was
        # measured (a budget shorter than start-up, a few steps and a validation).
        warning = None if self.warned or (steps and pace.pace is None) else warmup_warning(
            total, train.warmup_steps, train.time_budget, train.train_steps)
        if warning:
            print(warning, file=sys.stderr)
            self.warned = True
        if not steps:
            # The deadline passed or the schedule planned for the budget ended (not the step cap, which a
            # larger --train_steps raises): kept in the resume state, since the next process's clock
            # starts at the last checkpoint's seconds, which may be short of the deadline this one reached.
            if state["step"] < train.train_steps:
                state["budget_spent"] = True
            return 0
        self.set_total_steps(total)
        if pace.pace is not None:  # a resumed run keeps its plan until the pace is measured
            state["scheduled"] = total
        return steps

