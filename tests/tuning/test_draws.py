"""No setting trained twice by accident: every new trial is a draw no trial of the study has had,
a second retry of the same dead trial is skipped, a trial stopped by Ctrl-C is queued to train on,
and Optuna's lines about a failed trial carry no traceback."""

from __future__ import annotations

import os
import socket

import optuna
import pytest

from bert4rec_tf.tasks.space import Choice, Float, suggest
from bert4rec_tf.tuning import draws, workers
from bert4rec_tf.tuning.binding import bind
from bert4rec_tf.tuning.optuna_setup import load_optuna
from bert4rec_tf.tuning.settings import new_settings, searched, start_config
from bert4rec_tf.tuning.trials import counted
from bert4rec_tf.tuning.workers import open_study, work

SPACE = {"learning_rate": Float(1e-4, 1e-2, log=True), "hidden_size": Choice((16, 32, 64))}
FIXED = ["num_negatives=20", "valid_users=0", "warmup_steps=100"]


def _run_drawn(study, space, value: float) -> dict:
    """Queues a new draw, takes it and ends it with `value`; its settings."""
    study.enqueue_trial(draws.draw_new(study, space, None, seed=7))
    trial = study.ask()
    suggest(space, trial, None)
    study.tell(trial, value)
    return trial.params


def test_a_draw_is_never_a_setting_the_study_has(monkeypatch):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    seen = [_run_drawn(study, SPACE, 0.01 * number) for number in range(12)]
    assert all(seen.count(params) == 1 for params in seen)
    # A process that starts again (after a kill) at the same number of trials draws what the first did,
    # and is asked again: the sampler's first answer here is a setting the study has.
    first = draws.draw_new(study, SPACE, None, seed=7)
    study.enqueue_trial(first)
    assert draws.draw_new(study, SPACE, None, seed=7) != first  # the queued trial's settings are taken too
    assert draws.draw_seed(7, 3) != draws.draw_seed(7, 4)


def test_a_small_space_tried_in_full_ends_the_study():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize")
    space = {"hidden_size": Choice((16, 32))}
    assert sorted(_run_drawn(study, space, 0.1)["hidden_size"] for _ in range(2)) == [16, 32]
    with pytest.raises(draws.SpaceExhausted, match="the search space is exhausted: 100 draws in a row"):
        draws.draw_new(study, space, None, seed=7)


def _open(tmp_path):
    settings = bind(str(tmp_path), new_settings("beauty", "bpr_mf", None, "cpu-30m", 18.0, 6.0, FIXED,
                                                               eval_every=100))
    return settings, open_study(str(tmp_path), settings, None)


def test_a_second_retry_of_the_same_dead_trial_is_skipped_and_not_counted(tmp_path):
    """Two processes that both find a trial's heartbeat stale may each queue a retry: only the first
    trains (in the dead trial's run folder)."""
    settings, study = _open(tmp_path)
    dead = study.ask()
    suggest(searched(settings, start_config(settings)), dead, start_config(settings))
    study.tell(dead, state=optuna.trial.TrialState.FAIL)
    frozen = study.get_trials()[0]
    retry = optuna.storages.RetryHeartbeatStaleTrialCallback(inherit_intermediate_values=True)
    retry(study, frozen)
    retry(study, frozen)  # the second process's
    first, second = study.ask(), study.ask()
    assert first.number == 1 and first.params == dead.params
    assert second.number == 3 and second.params != dead.params  # a new draw, not the duplicate
    trials = study.get_trials()
    assert trials[2].state == optuna.trial.TrialState.FAIL and trials[2].user_attrs["duplicate"]
    assert [trial.number for trial in counted(trials)] == [0, 1, 3]


def test_a_trial_stopped_by_ctrl_c_is_queued_to_train_on(tmp_path, monkeypatch):
    settings, study = _open(tmp_path)

    def objective_factory(*_):
        def objective(trial):
            suggest(searched(settings, start_config(settings)), trial, start_config(settings))
            trial.set_user_attr("process", f"{socket.gethostname()}:{os.getpid()}")
            trial.set_user_attr("folder", f"trials/{trial.number:04d}")
            raise KeyboardInterrupt
        return objective

    monkeypatch.setattr(workers, "make_objective", objective_factory)
    with pytest.raises(KeyboardInterrupt):
        work(str(tmp_path), settings, study, None, None, None)
    interrupted, queued = study.get_trials()
    assert interrupted.state == optuna.trial.TrialState.FAIL and queued.state == optuna.trial.TrialState.WAITING
    assert queued.system_attrs["failed_trial"] == 0 and queued.system_attrs["fixed_params"] == interrupted.params
    assert queued.user_attrs["folder"] == "trials/0000"


def test_optunas_line_about_a_failed_trial_has_no_traceback(tmp_path):
    import io
    import logging

    _, study = _open(tmp_path)
    load_optuna()
    optuna.logging.set_verbosity(optuna.logging.INFO)
    [handler] = [item for item in logging.getLogger("optuna").handlers if type(item) is logging.StreamHandler]
    stream = io.StringIO()
    earlier = handler.setStream(stream)

    def diverges(trial):
        trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True)
        raise ValueError("training diverged")

    try:
        study.optimize(diverges, n_trials=1, catch=(ValueError,))
    finally:
        handler.setStream(earlier)
    err = stream.getvalue()
    assert "failed with parameters" in err and "ValueError('training diverged')" in err
    assert "Traceback" not in err and "failed with value None" not in err and len(err.strip().splitlines()) == 1
