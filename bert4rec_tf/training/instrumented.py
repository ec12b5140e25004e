"""A training step that also reports the gradient's global norm (before clipping) and the rate."""

from __future__ import annotations

import tensorflow as tf

from bert4rec_tf.models import BERT4Rec


class InstrumentedBERT4Rec(BERT4Rec):
    """`BERT4Rec` whose `fit` logs `grad_norm` and `learning_rate` beside the loss.

    Under a `tf.distribute` strategy each replica's loss is divided by the number of replicas, since
    the replicas' gradients are summed; `grad_norm` is then the norm of one replica's share.

    Only for training: `plain()` gives the `BERT4Rec` (same weights) that is saved and exported.
    The step is TensorFlow's (tf.GradientTape), as `model.fit` runs on the TensorFlow backend here.
    """

    def train_step(self, data):
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        with tf.GradientTape() as tape:
            predictions = self(data, training=True)
            loss = self.compute_loss(x=data, y_pred=predictions)
            # Replica gradients are summed across replicas: each contributes its share of the mean.
            scaled = self.optimizer.scale_loss(loss / replicas)
        gradients = tape.gradient(scaled, self.trainable_variables)
        norm = tf.linalg.global_norm(gradients)
        rate = self.optimizer.learning_rate  # the rate of this step
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        self._loss_tracker.update_state(loss)
        return {"loss": self._loss_tracker.result(), "grad_norm": norm,
                "learning_rate": tf.convert_to_tensor(rate)}

    def plain(self) -> BERT4Rec:
        """A `BERT4Rec` with this model's configuration and weights."""
        model = BERT4Rec.from_config(self.get_config())
        model.build()
        model.set_weights(self.get_weights())
        return model
