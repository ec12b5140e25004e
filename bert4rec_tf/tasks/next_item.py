"""SASRec (Kang & McAuley, 2018): a causal Transformer where every position predicts the next item.

Preset "sasrec": the SASRec paper's settings (d 50, one head, two blocks, FFN d x d, L 200 on ML-1m
and 50 elsewhere, dropout 0.2 on ML-1m and 0.5 elsewhere, lr 1e-3, batch 128, no weight decay), with
its binary cross-entropy against one negative per position ("bce"), or a softmax over every item
("ce"). It reads no masked instances, so no static TFRecords are written for it. The `cpu-*`
recipes keep the shared settings: on Beauty, 15-minute trials on one core gave test pop-100 HR@10
0.2645 (ce) and 0.1889 (bce) at 3e-3 against 0.2094 and 0.1671 at its paper's 1e-3.
"""

from __future__ import annotations

import numpy as np

from bert4rec_tf.config import ExperimentConfig, ModelConfig
from bert4rec_tf.tasks.base import TRANSFORMER_SETTINGS, Task, history_features


class NextItemTask(Task):
    """Next-item training: shifted sequences, padded on the left, one negative per target."""

    name = "sasrec"
    presets = {"sasrec": {
        "*": {"model.name": "sasrec", "max_len": 50, "hidden_size": 50, "num_heads": 1, "intermediate_size": 50,
              "num_layers": 2, "hidden_dropout": 0.5, "attention_dropout": 0.5, "learning_rate": 1e-3,
              "batch_size": 128, "weight_decay": 0.0, "loss": "bce", "static_instances": False,
              "prop_sliding_window": 0.5},
        "ml-1m": {"max_len": 200, "hidden_dropout": 0.2, "attention_dropout": 0.2},
    }}
    losses = ("bce", "ce", "sampled_softmax")
    settings = TRANSFORMER_SETTINGS + ("model.code_network", "data.prop_sliding_window")
    sequence_features = ("input_ids", "positive_ids", "negative_ids")
    padded_left = True
    attention_last_label = "newest item"

    def validate(self, config: ExperimentConfig) -> None:
        """The shared checks, and `model.code_network` runs its blocks on whole windows only."""
        super().validate(config)
        if config.model.code_network and config.model.padding_free == "on":
            raise ValueError("--config padding_free=on cannot be used with --config code_network=true: the "
                             "code's blocks run on whole windows (use auto or off)")

    def build_model(self, config: ModelConfig):
        from bert4rec_tf.models.sasrec import SASRec

        model = SASRec(config)
        model.build()
        return model

    def training_stream(self, config: ExperimentConfig, prepared, train: list[np.ndarray]):
        from bert4rec_tf.data.instances import make_windows
        from bert4rec_tf.data.negatives import NegativeSampler
        from bert4rec_tf.data.pipeline import next_item_training_dataset

        data = config.data
        # max_len inputs and the last target
        windows = make_windows(train, np.arange(1, len(train) + 1), data.max_len + 1, data.prop_sliding_window)
        sampler = NegativeSampler(train, prepared.num_items)
        return lambda start: next_item_training_dataset(windows, data, sampler, batch_size=config.train.batch_size,
                                                        start=start)

    def loss_features(self, model, histories, targets, negatives, users=None):
        """Only the last position (the newest history item) has a next item, the target; "bce" scores
        it against the user's first negative, "ce" over all items."""
        features = history_features(model, histories)
        positive = np.zeros(features["input_ids"].shape, dtype=np.int64)  # [users, max_len]
        negative = np.zeros_like(positive)
        positive[:, -1], negative[:, -1] = targets, negatives[:, 0]  # left padding: the newest item is last
        features.update(positive_ids=positive, negative_ids=negative)
        return features
