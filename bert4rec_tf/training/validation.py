"""What a run validates with: its metrics on the validation targets and its validation loss.

The trainer validates every `eval_every` steps with these; `benchmark.py --real` times them to give
the share of a budget validation takes.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.constants import SELECTION_METRIC
from bert4rec_tf.data.pipeline import evaluation_histories
from bert4rec_tf.evaluation.evaluator import evaluate, evaluation_users, validation_users
from bert4rec_tf.evaluation.validation_loss import validation_loss_function
from bert4rec_tf.tasks import Task

ATTENTION_USERS = 512
# The protocols of every validation: the selection metric's and full ranking.
VALIDATION_PROTOCOLS = (SELECTION_METRIC[0], "full")


@dataclasses.dataclass
class Validation:
    """A run's validation.

    Attributes:
        metrics: model -> its metrics on the validation targets (of `users`).
        loss: () -> the trained model's validation loss, or None for a model without loss features.
        histories: the first `ATTENTION_USERS` validation histories (the attention figures' inputs).
        users: the users validated (`train.valid_users` of those tested), None for every user.
    """

    metrics: Callable
    loss: Callable | None
    histories: np.ndarray
    users: np.ndarray | None


def evaluated_users(config: ExperimentConfig, sequences) -> np.ndarray | None:
    """The users a run tests (`train.eval_users`), None for every user."""
    return evaluation_users(sequences.num_users, config.train.eval_users)


def make_validation(config: ExperimentConfig, task: Task, model, sequences, candidates) -> Validation | None:
    """The validation of a run of `config` training `model`, or None without a validation split."""
    if config.data.split != "valid":
        return None
    users = validation_users(sequences.num_users, config.train.eval_users, config.train.valid_users)
    protocols = VALIDATION_PROTOCOLS if task.full_ranking_validation else VALIDATION_PROTOCOLS[:1]
    length = config.data.history_length()
    inputs = {}  # every validation scores the same batches: their inputs are made once

    def metrics(m):
        return evaluate(m, sequences, "valid", length, candidates, protocols=protocols, users=users, inputs=inputs)

    histories, targets = evaluation_histories(sequences, "valid", length)
    loss = validation_loss_function(model, task.loss_features, histories, targets, candidates["uniform_valid"])
    return Validation(metrics, loss, histories[:ATTENTION_USERS], users)
