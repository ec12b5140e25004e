"""The negatives of the sampled-softmax loss: K items drawn once per training batch from the catalogue."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

# The log-probability given to the ids that are never drawn (padding, [MASK], extra tokens): far below
# any real item's, finite so that it never makes a NaN.
NEVER = -1e30


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class CatalogueSampler(keras.layers.Layer):
    """Draws `count` item ids per call, with replacement, from the real items 1..num_items, with
    probability proportional to (training count) ** `alpha` (0: uniform), and holds log q, the log of
    each id's probability, for the loss's logQ correction (`sampled_softmax_cross_entropy`).

    An item never seen in training counts as seen once, so that every item can be drawn. The counts
    come from `fit_counts`; until then (and with `alpha` 0) q is uniform. The draws come from the
    layer's seed generator, whose state the checkpoints keep, so a resumed run draws what an
    uninterrupted one would.

    Args:
        vocab_size: ids 0..vocab_size - 1 (padding 0, items 1..vocab_size - 2, [MASK]).
        count: K, items per draw.
        alpha: the popularity exponent.
        **kwargs: passed to `keras.layers.Layer`.
    """

    def __init__(self, vocab_size: int, count: int, alpha: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        if count < 1:
            raise ValueError(f"the sampled softmax needs at least one negative, got {count}")
        self.vocab_size, self.count, self.alpha = vocab_size, count, alpha
        self.num_items = vocab_size - 2
        self.seed_generator = keras.random.SeedGenerator(name="sampled_negatives")

    def build(self, input_shape=None):
        self.log_q = self.add_weight(shape=(self.vocab_size,), initializer="zeros", trainable=False, name="log_q")
        self.fit_counts(np.ones(self.vocab_size))
        self.built = True

    def fit_counts(self, counts: np.ndarray) -> None:
        """Sets q from the training counts of every id (`counts` [vocab_size]; ids outside the items ignored)."""
        weights = np.maximum(np.asarray(counts, dtype=np.float64)[1:self.num_items + 1], 1.0) ** self.alpha
        log_q = np.full(self.vocab_size, NEVER)
        log_q[1:self.num_items + 1] = np.log(weights / weights.sum())
        self.log_q.assign(log_q.astype(np.float32))

    def call(self, inputs=None):
        """int32 [count] item ids."""
        seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1), tf.int32)
        if self.alpha == 0:
            return tf.random.stateless_uniform((self.count,), seed, minval=1, maxval=self.num_items + 1,
                                               dtype=tf.int32)
        logits = tf.cast(self.log_q, tf.float32)[tf.newaxis, :]  # [1, vocab]
        return tf.cast(tf.random.stateless_categorical(logits, self.count, seed)[0], tf.int32)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, count=self.count, alpha=self.alpha)
        return config
