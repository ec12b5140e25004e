"""The interaction training stream of the families that learn a vector per user (BPR-MF, NCF, FPMC).

One instance is one training interaction (user, item): the item is the positive, the item the user
had just before it is the previous item (FPMC's basket of one), and `k` negatives are drawn from the
items the user never had. There are no sequence features, so the batches are never length-grouped.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from bert4rec_tf.constants import PAD_ID
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.negatives import NegativeSampler
from bert4rec_tf.data.seeds import Stream, batch_positions, batch_stream, instance_seed


@dataclasses.dataclass(frozen=True)
class Interactions:
    """Every training interaction, users in order, each user's items in time order.

    Attributes:
        users: int32 [I] model user ids (user u of the training list is u + 1).
        items: int32 [I] the items.
        previous: int32 [I] the item the user had just before (0 for a user's first item).
    """

    users: np.ndarray
    items: np.ndarray
    previous: np.ndarray

    def __len__(self) -> int:
        return len(self.items)


def training_interactions(train: list[np.ndarray]) -> Interactions:
    """The interactions of the training sequences `train` (per user, the items in time order).

    Example: `training_interactions([[5, 6], [7]])` has users [1, 1, 2], items [5, 6, 7] and
    previous [0, 5, 0].
    """
    lengths = np.array([len(items) for items in train], dtype=np.int64)
    items = np.concatenate([np.asarray(row, dtype=np.int32) for row in train] or [np.zeros(0, np.int32)])
    previous = np.concatenate([[PAD_ID], items[:-1]]).astype(np.int32) if len(items) else items.copy()
    firsts = (np.cumsum(lengths) - lengths)[lengths > 0]  # each user's first interaction
    previous[firsts] = PAD_ID
    users = np.repeat(np.arange(1, len(train) + 1, dtype=np.int32), lengths)
    return Interactions(users=users, items=items, previous=previous)


def interaction_training_dataset(interactions: Interactions, seed: int, sampler: NegativeSampler,
                                 num_negatives: int, batch_size: int | None = None,
                                 start: int = 0) -> tf.data.Dataset:
    """The endless stream of training interactions, each with its user's negatives, made a whole
    batch at a time.

    Instance n is interaction index_shuffle(n mod I) of epoch n // I (I interactions; the order
    seeded by (seed, epoch)). The negatives of batch b (instances b * B to b * B + B - 1, B the batch
    size, 1 unbatched) are drawn for all its rows at once (`sample_rows`) with the seed (seed, b).
    A pure function of the batch number: `start`, a multiple of B, resumes it exactly.

    Args:
        interactions: the training interactions (`training_interactions`).
        seed: the data seed.
        sampler: draws the negatives from the items each user never had.
        num_negatives: k, negatives per instance.
        batch_size: full batches of this many instances when given.
        start: the first instance number (instances already consumed), a multiple of `batch_size`.

    Returns:
        Instances of int32 `user_ids`, `positive_ids`, `previous_ids` (scalars) and `negative_ids` [k]
        (with a leading batch dimension when batched).

    Raises:
        DataError: when there is no training interaction.
        ValueError: when `start` is not a multiple of `batch_size`.
    """
    count = len(interactions)
    if count == 0:
        raise DataError("the training sequences hold no interaction to train on")
    block = batch_size or 1
    users, items, previous = (tf.constant(values) for values in
                              (interactions.users, interactions.items, interactions.previous))

    def make(batch):
        index = batch_positions(batch, block, count, seed, Stream.INTERACTIONS)  # [B]
        user = tf.gather(users, index)
        negatives = sampler.sample_rows(user, num_negatives, instance_seed(seed, Stream.INTERACTION_NEGATIVES, batch))
        return {"user_ids": user, "positive_ids": tf.gather(items, index), "previous_ids": tf.gather(previous, index),
                "negative_ids": tf.cast(negatives, tf.int32)}

    return batch_stream(make, batch_size, start, "interaction")
