"""Dropout whose mask is drawn inside one fused pass, forward and backward."""

import keras
import tensorflow as tf

from bert4rec_tf.layers.fused import dropout


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class Dropout(keras.layers.Layer):
    """`keras.layers.Dropout` without `noise_shape`, using the fused `bert4rec_tf.layers.fused.dropout`.

    Each call draws a new seed from the layer's `keras.random.SeedGenerator`, so
    `keras.utils.set_random_seed` makes the masks reproducible, as with Keras' own layer.

    Args:
        rate: drop probability in [0, 1).
        seed: the seed generator's seed (None: drawn from Python's seeded `random`).
        **kwargs: passed to `keras.layers.Layer`.
    """

    def __init__(self, rate: float, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
        self.rate = rate
        self.seed = seed
        if rate > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)
        self.built = True

    def call(self, inputs, training=None):
        if not training or self.rate == 0:
            return inputs
        return dropout(inputs, self.rate, self.next_seed())

    def next_seed(self):
        """The stateless int32 [2] seed of this call's mask (also for masks drawn elsewhere, such as the
        attention's fused softmax and dropout); advances the layer's seed generator."""
        seed = self.seed_generator.next()  # int64 [2], as Keras' own dropout, folded into int32
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            # The replicas share the seed generator's state: without this, every replica would drop the
            # same positions of its share of the batch.
            seed = tf.random.experimental.stateless_fold_in(seed, context.replica_id_in_sync_group)
        return seed

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(rate=self.rate, seed=self.seed)
        return config
