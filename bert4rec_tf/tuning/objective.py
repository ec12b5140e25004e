"""A trial: an ordinary run folder trained with the settings of the trial, reporting its best
validation score to the pruner at its seconds of training and validation."""

from __future__ import annotations

import math
import os
import socket
from typing import Any

from bert4rec_tf.constants import SELECTION_METRIC
from bert4rec_tf.tasks.resolve import with_settings
from bert4rec_tf.tasks.space import suggest
from bert4rec_tf.tuning.optuna_setup import load_optuna
from bert4rec_tf.tuning.rungs import rung_seconds
from bert4rec_tf.tuning.settings import StudySettings, searched, start_config
from bert4rec_tf.tuning.trials import original_number


def _frozen(trial):
    """The stored `FrozenTrial` of the running `trial`."""
    return next(item for item in trial.study.get_trials(deepcopy=False) if item.number == trial.number)


def trial_folder(study_dir: str, trial) -> str:
    """The run folder of `trial`: named by its original trial's number when it is a retry."""
    return os.path.join(study_dir, "trials", f"{original_number(_frozen(trial)):04d}")


def make_objective(study_dir: str, settings: StudySettings, data_dir: str | None, source_file: str | None,
                   encoding: str | None):
    """The objective of Optuna's `optimize`: one trial trained in its run folder; its value is the best
    validation score (`SELECTION_METRIC`), or `TrialPruned` when the pruner stopped it."""
    import keras
    optuna = load_optuna()

    from bert4rec_tf.training.run_folder import RunFolder
    from bert4rec_tf.training.trainer import train_and_evaluate

    before = start_config(settings, encoding)
    space = searched(settings, before)

    def objective(trial) -> float:
        sampled = {key: _plain(value) for key, value in suggest(space, trial, before).items()}
        config = with_settings(before, sampled, settings.model)
        folder = trial_folder(study_dir, trial)
        trial.set_user_attr("folder", os.path.relpath(folder, study_dir))
        trial.set_user_attr("process", f"{socket.gethostname()}:{os.getpid()}")
        trial.set_user_attr("settings", sampled)
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
