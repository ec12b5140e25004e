"""Negative candidates for the sampled evaluation protocols, deterministic from a seed.

pop-100 (the paper): negatives drawn without replacement with probability proportional to the
item's interaction count over the whole data set; uniform-100: drawn uniformly. Both exclude every
item the user interacted with. User u's draws come from its own generator seeded with
(seed, protocol, stage, u), so they do not depend on the order of the work.
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
        DataError: when a user has fewer than `num_negatives` items left to sample.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    weights = item_popularity(sequences).astype(np.float64)
    if protocol == "uniform":
        weights = np.ones_like(weights)
    weights[0] = 0.0
    cdf = np.cumsum(weights)
    out = np.zeros((sequences.num_users, num_negatives), dtype=np.int32)
    for user in range(sequences.num_users):
        history = sequences.sequence(user)
        if sequences.num_items - np.unique(history).size < num_negatives:
            raise DataError(f"user {sequences.user_ids[user]} has fewer than {num_negatives} items left to "
                            f"sample as negatives; lower num_negatives")
        seen = np.zeros(sequences.num_items + 1, dtype=bool)
        seen[history] = True
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
