"""The paper's preprocessing: implicit feedback, stable time order, user and item filters, id maps.

Id order (documented, fixed): when every raw id of a kind is an integer the model ids follow the
numeric order (so the original's preprocessed files keep their ids 1..n); otherwise they follow the
order of first appearance in the time-sorted data. Real items get ids 1..n, users 1..U.
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
        user_ids: raw user ids, [num_users] (str); user u (0-based) has model user id u + 1.
        item_ids: raw item ids, [num_items] (str); model item id i is raw id item_ids[i - 1].
        offsets: [num_users + 1] int64; user u's items are items[offsets[u]:offsets[u + 1]].
        items: [num_actions] int32 model item ids in 1..num_items.
        timestamps: [num_actions] int64 or None.
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


def _ordered_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes 0..k-1 for `values` in the documented id order, and the distinct values in that order."""
    codes, uniques = pd.factorize(values)
    uniques = np.asarray(uniques, dtype=object)
    as_text = uniques.astype(str)
    if all(text.isdigit() for text in as_text):
        order = np.argsort(as_text.astype(np.int64), kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return rank[codes], uniques[order]
    return codes, uniques


def preprocess(
    interactions: Interactions,
    min_user_interactions: int = 5,
    min_item_interactions: int = 0,
) -> tuple[UserSequences, dict[str, int]]:
    """Applies the paper's preprocessing to a table of interactions.

    Every interaction counts (implicit feedback). Items with fewer than `min_item_interactions`
    interactions in the whole file are dropped first, then users left with fewer than
    `min_user_interactions`. Each user's items are sorted by timestamp, ties kept in file order.

    Args:
        interactions: the table read from a source file.
        min_user_interactions: users with fewer interactions are dropped.
        min_item_interactions: items with fewer interactions are dropped (0 or 1: no item filter).

    Returns:
        The sequences and a report of what was read and dropped on purpose.

    Raises:
        DataError: when nothing is left after filtering.
    """
    users, items = interactions.users, interactions.items
    position = np.arange(len(users))
    report = {"interactions_read": int(len(users))}

    item_codes, _ = pd.factorize(items)
    item_counts = np.bincount(item_codes)
    keep = item_counts[item_codes] >= min_item_interactions
    report["items_read"] = int(len(item_counts))
    report["items_dropped_rare"] = int((item_counts < min_item_interactions).sum())
    report["interactions_dropped_rare_items"] = int((~keep).sum())

    user_codes, _ = pd.factorize(users)
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
    stamps = interactions.timestamps[keep] if interactions.timestamps is not None else position
    user_rank, user_ids = _ordered_codes(users)
    order = np.lexsort((position, stamps, user_rank))  # user, then time, then file order
    user_rank, items = user_rank[order], items[order]
    item_rank, item_ids = _ordered_codes(items)
    offsets = np.zeros(len(user_ids) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.bincount(user_rank, minlength=len(user_ids)))
    sequences = UserSequences(
        user_ids=user_ids.astype(str),
        item_ids=item_ids.astype(str),
        offsets=offsets,
        items=(item_rank + 1).astype(np.int32),
        timestamps=stamps[order] if interactions.timestamps is not None else None,
    )
    return sequences, report
