"""Negative items for training: uniform over the items a user never had, inside tf.data.

Sampling is exact, without rejection: the user's items are kept sorted, and the r-th item outside
them is found by a binary search, so a draw never returns one of the user's items and costs
O(log(items of the user)). Draws are stateless: the same seed gives the same negatives.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert4rec_tf.data.errors import DataError


class NegativeSampler:
    """Draws items uniformly from those a user never had.

    Args:
        train_sequences: per user (user id u is index u - 1), the items the user had.
        num_items: real items are 1..num_items.

    Raises:
        DataError: when a user had every item, so no negative exists.
    """

    def __init__(self, train_sequences: list[np.ndarray], num_items: int):
        rows = [np.unique(np.asarray(items, dtype=np.int64)) for items in train_sequences]
        lengths = np.array([len(row) for row in rows], dtype=np.int64)
        full = np.flatnonzero(lengths >= num_items)
        if len(full):
            raise DataError(f"user {full[0] + 1} had every one of the {num_items} items: no negative can be drawn")
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        values = np.concatenate(rows or [np.zeros(0, np.int64)])
        # below[j]: how many non-items of the user lie below its j-th item (sorted): v_j - j - 1.
        local = np.arange(len(values)) - np.repeat(offsets[:-1], lengths)
        self.num_items = num_items
        self._offsets = tf.constant(offsets, tf.int64)
        self._below = tf.constant(values - local - 1, tf.int64)

    def sample(self, user: tf.Tensor, count: int, seed: tf.Tensor) -> tf.Tensor:
        """int64 [count] items, uniform over those user `user` (1-based, scalar) never had.

        Args:
            user: scalar int user id, 1-based.
            count: draws (independent, so repeats are possible).
            seed: [2] stateless seed.
        """
        user = tf.cast(user, tf.int64)
        begin, end = self._offsets[user - 1], self._offsets[user]
        below = self._below[begin:end]  # [items of the user]
        free = self.num_items - (end - begin)
        rank = tf.random.stateless_uniform([count], seed, minval=0, maxval=free, dtype=tf.int64)  # [count]
        return rank + 1 + tf.searchsorted(below, rank, side="right", out_type=tf.int64)
