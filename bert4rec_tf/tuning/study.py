"""A tuning study: Optuna's sampler and pruner over run folders, its trials in a database.

    study folder/
        study.json          what the study is: data set, model, loss, recipe, budgets, the space
        study.db            the trials (SQLite; or a database URL given as `storage`)
        trials/<number>/    each trial's run folder (`bert4rec-train`'s, without test or export)
        best.flags          the chosen configuration, a flag file for `bert4rec-train --flagfile`

A study folder is bound like a run folder: to what it tunes (study.json's `BINDING` fields), to the
data it tunes on (the source's identity, each attribute file's contents and the prepared data's key)
and to its storage (`storage.storage_record`). A command that gives another of any of them for the
same folder is refused in one line naming what differs, before anything is written.

Each trial is an ordinary time-budgeted run in its own folder, trained with the settings the sampler
chose: the first `trial_budget` seconds (`train.stop_after`) of a run of the test run's budget
(`schedule_budget`, `train.time_budget`), so that its learning rate follows the schedule the chosen
configuration will train with, not one that decays to 0 at the end of the trial. After each
validation it reports its best validation score (`SELECTION_METRIC`) to Optuna at its seconds of
training and validation so far, and the successive-halving pruner may stop it at a rung: the
budget is the fidelity (rungs at `min_resource`, 3x, 9x ... seconds, `rung_seconds`). A trial also
validates at each rung's seconds, so that at a rung every trial is judged on what it reached in the
same time: Optuna's pruner judges a rung on the first report at or past it, which with validations
every `eval_every` steps could be minutes later for a trial of slow steps than for one of fast
steps. A trial is judged at a rung whether or not its learning rate is still warming up
(`stop_in_warmup`): the budget is time, and a setting whose steps are so slow that it is still
warming at a rung has reached less in that time. Studies made before this (their study.json
without the field) spared a warming trial, and keep that rule when they go on. The test is never
read: the study chooses on validation only.

What survives a kill: Optuna's database storage with heartbeats. A trial whose process died stops
beating; once its heartbeat is older than `GRACE_SECONDS` Optuna marks it failed and queues a copy of
it (`RetryHeartbeatStaleTrialCallback`), which trains on in the same run folder from its last
checkpoint (the folder is named by the original trial's number); so does a trial stopped by Ctrl-C.
A finished trial's value is in the database before its process moves on, so it is never trained or
counted again. Every other trial is a new draw that no trial of the study has had (`draws`).

The budget is the sum of the trials' training and validation seconds (one core each), counted once
per run folder, so that a resumed trial's time is not counted twice. No trial starts once it is
reached; those running finish (so a study overruns by up to a trial).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import socket
import statistics
import time
from typing import Any, Sequence

from bert4rec_tf import cli
from bert4rec_tf.constants import SELECTION_METRIC
from bert4rec_tf.files import read_json, write_json_atomic
from bert4rec_tf.tasks import task_of_preset
from bert4rec_tf.tuning.draws import STARTUP_TRIALS, SpaceExhausted, draw_new, taken_settings
from bert4rec_tf.tuning.space import (Derived, SearchSpace, around, check_space, starting_point, suggest,
                                      without_fixed)
from bert4rec_tf.tuning.storage import check_storage, describe, storage_record, study_lock, study_storage
from bert4rec_tf.tuning.trials import counted, original_number, spent_seconds

# Heartbeats of running trials, and how old one may be before its trial counts as dead.
HEARTBEAT_SECONDS = 5
GRACE_SECONDS = 20
# A study stops when this many trials in a row fail (settings the family refuses, divergence).
MAX_FAILURES_IN_A_ROW = 3
STUDY_FILE = "study.json"
BEST_FLAGS = "best.flags"
# The fields of study.json that bind a study folder: the same command must give the same values.
BINDING = ("dataset", "model", "loss", "recipe", "trial_budget", "schedule_budget", "overrides", "seed", "eval_every",
           "space")


@dataclasses.dataclass
class StudySettings:
    """What a study tunes and how (study.json).

    Attributes:
        dataset, model, loss: what is tuned (`loss` None: the model's default loss).
        recipe: the recipe each trial starts from (its settings, then the sampled ones).
        budget: seconds of trials (training and validation, one core each) the study spends.
        trial_budget: each trial's seconds of training and validation (the largest fidelity).
        schedule_budget: the time budget the trials' learning-rate schedule is fitted to, in seconds:
            the test run's (by default the recipe's), at least `trial_budget`.
        overrides: settings fixed for every trial ("key=value"), over the recipe, under the sampled ones.
        seed: every trial's data seed (None: the preset's); the sampler is seeded from it too.
        eval_every: steps between a trial's validations (its reports to the pruner), besides the rungs' ones.
        min_resource: the first rung of the pruner, in seconds (default: a ninth of the trial budget).
        stop_in_warmup: whether the pruner may stop a trial still in its learning-rate warm-up
            (`warmup_steps`). A new study's is True; False is the older rule, which spared such a
            trial (that of a study.json without the field).
        storage: where the trials are (`storage.storage_record`; "" before the folder is bound).
        data: the data the study tunes on (`data_record`; empty before the folder is bound).
    """

    dataset: str
    model: str
    loss: str | None
    recipe: str
    budget: float
    trial_budget: float
    overrides: list[str]
    seed: int | None
    eval_every: int
    min_resource: float | None = None
    space: dict[str, str] = dataclasses.field(default_factory=dict)
    schedule_budget: float | None = None
    stop_in_warmup: bool = False
    storage: str = ""
    data: dict = dataclasses.field(default_factory=dict)

    @property
    def schedule(self) -> float:
        """The seconds the trials' schedule is fitted to (a study made before `schedule_budget`: the
        trial budget, as its trials trained)."""
        return self.schedule_budget or self.trial_budget

    @property
    def name(self) -> str:
        return f"{self.dataset}-{self.model}-{self.loss or 'default'}"


def _optuna():
    """Optuna, with its warnings that the heartbeat and retry features are experimental silenced
    (they are what makes a study survive a kill; the tests pin their behaviour)."""
    import warnings

    import optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    for handler in logging.getLogger("optuna").handlers:
        if not any(isinstance(item, _OneLine) for item in handler.filters):
            handler.addFilter(_OneLine())
    return optuna


class _OneLine(logging.Filter):
    """Keeps Optuna's log lines to their message: a failed trial's cause is one line (its error, also
    in the trial's `error` attribute), not a traceback; `--debug` shows tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not cli.debugging():
            record.exc_info, record.exc_text = None, None
        return True


def data_record(prepared, data_config) -> dict:
    """What binds a study to its data: the source's identity, the prepared data's key (which holds the
    data settings and every attribute file's contents and encoding) and, per attribute file of
    `data_config`, its path and contents (`prepare.attribute_files`), so that a refusal can name it."""
    from bert4rec_tf.data.prepare import attribute_files

    files = {field: {"path": os.path.abspath(getattr(data_config, field)), "contents": identity}
             for field, identity in attribute_files(data_config).items()}
    return {"source": prepared.metadata["source"]["identity"],
            "data_key": os.path.basename(os.path.normpath(prepared.directory)), "files": files}


def bind(study_dir: str, settings: StudySettings, storage: str | None = None, data: dict | None = None
         ) -> StudySettings:
    """Writes study.json for a new study folder, or checks that an existing one is this study, on this
    data (`data_record`; None: not checked) in this storage (its recorded budget may be raised: a larger
    `budget` tunes on). An existing study keeps the pruning rule it was made with (`stop_in_warmup`),
    which the returned settings carry. A folder of older code that recorded no storage or data takes
    this command's.

    Raises:
        ValueError: one line naming the first binding that differs and the way out; nothing is written.
    """
    path = os.path.join(study_dir, STUDY_FILE)
    settings = dataclasses.replace(settings, storage=storage_record(storage), data=data or {})
    if os.path.isfile(path):
        recorded = read_json(path, "study settings")
        for key in BINDING:
            if recorded.get(key) != dataclasses.asdict(settings)[key]:
                raise ValueError(f"{study_dir} holds another study: its {key} is {recorded.get(key)!r}, this command's "
                                 f"{dataclasses.asdict(settings)[key]!r}; use another --study_dir")
        if recorded.get("storage") and recorded["storage"] != settings.storage:
            raise ValueError(f"{study_dir} keeps its trials in {describe(recorded['storage'])}, this command in "
                             f"{describe(settings.storage)}: give the same --storage again, or use another --study_dir")
        if data is None or not recorded.get("data"):
            settings = dataclasses.replace(settings, data=recorded.get("data") or settings.data)
        else:
            _check_data(study_dir, recorded["data"], settings.data)
        settings = dataclasses.replace(settings, stop_in_warmup=bool(recorded.get("stop_in_warmup", False)))
    os.makedirs(study_dir, exist_ok=True)
    write_json_atomic(path, dataclasses.asdict(settings))
    return settings


def _check_data(study_dir: str, recorded: dict, data: dict) -> None:
    """Refuses `data` (`data_record`) when it is not the data `recorded` for the study in `study_dir`,
    naming what differs: the source file, an attribute file, or the prepared data.

    Raises:
        ValueError: one line.
    """
    way_out = "use another --study_dir for this data, or give the study's own again"
    if recorded.get("source") != data["source"]:
        raise ValueError(f"{study_dir} was tuned on another source file (identity {recorded.get('source')}, this "
                         f"command's {data['source']}): {way_out}")
    theirs, ours = recorded.get("files", {}), data["files"]
    for field in sorted(set(theirs) | set(ours)):
        before, now = theirs.get(field), ours.get(field)
        if (before or {}).get("contents") != (now or {}).get("contents"):
            was = f"{before['path']} (contents {before['contents']})" if before else "none"
            given = f"{now['path']} (contents {now['contents']})" if now else "none"
            raise ValueError(f"{study_dir} was tuned with another --config {field}: the study's was {was}, this "
                             f"command's is {given}: {way_out}")
    if recorded.get("data_key") != data["data_key"]:
        raise ValueError(f"{study_dir} was tuned on other prepared data (data key {recorded.get('data_key')}, this "
                         f"command's {data['data_key']}): {way_out}")


def _frozen(trial):
    """The stored `FrozenTrial` of the running `trial`."""
    return next(item for item in trial.study.get_trials(deepcopy=False) if item.number == trial.number)


def trial_folder(study_dir: str, trial) -> str:
    """The run folder of `trial`: named by its original trial's number when it is a retry."""
    return os.path.join(study_dir, "trials", f"{original_number(_frozen(trial)):04d}")


def base_overrides(settings: StudySettings) -> list[str]:
    """Every trial's overrides before the sampled ones: the study's, the loss, the schedule's budget and
    the trial budget (where the trial stops, when the schedule is longer)."""
    schedule = settings.schedule
    return [*settings.overrides, *([f"loss={settings.loss}"] if settings.loss else []), f"time_budget={schedule}",
            f"stop_after={settings.trial_budget if schedule > settings.trial_budget else 0}"]


def make_objective(study_dir: str, settings: StudySettings, data_dir: str | None, source_file: str | None,
                   encoding: str | None):
    """The objective of Optuna's `optimize`: one trial trained in its run folder; its value is the best
    validation score (`SELECTION_METRIC`), or `TrialPruned` when the pruner stopped it."""
    import keras
    optuna = _optuna()

    from bert4rec_tf.training.run_folder import RunFolder
    from bert4rec_tf.training.trainer import train_and_evaluate

    before = start_config(settings, encoding)
    space = searched(settings, before)
    fixed = base_overrides(settings)

    def objective(trial) -> float:
        sampled = suggest(space, trial, before)
        config = cli.experiment_config(settings.dataset, fixed + [f"{key}={value}" for key, value in sampled.items()],
                                       settings.seed, settings.model, settings.recipe, encoding)
        folder = trial_folder(study_dir, trial)
        trial.set_user_attr("folder", os.path.relpath(folder, study_dir))
        trial.set_user_attr("process", f"{socket.gethostname()}:{os.getpid()}")
        trial.set_user_attr("settings", {key: _plain(value) for key, value in sampled.items()})
        # The seconds reported already, and the best of them (a retry inherits its dead original's
        # reports and the seconds it was judged at).
        frozen = _frozen(trial)
        reported = set(frozen.intermediate_values)
        best = {"value": max(frozen.intermediate_values.values(), default=-math.inf)}
        judged = list(frozen.user_attrs.get("judged", []))
        rungs = rung_seconds(settings, within_trial=False)

        def on_validation(point: dict) -> bool:
            score = point.get("/".join(SELECTION_METRIC))
            if score is not None and math.isfinite(score):
                best["value"] = max(best["value"], score)
            trial.set_user_attr("seconds", float(point.get("seconds", 0.0)))
            second = int(point.get("seconds", 0.0))
            # One report a second (Optuna's steps are integers: a second validation within the same
            # second would only be warned about and ignored). The pruner judges a rung on the first
            # report at or past it and records the value there. A trial still warming up is judged
            # too, unless the study is of the older rule that spared it (`stop_in_warmup`).
            if math.isfinite(best["value"]) and second not in reported:
                trial.report(best["value"], step=second)
                reported.add(second)
            warming = int(point.get("step", 0)) <= config.train.warmup_steps
            stop = trial.should_prune()
            if len(judged) < len(rungs) and second >= rungs[len(judged)]:
                # The rungs this report was judged at (Optuna records each), kept for the figure and
                # the summary: the seconds of the report, one entry per rung.
                done = sum(key.startswith("completed_rung_") for key in _frozen(trial).system_attrs)
                judged.extend([second] * (done - len(judged)))
                trial.set_user_attr("judged", judged)
            return stop and (settings.stop_in_warmup or not warming)

        keras.backend.clear_session()
        try:
            train_and_evaluate(config, folder, data_dir, source_file, eval_every=settings.eval_every, verbose=0,
                               on_validation=on_validation, test=False, validate_at=rung_seconds(settings))
        except ValueError as error:  # divergence, a setting the family refuses: the trial fails, the study goes on
            trial.set_user_attr("error", str(error).splitlines()[0][:300])
            raise
        state = RunFolder(folder).load_state()
        trial.set_user_attr("seconds", float(state["seconds"]))
        trial.set_user_attr("steps", int(state["step"]))
        # Stopped by the pruner, unless its budget was spent by then (a first interval can outlast a
        # short budget: it is not cut); the trial budget is its `stop_after`, or its whole time budget.
        finished = (state.get("budget_spent") or state["step"] >= config.train.train_steps
                    or state["seconds"] >= settings.trial_budget)
        if not finished:
            raise optuna.TrialPruned(f"stopped at {state['seconds']:.0f} s on its validation curve")
        if state["best"] is None:
            raise ValueError(f"trial {trial.number} validated no checkpoint")
        return float(state["best"])

    return objective


def _plain(value: Any) -> Any:
    """A sampled value as JSON keeps it (NumPy scalars to Python's)."""
    return value.item() if hasattr(value, "item") else value


# The successive-halving pruner's reduction factor: a third of the trials at a rung go on to the next.
REDUCTION = 3


def _first_rung(settings: StudySettings) -> int:
    """The pruner's first rung in seconds (at least 1): `min_resource`, by default a ninth of the
    trial budget."""
    return max(1, int(settings.min_resource or settings.trial_budget / 9))


def rung_seconds(settings: StudySettings, within_trial: bool = True) -> list[int]:
    """The seconds of the pruner's rungs (the first rung, then `REDUCTION` times the last): those a
    trial validates at, without one within the last 1% of the trial budget (the trial's end
    validates there anyway); without `within_trial`, every rung up to the trial budget.

    Example: a trial budget of 600 s gives [66, 198] (and 594 s, the trial's end, without `within_trial`).
    """
    rungs, rung = [], _first_rung(settings)
    while rung < (0.99 if within_trial else 1.0) * settings.trial_budget:
        rungs.append(rung)
        rung *= REDUCTION
    return rungs


def open_study(study_dir: str, settings: StudySettings, storage: str | None, encoding: str | None = None):
    """The Optuna study of `settings` in its storage (created on first use), with its pruner
    (successive halving over seconds). Each trial it starts is a queued one (the recipe's, a retry
    of a trial whose process died) or a new draw (`draws.draw_new`), taken under the study folder's
    lock (`_taking_trials_in_turn`)."""
    optuna = _optuna()

    pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=_first_rung(settings), reduction_factor=REDUCTION)
    # Every trial's settings are drawn by `draw_new` and queued: the study's own sampler never draws.
    sampler = optuna.samplers.TPESampler(seed=settings.seed, n_startup_trials=STARTUP_TRIALS, constant_liar=True)
    study = optuna.create_study(study_name=settings.name, storage=study_storage(study_dir, storage, HEARTBEAT_SECONDS,
                                                                                 GRACE_SECONDS),
                                sampler=sampler, pruner=pruner, direction="maximize", load_if_exists=True)
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
    optuna = _optuna()

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
    states = _optuna().trial.TrialState
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
    optuna = _optuna()

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
    optuna = _optuna()

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


def best_trial(study):
    """The completed trial of the highest value, or None."""
    optuna = _optuna()

    completed = [trial for trial in study.get_trials(deepcopy=False) if trial.state == optuna.trial.TrialState.COMPLETE]
    return max(completed, key=lambda trial: trial.value) if completed else None


def best_flags(settings: StudySettings, trial, trials: Sequence) -> str:
    """The flag file of the chosen configuration: `bert4rec-train --flagfile best.flags` trains it
    (its recipe's own time budget; a flag after the flag file overrides it)."""
    schedule = settings.schedule
    lines = [f"# bert4rec-tune {settings.name}: trial {trial.number} of {len(trials)}, best validation "
             f"{'/'.join(SELECTION_METRIC)} {trial.value:.4f} in {cli.format_duration(settings.trial_budget)} of a "
             f"{cli.format_duration(schedule)} schedule",
             f"--dataset={settings.dataset}", f"--model={settings.model}", f"--recipe={settings.recipe}"]
    if settings.loss:
        lines.append(f"--loss={settings.loss}")
    lines += [f"--config={override}" for override in settings.overrides]
    lines += [f"--config={key}={value}" for key, value in trial.user_attrs["settings"].items()]
    if settings.seed is not None:
        lines.append(f"--seed={settings.seed}")
    return "\n".join(lines) + "\n"


def summary(study, settings: StudySettings | None = None) -> dict:
    """Counts of the study's trials by state (`counted`), the trials' seconds (`spent_seconds`) and the wall time
    from the first trial's start to the last one's end, the budgets of `settings`, how the recipe's
    trial ended ("start": its number, state and value), the best trial's number, value and
    settings, whether a trial could be stopped in its warm-up ("stop_in_warmup"), the data it tuned on
    ("data": the source's identity and the prepared data's key, `data_record`), and how many
    seconds past its rung each judgement of a trial was ("at_rungs": their
    count, median and maximum; trials of older code, which did not validate at the rungs and could
    be judged minutes past one, kept no record of it)."""
    optuna = _optuna()

    trials = counted(study.get_trials(deepcopy=False))
    counts = {state.name.lower(): sum(trial.state == state for trial in trials) for state in optuna.trial.TrialState}
    starts = [trial.datetime_start for trial in trials if trial.datetime_start]
    ends = [trial.datetime_complete for trial in trials if trial.datetime_complete]
    wall = (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0
    best = best_trial(study)
    budgets = {} if settings is None else {"budget": settings.budget, "trial_budget": settings.trial_budget,
                                           "schedule_budget": settings.schedule,
                                           "stop_in_warmup": settings.stop_in_warmup,
                                           "data": {key: settings.data[key] for key in ("source", "data_key")
                                                    if key in settings.data}}
    # The recipe's trial (`enqueue_start`) as it ended: a retry of it ends where its original did not.
    starts = [trial for trial in trials if trial.user_attrs.get("start") == "recipe" and trial.state.is_finished()]
    start = next((trial for trial in reversed(starts) if trial.state != optuna.trial.TrialState.FAIL),
                 starts[-1] if starts else None)
    recipe = {} if start is None else {"start": {
        "number": start.number, "state": start.state.name.lower(),  # a pruned trial: its last report
        "value": start.value if start.value is not None else (
            start.intermediate_values[max(start.intermediate_values)] if start.intermediate_values else None)}}
    # How late past each rung the trials that ended were judged (from the seconds they were judged at,
    # which trials of older code did not keep; a failed trial's judgements are its retry's too).
    rungs = [] if settings is None else rung_seconds(settings, within_trial=False)
    ended = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    late = [second - rung for trial in trials if trial.state in ended
            for second, rung in zip(trial.user_attrs.get("judged", []), rungs)]
    at_rungs = {"judged": len(late), **({"median": float(statistics.median(late)), "max": max(late)} if late else {})}
    return {"trials": {key: value for key, value in counts.items() if value}, "spent_seconds": spent_seconds(trials),
            "wall_seconds": round(wall, 1), **budgets, **recipe, "at_rungs": at_rungs,
            **({} if best is None else {"best": {"number": best.number, "value": best.value,
                                                 "settings": best.user_attrs.get("settings", {})}})}


def new_settings(dataset: str, model: str, loss: str | None, recipe: str, budget: float, trial_budget: float,
                 overrides: Sequence[str] = (), seed: int | None = None, eval_every: int = 500,
                 min_resource: float | None = None, encoding: str | None = None,
                 schedule_budget: float | None = None) -> StudySettings:
    """The settings of a study, checked: the model, loss, recipe and overrides as `bert4rec-train`
    takes them, a search space with keys the family has, budgets that hold a trial.

    `schedule_budget` None is the test run's: the time budget of the recipe under the overrides, or
    the trial budget when that has none (a recipe of steps).

    Budgets are seconds, or durations such as "10m" (`cli.parse_duration`).

    Raises:
        ValueError: one line naming the argument (as `bert4rec-tune`'s flag) and what is wrong.
    """
    task = task_of_preset(model)
    if not task.search_space(model):
        raise ValueError(f"{model} has nothing to tune (its search space is empty)")
    budget, trial_budget = _seconds(budget, "--budget"), _seconds(trial_budget, "--trial_budget")
    if schedule_budget is not None:
        schedule_budget = _seconds(schedule_budget, "--schedule_budget")
    if isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 1:
        raise ValueError(f"--eval_every must be a whole number of steps, at least 1, got {eval_every!r}")
    if min_resource is not None:
        min_resource = _seconds(min_resource, "--min_resource")
        if min_resource >= trial_budget:
            raise ValueError(f"--min_resource ({cli.format_duration(min_resource)}) must be below --trial_budget "
                             f"({cli.format_duration(trial_budget)}): the pruner judges a trial first at "
                             "--min_resource, and no trial would reach it (default: a ninth of --trial_budget)")
    if budget < trial_budget:
        raise ValueError(f"--budget ({cli.format_duration(budget)}) must hold at least one --trial_budget "
                         f"({cli.format_duration(trial_budget)})")
    if schedule_budget is None:
        test_run = cli.experiment_config(dataset, [*overrides, *([f"loss={loss}"] if loss else [])], seed, model,
                                         recipe, encoding)
        schedule_budget = test_run.train.time_budget if test_run.has("time_budget") else 0.0
    schedule_budget = float(schedule_budget or trial_budget)
    if schedule_budget < trial_budget:
        raise ValueError(f"--schedule_budget ({cli.format_duration(schedule_budget)}) must be at least the "
                         f"--trial_budget ({cli.format_duration(trial_budget)})")
    settings = StudySettings(dataset, model, loss, recipe, float(budget), float(trial_budget), list(overrides),
                             seed, eval_every, min_resource, {}, schedule_budget, stop_in_warmup=True)
    config = start_config(settings, encoding)
    check_space(task.search_space(model), config)
    space = searched(settings, config)
    if not any(not isinstance(param, Derived) for param in space.values()):
        raise ValueError(f"--config fixes every setting {model} searches ({', '.join(task.search_space(model))}): "
                         "nothing is left to tune")
    settings.space = {key: param.describe() for key, param in space.items()}
    return settings


def _seconds(value, flag: str) -> float:
    """`value` in seconds: a duration such as "10m", or a positive finite number.

    Raises:
        ValueError: naming `flag` and the value.
    """
    if isinstance(value, str):
        value = cli.parse_duration(value, flag)
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{flag} must be seconds or a duration such as 10m, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{flag} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def start_config(settings: StudySettings, encoding: str | None = None):
    """The configuration every trial starts from: the recipe's, with the study's fixed overrides."""
    return cli.experiment_config(settings.dataset, base_overrides(settings), settings.seed, settings.model,
                                 settings.recipe, encoding)


def searched(settings: StudySettings, config) -> SearchSpace:
    """What the study searches: its family's space without the keys the study's --config fixes, each
    grid also holding `config`'s (the recipe's) value (`space.around`)."""
    space = task_of_preset(settings.model).search_space(settings.model)
    return around(without_fixed(space, config, settings.overrides), config)


def starting_point_of(settings: StudySettings, encoding: str | None = None):
    """The recipe's settings as the study's first trial takes them (in the family's space, each grid
    holding the recipe's own value too: `space.around`), and where that trial trains otherwise
    (`space.starting_point`)."""
    config = start_config(settings, encoding)
    return starting_point(searched(settings, config), config)


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


def write_best(study_dir: str, settings: StudySettings, study) -> str | None:
    """Writes best.flags (complete or absent) for the best completed trial; returns its path, or None."""
    from bert4rec_tf.files import atomic_path

    trial = best_trial(study)
    if trial is None:
        return None
    path = os.path.join(study_dir, BEST_FLAGS)
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        handle.write(best_flags(settings, trial, counted(study.get_trials(deepcopy=False))))
    write_json_atomic(os.path.join(study_dir, "summary.json"), summary(study, settings))
    return path


def load_settings(study_dir: str) -> StudySettings:
    """The study.json of `study_dir`."""
    return StudySettings(**read_json(os.path.join(study_dir, STUDY_FILE), "study settings"))


def tune(study_dir: str, settings: StudySettings, storage: str | None = None, data_dir: str | None = None,
         source_file: str | None = None, encoding: str | None = None, workers=None) -> dict:
    """Runs the study `settings` in `study_dir` to its budget (in this process, or by `workers()`,
    which runs worker processes and waits for them), then writes best.flags, summary.json and the
    figures; returns the summary with "best_flags" and "figures".

    Raises:
        ValueError: for a folder holding another study, other data or another storage (`bind`), a
            storage that cannot be opened (`storage.check_storage`), or when no trial completed.
    """
    from bert4rec_tf.tuning.report import write_report

    settings, study = start(study_dir, settings, storage, data_dir, source_file, encoding)
    with study_lock(study_dir):
        queued = enqueue_start(study, settings, encoding)
    if queued:
        print(queued, flush=True)
    if workers is None:
        work(study_dir, settings, study, data_dir, source_file, encoding)
    else:
        workers()
    path = write_best(study_dir, settings, study)
    if path is None:
        raise ValueError(f"no trial of {study_dir} completed; see its trials/ folders")
    figures = write_report(study_dir, study, rung_seconds(settings, within_trial=False))
    return {**summary(study, settings), "best_flags": path, "figures": figures}
