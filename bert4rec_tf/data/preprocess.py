"""The paper's preprocessing: implicit feedback, stable time order, user and item filters, id maps.

Time order: each user's interactions are sorted by the exact value of their timestamps (see
`bert4rec_tf.data.readers`), ties kept in file order.

Id order (documented, fixed, the same for users and items): raw ids that are positive integers
(ASCII digits, not all zeros) come first, in numeric order, so files whose ids are 1..n, like the
original's preprocessed files, keep them. Every other id (``0``, ``-3``, ``1.5``, ``sku-7``) follows,
in order of first appearance in the time-sorted data. A stray other id therefore never renumbers the
integer ids; the report counts the other ids (`item_ids_not_positive_integers`,
`user_ids_not_positive_integers`). Spellings of one number (``7``, ``007``) are different ids,
ordered by first appearance. Real items get ids 1..n, users 1..U.

Duplicate rows: an interaction with the same user, item and timestamp as an earlier one (the same
user and item, in files without timestamps) is kept, because implicit feedback counts every
interaction, as the original code did; the report counts them (`duplicate_rows`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.readers import Interactions


@dataclasses.dataclass
class UserSequences:
    """Time-ordered item sequences of all users, in compressed form.

    Attributes:
        user_ids: raw user ids, [num_users] (str objects); user u (0-based) has model user id u + 1.
        item_ids: raw item ids, [num_items] (str objects); model item id i is raw id item_ids[i - 1].
        offsets: [num_users + 1] int64; user u's items are items[offsets[u]:offsets[u + 1]].
        items: [num_actions] int32 model item ids in 1..num_items.
        timestamps: [num_actions] exact timestamps (see `Interactions.timestamps`) or None.
    """

    user_ids: np.ndarray
    item_ids: np.ndarray
    offsets: np.ndarray
    items: np.ndarray
    timestamps: np.ndarray | None = None

    @property
    def num_users(self) -> int:
        return len(self.user_ids)

    @property
    def num_items(self) -> int:
        return len(self.item_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def sequence(self, user: int) -> np.ndarray:
        """Model item ids of 0-based user `user`, oldest first."""
        return self.items[self.offsets[user]:self.offsets[user + 1]]

    def stats(self) -> dict[str, float]:
        """Users, items, actions, average / minimum / median / maximum length."""
        lengths = self.lengths
        return {
            "users": int(self.num_users),
            "items": int(self.num_items),
            "actions": int(len(self.items)),
            "avg_length": float(lengths.mean()),
            "min_length": int(lengths.min()),
            "median_length": float(np.median(lengths)),
            "max_length": int(lengths.max()),
        }


def _is_positive_integer(text: str) -> bool:
    return text.isascii() and text.isdigit() and text.strip("0") != ""


def _ordered_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Codes 0..k-1 for `values` in the documented id order (see the module doc).

    Returns:
        The codes [len(values)], the distinct values in that order [k] (str objects), and how many
        of them are not positive integers.
    """
    codes, uniques = pd.factorize(values)  # codes in order of first appearance
    texts = [str(value) for value in uniques]
    numeric = np.asarray([_is_positive_integer(text) for text in texts], dtype=bool)
    digits = np.asarray([text.lstrip("0") if number else "" for text, number in zip(texts, numeric)], dtype=object)
    lengths = np.asarray([len(text) for text in digits])
    order = np.lexsort((np.arange(len(texts)), digits, lengths, ~numeric))  # integers by value, then the rest
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[codes], np.asarray(texts, dtype=object)[order], int((~numeric).sum())


def _time_keys(timestamps: np.ndarray) -> np.ndarray:
    """int64 keys that sort like the exact timestamps.

    The timestamps themselves when they are int64, else each one's rank among the distinct exact
    values (ints and Decimals compare exactly).
    """
    if timestamps.dtype != object:
        return timestamps
    return np.unique(timestamps, return_inverse=True)[1].reshape(-1).astype(np.int64)


def preprocess(
    interactions: Interactions,
    min_user_interactions: int = 5,
    min_item_interactions: int = 0,
) -> tuple[UserSequences, dict[str, int]]:
    """Applies the paper's preprocessing to a table of interactions.

    Every interaction counts (implicit feedback), duplicate rows included. Items with fewer than
    `min_item_interactions` interactions in the whole file are dropped first, then users left with
    fewer than `min_user_interactions`. Each user's items are sorted by their exact timestamps, ties
    kept in file order. Ids are numbered as the module doc says.

    Args:
        interactions: the table read from a source file.
        min_user_interactions: users with fewer interactions are dropped.
        min_item_interactions: items with fewer interactions are dropped (0 or 1: no item filter).

    Returns:
        The sequences and a report of what was read, dropped on purpose, kept as duplicates, and
        how many kept ids are not positive integers.

    Raises:
        DataError: when nothing is left after filtering.
    """
    users, items = interactions.users, interactions.items
    position = np.arange(len(users))
    times = _time_keys(interactions.timestamps) if interactions.timestamps is not None else None
    report = {"interactions_read": int(len(users))}

    item_codes, _ = pd.factorize(items)
    user_codes, _ = pd.factorize(users)
    rows = {"user": user_codes, "item": item_codes, **({"time": times} if times is not None else {})}
    report["duplicate_rows"] = int(pd.DataFrame(rows).duplicated().sum())

    item_counts = np.bincount(item_codes)
    keep = item_counts[item_codes] >= min_item_interactions
    report["items_read"] = int(len(item_counts))
    report["items_dropped_rare"] = int((item_counts < min_item_interactions).sum())
    report["interactions_dropped_rare_items"] = int((~keep).sum())

    user_counts = np.bincount(user_codes[keep], minlength=user_codes.max() + 1)
    short = user_counts < min_user_interactions
    report["users_read"] = int(len(user_counts))
    report["users_dropped_short"] = int(short.sum())
    dropped_short = keep & short[user_codes]
    report["interactions_dropped_short_users"] = int(dropped_short.sum())
    keep &= ~short[user_codes]
    if not keep.any():
        raise DataError(
            f"no interactions left after filtering (users >= {min_user_interactions}, "
            f"items >= {min_item_interactions} interactions)", interactions.path)

    users, items, position = users[keep], items[keep], position[keep]
    user_rank, user_ids, report["user_ids_not_positive_integers"] = _ordered_codes(users)
    order = np.lexsort((position, times[keep] if times is not None else position, user_rank))  # user, time, file
    user_rank, items = user_rank[order], items[order]
    item_rank, item_ids, report["item_ids_not_positive_integers"] = _ordered_codes(items)
    offsets = np.zeros(len(user_ids) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.bincount(user_rank, minlength=len(user_ids)))
    sequences = UserSequences(
        user_ids=user_ids,
        item_ids=item_ids,
        offsets=offsets,
        items=(item_rank + 1).astype(np.int32),
        timestamps=interactions.timestamps[keep][order] if interactions.timestamps is not None else None,
    )
    return sequences, report
