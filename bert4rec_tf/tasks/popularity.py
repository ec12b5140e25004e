"""POP: every user gets the items ranked by their number of training interactions.

It has nothing to train: its statistics are its model. It is also the reference every trained run
is compared with (`bert4rec_tf.tasks.reference_model`).
"""

from __future__ import annotations

from bert4rec_tf.config import ModelConfig
from bert4rec_tf.tasks.base import Task


class PopularityTask(Task):
    """Ranking by popularity; no training stream, no loss."""

    name = "pop"
    presets = {"pop": {"*": {"model.name": "pop", "static_instances": False}}}
    trains = False

    def build_model(self, config: ModelConfig):
        from bert4rec_tf.models.pop import POP

        model = POP(config)
        model.build()
        return model
