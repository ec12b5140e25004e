"""BPR-MF (Rendle et al., 2009), a baseline of the BERT4Rec paper's Table 2; also the Task that every
family trained on single interactions with a vector per user (NCF, FPMC) derives from.

Preset "bpr_mf": the BERT4Rec paper implemented BPR-MF itself and tuned d, the L2 regulariser and
dropout for every baseline on the validation sets (grids d in {16, ..., 256}, l2 in {1, ..., 1e-4})
without reporting the values it chose; the preset takes d 64 (its BERT4Rec default), l2 0.01 (the
middle of its grid; 0.001 on ML-1m, chosen on validation: docs/models.md gives the trials), Adam at
1e-3 in batches of 256 (the BPR paper trains by SGD on one (u, i, j) triple at a time), one negative
per positive (the paper's triples) and no weight decay (the L2 term regularises).

The `cpu-*` recipes keep their rate (3e-3 on ML-1m and Beauty) and set the batch: the training step
turns the embeddings' gradients dense and AdamW updates every row, so a step costs about the same
whatever the batch. With Beauty's large tables (40,226 users, 54,544 items) 1,024 instances a step
train several times more instances per second than 256; with ML-1m's small ones the step is cheap
and the interaction stream limits the rate, so ML-1m keeps the preset's 256 (the lab notebook has
the measurements).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from bert4rec_tf.config import (DataConfig, EmbeddingPart, ExperimentConfig, L2Part, NegativesPart, TrainConfig,
                                TrainedModelConfig)
from bert4rec_tf.tasks.base import Task, history_features
from bert4rec_tf.tasks.space import LEARNING_RATE, PAPER_HIDDEN_SIZES, PAPER_L2, Choice


@dataclasses.dataclass
class FactorConfig(EmbeddingPart, NegativesPart, L2Part, TrainedModelConfig):
    """The model section of a family of factor vectors trained by BPR on single interactions (BPR-MF,
    FPMC): d, the negatives and the L2 penalty.

    Attributes:
        loss: "bpr", the BPR paper's pairwise loss.
    """

    name: str = "bpr_mf"
    loss: str = "bpr"
    losses: ClassVar[tuple[str, ...]] = ("bpr",)

# What the `cpu-*` recipes change for a family trained on interactions (see the module docstring); the
# rate is the shared recipes' 3e-3, which learned faster than 1e-3 for BPR-MF and FPMC on Beauty's
# validation (lab_notebook/experiments.md has the trials).
INTERACTION_CPU_RECIPES = {"ml-1m": {"batch_size": 256}, "beauty": {"batch_size": 1024}}

# What tuning varies for the factor families (BPR-MF, FPMC): the paper's grids of d and L2, the
# negatives per positive, the rate and the batch (which sets the steps a budget holds).
FACTOR_SPACE = {"hidden_size": Choice(PAPER_HIDDEN_SIZES), "l2": Choice(PAPER_L2),
                "train_negatives": Choice((1, 2, 4, 8)), "learning_rate": LEARNING_RATE,
                "batch_size": Choice((256, 1024))}


def bpr_preset(name: str) -> dict:
    """The preset of family `name` trained by BPR on single interactions (BPR-MF, FPMC): d 64, one
    negative per positive, Adam at 1e-3 in batches of 256 without weight decay, L2 0.01 (0.001 on
    ML-1m; see the module docstring)."""
    return {name: {"*": {"loss": "bpr", "hidden_size": 64, "l2": 0.01, "train_negatives": 1,
                         "learning_rate": 1e-3, "batch_size": 256, "weight_decay": 0.0},
                   "ml-1m": {"l2": 0.001}}}


class InteractionTask(Task):
    """A family trained on single interactions (`bert4rec_tf.data.interactions`) with a vector per user.

    Subclasses set `name`, `presets`, `model_config` and `model_class`.
    """

    sequential = False
    data_config = DataConfig
    train_config = TrainConfig

    def training_stream(self, config: ExperimentConfig, prepared, train: list[np.ndarray]):
        from bert4rec_tf.data.interactions import interaction_training_dataset, training_interactions
        from bert4rec_tf.data.negatives import negative_sampler

        interactions = training_interactions(train)
        sampler = negative_sampler(train, prepared.num_items, config.model.negative_alpha)
        return lambda start: interaction_training_dataset(interactions, config.data.seed, sampler,
                                                          config.model.train_negatives,
                                                          batch_size=config.train.batch_size, start=start)

    def loss_features(self, model, histories, targets, negatives, users=None):
        """Each user's validation target as the positive against its first `train_negatives` negatives,
        the history's newest item as the previous item; `input_ids` is the model's history input."""
        from keras import ops

        from bert4rec_tf.models.history import last_items

        if users is None:
            raise ValueError(f"{self.name} learns a vector per user: its loss features need the users")
        newest, _ = last_items(histories, 1)
        features = history_features(model, histories)
        features.update(user_ids=np.asarray(users, dtype=np.int32), positive_ids=np.asarray(targets, dtype=np.int32),
                        previous_ids=ops.convert_to_numpy(ops.sum(newest, axis=1)).astype(np.int32),
                        negative_ids=np.asarray(negatives[:, :model.model_config.train_negatives], dtype=np.int32))
        return features


class BPRMFTask(InteractionTask):
    """BPR-MF: a user's items as a set, one factor vector per user and per item."""

    name = "bpr_mf"
    presets = bpr_preset("bpr_mf")
    cpu_recipes = {"bpr_mf": INTERACTION_CPU_RECIPES}
    model_config = FactorConfig
    space = FACTOR_SPACE

    def model_class(self):
        from bert4rec_tf.models.bpr_mf import BPRMF

        return BPRMF
