"""The validation loss: each model's own training loss on the validation targets.

For every (sampled) user the instance is the one the model ranks with at validation: its validation
history as `history_inputs` makes it, the validation target as the one item to predict there.

- Cloze models (bert4rec, bert4rec_1mask): one masked slot, the [MASK] appended to the history, whose
  true item is the target; the loss is the masked-item cross-entropy over the vocabulary.
- BERT4Rec with matching: the same slot, plus the matching task with the target as the matched item
  and the first `match_negatives` of the user's uniform validation negatives.
- SASRec: only the last position (the newest history item) has a next item, the target; "bce"
  scores it against the first of the user's uniform validation negatives, "ce" over all items.
- POP: none (it has no loss; nothing is trained).

The loss is `compute_loss` on these features with dropout off, averaged over users (every model's
loss is a mean of one term per user here). The negatives are the prepared data's fixed uniform-100
validation candidates (drawn from items the user never had), so the value changes only with the
weights.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import ops

LOSS_USERS = 1024  # users the validation loss is computed on (spread evenly), to keep it cheap


def loss_instances(model, histories: np.ndarray, targets: np.ndarray, negatives: np.ndarray) -> dict | None:
    """The model's training features for predicting `targets` after `histories`, one loss term per row.

    Args:
        model: a `SequentialRecommender`.
        histories: int [users, L] validation histories, right-padded (`evaluation_histories`).
        targets: int [users] validation targets.
        negatives: int [users, C] items each user never had (C >= 1; the matching task uses up to
            `match_negatives` of them).

    Returns:
        The feature dict of the model's training pipeline (see the module docstring), or None for a
        model with nothing to train.
    """
    kind = model.TRAINING_INSTANCES
    if kind == "none":
        return None
    features = {name: ops.convert_to_numpy(value) for name, value in model.history_inputs(histories).items()}
    targets = np.asarray(targets, dtype=np.int64)
    users = len(targets)
    if kind in ("masked", "masked_matching"):
        features.update(masked_lm_positions=(features["input_mask"].sum(axis=1) - 1)[:, None],  # the [MASK]
                        masked_lm_ids=targets[:, None],
                        masked_lm_weights=np.ones((users, 1), dtype=np.float32))
        if kind == "masked_matching":
            features.update(match_positive=targets[:, None],
                            match_negatives=np.asarray(negatives[:, :model.model_config.match_negatives], np.int64))
        return features
    if kind == "next_item":
        positive = np.zeros(features["input_ids"].shape, dtype=np.int64)  # [users, max_len]
        negative = np.zeros_like(positive)
        positive[:, -1], negative[:, -1] = targets, negatives[:, 0]  # left padding: the newest item is last
        features.update(positive_ids=positive, negative_ids=negative)
        return features
    raise ValueError(f"no validation loss for training instances {kind!r}")


def validation_loss_function(model, histories: np.ndarray, targets: np.ndarray, negatives: np.ndarray,
                             users: int = LOSS_USERS, batch_size: int = 256):
    """A function of no argument giving the model's current validation loss, or None for POP.

    The instances (`loss_instances`) are made and the model's loss traced once, here, for at most
    `users` users spread evenly over all of them; each call runs the model on them without dropout,
    `batch_size` users at a time.

    Args:
        model: a `SequentialRecommender` (the one being trained: the function reads its weights).
        histories, targets, negatives: as in `loss_instances`, for every user.
        users: the most users to use.
        batch_size: users per forward pass.
    """
    chosen = np.unique(np.linspace(0, len(targets) - 1, min(users, len(targets))).astype(np.int64))
    features = loss_instances(model, histories[chosen], targets[chosen], negatives[chosen])
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
