"""Metrics on groups of test targets by how often their item occurs in training: what a model does
for rare items (where item attributes should help) beside what it does on average.

A target's training frequency counts the item's occurrences in every user's training items (the
split's: the last two items of each user held out under "valid", the last one under "original").
"""

from __future__ import annotations

import numpy as np

from bert4rec_tf.data.preprocess import UserSequences
from bert4rec_tf.evaluation.metrics import metrics_from_ranks

# The slices' edges: fewer than 5 training occurrences, 5 to 20, more than 20.
FREQUENCY_EDGES = (5, 21)


def target_frequencies(sequences: UserSequences, train: list[np.ndarray], stage: str) -> np.ndarray:
    """Per user (0-based), the occurrences in `train` (`training_sequences` of the run's split) of
    its `stage` target ("valid": the second last item, "test": the last)."""
    if stage not in ("valid", "test"):
        raise ValueError(f"stage must be 'valid' or 'test', got {stage!r}")
    counts = np.bincount(np.concatenate(train) if train else np.zeros(0, np.int64),
                         minlength=sequences.num_items + 1)
    targets = sequences.items[sequences.offsets[1:] - (1 if stage == "test" else 2)]
    return counts[targets]


def slice_labels(edges: tuple[int, ...] = FREQUENCY_EDGES) -> list[str]:
    """The slices' names for `edges` (a < b < ...): "<5", "5-20", ">20" for the default."""
    labels = [f"<{edges[0]}"]
    labels += [f"{low}-{high - 1}" for low, high in zip(edges, edges[1:])]
    return labels + [f">{edges[-1] - 1}"]


def sliced_metrics(ranks: dict[str, np.ndarray], frequencies: np.ndarray, metric_names: dict[str, tuple[str, ...]],
                   edges: tuple[int, ...] = FREQUENCY_EDGES) -> dict[str, dict]:
    """Each slice's metrics per protocol, from the per-user `ranks` ({protocol: [users]}, the target's
    0-based rank) and the same users' target `frequencies`; with "users", how many users it holds
    (a slice without users has NaN metrics).

    Example: sliced_metrics({"pop": np.array([0, 50])}, np.array([2, 30]), {"pop": ("HR@10",)})
        == {"<5": {"users": 1, "pop": {"HR@10": 1.0}}, "5-20": {"users": 0, "pop": {"HR@10": nan}},
            ">20": {"users": 1, "pop": {"HR@10": 0.0}}}
    """
    groups = np.digitize(frequencies, edges)
    found = {}
    for index, label in enumerate(slice_labels(edges)):
        chosen = groups == index
        found[label] = {"users": int(chosen.sum()),
                        **{protocol: metrics_from_ranks(values[chosen], metric_names[protocol])
                           for protocol, values in ranks.items()}}
    return found
