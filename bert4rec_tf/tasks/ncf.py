"""NCF (He et al., 2017), NeuMF: a baseline of the BERT4Rec paper's Table 2.

Preset "ncf": the BERT4Rec paper ran the NCF authors' code with d, the L2 regulariser and dropout
tuned on its validation sets, without reporting the values; the preset takes the NCF paper's
settings: NeuMF without pre-training, Adam at 1e-3, batches of 256, 4 negatives per positive, three
MLP layers, no regularisation (its code's defaults) and 64 predictive factors (the largest it tried,
and BERT4Rec's d): GMF 64, MLP embeddings 256 each, layers 256 -> 128 -> 64; no weight decay.

Scoring is NCF's cost: every (user, item) pair runs the MLP, and the evaluator scores every item
for every user at each validation. At the preset's size a full-ranking validation takes minutes on
ML-1m's 6,040 users but hours on Beauty's 40,226 and 54,542 items, and the cost grows with d and
the MLP's depth (the lab notebook has the timings). So the `cpu-*` recipes keep the preset on ML-1m
and take d 16 and one layer on Beauty, with batches of 1,024 as BPR-MF (`INTERACTION_CPU_RECIPES`),
and on Beauty an L2 penalty of 0.01, first of 0, 0.001, 0.01, 0.03 and 0.1 on validation
(lab_notebook/experiments.md has the trials).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from bert4rec_tf.config import EmbeddingPart, L2Part, NegativesPart, TrainedModelConfig
from bert4rec_tf.config.sections import check_at_least_one
from bert4rec_tf.tasks.bpr_mf import INTERACTION_CPU_RECIPES, InteractionTask
from bert4rec_tf.tasks.space import LEARNING_RATE, Choice, Int


@dataclasses.dataclass
class NCFConfig(EmbeddingPart, NegativesPart, L2Part, TrainedModelConfig):
    """NeuMF's model section.

    Attributes:
        hidden_size: the predictive factors: GMF's d and the width of the MLP's last layer
            (`bert4rec_tf.models.ncf.mlp_widths`).
        num_layers: the MLP's layers.
        loss: "bce", the pointwise log loss against `train_negatives` negatives a positive.
    """

    name: str = "ncf"
    num_layers: int = 2
    loss: str = "bce"
    losses: ClassVar[tuple[str, ...]] = ("bce",)

    def check(self) -> None:
        super().check()
        check_at_least_one(self, "num_layers")


class NCFTask(InteractionTask):
    """NeuMF, trained pointwise on each interaction and its sampled negatives."""

    name = "ncf"
    presets = {"ncf": {"*": {"loss": "bce", "hidden_size": 64, "num_layers": 3, "l2": 0.0,
                             "train_negatives": 4, "learning_rate": 1e-3, "batch_size": 256, "weight_decay": 0.0}}}
    cpu_recipes = {"ncf": {**INTERACTION_CPU_RECIPES,
                           "beauty": {**INTERACTION_CPU_RECIPES["beauty"], "hidden_size": 16, "num_layers": 1,
                                      "l2": 0.01}}}
    model_config = NCFConfig
    # The NCF paper's predictive factors {8, 16, 32, 64} and up to its three MLP layers; the negatives
    # per positive (its Figure 6 tried 1 to 10), L2, the rate and the batch.
    space = {"hidden_size": Choice((8, 16, 32, 64)), "num_layers": Int(1, 3),
             "l2": Choice((0.0, 1e-4, 1e-3, 1e-2)), "train_negatives": Choice((1, 2, 4, 8)),
             "learning_rate": LEARNING_RATE, "batch_size": Choice((256, 1024))}
    # Ranking every item at each validation would cost more than the training between them (above);
    # validation scores the pop-100 candidates only (`NCF.score_items`), the test ranks every item.
    full_ranking_validation = False

    def model_class(self):
        from bert4rec_tf.models.ncf import NCF

        return NCF
