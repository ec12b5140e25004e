"""What a study's trials add up to: a trial's run folder is its original trial's (a retry trains on in
it), and the study's time is counted once per folder."""

from __future__ import annotations


def original_number(trial) -> int:
    """The number of the trial whose run folder `trial` (an Optuna `FrozenTrial`) trains in: its own,
    or, for a retry of a dead trial, the first trial of the series (Optuna's `failed_trial`)."""
    original = trial.system_attrs.get("failed_trial")
    return trial.number if original is None else int(original)


def spent_seconds(trials) -> float:
    """The study's seconds so far: per run folder (a trial and its retries), the most any of them
    reached (the user attribute `seconds`, set at every validation)."""
    per_folder: dict[int, float] = {}
    for trial in trials:
        key = original_number(trial)
        per_folder[key] = max(per_folder.get(key, 0.0), float(trial.user_attrs.get("seconds", 0.0)))
    return sum(per_folder.values())


def counted(trials) -> list:
    """The study's `trials` without the second retries of one dead trial, which were skipped without
    training (the user attribute `duplicate`)."""
    return [trial for trial in trials if not trial.user_attrs.get("duplicate")]
