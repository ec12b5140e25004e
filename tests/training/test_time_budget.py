"""Time budgets: the plan of intervals under a deadline, the duration flag, and a tiny budgeted run."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
import types

import pytest

from bert4rec_tf import cli
from bert4rec_tf.config import TrainConfig
from bert4rec_tf.training.schedule import IntervalPlan, budget_plan, finished, warmup_warning
from tests.conftest import REPO, event_scalars, toy_sequences, write_pairs


def train_intervals(fit, state, train, every, pace, clock, set_total_steps, stopped) -> None:
    """The trainer's loop without Keras: `fit(steps)` for each interval `IntervalPlan` plans, as
    `callbacks.IntervalDriver` trains them inside one `model.fit`."""
    plan = IntervalPlan(state, train, every, pace, clock, set_total_steps, stopped)
    while steps := plan.next_steps():
        fit(steps)


class Replaced(Exception):
    """The process running the loop is replaced (killed, then resumed)."""


def simulate(budget: float, pace: float, every: int, probe: int = 100, cap: int = 10**9, overhead: float = 0.0,
             resumed_after: int | None = None, totals: list | None = None):
    """Runs the trainer's loop (`train_intervals`) against a clock where a step takes `pace` s and each
    interval `overhead` s more, and a `fit` that only advances that clock and the state.

    The pace becomes known after the first interval of a process, as `PaceMeter` measures it. After
    `resumed_after` intervals the process is replaced (a resume): the new one starts the loop again
    with the saved state and no measured pace. `totals` collects the total each interval was trained
    towards. Returns (steps done, seconds elapsed, the state's scheduled total, the intervals' steps).
    """
    state, clock, intervals = {"step": 0, "scheduled": None}, [0.0], []
    train = TrainConfig(time_budget=budget, train_steps=cap, warmup_steps=probe)
    schedule_total = [None]

    def fit(steps: int) -> None:
        if totals is not None:
            totals.append(schedule_total[0])
        state["step"] += steps
        clock[0] += steps * pace + overhead
        intervals.append(steps)
        meter.pace, meter.overhead = pace, overhead
        if len(intervals) == resumed_after:
            raise Replaced

    def run() -> None:
        train_intervals(fit, state, train, every, meter, lambda: clock[0],
                        lambda total: schedule_total.__setitem__(0, total), lambda: False)

    meter = types.SimpleNamespace(pace=None, overhead=0.0)
    try:
        run()
    except Replaced:
        meter = types.SimpleNamespace(pace=None, overhead=0.0)
        run()
    return state["step"], clock[0], state["scheduled"], intervals


def test_fixed_steps_train_in_intervals_until_stopped():
    calls, state = [], {"step": 0, "scheduled": None}

    def fit(steps):
        calls.append(steps)
        state["step"] += steps

    train_intervals(fit, state, TrainConfig(train_steps=32), 5, None, None, None, lambda: False)
    assert calls == [5] * 6 + [2] and state["step"] == 32
    calls.clear()
    train_intervals(fit, {"step": 0}, TrainConfig(train_steps=32), 5, None, None, None, lambda: True)
    assert calls == []


def test_the_schedule_ends_at_zero_at_the_deadline():
    done, elapsed, scheduled, intervals = simulate(budget=3600.0, pace=0.5, every=1000, overhead=10.0)
    assert done == scheduled                      # the rate reached 0 at the last step ...
    assert 3600 - 0.5 * 1000 <= elapsed <= 3600 + 10  # ... within an interval of the deadline
    assert intervals[0] == 100 and max(intervals) == 1000
    assert done == pytest.approx((3600 - 10 * len(intervals)) / 0.5, rel=0.01)


def test_without_overhead_the_budget_is_used_to_the_second():
    done, elapsed, scheduled, _ = simulate(budget=600.0, pace=0.1, every=100)
    assert done == scheduled == 6000 and elapsed == pytest.approx(600.0)


def test_the_cap_and_a_spent_budget_stop_training():
    assert budget_plan(500, 100.0, 600.0, 500, 100, 100, None, 0.1) == (0, 500)
    assert budget_plan(10, 700.0, 600.0, 10_000, 100, 100, 50, 0.1) == (0, 10)
    assert budget_plan(60, 100.0, 600.0, 10_000, 100, 100, 60, 0.1) == (0, 60)   # the schedule has ended
    assert budget_plan(0, 0.0, 600.0, 10_000, 100, 100, None, None) == (100, 10_000)
    # 540 s left at 0.5 s a step and 50 s per 500-step interval: 540 / 0.6 = 900 more steps
    assert budget_plan(100, 60.0, 600.0, 10_000, 500, 100, None, 0.5, 50.0) == (500, 1000)


def test_a_passed_deadline_is_kept_so_a_resumed_run_trains_no_more():
    # The last interval overran the deadline by 30 s: the clock a new process starts from (the last
    # checkpoint's seconds) is before the deadline, yet the budget is spent.
    train, calls = TrainConfig(time_budget=600.0, train_steps=10_000, warmup_steps=100), []
    state = {"step": 900, "scheduled": 1000, "seconds": 590.0}
    meter = types.SimpleNamespace(pace=0.5, overhead=0.0)
    train_intervals(lambda steps: calls.append(steps), state, train, 500, meter, lambda: 630.0,
                    lambda total: None, lambda: False)
    assert calls == [] and state["budget_spent"] is True
    assert finished(state, train, False) == "its 600 s time budget is spent, at step 900"
    fresh = types.SimpleNamespace(pace=None, overhead=0.0)
    train_intervals(lambda steps: calls.append(steps), state, train, 500, fresh, lambda: 590.0,
                    lambda total: None, lambda: False)
    assert calls == []  # without the record, the probe of 100 steps towards 1,000 would train


def test_a_schedule_that_ended_before_the_deadline_spends_the_budget_and_the_step_cap_does_not():
    meter = types.SimpleNamespace(pace=0.5, overhead=0.0)
    ended = {"step": 1000, "scheduled": 1000}  # the plan fit in the budget: 50 s were left
    train_intervals(lambda steps: None, ended, TrainConfig(time_budget=600.0, train_steps=10_000), 500,
                    meter, lambda: 550.0, lambda total: None, lambda: False)
    assert ended["budget_spent"] is True
    capped = {"step": 500, "scheduled": None}  # --train_steps 500 ended it: a larger one trains on
    train_intervals(lambda steps: None, capped, TrainConfig(time_budget=600.0, train_steps=500), 500,
                    meter, lambda: 100.0, lambda total: None, lambda: False)
    assert "budget_spent" not in capped
    assert finished(capped, TrainConfig(time_budget=600.0, train_steps=500), False) == "it has trained its 500 steps"
    assert finished(capped, TrainConfig(time_budget=600.0, train_steps=800), False) is None


def test_what_finishes_a_run():
    train = TrainConfig(train_steps=200)
    assert finished({"step": 200}, train, False) == "it has trained its 200 steps"
    assert finished({"step": 20, "since_best": 1}, train, True) == (
        "it stopped early at step 20, after 1 validation without improvement")
    assert finished({"step": 20, "since_best": 2}, train, False) is None


def test_a_resumed_run_keeps_its_plan_until_the_pace_is_measured():
    # Resumed at step 900 of a 1,000-step plan: the probe trains towards 1,000, not towards the cap
    # (at the cap's schedule the rate would jump back up to near its peak).
    assert budget_plan(900, 540.0, 600.0, 10_000, 500, 100, 1000, None) == (100, 1000)
    assert budget_plan(990, 590.0, 600.0, 10_000, 500, 100, 1000, None) == (10, 1000)
    whole, cut = [], []
    uninterrupted = simulate(budget=3600.0, pace=0.5, every=1000, overhead=10.0, totals=whole)
    resumed = simulate(budget=3600.0, pace=0.5, every=1000, overhead=10.0, resumed_after=4, totals=cut)
    assert cut[4] == cut[3] == whole[3] and max(cut[1:]) < 10**9      # no interval after the first towards the cap
    assert resumed[3][4] == 100                                        # the new process's probe
    assert resumed[0] == resumed[2] and abs(resumed[0] - uninterrupted[0]) <= 100


def test_stop_after_trains_the_first_seconds_of_the_whole_budgets_schedule_and_a_larger_one_trains_on():
    # A tuning trial: 10 minutes of a one-hour run at 0.5 s a step (7,200 steps in the hour).
    state, clock, totals, calls = {"step": 0, "scheduled": None, "seconds": 0.0}, [0.0], [], []
    meter = types.SimpleNamespace(pace=None, overhead=0.0)

    def fit(steps):
        calls.append(steps)
        state["step"] += steps
        clock[0] += 0.5 * steps + 2.0  # each interval also validates for 2 s
        state["seconds"] = clock[0]    # as the checkpoint records it
        meter.pace, meter.overhead = 0.5, 2.0

    def run(train):
        train_intervals(fit, state, train, 200, meter, lambda: clock[0], totals.append, lambda: False)

    trial = TrainConfig(time_budget=3600.0, stop_after=600.0, train_steps=10**9, warmup_steps=100)
    run(trial)
    assert 600.0 <= state["seconds"] <= 600.0 + 0.5 + 2.0    # the last interval was cut to end there
    assert calls[-1] < 200 and sum(calls) == state["step"]
    assert all(total > 6500 for total in totals[1:])          # the rate decays towards the hour's end, not 600 s
    assert "budget_spent" not in state
    assert finished(state, trial, False) == (f"it has trained the 600 s of its stop_after, at step {state['step']:,} "
                                             "(a larger --config stop_after trains it on)")
    longer = TrainConfig(time_budget=3600.0, stop_after=1200.0, train_steps=10**9, warmup_steps=100)
    assert finished(state, longer, False) is None
    before = state["step"]
    run(longer)
    assert state["step"] > before and 1200.0 <= state["seconds"] <= 1200.0 + 2.5
    with pytest.raises(ValueError, match="--config stop_after must be 0 without a time_budget"):
        TrainConfig(stop_after=600.0).check()


def _validations(pace: float, marks=(), probe: int = 500, validation: float = 2.0, stamp_lag: float = 0.0):
    """The seconds of each validation of a 10-minute trial of a one-hour schedule at `pace` seconds a
    step, validating every 200 steps for `validation` s, stepped as `callbacks.IntervalDriver` steps
    it: after each step it asks the plan whether a mark is due. The point is stamped `stamp_lag` s
    before the plan next reads the clock (the checkpoint and the tuner's report in between)."""
    state, clock, stamps = {"step": 0, "scheduled": None, "seconds": 0.0, "curve": []}, [0.0], []
    meter = types.SimpleNamespace(pace=None, overhead=0.0)
    train = TrainConfig(time_budget=3600.0, stop_after=600.0, train_steps=10**9, warmup_steps=probe)
    plan = IntervalPlan(state, train, 200, meter, lambda: clock[0], lambda total: None, lambda: False, marks)
    while steps := plan.next_steps():
        seen = 0
        while True:
            clock[0] += pace
            seen += 1
            if seen >= steps or plan.mark_due():
                break
        state["step"] += seen
        clock[0] += validation
        state["curve"].append({"step": state["step"], "seconds": round(clock[0], 1)})
        stamps.append(round(clock[0], 1))
        clock[0] += stamp_lag
        state["seconds"] = clock[0]
        meter.pace, meter.overhead = pace, validation
    return stamps


def test_a_trial_validates_at_each_mark_whatever_its_pace():
    # A validation right after each mark (the pruner's rungs, 66 s and 198 s), for a trial of fast
    # steps and one of slow steps whose first interval (the pace's probe, 200 steps: 180 s) would pass
    # the first: within a step and a validation of the mark, not an interval later.
    for pace in (0.05, 0.9):
        stamps = _validations(pace, marks=(66, 198))
        for mark in (66, 198):
            first = min(second for second in stamps if second >= mark)
            assert first <= mark + pace + 2.0 + 0.1, (pace, mark, stamps)
        assert 600.0 <= stamps[-1] <= 600.0 + pace + 2.0 + 0.1
    # Without marks the slow trial's first validation is at the end of its probe, 182 s.
    assert _validations(0.9)[0] == 182.0
    # A validation stamped just short of a mark (its int below it) while the clock has passed it by
    # the time the plan asks: the mark stays due, and the next interval ends after one step.
    stamps = _validations(0.3, marks=(66,), validation=5.5, stamp_lag=0.6)
    assert 65.0 <= stamps[0] < 66.0                  # the probe: 60 s of steps and 5.5 s of validation
    assert 66.0 <= stamps[1] <= 66.0 + 0.3 + 5.5 + 0.7


@pytest.mark.parametrize("text, seconds", [("2h", 7200), ("30m", 1800), ("1h30m", 5400), ("45s", 45),
                                           ("5400", 5400), ("1.5h", 5400)])
def test_durations(text, seconds):
    assert cli.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "2x", "-1h", "h"])
def test_bad_durations_name_the_flag(text):
    with pytest.raises(ValueError, match="--time_budget"):
        cli.parse_duration(text)


def budgeted_args(tmp_path, budget: str, warmup_steps: int) -> tuple[list[str], str]:
    """The command of a tiny budgeted train.py run and its model folder."""
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    model_dir = str(tmp_path / "run")
    args = [sys.executable, os.path.join(REPO, "run_scripts", "train.py"), "--dataset", "beauty", "--source_file",
            source, "--data_dir", str(tmp_path / "data"), "--model_dir", model_dir, "--recipe", "paper",
            "--time_budget", budget,
            "--train_steps", "100000", "--eval_every", "20", "--config", f"warmup_steps={warmup_steps}",
            "--config", "max_len=10", "--config", "dupe_factor=2", "--config", "model.hidden_size=8",
            "--config", "model.num_layers=1", "--config", "model.intermediate_size=16", "--batch_size", "4"]
    return args, model_dir


def budgeted_run(tmp_path, budget: str, warmup_steps: int):
    """A tiny budgeted train.py run: (its process result, its model folder)."""
    args, model_dir = budgeted_args(tmp_path, budget, warmup_steps)
    result = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, model_dir


def test_warmup_warning_only_when_the_budget_ends_inside_the_warmup():
    assert warmup_warning(500, 500, 60.0) is None and warmup_warning(9000, 500, 3600.0) is None
    message = warmup_warning(300, 500, 120.0)
    assert message.startswith("warning: the 120 s budget affords about 300 steps, fewer than the 500 warm-up steps")
    assert "\n" not in message and "train.warmup_steps" in message
    assert warmup_warning(300, 500, 1800.0, cap=10**9).startswith("warning: the 1800 s budget affords about 300")
    assert warmup_warning(30, 500, 1800.0, cap=30).startswith(  # the step cap ends the run, not the budget
        "warning: --train_steps 30 is fewer than the 500 warm-up steps: training ends during the warm-up")


@pytest.mark.slow
def test_a_budget_shorter_than_the_warmup_is_warned_about_once(tmp_path):
    # 100,000 warm-up steps cannot fit in 8 seconds: the rate would still be rising at the deadline.
    result, _ = budgeted_run(tmp_path, "8s", 100_000)
    assert result.stderr.count("fewer than the 100000 warm-up steps") == 1, result.stderr[-3000:]


@pytest.mark.slow
def test_a_budget_spent_inside_the_first_interval_is_warned_about(tmp_path):
    # 1 second is spent before the pace is measured (start-up, 20 steps and a validation): the run
    # ends in its warm-up all the same, and says so (on 2026-11-25 it said nothing).
    result, _ = budgeted_run(tmp_path, "1s", 500)
    assert result.stderr.count("fewer than the 500 warm-up steps") == 1, result.stderr[-3000:]
    assert "affords about 20 steps" in result.stderr


@pytest.mark.slow
def test_a_budgeted_run_stops_at_the_deadline_with_the_rate_at_zero(tmp_path):
    result, model_dir = budgeted_run(tmp_path, "20s", 10)
    assert "warm-up steps" not in result.stderr
    with open(os.path.join(model_dir, "checkpoints", "state.json")) as handle:
        state = json.load(handle)
    # The deadline, not the 100,000-step cap, ended training: the schedule was fitted to the budget
    # and (about) reached. Timing on a shared machine is noisy, so the bounds here are loose; the
    # planner's exact behaviour is tested above with a simulated clock.
    assert 10 < state["step"] <= state["scheduled"] < 100_000 and state["step"] >= 0.5 * state["scheduled"]
    assert 20 * 0.5 <= state["seconds"] <= 20 + 30
    with open(os.path.join(model_dir, "config.json")) as handle:
        assert json.load(handle)["train"]["time_budget"] == 20.0


def learning_rates(directory: str) -> list[dict[int, float]]:
    """The learning rate logged at each step, one dict per event file (per process), oldest first.

    Event file names carry their creation time in seconds; the two processes start seconds apart.
    """
    return [event_scalars(path).get("learning_rate", {})
            for path in sorted(glob.glob(os.path.join(directory, "events.*")))]


@pytest.mark.slow
def test_a_budgeted_run_resumed_after_sigkill_goes_on_decaying(tmp_path):
    # 45 s: on a slow machine 30 s planned only 77 steps, too few to cut at 40 with 40 still to go.
    args, model_dir = budgeted_args(tmp_path, "45s", 0)
    state_file = os.path.join(model_dir, "checkpoints", "state.json")
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, state = time.time() + 300, {}
    while time.time() < deadline and process.poll() is None:
        try:
            with open(state_file) as handle:
                state = json.load(handle)
        except (OSError, ValueError):
            pass
        if state.get("scheduled") and state["step"] >= 40 and state["scheduled"] >= state["step"] + 40:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run ended before it could be interrupted"
    with open(state_file) as handle:
        cut = json.load(handle)
    assert cut["step"] % 20 == 0 and cut["scheduled"] >= cut["step"] + 40, cut
    resumed = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    before, after = learning_rates(os.path.join(model_dir, "train"))
    with open(os.path.join(model_dir, "config.json")) as handle:
        peak = json.load(handle)["train"]["learning_rate"]
    # Steps are logged every 20: the new process's first logged rate (after its 20-step probe) is
    # below the old process's rate at the resume point. Trained towards the 100,000-step cap
    # instead of the plan, it would be back near the peak.
    first = min(after)
    assert first == cut["step"] + 20
    assert after[first] < before[cut["step"]] < peak * (1 - (cut["step"] + 20) / 100_000), (after, before)
    with open(state_file) as handle:
        final = json.load(handle)
    assert cut["step"] < final["step"] <= final["scheduled"] < 100_000
