"""The processes that run a study's trials: the study opened in its storage, each next trial taken in
turn (a queued one, or a new draw), trials run until the budget is spent, a trial stopped by Ctrl-C
queued again."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from bert4rec_tf.tuning.binding import bind, data_record
from bert4rec_tf.tuning.draws import STARTUP_TRIALS, SpaceExhausted, draw_new, taken_settings
from bert4rec_tf.tuning.objective import make_objective
from bert4rec_tf.tuning.optuna_setup import load_optuna
from bert4rec_tf.tuning.rungs import REDUCTION, first_rung
from bert4rec_tf.tuning.settings import StudySettings, searched, start_config, starting_point_of
from bert4rec_tf.tuning.storage import check_storage, study_lock, study_storage
from bert4rec_tf.tuning.trials import counted, original_number, spent_seconds

# Heartbeats of running trials, and how old one may be before its trial counts as dead.
HEARTBEAT_SECONDS = 5
GRACE_SECONDS = 20
# A study stops when this many trials in a row fail (settings the family refuses, divergence).
MAX_FAILURES_IN_A_ROW = 3


def check_jobs(jobs: int) -> None:
    """Refuses `bert4rec-tune --jobs` below 1 or above the cores this process may use: each trial needs
    one, or two trials on one core are each judged on half the compute their budget implies.

    Raises:
        ValueError: one line naming the flag, the value and the cores.
    """
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    if jobs > len(cores):
        raise ValueError(f"--jobs {jobs} runs more trials at once than the {len(cores)} core(s) this process may use "
                         f"({', '.join(map(str, cores))}): each trial needs a core of its own, or it trains on a "
                         f"fraction of the compute its budget implies; give --jobs {len(cores)} or fewer")


def open_study(study_dir: str, settings: StudySettings, storage: str | None, encoding: str | None = None):
    """The Optuna study of `settings` in its storage (created on first use), with its pruner
    (successive halving over seconds). Each trial it starts is a queued one (the recipe's, a retry
    of a trial whose process died) or a new draw (`draws.draw_new`), taken under the study folder's
    lock (`_taking_trials_in_turn`)."""
    optuna = load_optuna()

    pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=first_rung(settings), reduction_factor=REDUCTION)
    # Every trial's settings are drawn by `draw_new` and queued: the study's own sampler never draws.
    sampler = optuna.samplers.TPESampler(seed=settings.seed, n_startup_trials=STARTUP_TRIALS, constant_liar=True)
    # The database's tables and the study are created by one process of this machine at a time: two
    # creating them at once collide ("table ... already exists").
    with study_lock(study_dir):
        study = optuna.create_study(study_name=settings.name, storage=study_storage(
            study_dir, storage, HEARTBEAT_SECONDS, GRACE_SECONDS), sampler=sampler, pruner=pruner, direction="maximize",
            load_if_exists=True)
    config = start_config(settings, encoding)
    space = searched(settings, config)
    return _taking_trials_in_turn(study, study_dir, lambda: draw_new(study, space, config, settings.seed))


def _taking_trials_in_turn(study, study_dir: str, draw):
    """`study`, whose taking of its next trial is serialised across this machine's processes by the
    study folder's lock (`storage.study_lock`): a queued trial if there is one (a second retry of the
    same dead trial, which two processes can queue at once, is failed as a duplicate and skipped),
    else the settings `draw()` returns, queued and taken.

    Optuna takes a queued (WAITING) trial by reading its state, then writing RUNNING; SQLite does not
    lock the row it read, so two workers starting at once could take the same trial. This wraps
    `Study._pop_waiting_trial_id`, an Optuna internal that `Study.ask` calls; without it (another
    Optuna) the study refuses to start rather than race.
    """
    optuna = load_optuna()

    pop = getattr(study, "_pop_waiting_trial_id", None)
    if pop is None:
        raise ValueError("this Optuna has no Study._pop_waiting_trial_id: bert4rec-tune cannot serialise its "
                         "workers' taking of trials; install the Optuna this package was tested with (5.1)")

    def taken():
        with study_lock(study_dir):
            optuna.storages.fail_stale_trials(study)
            while True:
                trial_id = pop()
                if trial_id is None:
                    break
                if not _second_retry(study, trial_id):
                    return trial_id
            study.enqueue_trial(draw())
            return pop()

    study._pop_waiting_trial_id = taken
    return study


def _second_retry(study, trial_id: int) -> bool:
    """Whether the trial `trial_id` (just taken) retries a run folder that another trial already
    continues (running, or ended other than failed) or that an earlier queued retry will: it is then
    failed, marked `duplicate`, and not counted."""
    states = load_optuna().trial.TrialState
    trials = study.get_trials(deepcopy=False)
    trial = next(item for item in trials if item._trial_id == trial_id)
    if "failed_trial" not in trial.system_attrs:
        return False
    folder = original_number(trial)
    others = [item for item in trials if item.number != trial.number and item.number != folder
              and original_number(item) == folder]
    if not any(item.state in (states.RUNNING, states.COMPLETE, states.PRUNED)
               or (item.state == states.WAITING and item.number < trial.number) for item in others):
        return False
    study._storage.set_trial_user_attr(trial_id, "duplicate", True)
    study._storage.set_trial_state_values(trial_id, state=states.FAIL)
    return True


def start(study_dir: str, settings: StudySettings, storage: str | None, data_dir: str | None,
          source_file: str | None, encoding: str | None) -> tuple[StudySettings, Any]:
    """Checks the study folder and storage, prepares the data (once, before any trial: a bad file is
    one error here, not a failed trial each), binds the folder (`bind`) and opens the study.

    Returns:
        the bound settings and the Optuna study.

    Raises:
        ValueError: one line, with nothing written to the study folder or its database.
    """
    from bert4rec_tf.data.prepare import prepare

    if os.path.exists(study_dir) and not os.path.isdir(study_dir):
        raise ValueError(f"--study_dir {study_dir} is a file, not a folder: give a folder for the study")
    check_storage(study_dir, storage)
    data = start_config(settings, encoding).data
    settings = bind(study_dir, settings, storage, data_record(prepare(data, data_dir, source_file), data))
    return settings, open_study(study_dir, settings, storage, encoding)


def run_worker(study_dir: str, settings: StudySettings, storage: str | None, data_dir: str | None,
               source_file: str | None, encoding: str | None) -> None:
    """Binds the study (`start`) and runs its trials in this process (`work`)."""
    settings, study = start(study_dir, settings, storage, data_dir, source_file, encoding)
    work(study_dir, settings, study, data_dir, source_file, encoding)


def work(study_dir: str, settings: StudySettings, study, data_dir: str | None, source_file: str | None,
         encoding: str | None) -> None:
    """Runs trials of the study until its budget is spent (or its space is exhausted), then waits for
    the trials other processes run (a dead one is failed after `GRACE_SECONDS` and its retry run
    here). A trial stopped by Ctrl-C is queued again, to train on from its last checkpoint when the
    study goes on, and the KeyboardInterrupt goes on up."""
    optuna = load_optuna()

    objective = make_objective(study_dir, settings, data_dir, source_file, encoding)
    states = optuna.trial.TrialState
    failures = 0
    while True:
        optuna.storages.fail_stale_trials(study)
        trials = counted(study.get_trials(deepcopy=False))
        waiting = any(trial.state == states.WAITING for trial in trials)
        if waiting or spent_seconds(trials) < settings.budget:
            ran: list = []
            try:
                study.optimize(objective, n_trials=1, catch=(ValueError,), gc_after_trial=True,
                               callbacks=[lambda _, trial: ran.append(trial)])
            except SpaceExhausted as exhausted:
                print(f"{exhausted}; the study ends", flush=True)
                return
            except KeyboardInterrupt:
                _queue_interrupted(study)
                raise
            failures = failures + 1 if ran and ran[0].state == states.FAIL else 0
            if failures >= MAX_FAILURES_IN_A_ROW:
                raise ValueError(f"{failures} trials in a row failed (the last: {ran[0].user_attrs.get('error', '?')}); "
                                 f"their run folders are in {os.path.join(study_dir, 'trials')}")
            continue
        if not any(trial.state == states.RUNNING for trial in trials):
            return
        time.sleep(HEARTBEAT_SECONDS)


def _queue_interrupted(study) -> None:
    """Queues a retry of the trials of this process that Ctrl-C failed, as for a dead process: each
    trains on in its run folder when the study goes on."""
    optuna = load_optuna()

    process = f"{socket.gethostname()}:{os.getpid()}"
    retried = {original_number(trial) for trial in study.get_trials(deepcopy=False)
               if trial.state in (optuna.trial.TrialState.WAITING, optuna.trial.TrialState.RUNNING)}
    for trial in study.get_trials(deepcopy=True):
        if (trial.state == optuna.trial.TrialState.FAIL and trial.user_attrs.get("process") == process
                and "error" not in trial.user_attrs and not trial.user_attrs.get("duplicate")
                and original_number(trial) not in retried and _last_of_folder(study, trial)):
            optuna.storages.RetryHeartbeatStaleTrialCallback(inherit_intermediate_values=True)(study, trial)


def _last_of_folder(study, trial) -> bool:
    """Whether `trial` is the newest trial of its run folder."""
    folder = original_number(trial)
    return trial.number == max(item.number for item in study.get_trials(deepcopy=False)
                               if original_number(item) == folder)


def enqueue_start(study, settings: StudySettings, encoding: str | None = None) -> str | None:
    """Queues the recipe's settings as the study's next trial, unless a trial has them already or the
    budget is spent: the chosen configuration is then never one that validates below the recipe at
    the trial budget. Returns a line saying so (and what the trial trains unlike the recipe), or None."""
    params, differs = starting_point_of(settings, encoding)
    trials = counted(study.get_trials(deepcopy=False))
    if not params or spent_seconds(trials) >= settings.budget or params in taken_settings(trials):
        return None
    study.enqueue_trial(params, user_attrs={"start": "recipe"})
    unlike = "; ".join(f"{key} {ours if ours is not None else 'sampled'} (the recipe's {theirs})"
                       for key, (theirs, ours) in differs.items())
    return ("the recipe's settings queued as the next trial" + (f", but for {unlike}" if unlike else "")
            + f": {', '.join(f'{key} {value}' for key, value in params.items())}")
