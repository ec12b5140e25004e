"""The study's figures: the best validation score against the trials' time, each trial's curve (the
pruned ones stopping early), and each setting's importance (Optuna's fANOVA)."""

from __future__ import annotations

import os

from bert4rec_tf.constants import SELECTION_METRIC


def write_report(study_dir: str, study) -> list[str]:
    """Writes tuning.png (and importance.png once two trials completed) in `study_dir`; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna

    from bert4rec_tf.files import atomic_path
    from bert4rec_tf.tuning.trials import spent_seconds

    metric = "/".join(SELECTION_METRIC)
    trials = sorted(study.get_trials(deepcopy=False), key=lambda trial: trial.number)
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
    for trial in trials:
        steps = sorted(trial.intermediate_values)
        if not steps:
            continue
        pruned = trial.state == optuna.trial.TrialState.PRUNED
        # A pruned trial may have reported once: its point is drawn all the same.
        style = dict(color="grey", linestyle="--", marker="x", alpha=0.6) if pruned else dict(marker=".", alpha=0.9)
        right.plot([step / 60 for step in steps], [trial.intermediate_values[step] for step in steps],
                   label=None if pruned else f"trial {trial.number}", **style)
    right.set(xlabel="trial's time (minutes)", ylabel=f"best validation {metric} so far",
              title="Each trial's curve (grey, dashed: stopped by the pruner)")
    if sum(trial.state == optuna.trial.TrialState.COMPLETE for trial in trials) <= 12:
        right.legend(fontsize="small")
    figure.tight_layout()
    paths = [os.path.join(study_dir, "tuning.png")]
    with atomic_path(paths[0]) as temporary:
        figure.savefig(temporary, format="png", dpi=100)
    plt.close(figure)
    completed = [trial for trial in trials if trial.state == optuna.trial.TrialState.COMPLETE]
    if len(completed) >= 2:
        importance = optuna.importance.get_param_importances(study)
        figure, axis = plt.subplots(figsize=(6, 0.4 * len(importance) + 1.2))
        names = list(importance)[::-1]
        axis.barh(names, [importance[name] for name in names])
        axis.set(xlabel="importance (fANOVA over the completed trials)",
                 title=f"Which setting moved validation {metric}")
        figure.tight_layout()
        paths.append(os.path.join(study_dir, "importance.png"))
        with atomic_path(paths[1]) as temporary:
            figure.savefig(temporary, format="png", dpi=100)
        plt.close(figure)
    return paths
