"""The study's figures: the best validation score against the trials' time, each trial's curve (the
pruned ones stopping early; marked, the points the pruner judged it on), and each setting's importance
(Optuna's PED-ANOVA)."""

from __future__ import annotations

import json
import math
import os

from bert4rec_tf.constants import SELECTION_METRIC


def write_report(study_dir: str, study, rungs: list[int]) -> list[str]:
    """Writes tuning.png (and importance.png once two trials completed) in `study_dir`; returns the
    paths. `rungs`: the pruner's rungs in seconds (where each trial was judged)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna

    from bert4rec_tf.files import atomic_path
    from bert4rec_tf.tuning.trials import counted, spent_seconds

    metric = "/".join(SELECTION_METRIC)
    trials = sorted(counted(study.get_trials(deepcopy=False)), key=lambda trial: trial.number)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    finished = [trial for trial in trials if trial.state.is_finished()]
    best, xs, ys = None, [], []
    for count, trial in enumerate(finished, start=1):
        if trial.state == optuna.trial.TrialState.COMPLETE and (best is None or trial.value > best):
            best = trial.value
        if best is not None:
            xs.append(spent_seconds(finished[:count]) / 60)
            ys.append(best)
    left.step(xs, ys, where="post", marker="o")
    left.set(xlabel="trials' time spent (minutes, in the order the trials were made)",
             ylabel=f"best validation {metric}", title="Best trial so far")
    drawn = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    for trial in finished:
        if trial.state not in drawn:  # a failed trial's folder is its retry's: drawn once, as the retry
            continue
        seconds, values = _curve(study_dir, trial, metric)
        if not seconds:
            continue
        pruned = trial.state == optuna.trial.TrialState.PRUNED
        style = dict(color="grey", linestyle="--", alpha=0.6) if pruned else dict(alpha=0.9)
        recipe = " (the recipe's)" if trial.user_attrs.get("start") == "recipe" else ""
        line, = right.plot([second / 60 for second in seconds], values,
                           label=None if pruned else f"trial {trial.number}{recipe}", **style)
        # The reports it was judged on, as the trial kept them (older trials: as the pruner's rule gives them).
        judged = [second for second in dict.fromkeys(trial.user_attrs.get("judged", []))
                  if second in trial.intermediate_values] or judged_seconds(trial.intermediate_values, rungs)
        right.plot([second / 60 for second in judged], [trial.intermediate_values[second] for second in judged],
                   linestyle="none", marker="x" if pruned else ".", color=line.get_color(), alpha=line.get_alpha())
    right.set(xlabel="trial's time (minutes)", ylabel=f"best validation {metric} so far",
              title="Each trial's curve (grey, dashed: stopped by the pruner;\nmarked: the points it was judged on)")
    if sum(trial.state == optuna.trial.TrialState.COMPLETE for trial in trials) <= 12:
        right.legend(fontsize="small")
    figure.tight_layout()
    paths = [os.path.join(study_dir, "tuning.png")]
    with atomic_path(paths[0]) as temporary:
        figure.savefig(temporary, format="png", dpi=100)
    plt.close(figure)
    completed = [trial for trial in trials if trial.state == optuna.trial.TrialState.COMPLETE]
    if len(completed) >= 2:
        # Named, not Optuna's default: that is fANOVA (which needs scikit-learn) before Optuna 5.
        importance = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
        figure, axis = plt.subplots(figsize=(6, 0.4 * len(importance) + 1.2))
        names = list(importance)[::-1]
        axis.barh(names, [importance[name] for name in names])
        axis.set(xlabel="importance (PED-ANOVA over the completed trials)",
                 title=f"Which setting moved validation {metric}")
        figure.tight_layout()
        paths.append(os.path.join(study_dir, "importance.png"))
        with atomic_path(paths[1]) as temporary:
            figure.savefig(temporary, format="png", dpi=100)
        plt.close(figure)
    return paths


def judged_seconds(reports: dict[int, float], rungs: list[int]) -> list[int]:
    """The reports (seconds) a successive-halving pruner with `rungs` (seconds) judged a trial on: for
    each rung the trial reached, its first report at or past it (one report may serve several rungs).

    Example: judged_seconds({30: 0.1, 70: 0.2, 150: 0.3, 250: 0.4}, [66, 198, 594]) == [70, 250].
    """
    judged = []
    for rung in rungs:
        past = [second for second in sorted(reports) if second >= rung]
        if not past:
            break
        if past[0] not in judged:
            judged.append(past[0])
    return judged


def _curve(study_dir: str, trial, metric: str) -> tuple[list[float], list[float]]:
    """A trial's best validation score so far at each validation (seconds, values), from its
    run folder's curve (every validation, the warm-up's included); from its reports without one."""
    path = os.path.join(study_dir, trial.user_attrs.get("folder", "-"), "validation.json")
    if not os.path.isfile(path):
        seconds = sorted(trial.intermediate_values)
        return seconds, [trial.intermediate_values[second] for second in seconds]
    with open(path, encoding="utf-8") as handle:
        curve = json.load(handle)
    seconds, values, best = [], [], -math.inf
    for point in curve:
        score = point.get(metric)
        if score is None or not math.isfinite(score):
            continue
        best = max(best, score)
        seconds.append(float(point.get("seconds", 0.0)))
        values.append(best)
    return seconds, values
