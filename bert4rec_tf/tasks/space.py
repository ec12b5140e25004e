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

    def contains(self, value) -> bool:
        return value in self.values

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

    def contains(self, value) -> bool:
        return isinstance(value, (int, float)) and self.low <= value <= self.high

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

    def contains(self, value) -> bool:
        return isinstance(value, int) and self.low <= value <= self.high

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


class _Settings(dict):
    """The sampled settings, falling back to `config`'s value for a key not sampled (one the user
    fixed): what a `Derived` rule reads."""

    def __init__(self, sampled: Mapping[str, Any], config):
        super().__init__(sampled)
        self.config = config

    def __missing__(self, key: str):
        return setting(self.config, key)


def suggest(space: SearchSpace, trial, config) -> dict[str, Any]:
    """The settings `trial` (an Optuna trial) samples from `space`, then the derived ones (from the
    sampled ones and `config`, the trial's configuration before them, whose value a derived rule reads
    for a key the space does not sample)."""
    sampled = {key: param.suggest(trial, key) for key, param in space.items() if not isinstance(param, Derived)}
    derived = {key: param.rule(_Settings(sampled, config), config) for key, param in space.items()
               if isinstance(param, Derived)}
    return {**sampled, **derived}


def without_fixed(space: SearchSpace, config, overrides: Sequence[str]) -> SearchSpace:
    """`space` without the keys that `overrides` (the study's own `--config key=value` items) set: a
    setting the user fixes trains as given in every trial (a derived key follows it)."""
    fixed = {config.resolve(item.split("=", 1)[0].strip()) for item in overrides}
    return {key: param for key, param in space.items() if config.resolve(key) not in fixed}


def setting(config, key: str):
    """The value of `key` (`section.field` or a field name) in `config`, an `ExperimentConfig`."""
    section, field = config.resolve(key)
    return getattr(getattr(config, section), field)


def around(space: SearchSpace, config) -> SearchSpace:
    """`space` with each `Choice` also holding `config`'s own value of its key where the grid lacks it
    (SASRec's d 50 beside the paper's 16 to 256), so that the configuration a study starts from, the
    recipe's, is a point of the search."""
    widened = dict(space)
    for key, param in space.items():
        if isinstance(param, Choice) and config.has(key) and not param.contains(setting(config, key)):
            values = [*param.values, setting(config, key)]
            widened[key] = Choice(tuple(sorted(values)) if all(isinstance(v, (int, float)) for v in values)
                                  else tuple(values))
    return widened


def starting_point(space: SearchSpace, config) -> tuple[dict[str, Any], dict[str, tuple[Any, Any]]]:
    """The sampled settings of `config` (the recipe's), where `space` holds them; and what a trial of
    them trains differently from `config`: {key: (config's value, the trial's)} for a derived key
    whose rule gives another value, or a range that excludes the config's (the key is then sampled,
    shown as None)."""
    params = {key: setting(config, key) for key, param in space.items()
              if not isinstance(param, Derived) and param.contains(setting(config, key))}
    differs = {key: (setting(config, key), None) for key, param in space.items()
               if not isinstance(param, Derived) and key not in params}
    if not differs:
        for key, param in space.items():
            if isinstance(param, Derived):
                value = param.rule(_Settings(params, config), config)
                if value != setting(config, key):
                    differs[key] = (setting(config, key), value)
    return params, differs


def check_space(space: SearchSpace, config) -> None:
    """Refuses a space key that `config` (an `ExperimentConfig` of the family) does not have.

    Raises:
        ValueError: naming the key and the family.
    """
    for key in space:
        if not config.has(key):
            raise ValueError(f"the search space of {config.model.name} names {key!r}, which it does not have; "
                             f"its settings: {', '.join(config.keys())}")
