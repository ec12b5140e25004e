"""SASRec (Kang & McAuley, 2018): a causal Transformer where every position predicts the next item.

Preset "sasrec": the SASRec paper's settings (d 50, one head, two blocks, FFN d x d, L 200 on ML-1m
and 50 elsewhere, dropout 0.2 on ML-1m and 0.5 elsewhere, lr 1e-3, batch 128, no weight decay), with
its binary cross-entropy against one negative per position ("bce"), or a softmax over every item
("ce"). It reads no masked instances. The `cpu-*` recipes keep the shared settings: their rate
3e-3 learned faster on Beauty than its paper's 1e-3 (lab_notebook/experiments.md has the trials).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from bert4rec_tf.config import (AttributesPart, ExperimentConfig, SampledSoftmaxPart, SlidingWindowData,
                                TrainConfig, TrainedModelConfig, TransformerPart)
from bert4rec_tf.tasks.base import Task, history_features
from bert4rec_tf.tasks.space import LEARNING_RATE, PAPER_HIDDEN_SIZES, Choice, Derived, Int


@dataclasses.dataclass
class SASRecConfig(AttributesPart, SampledSoftmaxPart, TransformerPart, TrainedModelConfig):
    """SASRec's model section.

    Attributes:
        loss: "bce" (the paper's, one negative per position), "ce" (softmax over all items) or
            "sampled_softmax" (K sampled negatives, not the paper's loss).
        code_network: run the network of its authors' code instead of the paper's post-LN blocks:
            the item embedding scaled by sqrt(d) with no input LayerNorm, pre-LN blocks without the
            attention's output projection, a last LayerNorm (`bert4rec_tf.layers.code_sasrec_block`);
            its blocks do not run packed.
    """

    name: str = "sasrec"
    loss: str = "bce"
    code_network: bool = False
    losses: ClassVar[tuple[str, ...]] = ("bce", "ce", "sampled_softmax")

    def check(self) -> None:
        super().check()
        if self.code_network and self.padding_free == "on":
            raise ValueError("--config padding_free=on cannot be used with --config code_network=true: the "
                             "code's blocks run on whole windows (use auto or off)")


class NextItemWindowsTask(Task):
    """Next-item training on windows of max_len + 1 items padded on the left: every position predicts
    the next item. Subclasses set their model and what negatives a target gets."""

    data_config = SlidingWindowData
    train_config = TrainConfig
    sequence_features = ("input_ids", "positive_ids")
    padded_left = True

    def negative_sampler(self, prepared, train: list[np.ndarray]):
        """What draws one negative per target into the stream's `negative_ids` (None: none)."""
        return None

    def training_stream(self, config: ExperimentConfig, prepared, train: list[np.ndarray]):
        from bert4rec_tf.data.instances import make_windows
        from bert4rec_tf.data.pipeline import next_item_training_dataset

        data = config.data
        # max_len inputs and the last target
        windows = make_windows(train, np.arange(1, len(train) + 1), data.max_len + 1, data.prop_sliding_window)
        sampler = self.negative_sampler(prepared, train)
        with_users = bool(config.model.user_attributes)
        return lambda start: next_item_training_dataset(windows, data, sampler, batch_size=config.train.batch_size,
                                                        start=start, with_users=with_users)

    def loss_features(self, model, histories, targets, negatives, users=None):
        """Only the last position (the newest history item) has a next item, the target."""
        features = history_features(model, histories, users)
        positive = np.zeros(features["input_ids"].shape, dtype=np.int64)  # [users, max_len]
        positive[:, -1] = targets  # left padding: the newest item is last
        features.update(positive_ids=positive)
        return features


class SASRecTask(NextItemWindowsTask):
    """SASRec's training: the next-item windows, one sampled negative per target."""

    name = "sasrec"
    reads_features = ("item", "user")
    presets = {"sasrec": {
        "*": {"max_len": 50, "hidden_size": 50, "num_heads": 1, "intermediate_size": 50,
              "num_layers": 2, "hidden_dropout": 0.5, "attention_dropout": 0.5, "learning_rate": 1e-3,
              "batch_size": 128, "weight_decay": 0.0, "loss": "bce", "prop_sliding_window": 0.5},
        "ml-1m": {"max_len": 200, "hidden_dropout": 0.2, "attention_dropout": 0.2},
    }}
    model_config = SASRecConfig
    # d (one head, a feed-forward of width d as the SASRec code), its layers, the dropout of the
    # hidden states and of the attention (one rate in the presets, two in the CPU recipes), the rate.
    space = {"hidden_size": Choice(PAPER_HIDDEN_SIZES),
             "intermediate_size": Derived(lambda sampled, config: sampled["hidden_size"], "d"),
             "num_layers": Int(1, 3), "hidden_dropout": Choice((0.0, 0.1, 0.2, 0.3, 0.4, 0.5)),
             "attention_dropout": Choice((0.0, 0.1, 0.2, 0.3, 0.4, 0.5)), "learning_rate": LEARNING_RATE}
    sequence_features = ("input_ids", "positive_ids", "negative_ids")
    attention_last_label = "newest item"

    def model_class(self):
        from bert4rec_tf.models.sasrec import SASRec

        return SASRec

    def negative_sampler(self, prepared, train: list[np.ndarray]):
        from bert4rec_tf.data.negatives import NegativeSampler

        return NegativeSampler(train, prepared.num_items)

    def loss_features(self, model, histories, targets, negatives, users=None):
        """"bce" scores the target against the user's first negative, "ce" over all items."""
        features = super().loss_features(model, histories, targets, negatives, users)
        negative = np.zeros_like(features["positive_ids"])
        negative[:, -1] = negatives[:, 0]
        features.update(negative_ids=negative)
        return features
