"""The validation loss: each model's own training loss on the validation targets.

For every (sampled) user the instance is the one the model ranks with at validation: its validation
history as `history_inputs` makes it, the validation target as the one item to predict there. Which
features that instance has is the model's Task's (`Task.loss_features`); a model with nothing to
train has none.

The loss is `compute_loss` on these features with dropout off, averaged over users (every model's
loss is a mean of one term per user here). The negatives are the prepared data's fixed uniform-100
validation candidates (drawn from items the user never had), so the value changes only with the
weights.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from bert4rec_tf.constants import MAX_BATCH_SCORES

LOSS_USERS = 1024  # users the validation loss is computed on (spread evenly), to keep it cheap


def validation_loss_function(model, loss_features, histories: np.ndarray, targets: np.ndarray,
                             negatives: np.ndarray, users: int = LOSS_USERS, batch_size: int = 256):
    """A function of no argument giving the model's current validation loss, or None when the model
    has no loss features.

    The instances (`loss_features`) are made and the model's loss traced once, here, for at most
    `users` users spread evenly over all of them; each call runs the model on them without dropout,
    `batch_size` users at a time.

    Args:
        model: a `SequentialRecommender` (the one being trained: the function reads its weights).
        loss_features: the Task's `loss_features(model, histories, targets, negatives, users=...)`.
        histories: int [users, L] validation histories, right-padded (`evaluation_histories`).
        targets: int [users] validation targets.
        negatives: int [users, C] items each user never had (C >= 1).
        users: the most users to use.
        batch_size: users per forward pass, at most `MAX_BATCH_SCORES // vocab_size` (at least one):
            the exact loss scores the whole vocabulary for each user.
    """
    batch_size = max(1, min(batch_size, MAX_BATCH_SCORES // model.model_config.vocab_size))
    chosen = np.unique(np.linspace(0, len(targets) - 1, min(users, len(targets))).astype(np.int64))
    features = loss_features(model, histories[chosen], targets[chosen], negatives[chosen], users=chosen + 1)
    if features is None:
        return None

    def batch_loss(batch):
        return model.compute_loss(x=batch, y_pred=model(batch, training=False))

    if isinstance(model, keras.Model):
        # One graph for every batch size, traced now: before training, not in its first validation.
        signature = {name: tf.TensorSpec((None,) + value.shape[1:], tf.as_dtype(value.dtype))
                     for name, value in features.items()}
        batch_loss = tf.function(batch_loss, input_signature=[signature])
        batch_loss.get_concrete_function()

    def loss() -> float:
        total = 0.0
        for begin in range(0, len(chosen), batch_size):
            batch = {name: value[begin:begin + batch_size] for name, value in features.items()}
            total += float(batch_loss(batch)) * len(batch["input_ids"])
        return total / len(chosen)

    return loss
