"""BERT4Rec (Sun et al., 2019): a bidirectional Transformer trained on the Cloze task.

Presets: "bert4rec" (the data set's preset as it is) and "bert4rec_1mask", the paper's ablation with
one masked item per instance. The training stream is the masked instances: the static TFRecords
written at preparation, or fresh masks each epoch (`train.dynamic_masking`).
"""

from __future__ import annotations

import numpy as np

import dataclasses
from typing import ClassVar

from bert4rec_tf.config import (PRESETS, AttributesPart, ExperimentConfig, MaskedData, MaskedTraining,
                                SampledSoftmaxPart, TrainedModelConfig, TransformerPart)
from bert4rec_tf.tasks.base import Task, history_features
from bert4rec_tf.tasks.space import LEARNING_RATE, PAPER_HIDDEN_SIZES, Choice, Derived, SearchSpace


@dataclasses.dataclass
class BERT4RecConfig(AttributesPart, SampledSoftmaxPart, TransformerPart, TrainedModelConfig):
    """BERT4Rec's model section: the Transformer encoder, and the sampled head under "sampled_softmax".

    Attributes:
        loss: "ce" (the paper's: the masked items' cross-entropy over every item) or
            "sampled_softmax" (K sampled negatives, not the paper's loss).
    """

    name: str = "bert4rec"
    loss: str = "ce"
    losses: ClassVar[tuple[str, ...]] = ("ce", "sampled_softmax")


class BERT4RecTask(Task):
    """The Cloze family: masked instances in, the masked items' cross-entropy over the vocabulary."""

    name = "bert4rec"
    presets = {"bert4rec": {}, "bert4rec_1mask": {"*": {"max_predictions_per_seq": 1}}}
    data_config = MaskedData
    model_config = BERT4RecConfig
    train_config = MaskedTraining
    # BERT4Rec (1 mask) is its one masked slot per instance: the recipes' 20 slots on ML-1m must not
    # replace it, or the model trains as BERT4Rec.
    cpu_recipes = {"bert4rec_1mask": {name: {"max_predictions_per_seq": 1} for name in PRESETS}}
    sequence_features = ("input_ids", "input_mask")
    attention_last_label = "[mask]"
    reads_features = ("item", "user")
    # The paper's mask proportions rho (Figure 4) with the masked slots they need, its d grid with the
    # feed-forward 4d, the hidden dropout and the rate.
    space = {"masked_lm_prob": Choice((0.1, 0.2, 0.4, 0.6, 0.8)),
             "max_predictions_per_seq": Derived(
                 lambda sampled, config: max(1, round(sampled["masked_lm_prob"] * config.data.max_len)),
                 "rho x max_len"),
             "hidden_size": Choice(PAPER_HIDDEN_SIZES),
             "intermediate_size": Derived(lambda sampled, config: 4 * sampled["hidden_size"], "4d"),
             "hidden_dropout": Choice((0.0, 0.1, 0.2, 0.3, 0.4, 0.5)), "learning_rate": LEARNING_RATE}

    def search_space(self, model: str) -> SearchSpace:
        """BERT4Rec (1 mask) keeps its one masked slot: rho is not searched."""
        space = dict(self.space)
        if model == "bert4rec_1mask":
            for key in ("masked_lm_prob", "max_predictions_per_seq"):
                space.pop(key)
        return space

    def validate(self, config: ExperimentConfig) -> None:
        if not (config.data.static_instances or config.train.dynamic_masking):
            raise ValueError(f"{config.model.name} trains on masked instances: set --config train.dynamic_masking=true "
                             "or --config data.static_instances=true")

    def model_class(self):
        from bert4rec_tf.models.bert4rec import BERT4Rec

        return BERT4Rec

    def build_model(self, config: BERT4RecConfig):
        # Packed: logits only for the real masked slots in training.
        model = self.model_class()(config, packed=True)
        model.build()
        return model

    def stream_extras(self, config: ExperimentConfig, prepared, train: list[np.ndarray]) -> dict:
        """Extra arguments of the masked pipelines (none here)."""
        return {}

    def training_stream(self, config: ExperimentConfig, prepared, train: list[np.ndarray]):
        from bert4rec_tf.data.instances import make_windows
        from bert4rec_tf.data.pipeline import dynamic_training_dataset, static_training_dataset

        data, batch_size = config.data, config.train.batch_size
        extras = self.stream_extras(config, prepared, train)
        if config.train.dynamic_masking:
            windows = make_windows(train, np.arange(1, len(train) + 1), data.max_len, data.prop_sliding_window)
            return lambda start: dynamic_training_dataset(windows, data, prepared.num_items, batch_size=batch_size,
                                                          start=start, **extras)
        return lambda start: static_training_dataset(prepared.train_files, data, batch_size=batch_size, start=start,
                                                     **extras)

    def loss_features(self, model, histories, targets, negatives, users=None):
        """One masked slot per user: the [MASK] appended to the history, whose true item is the target."""
        features = history_features(model, histories, users)
        users = len(targets)
        features.update(masked_lm_positions=(features["input_mask"].sum(axis=1) - 1)[:, None],  # the [MASK]
                        masked_lm_ids=np.asarray(targets, dtype=np.int64)[:, None],
                        masked_lm_weights=np.ones((users, 1), dtype=np.float32))
        return features
