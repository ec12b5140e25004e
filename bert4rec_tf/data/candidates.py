"""Negative candidates for the sampled evaluation protocols, deterministic from a seed.

pop-100 (the paper): negatives drawn without replacement with probability proportional to the
item's interaction count over the whole data set; uniform-100: drawn uniformly. Both exclude every
item the user interacted with. User u's draws come from its own generator seeded with
(seed, protocol, stage, u), so they do not depend on the order of the work.

Before drawing, every user is checked to leave enough items with a positive weight, so a catalogue
too small for the number of negatives is an error at once instead of a loop that never ends.
"""

from __future__ import annotations

import numpy as np

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.preprocess import UserSequences

PROTOCOLS = ("pop", "uniform")
_STAGES = ("valid", "test")


def item_popularity(sequences: UserSequences) -> np.ndarray:
    """[num_items + 1] interaction counts over all sequences; index 0 (padding) is 0."""
    return np.bincount(sequences.items, minlength=sequences.num_items + 1).astype(np.int64)


def _sampleable_items(sequences: UserSequences, weights: np.ndarray) -> np.ndarray:
    """[num_users] int64: per user, the items with a positive weight it never interacted with.

    Args:
        sequences: all users' sequences.
        weights: [num_items + 1] sampling weight of each model id.
    """
    positive = weights > 0
    owners = np.repeat(np.arange(sequences.num_users, dtype=np.int64), sequences.lengths)
    width = sequences.num_items + 1
    pairs = np.unique(owners * width + sequences.items)  # distinct (user, item) pairs
    seen = np.bincount(pairs // width, weights=positive[pairs % width], minlength=sequences.num_users)
    return int(positive.sum()) - seen.astype(np.int64)


def sample_negatives(sequences: UserSequences, protocol: str, stage: str, num_negatives: int,
                     seed: int) -> np.ndarray:
    """[num_users, num_negatives] int32 negatives for each user.

    Args:
        sequences: all users' sequences (their items are excluded).
        protocol: "pop" or "uniform".
        stage: "valid" or "test" (separate draws).
        num_negatives: negatives per user.
        seed: the base seed.

    Raises:
        DataError: before any draw, when a user leaves fewer than `num_negatives` items to sample,
            naming the numbers of items and users and the largest `num_negatives` that fits.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    weights = item_popularity(sequences).astype(np.float64)
    if protocol == "uniform":
        weights = np.ones_like(weights)
    weights[0] = 0.0
    left = _sampleable_items(sequences, weights)
    if left.min() < num_negatives:
        user = int(left.argmin())
        remedy = f"set --config num_negatives={left[user]} or less" if left[user] else "use more data"
        raise DataError(
            f"too few items for {num_negatives} negatives per user ({sequences.num_items} items, "
            f"{sequences.num_users} users): user {sequences.user_ids[user]!r} has fewer than {num_negatives} items "
            f"left to sample (only {left[user]}); {remedy}")
    cdf = np.cumsum(weights)
    out = np.zeros((sequences.num_users, num_negatives), dtype=np.int32)
    for user in range(sequences.num_users):
        seen = np.zeros(sequences.num_items + 1, dtype=bool)
        seen[sequences.sequence(user)] = True
        seen[0] = True
        rng = np.random.default_rng([seed, PROTOCOLS.index(protocol), _STAGES.index(stage), user])
        chosen: list[int] = []
        while len(chosen) < num_negatives:
            draws = np.searchsorted(cdf, rng.random(2 * num_negatives) * cdf[-1], side="right")
            for item in draws:
                if not seen[item]:
                    seen[item] = True
                    chosen.append(int(item))
                    if len(chosen) == num_negatives:
                        break
        out[user] = chosen
    return out
