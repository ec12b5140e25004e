"""Negative items for training, inside tf.data: uniform over the items a user never had
(`NegativeSampler`), by popularity among them (`PopularNegativeSampler`), or drawn by popularity for a
whole batch (`popularity_sampler`).

Uniform sampling is exact, without rejection: the user's items are kept sorted, and the r-th item outside
them is found by a binary search, so a draw never returns one of the user's items and costs
O(log(items of the user)). Draws are stateless: the same seed gives the same negatives.
"""

from __future__ import annotations

from typing import Callable

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
        below = values - local - 1
        self._below = tf.constant(below, tf.int64)
        # Every user's `below` in one sorted array, user u's shifted by (u - 1) * (num_items + 1): a
        # batch of users is searched at once (`sample_rows`).
        self._keys = tf.constant(np.repeat(np.arange(len(rows), dtype=np.int64), lengths) * (num_items + 1) + below,
                                 tf.int64)
        self._free = tf.constant(num_items - lengths, tf.int64)

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

    def sample_rows(self, users: tf.Tensor, count: int, seed: tf.Tensor) -> tf.Tensor:
        """int64 [rows, count]: for each user of `users` (1-based, [rows]) `count` items, uniform over
        those the user never had, in one draw for all rows (one seed [2] for the whole batch).

        The r-th non-item of a row's user is found for every row in one binary search over every
        user's items at once. Each rank is floor(u * free) of a float64 uniform u, uniform over the
        user's `free` non-items to within free / 2**53.
        """
        users = tf.cast(users, tf.int64) - 1  # [rows]
        uniform = tf.random.stateless_uniform([tf.size(users), count], seed, dtype=tf.float64)  # [rows, count]
        free = tf.gather(self._free, users)[:, tf.newaxis]  # [rows, 1]
        rank = tf.minimum(tf.cast(uniform * tf.cast(free, tf.float64), tf.int64), free - 1)  # [rows, count]
        base = users[:, tf.newaxis] * (self.num_items + 1)  # [rows, 1]
        found = tf.searchsorted(self._keys, tf.reshape(base + rank, [-1]), side="right", out_type=tf.int64)
        below = tf.reshape(found, tf.shape(rank)) - tf.gather(self._offsets, users)[:, tf.newaxis]
        return rank + 1 + below


def _rows_one_by_one(sampler, users: tf.Tensor, count: int, seed: tf.Tensor) -> tf.Tensor:
    """`sample_rows` by `sample` for each row, row i seeded (seed folded with i)."""
    users = tf.cast(users, tf.int64)
    rows = tf.range(tf.size(users, out_type=tf.int64))
    return tf.map_fn(lambda row: sampler.sample(users[row], count, tf.random.experimental.stateless_fold_in(seed, row)),
                     rows, fn_output_signature=tf.TensorSpec([count], tf.int64))


def item_counts(train: list[np.ndarray], size: int) -> np.ndarray:
    """int64 [size]: how often each id 0..size - 1 occurs in `train` (per user, the training items)."""
    items = np.concatenate([np.asarray(row, dtype=np.int64).ravel() for row in train] or [np.zeros(0, np.int64)])
    return np.bincount(items, minlength=size)[:size]


def popularity_sampler(train: list[np.ndarray], num_items: int, alpha: float) -> Callable[..., tf.Tensor]:
    """`draw(count, seed)`: int32 [count] items 1..num_items, independent, item i with probability
    proportional to (its occurrences in `train`) ** alpha (alpha 0: uniform over every item; alpha > 0:
    never an item absent from `train`); stateless, so the same seed [2] gives the same draws.

    Args:
        train: per user, the training items.
        num_items: real items are 1..num_items.
        alpha: the popularity exponent (GRU4Rec's `sample_alpha`).
    """
    counts = item_counts(train, num_items + 1)[1:].astype(np.float64)
    cumulative = tf.constant(np.cumsum(np.power(counts, alpha)))  # [num_items], 0 ** 0 = 1

    def draw(count: int, seed) -> tf.Tensor:
        points = tf.random.stateless_uniform([count], seed, dtype=tf.float64) * cumulative[-1]
        # Item i + 1 when cumulative[i - 1] <= point < cumulative[i]: never an item of weight 0.
        index = tf.searchsorted(cumulative, points, side="right", out_type=tf.int32)
        return tf.minimum(index, num_items - 1) + 1

    return draw


class PopularNegativeSampler:
    """Draws items a user never had, each with probability proportional to its training popularity
    ** `alpha` among them, by rejection: `tries` x count draws by popularity (`popularity_sampler`),
    the first `count` the user never had kept, in order. Should fewer than `count` survive (a user
    who had most of the popular items), the rest are uniform over the user's non-items
    (`NegativeSampler`), so a draw never returns one of the user's items. Stateless, as
    `NegativeSampler`, with the same `sample` signature.

    Args:
        train_sequences: per user (user id u is index u - 1), the items the user had.
        num_items: real items are 1..num_items.
        alpha: the popularity exponent (> 0; at 0 `NegativeSampler` draws uniformly without rejection).
        tries: draws per wanted negative.

    Raises:
        DataError: when a user had every item, so no negative exists.
    """

    def __init__(self, train_sequences: list[np.ndarray], num_items: int, alpha: float, tries: int = 4):
        self._uniform = NegativeSampler(train_sequences, num_items)
        self._draw = popularity_sampler(train_sequences, num_items, alpha)
        self._tries = tries
        # Each user's sorted items and a sentinel above every item, so that no row is empty.
        rows = [np.append(np.unique(np.asarray(items, dtype=np.int64)), num_items + 1) for items in train_sequences]
        self._offsets = tf.constant(np.concatenate([[0], np.cumsum([len(row) for row in rows])]), tf.int64)
        self._items = tf.constant(np.concatenate(rows or [np.zeros(0, np.int64)]), tf.int64)

    def sample(self, user: tf.Tensor, count: int, seed: tf.Tensor) -> tf.Tensor:
        """int64 [count] items user `user` (1-based, scalar) never had, by popularity ** alpha.

        Args:
            user: scalar int user id, 1-based.
            count: draws (independent, so repeats are possible).
            seed: [2] stateless seed.
        """
        user = tf.cast(user, tf.int64)
        items = self._items[self._offsets[user - 1]:self._offsets[user]]  # sorted, the sentinel last
        draws = tf.cast(self._draw(count * self._tries, seed), tf.int64)  # [count * tries]
        position = tf.searchsorted(items, draws, side="left", out_type=tf.int64)
        kept = tf.boolean_mask(draws, tf.gather(items, position) != draws)[:count]
        rest = self._uniform.sample(user, count, tf.random.experimental.stateless_fold_in(seed, 1))
        return tf.ensure_shape(tf.concat([kept, rest[:count - tf.size(kept, out_type=tf.int32)]], 0), [count])

    def sample_rows(self, users: tf.Tensor, count: int, seed: tf.Tensor) -> tf.Tensor:
        """int64 [rows, count]: `sample` for each user of `users`, row i with the seed folded with i."""
        return _rows_one_by_one(self, users, count, seed)


def negative_sampler(train_sequences: list[np.ndarray], num_items: int,
                     alpha: float = 0.0) -> NegativeSampler | PopularNegativeSampler:
    """The sampler of the items each user never had: uniform at `alpha` 0, else by popularity ** `alpha`."""
    if alpha:
        return PopularNegativeSampler(train_sequences, num_items, alpha)
    return NegativeSampler(train_sequences, num_items)
