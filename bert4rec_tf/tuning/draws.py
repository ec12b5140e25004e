"""New settings for a study's trials: each one that no trial of the study has had.

Every trial a worker starts is either the retry of a trial whose process died (which trains on in
that trial's run folder) or a new draw queued by `draw_new`: the study's sampler (TPE) fitted on the
study's trials as they stand, seeded by the study's seed, its number of trials and this machine's
name, and asked again while its draw equals the settings of a trial the study has (complete, pruned,
failed, running or queued). So a process started again after a kill, or a second process on the same
study, never draws from where another stood, and no setting is trained twice by accident.
"""

from __future__ import annotations

import hashlib
import socket
from typing import Any

from bert4rec_tf.tasks.space import SearchSpace, suggest

# The sampler's random draws before it models the trials (Optuna's TPE `n_startup_trials`).
STARTUP_TRIALS = 5
# Draws asked of the sampler before a study's search space counts as exhausted.
MAX_DRAWS = 100


class SpaceExhausted(ValueError):
    """Every setting the sampler drew is one the study has tried: a small grid, all of it tried."""


def taken_settings(trials) -> list[dict[str, Any]]:
    """The settings of the study's `trials` (Optuna `FrozenTrial`s; a queued one's are its fixed ones)."""
    return [trial.system_attrs.get("fixed_params", trial.params) for trial in trials]


def draw_seed(seed: int | None, trials: int) -> int:
    """The seed of a draw: a function of the study's `seed`, its number of `trials` and this machine's
    name (two machines sharing a database draw apart; the processes of one machine draw one at a time,
    each at another number of trials)."""
    text = f"{seed or 0}:{trials}:{socket.gethostname()}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


def draw_new(study, space: SearchSpace, config, seed: int | None) -> dict[str, Any]:
    """A setting of `space` that no trial of `study` has (the module doc).

    Args:
        study: the Optuna study.
        space: what is searched (without the keys the study fixes).
        config: the configuration the trials start from (a derived setting's rule reads it).
        seed: the study's seed.

    Raises:
        SpaceExhausted: when `MAX_DRAWS` draws in a row were settings the study has tried.
    """
    import optuna

    trials = study.get_trials(deepcopy=False)
    sampler = optuna.samplers.TPESampler(seed=draw_seed(seed, len(trials)), n_startup_trials=STARTUP_TRIALS,
                                         constant_liar=True)
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line for the study made in memory to draw
    try:
        mirror = optuna.create_study(direction="maximize", sampler=sampler)
    finally:
        optuna.logging.set_verbosity(verbosity)
    mirror.add_trials([trial for trial in trials if trial.state != optuna.trial.TrialState.WAITING])
    tried = taken_settings(trials)
    for _ in range(MAX_DRAWS):
        trial = mirror.ask()
        suggest(space, trial, config)
        if trial.params not in tried:
            return dict(trial.params)
        mirror.tell(trial, state=optuna.trial.TrialState.FAIL)
    raise SpaceExhausted(f"the search space is exhausted: {MAX_DRAWS} draws in a row were settings the study "
                         f"has tried ({len(trials)} trials)")
