"""The pruner's rungs: the seconds at which a trial is judged (successive halving over time)."""

from __future__ import annotations

from bert4rec_tf.tuning.settings import StudySettings

# The successive-halving pruner's reduction factor: a third of the trials at a rung go on to the next.
REDUCTION = 3


def first_rung(settings: StudySettings) -> int:
    """The pruner's first rung in seconds (at least 1): `min_resource`, by default a ninth of the
    trial budget."""
    return max(1, int(settings.min_resource or settings.trial_budget / 9))


def rung_seconds(settings: StudySettings, within_trial: bool = True) -> list[int]:
    """The seconds of the pruner's rungs (the first rung, then `REDUCTION` times the last): those a
    trial validates at, without one within the last 1% of the trial budget (the trial's end
    validates there anyway); without `within_trial`, every rung up to the trial budget.

    Example: a trial budget of 600 s gives [66, 198] (and 594 s, the trial's end, without `within_trial`).
    """
    rungs, rung = [], first_rung(settings)
    while rung < (0.99 if within_trial else 1.0) * settings.trial_budget:
        rungs.append(rung)
        rung *= REDUCTION
    return rungs
