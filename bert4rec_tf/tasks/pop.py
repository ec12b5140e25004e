"""POP: every user gets the items ranked by their number of training interactions.

It has nothing to train: its statistics are its model. It is also the reference every trained run
is compared with (`bert4rec_tf.tasks.reference_model`).
"""

from __future__ import annotations

import dataclasses

from bert4rec_tf.config import DataConfig, ModelConfig, RunConfig
from bert4rec_tf.tasks.base import Task


@dataclasses.dataclass
class POPConfig(ModelConfig):
    """POP's model section: nothing beyond the vocabulary the data give it."""

    name: str = "pop"


class PopTask(Task):
    """Ranking by popularity; no training stream, no loss."""

    name = "pop"
    presets = {"pop": {}}
    trains = False
    data_config = DataConfig
    model_config = POPConfig
    train_config = RunConfig

    def model_class(self):
        from bert4rec_tf.models.pop import POP

        return POP
