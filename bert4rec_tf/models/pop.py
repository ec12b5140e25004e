"""POP: every user gets the items ranked by their popularity in the training data."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from bert4rec_tf.models.base import SequentialRecommender


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class POP(SequentialRecommender):
    """Scores every item by its number of interactions in the training sequences.

    The counts are the model's only weight (not trainable), set by `fit_statistics`; they are
    saved and exported like any other weight. The user representation is the constant [1], so that
    scores = representation x counts, as for the other models.

    Args:
        config: the model section of the configuration (only `vocab_size` is read).
        **kwargs: passed to `keras.Model`.
    """

    def build(self, input_shape=None):
        self.counts = self.add_weight(shape=(self.model_config.vocab_size,), initializer="zeros",
                                      trainable=False, name="counts")
        self.built = True

    def fit_statistics(self, train_sequences: list) -> None:
        """Sets the counts: interactions per item id over `train_sequences` (arrays of item ids)."""
        if not self.built:
            self.build()
        from bert4rec_tf.data.negatives import item_counts

        self.counts.assign(item_counts(train_sequences, self.model_config.vocab_size).astype(np.float32))

    def history_inputs(self, history) -> dict:
        """POP reads no history: only the batch size matters."""
        return {"input_ids": history}

    def user_representation(self, history, training=None):
        """The constant [1] per user, float32 [batch, 1]."""
        return ops.ones((ops.shape(history)[0], 1), dtype="float32")

    def score_next(self, history, training=None):
        """The training counts for every user, float32 [batch, vocab_size]."""
        if not self.built:
            self.build()
        return self.user_representation(history) * ops.expand_dims(ops.cast(self.counts, "float32"), 0)

    def call(self, features: dict, training=None):
        return self.score_next(features["input_ids"])
