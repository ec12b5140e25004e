"""What a study chose: its best trial, the flag file and the summary of its trials."""

from __future__ import annotations

import os
import statistics
from typing import Sequence

from bert4rec_tf import cli
from bert4rec_tf.constants import SELECTION_METRIC
from bert4rec_tf.files import write_json_atomic
from bert4rec_tf.tuning.optuna_setup import load_optuna
from bert4rec_tf.tuning.rungs import rung_seconds
from bert4rec_tf.tasks.resolve import with_settings
from bert4rec_tf.tuning.settings import StudySettings, start_config
from bert4rec_tf.tuning.trials import counted, spent_seconds

BEST_FLAGS = "best.flags"
# The chosen configuration as a configuration file (`tasks.resolve.read_config_file`).
BEST_CONFIG = "best_config.json"
SUMMARY = "summary.json"


def best_trial(study):
    """The completed trial of the highest value, or None."""
    optuna = load_optuna()

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


def choice_record(settings: StudySettings, best) -> dict:
    """What a tuned run trains of the study (summary.json's "choice", read by
    `bert4rec_tf.experiments.tuned`): what the study tuned (data set, model preset, loss, recipe, seed,
    its fixed overrides) and the best trial's settings as (key, value) pairs in the order the trial set
    them."""
    return {"dataset": settings.dataset, "model": settings.model, "loss": settings.loss, "recipe": settings.recipe,
            "seed": settings.seed, "overrides": list(settings.overrides),
            "settings": [] if best is None else [[key, value] for key, value in best.user_attrs["settings"].items()]}


def summary(study, settings: StudySettings | None = None) -> dict:
    """Counts of the study's trials by state (`counted`), the trials' seconds (`spent_seconds`) and the wall time
    from the first trial's start to the last one's end, the budgets of `settings`, how the recipe's
    trial ended ("start": its number, state and value), the best trial's number, value and
    settings, what a tuned run trains of it ("choice", `choice_record`), whether a trial could be
    stopped in its warm-up ("stop_in_warmup"), the data it tuned on
    ("data": the source's identity and the prepared data's key, `data_record`), and how many
    seconds past its rung each judgement of a trial was ("at_rungs": their
    count, median and maximum; trials of older code, which did not validate at the rungs and could
    be judged minutes past one, kept no record of it)."""
    optuna = load_optuna()

    trials = counted(study.get_trials(deepcopy=False))
    counts = {state.name.lower(): sum(trial.state == state for trial in trials) for state in optuna.trial.TrialState}
    starts = [trial.datetime_start for trial in trials if trial.datetime_start]
    ends = [trial.datetime_complete for trial in trials if trial.datetime_complete]
    wall = (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0
    best = best_trial(study)
    budgets = {} if settings is None else {"choice": choice_record(settings, best),
                                           "budget": settings.budget, "trial_budget": settings.trial_budget,
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


def chosen_config(settings: StudySettings, trial, encoding: str | None = None):
    """The configuration of the test run of `trial`'s settings: the trials' own (the recipe, the
    study's overrides, the schedule's time budget, the sampled settings), trained to its end (no
    `stop_after`)."""
    config = with_settings(start_config(settings, encoding), trial.user_attrs["settings"], settings.model)
    config.override("train.stop_after", 0.0)
    return config


def write_best(study_dir: str, settings: StudySettings, study, encoding: str | None = None) -> str | None:
    """Writes, for the best completed trial, its configuration (`BEST_CONFIG`: `chosen_config` and its
    preset, which `bert4rec-train --config_file`, `api.train(config_file=...)` and
    `bert4rec-reproduce table2_tuned` read) and `BEST_FLAGS`, the same as a flag file for people,
    each complete or absent; returns the flag file's path, or None when no trial completed."""
    from bert4rec_tf.files import atomic_path

    trial = best_trial(study)
    if trial is None:
        return None
    write_json_atomic(os.path.join(study_dir, BEST_CONFIG),
                      {"preset": settings.model, "config": chosen_config(settings, trial, encoding).to_dict()})
    path = os.path.join(study_dir, BEST_FLAGS)
    with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        handle.write(best_flags(settings, trial, counted(study.get_trials(deepcopy=False))))
    write_json_atomic(os.path.join(study_dir, SUMMARY), summary(study, settings))
    return path
