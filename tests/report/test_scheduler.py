"""The job scheduler: the cores each run gets, the time left, the deadline and how long a run is
expected to take (bert4rec_tf/experiments/scheduler.py)."""

from __future__ import annotations

import pytest

from bert4rec_tf.experiments.plans import plan


def test_core_groups_give_every_concurrent_run_the_same_cores():
    from bert4rec_tf.experiments.scheduler import core_groups

    assert core_groups(1, [0, 1]) == [[0, 1]]
    assert core_groups(2, [1, 0]) == [[0], [1]]
    assert core_groups(2, [0, 1, 2, 3, 4]) == [[0, 1], [2, 3]]  # the fifth core would make one run faster
    with pytest.raises(ValueError, match="--jobs 3 needs at least 3 cores"):
        core_groups(3, [0, 1])


def test_the_time_left_counts_the_budget_when_no_run_has_trained_yet():
    from bert4rec_tf.experiments.scheduler import time_left

    assert time_left([], 3600.0, runs=5, jobs=2) == 3 * 3600.0  # the recipe's hour, not POP's minute
    assert time_left([3900.0, 3700.0], 3600.0, runs=2, jobs=2) == 3800.0
    assert time_left([], 0.0, runs=3, jobs=1) is None


def test_the_time_left_counts_what_running_runs_have_left():
    """On 2026-11-25 the third of four one-hour runs started as the first ended, with the second 59
    minutes in, and the command said 2h02m for the three left: it is about one hour."""
    from bert4rec_tf.experiments.scheduler import time_left

    hour = 3660.0
    assert time_left([hour], 3600.0, runs=3, jobs=2, elapsed=(59 * 60.0,)) == pytest.approx(hour + 2 * 60.0)
    assert time_left([hour], 3600.0, runs=3, jobs=2) == 2 * hour  # as if none had started
    assert time_left([], 3600.0, runs=2, jobs=2, elapsed=(600.0, 1200.0)) == 3000.0
    assert time_left([], 3600.0, runs=1, jobs=1, elapsed=(5000.0,)) == 0.0  # overdue: ends any moment


def test_pop_does_not_count_as_a_budget_in_the_time_left():
    from bert4rec_tf.experiments.scheduler import time_left, trained_runs

    runs = [run for run in plan("table2", ["beauty"]) if run.setting in ("pop", "sasrec-ce", "bert4rec")]
    assert len(runs) == 3 and trained_runs(runs) == 2
    # POP, SASRec and BERT4Rec on two cores with a one-hour budget: one hour, not two.
    assert time_left([], 3600.0, trained_runs(runs), 2) == 3600.0
    assert time_left([], 3600.0, trained_runs(runs[:1]), 2) == 0.0  # POP alone: nothing to wait for


def test_deadline_is_a_clock_time_or_a_duration():
    import time

    from bert4rec_tf.experiments.scheduler import parse_deadline

    now = time.mktime((2026, 11, 25, 9, 30, 0, 0, 0, -1))
    assert parse_deadline("2h40m", now) == now + 9600
    assert parse_deadline("10:35", now) == now + 65 * 60  # later today
    assert parse_deadline("09:00", now) == now + 23.5 * 3600  # passed today: tomorrow
    assert parse_deadline("9:30", now) == now + 24 * 3600


def test_a_run_is_expected_to_take_its_budget_and_the_overhead_or_what_runs_took():
    from bert4rec_tf.experiments.plans import Run
    from bert4rec_tf.experiments.scheduler import POP_SECONDS, RUN_OVERHEAD, expected_seconds

    bert4rec, pop = Run("ml-1m", "bert4rec", "bert4rec"), Run("ml-1m", "pop", "pop")
    assert expected_seconds(bert4rec, 3600.0, []) == 3600.0 + RUN_OVERHEAD
    assert expected_seconds(bert4rec, 3600.0, [4200.0, 4400.0]) == 4300.0  # measured, longer
    assert expected_seconds(bert4rec, 3600.0, [3700.0]) == 3600.0 + RUN_OVERHEAD  # never below the budget's
    assert expected_seconds(bert4rec, 0.0, []) is None  # --train_steps, nothing measured: unknown
    assert expected_seconds(bert4rec, 0.0, [50.0]) == 50.0
    assert expected_seconds(pop, 3600.0, []) == POP_SECONDS
    assert expected_seconds(bert4rec, 3600.0, [], trained=3000.0) == 600.0 + RUN_OVERHEAD  # resumed
    assert expected_seconds(bert4rec, 3600.0, [], trained=5000.0) == RUN_OVERHEAD  # the test and export remain

