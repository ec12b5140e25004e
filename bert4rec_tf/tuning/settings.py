"""What a study tunes and how: its settings (study.json), checked when made, and the configuration
every trial starts from."""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from bert4rec_tf import cli
from bert4rec_tf.tasks import task_of_preset
from bert4rec_tf.tasks.resolve import experiment_config
from bert4rec_tf.tasks.space import Derived, SearchSpace, around, check_space, starting_point, without_fixed


@dataclasses.dataclass
class StudySettings:
    """What a study tunes and how (study.json).

    Attributes:
        dataset, model, loss: what is tuned (`loss` None: the model's default loss).
        recipe: the recipe each trial starts from (its settings, then the sampled ones).
        budget: seconds of trials (training and validation, one core each) the study spends.
        trial_budget: each trial's seconds of training and validation (the largest fidelity).
        schedule_budget: the time budget the trials' learning-rate schedule is fitted to, in seconds:
            the test run's (by default the recipe's), at least `trial_budget`.
        overrides: settings fixed for every trial ("key=value"), over the recipe, under the sampled ones.
        seed: every trial's data seed (None: the preset's); the sampler is seeded from it too.
        eval_every: steps between a trial's validations (its reports to the pruner), besides the rungs' ones.
        min_resource: the first rung of the pruner, in seconds (default: a ninth of the trial budget).
        stop_in_warmup: whether the pruner may stop a trial still in its learning-rate warm-up
            (`warmup_steps`). A new study's is True; False is the older rule, which spared such a
            trial (that of a study.json without the field).
        storage: where the trials are (`storage.storage_record`; "" before the folder is bound).
        data: the data the study tunes on (`data_record`; empty before the folder is bound).
    """

    dataset: str
    model: str
    loss: str | None
    recipe: str
    budget: float
    trial_budget: float
    overrides: list[str]
    seed: int | None
    eval_every: int
    min_resource: float | None = None
    space: dict[str, str] = dataclasses.field(default_factory=dict)
    schedule_budget: float | None = None
    stop_in_warmup: bool = False
    storage: str = ""
    data: dict = dataclasses.field(default_factory=dict)

    @property
    def schedule(self) -> float:
        """The seconds the trials' schedule is fitted to (a study made before `schedule_budget`: the
        trial budget, as its trials trained)."""
        return self.schedule_budget or self.trial_budget

    @property
    def name(self) -> str:
        return f"{self.dataset}-{self.model}-{self.loss or 'default'}"


def base_overrides(settings: StudySettings) -> list[str]:
    """Every trial's overrides before the sampled ones: the study's, the loss, the schedule's budget and
    the trial budget (where the trial stops, when the schedule is longer)."""
    schedule = settings.schedule
    return [*settings.overrides, *([f"loss={settings.loss}"] if settings.loss else []), f"time_budget={schedule}",
            f"stop_after={settings.trial_budget if schedule > settings.trial_budget else 0}"]


def new_settings(dataset: str, model: str, loss: str | None, recipe: str, budget: float, trial_budget: float,
                 overrides: Sequence[str] = (), seed: int | None = None, eval_every: int = 500,
                 min_resource: float | None = None, encoding: str | None = None,
                 schedule_budget: float | None = None) -> StudySettings:
    """The settings of a study, checked: the model, loss, recipe and overrides as `bert4rec-train`
    takes them, a search space with keys the family has, budgets that hold a trial.

    `schedule_budget` None is the test run's: the time budget of the recipe under the overrides, or
    the trial budget when that has none (a recipe of steps).

    Budgets are seconds, or durations such as "10m" (`cli.parse_duration`).

    Raises:
        ValueError: one line naming the argument (as `bert4rec-tune`'s flag) and what is wrong.
    """
    task = task_of_preset(model)
    if not task.search_space(model):
        raise ValueError(f"{model} has nothing to tune (its search space is empty)")
    budget, trial_budget = _seconds(budget, "--budget"), _seconds(trial_budget, "--trial_budget")
    if schedule_budget is not None:
        schedule_budget = _seconds(schedule_budget, "--schedule_budget")
    if isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 1:
        raise ValueError(f"--eval_every must be a whole number of steps, at least 1, got {eval_every!r}")
    if min_resource is not None:
        min_resource = _seconds(min_resource, "--min_resource")
        if min_resource >= trial_budget:
            raise ValueError(f"--min_resource ({cli.format_duration(min_resource)}) must be below --trial_budget "
                             f"({cli.format_duration(trial_budget)}): the pruner judges a trial first at "
                             "--min_resource, and no trial would reach it (default: a ninth of --trial_budget)")
    if budget < trial_budget:
        raise ValueError(f"--budget ({cli.format_duration(budget)}) must hold at least one --trial_budget "
                         f"({cli.format_duration(trial_budget)})")
    if schedule_budget is None:
        test_run = experiment_config(dataset, [*overrides, *([f"loss={loss}"] if loss else [])], seed, model,
                                         recipe, encoding)
        schedule_budget = test_run.train.time_budget if test_run.has("time_budget") else 0.0
    schedule_budget = float(schedule_budget or trial_budget)
    if schedule_budget < trial_budget:
        raise ValueError(f"--schedule_budget ({cli.format_duration(schedule_budget)}) must be at least the "
                         f"--trial_budget ({cli.format_duration(trial_budget)})")
    settings = StudySettings(dataset, model, loss, recipe, float(budget), float(trial_budget), list(overrides),
                             seed, eval_every, min_resource, {}, schedule_budget, stop_in_warmup=True)
    config = start_config(settings, encoding)
    check_space(task.search_space(model), config)
    space = searched(settings, config)
    if not any(not isinstance(param, Derived) for param in space.values()):
        raise ValueError(f"--config fixes every setting {model} searches ({', '.join(task.search_space(model))}): "
                         "nothing is left to tune")
    settings.space = {key: param.describe() for key, param in space.items()}
    return settings


def _seconds(value, flag: str) -> float:
    """`value` in seconds: a duration such as "10m", or a positive finite number.

    Raises:
        ValueError: naming `flag` and the value.
    """
    if isinstance(value, str):
        value = cli.parse_duration(value, flag)
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{flag} must be seconds or a duration such as 10m, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{flag} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def start_config(settings: StudySettings, encoding: str | None = None):
    """The configuration every trial starts from: the recipe's, with the study's fixed overrides."""
    return experiment_config(settings.dataset, base_overrides(settings), settings.seed, settings.model,
                                 settings.recipe, encoding)


def searched(settings: StudySettings, config) -> SearchSpace:
    """What the study searches: its family's space without the keys the study's --config fixes, each
    grid also holding `config`'s (the recipe's) value (`space.around`)."""
    space = task_of_preset(settings.model).search_space(settings.model)
    return around(without_fixed(space, config, settings.overrides), config)


def starting_point_of(settings: StudySettings, encoding: str | None = None):
    """The recipe's settings as the study's first trial takes them (in the family's space, each grid
    holding the recipe's own value too: `space.around`), and where that trial trains otherwise
    (`space.starting_point`)."""
    config = start_config(settings, encoding)
    return starting_point(searched(settings, config), config)
