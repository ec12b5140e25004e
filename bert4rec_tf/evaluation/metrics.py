"""Ranks of the target and the ranking metrics derived from them.

The rank is 0-based: the number of competing items that score at least as high as the target, so
a tie ranks the target below, never above. A NaN score never helps the target: a NaN target score
ranks it last, and a competitor with a NaN score counts as beating it. With one relevant item per user:
HR@k = Recall@k = [rank < k], NDCG@k = [rank < k] / log2(rank + 2), MRR = 1 / (rank + 1).
"""

from __future__ import annotations

import math

import numpy as np
from keras import ops

from bert4rec_tf.constants import PAD_ID

SAMPLED_METRICS = ("HR@1", "HR@5", "HR@10", "NDCG@5", "NDCG@10", "MRR")
FULL_METRICS = ("Recall@10", "Recall@20", "NDCG@10", "NDCG@20", "MRR")


def target_rank(target_scores, other_scores, other_valid=None):
    """0-based rank of the target among the others; ties and NaN scores count against the target.

    Args:
        target_scores: float [batch].
        other_scores: float [batch, C] scores of the competing items.
        other_valid: bool [batch, C], False for items that do not compete (history, padding);
            None: all compete.

    Returns:
        int32 [batch].
    """
    # An item beats the target unless it scores below it; a comparison with NaN on either side is
    # False, so NaN scores count against the target without a pass of their own.
    below = ops.less(other_scores, ops.expand_dims(target_scores, -1))  # [batch, C]
    if other_valid is None:
        return ops.shape(other_scores)[-1] - ops.sum(ops.cast(below, "int32"), axis=-1)
    return ops.sum(ops.cast(ops.logical_and(other_valid, ops.logical_not(below)), "int32"), axis=-1)


def full_ranking_rank(scores, target_scores, excluded, num_items: int):
    """0-based rank of the target among the real items 1..num_items outside `excluded`.

    The rank `target_rank` gives with a [batch, vocab] mask that is False for the padding id, the
    ids from [MASK] on and each user's excluded items, counted without building that mask: the
    items beating the target among all real items, less those among the user's excluded items.
    Ties and NaN scores count against the target as in `target_rank`.

    Args:
        scores: float [batch, V] scores of every id (V > num_items).
        target_scores: float [batch].
        excluded: int [batch, W] the distinct real items that do not compete (the user's history
            and the target itself), right-padded with PAD_ID (0).
        num_items: real items, ids 1..num_items.

    Returns:
        int32 [batch].
    """
    everyone = target_rank(target_scores, scores[:, 1:num_items + 1])
    gathered = ops.take_along_axis(scores, excluded, axis=1)  # [batch, W]
    return everyone - target_rank(target_scores, gathered, ops.not_equal(excluded, PAD_ID))


def metrics_from_ranks(ranks: np.ndarray, names: tuple[str, ...]) -> dict[str, float]:
    """Averages over users of the named metrics ("HR@k", "Recall@k", "NDCG@k", "MRR")."""
    ranks = np.asarray(ranks, dtype=np.float64)
    out = {}
    for name in names:
        if name == "MRR":
            values = 1.0 / (ranks + 1.0)
        else:
            kind, k = name.split("@")
            hit = ranks < int(k)
            if kind in ("HR", "Recall"):
                values = hit.astype(np.float64)
            elif kind == "NDCG":
                values = np.where(hit, 1.0 / np.log2(ranks + 2.0), 0.0)
            else:
                raise ValueError(f"unknown metric {name!r}")
        out[name] = float(values.mean()) if len(values) else math.nan
    return out
