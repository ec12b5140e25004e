"""The one path from a configuration to a model ready to train: used by the trainer, the benchmark
and the tests alike."""

from __future__ import annotations

import dataclasses
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.data.pipeline import length_grouped
from bert4rec_tf.tasks import Task, get_task
from bert4rec_tf.training.optimization import WarmupLinearDecay, make_optimizer


@dataclasses.dataclass
class Trainee:
    """A model built, with its statistics fitted and (when it trains) compiled, and its data.

    Attributes:
        task: the model's family.
        model: the `SequentialRecommender`.
        schedule: the learning-rate schedule (None: nothing to train); a time budget moves its end.
        stream: a function of the first instance number giving the batched training stream (None:
            nothing to train).
    """

    task: Task
    model: keras.Model
    schedule: WarmupLinearDecay | None
    stream: Callable[[int], tf.data.Dataset] | None


def build_trainee(config: ExperimentConfig, prepared, train: list[np.ndarray]) -> Trainee:
    """The model of `config` (its Task's), seeded from the data seed, ready for `model.fit`.

    Call it inside a `tf.distribute` strategy's scope to train under that strategy.

    Args:
        config: the run's configuration, `model.vocab_size` set from the data.
        prepared: the `PreparedData`.
        train: per user, the training items.
    """
    task = get_task(config.model.name)
    keras.utils.set_random_seed(config.data.seed)
    model = task.build_model(config.model)
    if task.reads_features:
        model.set_attributes({key: prepared.features(key) for key in task.reads_features})
    model.fit_statistics(train)
    if not task.trains:
        return Trainee(task, model, None, None)
    schedule = WarmupLinearDecay(config.train.learning_rate, config.train.warmup_steps, config.train.train_steps,
                                 config.train.decay)
    model.compile(optimizer=make_optimizer(config.train, model.trainable_variables, schedule), jit_compile=False)
    return Trainee(task, model, schedule, training_stream(task, config, prepared, train))


def training_stream(task: Task, config: ExperimentConfig, prepared, train: list[np.ndarray]):
    """A function of the first instance number giving the Task's endless, batched training stream.

    Every stream is a pure function of the instance number, so a resumed run continues it exactly.
    With `train.length_groups` the batches are padding-aware (`length_grouped`, on the Task's
    sequence features; a Task without sequence features is not grouped).
    """
    full_width = task.training_stream(config, prepared, train)
    groups = config.train.length_groups
    if not groups or not task.sequence_features:
        return full_width
    return lambda start: length_grouped(full_width, start, config.train.batch_size, groups, task.sequence_features,
                                        task.padded_left, config.data.history_length(), config.data.seed)
