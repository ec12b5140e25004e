"""The registry of Tasks, and everything looked up through it: presets, recipes, settings checks.

A Task is registered once (`register_task`, in `bert4rec_tf/tasks/__init__.py`); `--model` names
one of its presets, and a configuration's `model.name` its Task.
"""

from __future__ import annotations

from typing import Any

from bert4rec_tf.config import (RECIPES, ExperimentConfig, Family, ModelConfig, dataset_settings, family,
                                register_family)
from bert4rec_tf.config.experiment import PLUGIN_GROUP
from bert4rec_tf.console import quiet_native_import
from bert4rec_tf.tasks.base import Task
from bert4rec_tf.tasks.space import check_space

TASKS: dict[str, Task] = {}
# The reference every trained run is compared with (its validation must beat this model's).
REFERENCE_TASK = "pop"


def register_task(task: Task) -> Task:
    """Adds `task` to the registry, by its `name`, with its presets and its sections.

    Raises:
        ValueError: when the name or one of its preset names is taken, or a preset, recipe or search
            space of the family names a key its sections do not have.
    """
    if not task.name or task.name in TASKS:
        raise ValueError(f"a task needs a new name, got {task.name!r} (registered: {', '.join(TASKS)})")
    register_family(task.name, Family(task.data_config, task.model_config, task.train_config))
    schema = ExperimentConfig.for_family(task.name)
    for name in task.presets:
        if name in preset_names():
            raise ValueError(f"preset {name!r} of task {task.name!r} is registered already")
    for what, table in (("preset", task.presets), ("cpu recipe of preset", task.cpu_recipes)):
        for name, scopes in table.items():
            unknown = sorted({key for settings in scopes.values() for key in settings if not schema.has(key)})
            if unknown:
                raise ValueError(f"{what} {name!r} of task {task.name!r} sets {', '.join(unknown)}, which "
                                 f"{task.name} does not have; its settings: {', '.join(schema.keys())}")
    for name in task.presets:
        check_space(task.search_space(name), schema)
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    """The Task whose models are `model.name` `name`.

    Raises:
        ValueError: for an unregistered name, listing the registered ones.
    """
    family(name)  # registered with its Task: raises for any other name
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
    """The original settings of the `--model` preset `model` on `dataset`: the family's sections at
    their defaults, the data set's preset (`bert4rec_tf.config.PRESETS`, the settings the family has),
    then the model's overrides for every data set ("*"), then for this one.

    Raises:
        ValueError: for an unknown data set or model, listing the known names.
    """
    settings = dataset_settings(dataset)
    task = task_of_preset(model)
    config = ExperimentConfig.for_family(task.name)
    config.override("data.dataset", dataset)
    config.apply(settings, only_known=True)
    scopes = task.presets[model]
    for scope in ("*", dataset):
        config.apply(scopes.get(scope, {}))
    return config


def recipe_overrides(name: str, dataset: str, model: str = "bert4rec") -> dict[str, Any]:
    """The settings recipe `name` gives the preset `model` on `dataset`: of its "*" entries and then
    the data set's own those the family has, then the model's for that data set (`cpu-*` recipes
    only, its Task's `cpu_recipes`).

    Raises:
        ValueError: for an unknown recipe, listing the known ones.
    """
    if name not in RECIPES:
        raise ValueError(f"unknown --recipe {name!r}; known: {', '.join(RECIPES)}")
    task = task_of_preset(model)
    schema = ExperimentConfig.for_family(task.name)
    shared = {key: value for scope in ("*", dataset) for key, value in RECIPES[name].get(scope, {}).items()
              if schema.has(key)}
    for_model = task.cpu_recipes.get(model, {}).get(dataset, {}) if name.startswith("cpu-") else {}
    return {**shared, **for_model}


def validate(config: ExperimentConfig) -> None:
    """Checks `config`: each section's checks (`ExperimentConfig.validate`), then its Task's.

    Raises:
        ValueError: one line naming the flag (or `--config section.key`) and the value.
    """
    config.validate()
    task = get_task(config.model.name)
    for field in config.data.attribute_files():
        key = field.split("_")[0]
        if key not in task.reads_features:
            reading = ", ".join(sorted(name for name, other in TASKS.items()
                                       if key in other.reads_features)) or "none yet"
            raise ValueError(f"--config {key}_features: {task.name} reads no {key} attributes (families that do: "
                             f"{reading})")
    at_output = config.model.attributes_at_output
    if at_output and "item_features" not in config.data.attribute_files():
        raise ValueError("--config attributes_at_output=true scores items from their attributes: give them with "
                         "--config item_features=FILE")
    if config.data.feature_items and not at_output:
        raise ValueError("--config feature_items=true adds items without interactions, whose own embedding rows "
                         "never train: give --config attributes_at_output=true too, so that they are scored from "
                         "their attributes")
    task.validate(config)


def preset_label(model: str | None, family: str) -> str:
    """How a message names the run's model: its family, or "bert4rec_1mask (a bert4rec model)" for a
    `--model` preset of another name (None: the family)."""
    return family if model in (None, family) else f"{model} (a {family} model)"


def refuse_inactive_settings(config: ExperimentConfig, given: dict[str, str], model: str | None = None) -> None:
    """Refuses a setting given on the command line that the family reads only under other losses
    (`Section.loss_fields`): it would be recorded as if it had shaped the model (`--config
    sampled_negatives=512` without `--loss sampled_softmax`).

    Args:
        config: the run's configuration, every override applied.
        given: `section.field` -> the override as the command line gave it (`key=value`).
        model: the `--model` the command named (a preset such as "bert4rec_1mask"), for the message;
            None: the family's name.

    Raises:
        ValueError: one line naming the key, the family and the losses that read it.
    """
    task = get_task(config.model.name)
    for field, key in given.items():
        section, name = field.split(".", 1)
        losses = type(getattr(config, section)).losses_reading(name)
        if losses is not None and config.model.loss not in losses:
            named = preset_label(model, task.name)
            raise ValueError(f"the setting {key} has no effect on {named} with --loss {config.model.loss}: "
                             f"{named} reads {field} only with --loss {' or '.join(losses)}")


def reference_model(config: ModelConfig):
    """The reference model (POP) with the vocabulary of `config`, built; its statistics are not yet fitted."""
    task = get_task(REFERENCE_TASK)
    return task.build_model(task.model_config(name=REFERENCE_TASK, vocab_size=config.vocab_size,
                                              num_users=config.num_users))


def load_plugins() -> list[str]:
    """Registers the Task of every entry point in `PLUGIN_GROUP` (a `Task` subclass or instance, e.g.
    `bigram = my_package.bigram:BigramTask` under `[project.entry-points."bert4rec_tf.tasks"]`), once;
    returns the names registered. A plugin that fails to load or register is left out with a warning
    naming it and the cause: the package's own families work whatever an installed plugin does.
    """
    import importlib.metadata
    import warnings

    registered = []
    for point in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        try:
            with quiet_native_import():  # its module may import TensorFlow before the flags are parsed
                task = point.load()
            task = task() if isinstance(task, type) else task
            if not isinstance(task, Task):
                raise TypeError(f"{point.value} is not a bert4rec_tf.tasks.Task")
            if TASKS.get(task.name) is not None and type(TASKS[task.name]) is type(task):
                continue  # loaded already
            registered.append(register_task(task).name)
        except Exception as error:  # noqa: BLE001 (any fault of a plugin's code)
            warnings.warn(f"the model family plugin {point.name!r} ({point.value}) was not loaded: {error}",
                          stacklevel=2)
    return registered
