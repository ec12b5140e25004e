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
    target = ops.expand_dims(target_scores, -1)  # [batch, 1]
    beats = ops.logical_or(ops.greater_equal(other_scores, target),
                           ops.logical_or(ops.isnan(other_scores), ops.isnan(target)))  # [batch, C]
    if other_valid is not None:
        beats = ops.logical_and(beats, other_valid)
    return ops.sum(ops.cast(beats, "int32"), axis=-1)


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
