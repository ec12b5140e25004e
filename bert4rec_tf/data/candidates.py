"""Negative candidates for the sampled evaluation protocols, deterministic from a seed.

pop-100 (the paper): negatives drawn without replacement with probability proportional to the
item's interaction count over the whole data set; uniform-100: drawn uniformly. Both exclude every
item the user interacted with. User u's draws come from its own generator seeded with
(seed, protocol, stage, u), so they do not depend on the order of the work.

Before drawing, every user is checked to leave enough items with a positive weight, so a catalogue
too small for the number of negatives is an error at once instead of a loop that never ends
(`check_enough_items`; preparation runs it before it builds anything). With fewer negatives than the
largest cutoff of the sampled metrics (10), a target ranks in the top 10 whatever the model does:
`trivial_protocols_warning` says so.
"""

from __future__ import annotations

import numpy as np

from bert4rec_tf.constants import NUM_EVAL_NEGATIVES
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.preprocess import UserSequences

PROTOCOLS = ("pop", "uniform")
_STAGES = ("valid", "test")
# The largest cutoff of the sampled metrics (HR@10, NDCG@10): with fewer negatives than this, every
# target ranks within it, so HR@10 is 1.0 by construction.
LARGEST_CUTOFF = 10


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


def _weights(sequences: UserSequences, protocol: str) -> np.ndarray:
    """[num_items + 1] float64 sampling weight of each model id under `protocol`; 0 for padding."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    weights = item_popularity(sequences).astype(np.float64)
    if protocol == "uniform":
        weights = np.ones_like(weights)
    weights[0] = 0.0
    return weights


def _require_enough_items(sequences: UserSequences, weights: np.ndarray, num_negatives: int) -> None:
    """Raises the `check_enough_items` error for one protocol's `weights` ([num_items + 1])."""
    left = _sampleable_items(sequences, weights)
    if left.min() < num_negatives:
        user = int(left.argmin())
        remedy = f"set --config num_negatives={left[user]} or less" if left[user] else "use more data"
        raise DataError(
            f"too few items for {num_negatives} negatives per user ({sequences.num_items} items, "
            f"{sequences.num_users} users): user {sequences.user_ids[user]!r} has fewer than {num_negatives} items "
            f"left to sample (only {left[user]}); {remedy}")


def check_enough_items(sequences: UserSequences, num_negatives: int) -> None:
    """Checks that every user leaves `num_negatives` items to sample under each protocol.

    Raises:
        DataError: when a user leaves fewer, naming the numbers of items and users and the largest
            `num_negatives` that fits.
    """
    for protocol in PROTOCOLS:
        _require_enough_items(sequences, _weights(sequences, protocol), num_negatives)


def trivial_protocols_warning(num_negatives: int, num_items: int) -> str | None:
    """The one-line warning when `num_negatives` is below `LARGEST_CUTOFF`, so that the sampled
    protocols' HR@10 is 1.0 for any model; None otherwise.

    Args:
        num_negatives: negatives sampled per user.
        num_items: items in the catalogue.
    """
    if num_negatives >= LARGEST_CUTOFF:
        return None
    full = (f" (with {num_items} items its Recall@{LARGEST_CUTOFF} is 1.0 too: only its MRR and NDCG tell models "
            "apart)" if num_items <= LARGEST_CUTOFF else "")
    return (f"{num_negatives} negative{'s' if num_negatives != 1 else ''} sampled per user (num_negatives="
            f"{num_negatives}, catalogue of {num_items} items), not {NUM_EVAL_NEGATIVES}: each target ranks among "
            f"{num_negatives + 1} items, so the sampled protocols (pop, uniform) give HR@{LARGEST_CUTOFF} 1.0 by "
            f"construction and are meaningless here; judge the model by full ranking{full}")


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
    weights = _weights(sequences, protocol)
    _require_enough_items(sequences, weights, num_negatives)
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
