"""Search spaces: the settings a family's tuning varies, declared beside its configuration.

A Task's `search_space` maps configuration keys (as `--config` takes them) to a `Choice`, a `Float`
or an `Int`, each turned into Optuna's `suggest_*` call by `suggest`; a `Derived` key is computed
from the others (BERT4Rec's feed-forward width 4d follows its hidden size d). Declaring a space
needs neither TensorFlow nor Optuna.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

# The BERT4Rec paper's grids for its baselines (section 4.3): d, the L2 penalty and dropout.
PAPER_HIDDEN_SIZES = (16, 32, 64, 128, 256)
PAPER_L2 = (1.0, 0.1, 0.01, 0.001, 0.0001)
PAPER_DROPOUT = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclasses.dataclass(frozen=True)
class Choice:
    """One of `values` (Optuna's categorical distribution)."""

    values: Sequence[Any]

    def suggest(self, trial, key: str):
        return trial.suggest_categorical(key, list(self.values))

    def describe(self) -> str:
        return "{" + ", ".join(map(str, self.values)) + "}"


@dataclasses.dataclass(frozen=True)
class Float:
    """A float in [low, high], on a log scale when `log`."""

    low: float
    high: float
    log: bool = False

    def suggest(self, trial, key: str):
        return trial.suggest_float(key, self.low, self.high, log=self.log)

    def describe(self) -> str:
        return f"[{self.low:g}, {self.high:g}]{' log' if self.log else ''}"


@dataclasses.dataclass(frozen=True)
class Int:
    """An integer in [low, high]."""

    low: int
    high: int
    log: bool = False

    def suggest(self, trial, key: str):
        return trial.suggest_int(key, self.low, self.high, log=self.log)

    def describe(self) -> str:
        return f"{self.low}..{self.high}{' log' if self.log else ''}"


@dataclasses.dataclass(frozen=True)
class Derived:
    """A setting computed from the sampled ones and the trial's configuration before them
    (`rule(sampled, config)`); not a dimension of the search."""

    rule: Callable[[Mapping[str, Any], Any], Any]
    text: str = "derived"

    def describe(self) -> str:
        return self.text


Param = Choice | Float | Int | Derived
SearchSpace = dict[str, Param]

# What every trained family tunes: the learning rate, around the recipes' 1e-3 and 3e-3.
LEARNING_RATE = Float(3e-4, 1e-2, log=True)


def suggest(space: SearchSpace, trial, config) -> dict[str, Any]:
    """The settings `trial` (an Optuna trial) samples from `space`, then the derived ones (from the
    sampled ones and `config`, the trial's configuration before them)."""
    sampled = {key: param.suggest(trial, key) for key, param in space.items() if not isinstance(param, Derived)}
    derived = {key: param.rule(sampled, config) for key, param in space.items() if isinstance(param, Derived)}
    return {**sampled, **derived}


def check_space(space: SearchSpace, config) -> None:
    """Refuses a space key that `config` (an `ExperimentConfig` of the family) does not have.

    Raises:
        ValueError: naming the key and the family.
    """
    for key in space:
        if not config.has(key):
            raise ValueError(f"the search space of {config.model.name} names {key!r}, which it does not have; "
                             f"its settings: {', '.join(config.keys())}")
