"""One experiment from its names: a data set, a model preset, a recipe and overrides resolved into the
`ExperimentConfig` a run trains, the same for the command line, the Python API, the tuner and the
experiments."""

from __future__ import annotations

import codecs
import copy
import json
from typing import Any, Mapping, Sequence

from bert4rec_tf.config import ExperimentConfig, UnknownSetting
from bert4rec_tf.tasks.registry import preset, preset_label, recipe_overrides, refuse_inactive_settings, validate


def experiment_config(dataset: str, overrides: Sequence[str], seed: int | None = None,
                      model: str = "bert4rec", recipe: str | None = None,
                      encoding: str | None = None) -> ExperimentConfig:
    """The configuration of `model` on `dataset` under `recipe`, with `overrides`.

    The settings come in layers, each over the ones before it:

    1. the family's sections at their defaults (`ExperimentConfig.for_family`);
    2. the data set's preset (`bert4rec_tf.config.PRESETS`), the settings the family has;
    3. the model preset's settings for every data set ("*"), then for this one (its Task's `presets`);
    4. the recipe's settings for every data set ("*"), then for this one (`bert4rec_tf.config.RECIPES`),
       those the family has, then, for a `cpu-*` recipe, its Task's `cpu_recipes` for the model;
    5. the `key=value` overrides, in order (a command's `--config` items, then its flags);
    6. `seed` (`data.seed`) and `encoding` (`data.encoding`, as Python names it: latin-1 and latin1
       both give iso8859-1).

    `train.recipe` records the recipe (None: "paper", the preset as it is).

    Raises:
        ValueError: for an unknown data set or model, a malformed override, an unknown key or a value
            out of range, an override of `train.recipe` (the recipe is chosen with `--recipe`), a key
            the model's family does not have (its sections' fields, listed in the message), a seed
            outside 0..2^32-1, or a setting it reads only under another loss
            (`bert4rec_tf.tasks.refuse_inactive_settings`).
    """
    config = preset(dataset, model)
    for key, value in recipe_overrides(recipe or "paper", dataset, model).items():
        config.override(key, value)
    config.train.recipe = recipe or "paper"
    given = {}
    for override in overrides:
        if "=" not in override:
            raise ValueError(f"override {override!r} is not key=value")
        key, value = override.split("=", 1)
        key = key.strip()
        if key in ("recipe", "train.recipe"):
            raise ValueError(f"--config {key} records the recipe of a run: choose it with --recipe")
        try:
            field = config.override(key, value)
        except UnknownSetting:
            raise UnknownSetting(config, key, preset_label(model, config.model.name)) from None
        given[field] = f"{key}={value.strip()}"
    if seed is not None:
        config.override("data.seed", seed)
    if encoding is not None:
        config.override("data.encoding", encoding)
    validate(config)
    refuse_inactive_settings(config, given, model)
    config.data.encoding = codecs.lookup(config.data.encoding).name
    return config


def with_settings(config: ExperimentConfig, settings: Mapping[str, Any], model: str) -> ExperimentConfig:
    """A copy of the resolved `config` of preset `model` with `settings` ({key: value}, typed: a tuning
    trial's sampled settings) set over it, and checked as `experiment_config` checks its overrides.

    Raises:
        ValueError: as `experiment_config`, for a key the family does not have or a value it refuses.
    """
    chosen = copy.deepcopy(config)
    given = {}
    for key, value in settings.items():
        try:
            field = chosen.override(key, value)
        except UnknownSetting:
            raise UnknownSetting(chosen, key, preset_label(model, chosen.model.name)) from None
        given[field] = f"{key}={value}"
    validate(chosen)
    refuse_inactive_settings(chosen, given, model)
    return chosen


def read_config_file(path: str) -> tuple[str, ExperimentConfig]:
    """The model preset and the configuration a configuration file holds: a tuning study's choice
    (`best_config.json`: {"preset", "config"}) or a run's `config.json` (its preset taken as its
    family's name).

    Raises:
        ValueError: one line naming the file, when it is missing, not JSON, or not a configuration.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
        values = found["config"] if "config" in found else found
        config = ExperimentConfig.from_dict(values)
        validate(config)
    except FileNotFoundError:
        raise ValueError(f"--config_file {path} does not exist") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"--config_file {path} is not a configuration (a study's best_config.json or a run's "
                         f"config.json): {' '.join(str(error).split())}") from None
    return found.get("preset") or config.model.name, config


def config_from_file(path: str, overrides: Sequence[str] = (), seed: int | None = None,
                     encoding: str | None = None) -> tuple[str, ExperimentConfig]:
    """The model preset and configuration of a configuration file (`read_config_file`) with the
    `key=value` `overrides`, the seed and the encoding over it, checked as `experiment_config` checks.

    Raises:
        ValueError: for a file that is not a configuration, or an override `experiment_config` refuses.
    """
    model, config = read_config_file(path)
    settings: dict[str, Any] = {}
    for override in overrides:
        if "=" not in override:
            raise ValueError(f"override {override!r} is not key=value")
        key, value = override.split("=", 1)
        settings[key.strip()] = value
    for key, value in (("data.seed", seed), ("data.encoding", encoding)):
        if value is not None:
            settings[key] = value
    config = with_settings(config, settings, model)
    config.data.encoding = codecs.lookup(config.data.encoding).name
    return model, config
