"""Caser (Tang & Wang, WSDM 2018): a baseline of the BERT4Rec paper's Table 2.

Preset "caser": the Caser paper's and its code's settings (d 50, L 5, T 3, n_v 4, n_h 16, dropout
0.5, Adam lr 1e-3, batch 512, 3 negatives per target, L2 lambda 1e-6 coupled into Adam as the code's
`weight_decay` (so no decoupled weight decay), 50 epochs on ML-1m and Beauty), with its binary
cross-entropy ("bce"). Training windows slide one item at a time over each user's training items
(`bert4rec_tf.data.windows`); the model reads the user's latest L items and user id
(`bert4rec_tf.models.caser`). No masked instances, so no static TFRecords are written for it.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from bert4rec_tf.config import (PRESETS, EmbeddingPart, ExperimentConfig, L2Part, NegativesPart, TrainConfig,
                                TrainedModelConfig, WindowData)
from bert4rec_tf.config.sections import check_at_least_one, check_dropout, require
from bert4rec_tf.tasks.base import Task, history_features
from bert4rec_tf.tasks.space import LEARNING_RATE, PAPER_DROPOUT, PAPER_HIDDEN_SIZES, Choice, Int


@dataclasses.dataclass
class CaserConfig(EmbeddingPart, NegativesPart, L2Part, TrainedModelConfig):
    """Caser's model section.

    Attributes:
        max_len: L, the latest items a window holds (kept equal to `data.max_len`).
        hidden_dropout: dropout on the convolutions' output.
        next_targets: T, the next items each training window predicts.
        conv_filters: the horizontal filters per height (n_h).
        vertical_filters: the vertical filters (n_v).
        learned_padding: embed the padding item 0 with a learned row, as the authors' code does
            (false: the zero vector, the zero-padded history of the paper).
        loss: "bce", the paper's binary cross-entropy against `train_negatives` negatives a target.
    """

    name: str = "caser"
    max_len: int = 200
    hidden_dropout: float = 0.2
    next_targets: int = 1
    conv_filters: int = 16
    vertical_filters: int = 4
    learned_padding: bool = False
    loss: str = "bce"
    losses: ClassVar[tuple[str, ...]] = ("bce",)

    def check(self) -> None:
        super().check()
        check_at_least_one(self, "next_targets", "conv_filters")
        require(self.vertical_filters >= 0, "vertical_filters", self.vertical_filters, "at least 0")
        check_dropout(self, "hidden_dropout")

# What the `cpu-*` recipes set on every data set (they set max_len 100 on ML-1m, batch 128 and dropout
# 0.1-0.2, for the Transformers): Caser's own L 5, batch 512 and dropout 0.5, and the shared
# short-budget rate 3e-3, which learned faster than its paper's 1e-3 on Beauty's validation
# (lab_notebook/experiments.md has the trials).
_CPU_START = {"max_len": 5, "batch_size": 512, "hidden_dropout": 0.5, "learning_rate": 3e-3}


class CaserTask(Task):
    """Caser's training: windows of L items and the next T, with sampled negatives per target."""

    name = "caser"
    presets = {"caser": {
        "*": {"max_len": 5, "hidden_size": 50, "next_targets": 3, "vertical_filters": 4,
              "conv_filters": 16, "hidden_dropout": 0.5, "learning_rate": 1e-3, "batch_size": 512,
              "train_negatives": 3, "l2": 1e-6, "weight_decay": 0.0, "loss": "bce"},
        # The authors' code trains 50 epochs (n_iter): of 945,251 windows on ML-1m and 109,832 on Beauty.
        "ml-1m": {"train_steps": 92_300},
        "beauty": {"train_steps": 10_700},
    }}
    cpu_recipes = {"caser": {dataset: dict(_CPU_START) for dataset in PRESETS}}
    data_config = WindowData
    model_config = CaserConfig
    train_config = TrainConfig
    # Caser's own L (1 to 9 in its paper's Figure 4) and T (1 to 3 there), the BERT4Rec paper's d and
    # dropout grids, its L2 around the preset's 1e-6, the negatives per target and the rate.
    space = {"max_len": Int(2, 9), "next_targets": Int(1, 5), "hidden_size": Choice(PAPER_HIDDEN_SIZES),
             "hidden_dropout": Choice(PAPER_DROPOUT), "l2": Choice((1e-6, 1e-5, 1e-4, 1e-3)),
             "train_negatives": Choice((1, 3, 5)), "learning_rate": LEARNING_RATE}

    def model_class(self):
        from bert4rec_tf.models.caser import Caser

        return Caser

    def training_stream(self, config: ExperimentConfig, prepared, train: list[np.ndarray]):
        from bert4rec_tf.data.negatives import negative_sampler
        from bert4rec_tf.data.windows import sequence_window_dataset, sequence_windows

        model = config.model
        windows = sequence_windows(train, config.data.max_len, model.next_targets)
        sampler = negative_sampler(train, prepared.num_items, model.negative_alpha)
        return lambda start: sequence_window_dataset(windows, config.data.seed, sampler, model.train_negatives,
                                                     batch_size=config.train.batch_size, start=start)

    def loss_features(self, model, histories, targets, negatives, users=None):
        """One window per user: its latest L items, the validation target as the only target (T 1)
        and the user's first `train_negatives` negatives against it."""
        features = history_features(model, histories)
        count = min(model.model_config.train_negatives, negatives.shape[1])
        users = np.zeros(len(targets), np.int32) if users is None else np.asarray(users, np.int32)
        features.update(user_ids=users, target_ids=np.asarray(targets, np.int32)[:, None],
                        negative_ids=np.asarray(negatives[:, None, :count], np.int32))
        return features
