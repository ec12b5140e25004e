"""Caser (Tang & Wang, WSDM 2018): a baseline of the BERT4Rec paper's Table 2.

Preset "caser": the Caser paper's and its code's settings (d 50, L 5, T 3, n_v 4, n_h 16, dropout
0.5, Adam lr 1e-3, batch 512, 3 negatives per target, L2 lambda 1e-6 coupled into Adam as the code's
`weight_decay` (so no decoupled weight decay), 50 epochs on ML-1m and Beauty), with its binary
cross-entropy ("bce"). Training windows slide one item at a time over each user's training items
(`bert4rec_tf.data.windows`); the model reads the user's latest L items and user id
(`bert4rec_tf.models.caser`). No masked instances, so no static TFRecords are written for it.
"""

from __future__ import annotations

import numpy as np

from bert4rec_tf.config import PRESETS, ExperimentConfig, ModelConfig
from bert4rec_tf.tasks.base import Task, history_features

# What the `cpu-*` recipes set on every data set (they set max_len 100 on ML-1m, batch 128 and dropout
# 0.1-0.2, for the Transformers): Caser's own L 5, batch 512 and dropout 0.5, and the shared
# short-budget rate 3e-3, which learned faster than its paper's 1e-3 on Beauty's validation
# (lab_notebook/experiments.md has the trials).
_CPU_START = {"max_len": 5, "batch_size": 512, "hidden_dropout": 0.5, "learning_rate": 3e-3}


class CaserTask(Task):
    """Caser's training: windows of L items and the next T, with sampled negatives per target."""

    name = "caser"
    presets = {"caser": {
        "*": {"model.name": "caser", "max_len": 5, "hidden_size": 50, "next_targets": 3, "vertical_filters": 4,
              "conv_filters": 16, "hidden_dropout": 0.5, "learning_rate": 1e-3, "batch_size": 512,
              "train_negatives": 3, "l2": 1e-6, "weight_decay": 0.0, "loss": "bce", "static_instances": False,
              # Unused by Caser (its windows step by one item); 1.0 keeps the generic check valid at L 5.
              "prop_sliding_window": 1.0},
        # The authors' code trains 50 epochs (n_iter): of 945,251 windows on ML-1m and 109,832 on Beauty.
        "ml-1m": {"train_steps": 92_300},
        "beauty": {"train_steps": 10_700},
    }}
    cpu_recipes = {"caser": {dataset: dict(_CPU_START) for dataset in PRESETS}}
    losses = ("bce",)
    settings = tuple(f"model.{field}" for field in ("hidden_size", "hidden_dropout", "train_negatives",
                                                     "negative_alpha", "l2", "next_targets", "conv_filters",
                                                     "vertical_filters", "learned_padding"))

    def build_model(self, config: ModelConfig):
        from bert4rec_tf.models.caser import Caser

        model = Caser(config)
        model.build()
        return model

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
