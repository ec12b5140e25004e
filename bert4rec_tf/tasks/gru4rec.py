"""GRU4Rec (Hidasi et al., ICLR 2016) and GRU4Rec+ (Hidasi & Karatzoglou, CIKM 2018): baselines of
the BERT4Rec paper's Table 2, one model (`bert4rec_tf.models.gru4rec`) with two families of losses.

Both train on SASRec's windows (`NextItemWindowsTask`): windows of max_len + 1 items padded on the left,
every position predicting the next item, so a user's history is read in one sequence (GRU4Rec's
session-parallel mini-batches read sessions; here a user's training items are one session). The
negatives of a target are the next items of the batch's other rows at the same column, GRU4Rec's
mini-batch sampling; GRU4Rec+ adds `train_negatives` items shared by the whole batch, drawn with
probability proportional to popularity ** `negative_alpha` (popularity: occurrences in the training
items).

Preset "gru4rec": the GRU4Rec paper's settings where it gives them (one GRU layer of 100 units,
batch 50, dropout 0.5 and the TOP1 loss, its best on RSC15), the output table separate from the
input embedding, no weight decay; Adam at 1e-3 instead of the paper's Adagrad at 0.01. max_len as
SASRec's presets (200 on ML-1m, 50 elsewhere): the windows bound the history the GRU reads.
Preset "gru4rec_plus": the GRU4Rec+ code's defaults at the time of its paper (100 units, batch 32,
no dropout, BPR-max with lambda 1.0, 2,048 extra negatives with alpha 0.75, the count the SASRec
paper ran GRU4Rec+ with), Adam at 1e-3 instead of Adagrad at 0.1.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar

import numpy as np

from bert4rec_tf.config import EmbeddingPart, ExperimentConfig, NegativesPart, TrainedModelConfig
from bert4rec_tf.config.sections import check_at_least_one, check_dropout, check_nonnegative
from bert4rec_tf.tasks.sasrec import NextItemWindowsTask
from bert4rec_tf.tasks.space import LEARNING_RATE, PAPER_DROPOUT, PAPER_HIDDEN_SIZES, Choice, Float


@dataclasses.dataclass
class GRU4RecConfig(EmbeddingPart, TrainedModelConfig):
    """GRU4Rec's model section.

    Attributes:
        max_len: the latest items the GRU reads (kept equal to `data.max_len`).
        num_layers: stacked GRU layers.
        hidden_dropout: dropout on the GRU's input embeddings and its output states.
        loss: "top1" (the paper's best on RSC15), "bpr" (both against the batch's other targets) or
            "ce" (softmax over every item).
    """

    name: str = "gru4rec"
    max_len: int = 200
    num_layers: int = 2
    hidden_dropout: float = 0.2
    loss: str = "top1"
    losses: ClassVar[tuple[str, ...]] = ("top1", "bpr", "ce")

    def check(self) -> None:
        super().check()
        check_at_least_one(self, "num_layers")
        check_dropout(self, "hidden_dropout")


@dataclasses.dataclass
class GRU4RecPlusConfig(NegativesPart, GRU4RecConfig):
    """GRU4Rec+'s model section: GRU4Rec's, with `train_negatives` shared negatives a batch.

    Attributes:
        loss: "bpr_max" or "top1_max" (the GRU4Rec+ paper's losses).
        bpr_max_reg: the score regularisation lambda of BPR-max.
    """

    name: str = "gru4rec_plus"
    loss: str = "bpr_max"
    bpr_max_reg: float = 1.0
    losses: ClassVar[tuple[str, ...]] = ("bpr_max", "top1_max")
    loss_fields: ClassVar[dict[str, tuple[str, ...]]] = {"bpr_max_reg": ("bpr_max",)}

    def check(self) -> None:
        super().check()
        check_nonnegative(self, "bpr_max_reg")


# The settings both presets share.
_COMMON_PRESET = {"prop_sliding_window": 0.5, "hidden_size": 100, "num_layers": 1, "weight_decay": 0.0,
                  "learning_rate": 1e-3, "max_len": 50}

# What the `cpu-*` recipes change, on top of the shared settings (batch 128, rate 3e-3 on ML-1m and
# Beauty, max_len 100 on ML-1m, hidden dropout 0.1 / 0.2, warm-up 500 on Beauty). GRU4Rec reads the
# same windows as SASRec, and batch 128 gives each target 127 in-batch negatives; its dropout is its
# paper's regularising 0.5 on Beauty's short sequences and 0.2 on ML-1m. GRU4Rec+ keeps its 2,048
# shared negatives, whose scores cost most of its step where the windows are full, so on ML-1m it
# takes its preset's batch of 32: a step costs a fraction of batch 128's at the same windows per
# second, so an hour holds several times the updates (the lab notebook has the timings).
_CPU_GRU4REC = {"ml-1m": {"hidden_dropout": 0.2}, "beauty": {"hidden_dropout": 0.5}}
_CPU_GRU4REC_PLUS = {"ml-1m": {"batch_size": 32}}


class GRU4RecTask(NextItemWindowsTask):
    """GRU4Rec: SASRec's next-item windows without its sampled negatives; the batch's other targets
    are the negatives ("top1", "bpr"), or a softmax over every item ("ce")."""

    name = "gru4rec"
    presets = {"gru4rec": {
        "*": {**_COMMON_PRESET, "hidden_dropout": 0.5, "batch_size": 50, "loss": "top1"},
        "ml-1m": {"max_len": 200},
    }}
    cpu_recipes = {"gru4rec": _CPU_GRU4REC}
    model_config = GRU4RecConfig
    # The BERT4Rec paper's d and dropout grids, the rate and the batch (whose other targets are the
    # negatives of "top1" and "bpr").
    space = {"hidden_size": Choice(PAPER_HIDDEN_SIZES), "hidden_dropout": Choice(PAPER_DROPOUT),
             "learning_rate": LEARNING_RATE, "batch_size": Choice((32, 64, 128, 256))}

    def validate(self, config: ExperimentConfig) -> None:
        """Also: the in-batch negatives need two rows a batch."""
        if config.model.loss in ("top1", "bpr") and config.train.batch_size < 2:
            raise ValueError(f"--batch_size must be at least 2 for {self.name}'s {config.model.loss!r} loss, whose "
                             f"negatives are the batch's other targets, got {config.train.batch_size}")

    def model_class(self):
        from bert4rec_tf.models.gru4rec import GRU4Rec

        return GRU4Rec

    def loss_features(self, model, histories, targets, negatives, users=None):
        """The target after the newest item (the last column); with no batch to draw from, its
        negatives are all the user's given negatives (`negatives`: the uniform validation candidates),
        which "ce" ignores."""
        features = super().loss_features(model, histories, targets, negatives, users)
        features["negatives"] = np.asarray(negatives, dtype=np.int64)
        return features


class GRU4RecPlusTask(GRU4RecTask):
    """GRU4Rec+: GRU4Rec's stream plus `train_negatives` popularity-sampled items shared by each batch."""

    name = "gru4rec_plus"
    presets = {"gru4rec_plus": {
        "*": {**_COMMON_PRESET, "hidden_dropout": 0.0, "batch_size": 32,
              "loss": "bpr_max", "train_negatives": 2048, "negative_alpha": 0.75, "bpr_max_reg": 1.0},
        "ml-1m": {"max_len": 200},
    }}
    cpu_recipes = {"gru4rec_plus": _CPU_GRU4REC_PLUS}
    model_config = GRU4RecPlusConfig
    # GRU4Rec's, and the shared negatives: how many, their popularity exponent, the BPR-max penalty.
    space = {**GRU4RecTask.space, "train_negatives": Choice((512, 1024, 2048)), "negative_alpha": Float(0.0, 1.0),
             "bpr_max_reg": Choice((0.5, 1.0, 2.0))}

    def training_stream(self, config: ExperimentConfig, prepared, train: list[np.ndarray]) -> Callable:
        """GRU4Rec's stream, each batch with `shared_negatives` int32 [batch, train_negatives]: the
        same draws in every row, seeded by the batch's first instance number."""
        import tensorflow as tf

        from bert4rec_tf.data.negatives import popularity_sampler
        from bert4rec_tf.data.seeds import Stream, instance_seed

        batches = super().training_stream(config, prepared, train)
        draw = popularity_sampler(train, prepared.num_items, config.model.negative_alpha)
        count, batch_size, seed = config.model.train_negatives, config.train.batch_size, config.data.seed

        def with_shared(start):
            def add(number, batch):
                negatives = draw(count, instance_seed(seed, Stream.SHARED_NEGATIVES, start + number * batch_size))
                return {**batch, "shared_negatives": tf.broadcast_to(negatives, [batch_size, count])}

            return batches(start).enumerate().map(add, num_parallel_calls=tf.data.AUTOTUNE,
                                                  deterministic=True).prefetch(tf.data.AUTOTUNE)

        return with_shared

