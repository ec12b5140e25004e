"""The registry of Tasks, and everything looked up through it: presets, recipes, settings checks.

A Task is registered once (`register_task`, in `bert4rec_tf/tasks/__init__.py`); `--model` names
one of its presets, and a configuration's `model.name` its Task.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bert4rec_tf.config import RECIPES, ExperimentConfig, ModelConfig, dataset_preset
from bert4rec_tf.tasks.base import FAMILY_SETTINGS, Task

TASKS: dict[str, Task] = {}
# The reference every trained run is compared with (its validation must beat this model's).
REFERENCE_TASK = "pop"


def register_task(task: Task) -> Task:
    """Adds `task` to the registry, by its `name`, with its presets.

    Raises:
        ValueError: when the name or one of its preset names is taken, or a preset would build
            another family's configuration.
    """
    if not task.name or task.name in TASKS:
        raise ValueError(f"a task needs a new name, got {task.name!r} (registered: {', '.join(TASKS)})")
    for name, scopes in task.presets.items():
        if name in preset_names():
            raise ValueError(f"preset {name!r} of task {task.name!r} is registered already")
        model_name = scopes.get("*", {}).get("model.name", ModelConfig.name)
        if model_name != task.name:
            raise ValueError(f"preset {name!r} of task {task.name!r} sets model.name {model_name!r}")
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    """The Task whose models are `model.name` `name`.

    Raises:
        ValueError: for an unregistered name, listing the registered ones.
    """
    if name not in TASKS:
        raise ValueError(f"--config model.name must be one of {', '.join(TASKS)}, got {name!r}")
    return TASKS[name]


def preset_names() -> tuple[str, ...]:
    """Every `--model` name, in registration order."""
    return tuple(name for task in TASKS.values() for name in task.presets)


def task_of_preset(model: str) -> Task:
    """The Task of the `--model` preset `model`.

    Raises:
        ValueError: for an unknown preset, listing the known ones.
    """
    for task in TASKS.values():
        if model in task.presets:
            return task
    raise ValueError(f"unknown model {model!r}; known: {', '.join(preset_names())}")


def preset(dataset: str, model: str = "bert4rec") -> ExperimentConfig:
    """The original settings of the `--model` preset `model` on `dataset`: the data set's preset
    (`bert4rec_tf.config.PRESETS`), then the model's overrides for every data set ("*"), then for
    this one.

    Raises:
        ValueError: for an unknown data set or model, listing the known names.
    """
    config = dataset_preset(dataset)
    scopes = task_of_preset(model).presets[model]
    for scope in ("*", dataset):
        for key, value in scopes.get(scope, {}).items():
            config.override(key, value)
    return config


def recipe_overrides(name: str, dataset: str, model: str = "bert4rec") -> dict[str, Any]:
    """The settings recipe `name` gives the preset `model` on `dataset`: its "*" entries, then the data
    set's own, then the model's for that data set (`cpu-*` recipes only, its Task's `cpu_recipes`).

    Raises:
        ValueError: for an unknown recipe, listing the known ones.
    """
    if name not in RECIPES:
        raise ValueError(f"unknown --recipe {name!r}; known: {', '.join(RECIPES)}")
    task = task_of_preset(model)
    for_model = task.cpu_recipes.get(model, {}).get(dataset, {}) if name.startswith("cpu-") else {}
    return {**RECIPES[name].get("*", {}), **RECIPES[name].get(dataset, {}), **for_model}


def validate(config: ExperimentConfig) -> None:
    """Checks `config`: the generic checks (`ExperimentConfig.validate`), then its Task's.

    Raises:
        ValueError: one line naming the flag (or `--config section.key`) and the value.
    """
    config.validate()
    get_task(config.model.name).validate(config)


def refuse_unread_settings(config: ExperimentConfig, given: dict[str, str], model: str | None = None) -> None:
    """Refuses a setting given on the command line that the run's family does not read: it would be
    recorded in the run's configuration as if it had shaped the model (`--config l2=0.01` on BERT4Rec).

    Args:
        config: the run's configuration, every override applied.
        given: `section.field` -> the override as the command line gave it (`key=value`).
        model: the `--model` the command named (a preset such as "bert4rec_1mask"), for the message;
            None: the family's name.

    Raises:
        ValueError: one line naming the key, the family and the families that do read it.
    """
    task = get_task(config.model.name)
    for field, key in given.items():
        if field in FAMILY_SETTINGS and field not in task.reads(config):
            readers = []
            for other in TASKS.values():
                losses = [loss for loss in other.losses if field in other.reads(_with_loss(config, loss))]
                if losses:
                    readers.append(other.name if len(losses) == len(other.losses)
                                   else f"{other.name} with --loss {' or '.join(losses)}")
            named = task.name if model in (None, task.name) else f"{model} (a {task.name} model)"
            raise ValueError(f"the setting {key} has no effect on {named} with --loss {config.model.loss}: "
                             f"{field} is read only by {', '.join(readers) or 'no family'}")


def _with_loss(config: ExperimentConfig, loss: str) -> ExperimentConfig:
    """`config` with `model.loss` `loss`."""
    return dataclasses.replace(config, model=dataclasses.replace(config.model, loss=loss))


def reference_model(config: ModelConfig):
    """The reference model (POP) with the vocabulary of `config`, built; its statistics are not yet fitted."""
    return get_task(REFERENCE_TASK).build_model(dataclasses.replace(config, name=REFERENCE_TASK))
