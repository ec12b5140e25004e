"""BERT4Rec with the matching task (Zhang & Li): a [UID] token whose output matches the user's
next item against sampled negatives, trained beside the Cloze task.

Preset "bert4rec_match": the matching paper's d 32 network, lr 1e-4, batch 128, runs of equal items
masked together. Its instances are the Cloze instances of the matching data
(`bert4rec_tf.config.MatchingData`), each with `match_negatives` negatives of its user.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert4rec_tf.config import SHORT_SEQUENCE_DATASETS, ExperimentConfig, MatchingData
from bert4rec_tf.config.sections import check_at_least_one
from bert4rec_tf.tasks.bert4rec import BERT4RecConfig, BERT4RecTask


@dataclasses.dataclass
class BERT4RecMatchConfig(BERT4RecConfig):
    """BERT4Rec's model section and the matching task's.

    Attributes:
        match_negatives: the matching task's negatives per instance (n).
        match_scale: the matching task's scale c.
    """

    name: str = "bert4rec_match"
    match_negatives: int = 5
    match_scale: float = 10.0

    def check(self) -> None:
        super().check()
        check_at_least_one(self, "match_negatives")


class BERT4RecMatchTask(BERT4RecTask):
    """The Cloze family with the matching task."""

    name = "bert4rec_match"
    # Its [UID] token is its user modelling: it reads no user attributes.
    reads_features = ("item",)
    presets = {"bert4rec_match": {"*": {"hidden_size": 32, "intermediate_size": 128,
                                        "learning_rate": 1e-4, "batch_size": 128, "mask_runs": True}}}
    # On short sequences: rate 5e-3, which learned a planted order faster than the shared 3e-3
    # (docs/training.md gives the trial and what it does not show).
    cpu_recipes = {"bert4rec_match": {name: {"learning_rate": 5e-3} for name in SHORT_SEQUENCE_DATASETS}}
    data_config = MatchingData
    model_config = BERT4RecMatchConfig

    def model_class(self):
        from bert4rec_tf.models.bert4rec_match import BERT4RecMatch

        return BERT4RecMatch

    def stream_extras(self, config: ExperimentConfig, prepared, train: list[np.ndarray]) -> dict:
        """Each instance also carries `match_negatives` negatives of its user for the [UID] output."""
        from bert4rec_tf.data.negatives import NegativeSampler

        return {"sampler": NegativeSampler(train, prepared.num_items), "match_negatives": config.model.match_negatives}

    def loss_features(self, model, histories, targets, negatives, users=None):
        """The Cloze slot, plus the matching task with the target as the matched item and the first
        `match_negatives` of the user's negatives."""
        features = super().loss_features(model, histories, targets, negatives, users)
        features.update(match_positive=np.asarray(targets, dtype=np.int64)[:, None],
                        match_negatives=np.asarray(negatives[:, :model.model_config.match_negatives], np.int64))
        return features
