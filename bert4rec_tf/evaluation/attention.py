"""Average attention over the last positions of each sequence, as in the paper's heat-map figure."""

from __future__ import annotations

import numpy as np
from keras import ops

# Dark blue -> teal -> yellow, interpolated for the heat maps.
_COLORS = np.array([[0.13, 0.11, 0.42], [0.13, 0.57, 0.55], [0.99, 0.91, 0.15]], dtype=np.float32)


def average_last_attention(model, histories: np.ndarray, last: int = 10, users: np.ndarray | None = None) -> np.ndarray:
    """Attention among each sequence's last `last` positions, averaged over users.

    The sequences are the model's own inputs for the histories (`history_inputs`), so for BERT4Rec
    the window ends at the appended [MASK].

    Args:
        model: a model with `history_inputs`, `with_users` (`SequentialRecommender`'s) and
            `encode(features, return_attention_scores=True)`.
        histories: int [users, L] raw histories, e.g. validation histories.
        last: the window, ending at each sequence's last real position; shorter sequences are skipped.
        users: the histories' model user ids [users], for a model that reads users (user attributes).

    Returns:
        float32 [num_layers, num_heads, last, last]: row i is how position i of the window attends to
        the window's positions (rows sum to at most 1: attention outside the window is left out).

    Raises:
        ValueError: when no sequence has `last` positions.
    """
    features = model.with_users(model.history_inputs(histories), users)
    features = {name: ops.convert_to_numpy(value) for name, value in features.items()}
    real = features["input_ids"] != 0  # [users, n]
    keep = real.sum(axis=1) >= last
    if not keep.any():
        raise ValueError(f"no sequence has {last} positions")
    subset = {name: value[keep] for name, value in features.items()}
    _, scores = model.encode(subset, training=False, return_attention_scores=True)
    ends = real.shape[1] - 1 - np.argmax(real[keep][:, ::-1], axis=1)  # [users] the last real position
    window = ends[:, None] - last + 1 + np.arange(last)[None, :]  # [users, last]
    out = []
    for layer_scores in scores:
        probs = ops.convert_to_numpy(layer_scores)  # [users, heads, n, n]
        rows = np.take_along_axis(probs, window[:, None, :, None], axis=2)  # [users, heads, last, n]
        block = np.take_along_axis(rows, window[:, None, None, :], axis=3)  # [users, heads, last, last]
        out.append(block.mean(axis=0))
    return np.stack(out).astype(np.float32)


def heatmap_image(matrix: np.ndarray, cell: int = 16) -> np.ndarray:
    """A [1, rows * cell, cols * cell, 3] float image in [0, 1] of `matrix` scaled to its maximum."""
    scaled = matrix / max(float(matrix.max()), 1e-12)
    position = scaled * (len(_COLORS) - 1)
    low = np.clip(np.floor(position).astype(int), 0, len(_COLORS) - 2)
    fraction = (position - low)[..., None]
    rgb = _COLORS[low] * (1 - fraction) + _COLORS[low + 1] * fraction  # [rows, cols, 3]
    return np.kron(rgb, np.ones((cell, cell, 1), dtype=np.float32))[None].astype(np.float32)
