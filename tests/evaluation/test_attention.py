"""The attention heat maps: the window follows each sequence's end; images are well formed."""

from __future__ import annotations

import numpy as np
import pytest

from bert4rec_tf.evaluation.attention import average_last_attention, heatmap_image


class FixedAttention:
    """One layer, one head: position i attends to j with weight (i * 10 + j) / 1000 (a marker).

    Its input is the history itself, padding (0) on either side.
    """

    def history_inputs(self, history):
        return {"input_ids": np.asarray(history)}

    def with_users(self, features, users):  # a model that reads no users (`SequentialRecommender`'s rule)
        return features

    def encode(self, features, training=False, return_attention_scores=False):
        batch, n = np.asarray(features["input_ids"]).shape
        grid = (np.arange(n)[:, None] * 10 + np.arange(n)[None, :]) / 1000.0
        return None, [np.tile(grid, (batch, 1, 1, 1))]


def test_window_ends_at_each_sequence_end_and_averages_users():
    histories = np.array([[5, 5, 5, 0, 0, 0], [5, 5, 5, 5, 5, 0], [5, 0, 0, 0, 0, 0], [0, 0, 0, 0, 5, 5]])
    out = average_last_attention(FixedAttention(), histories, last=2)
    assert out.shape == (1, 1, 2, 2)
    # user 1 window positions 1..2, user 2 positions 3..4, user 4 (padded on the left) 4..5;
    # user 3 is too short
    expected = (np.array([[11, 12], [21, 22]]) + np.array([[33, 34], [43, 44]])
                + np.array([[44, 45], [54, 55]])) / 3 / 1000.0
    np.testing.assert_allclose(out[0, 0], expected)
    with pytest.raises(ValueError, match="no sequence has 7 positions"):
        average_last_attention(FixedAttention(), histories, last=7)


def test_heatmap_image_shape_and_range():
    image = heatmap_image(np.array([[0.0, 1.0], [0.5, 0.25]]), cell=4)
    assert image.shape == (1, 8, 8, 3) and image.dtype == np.float32
    assert 0.0 <= image.min() and image.max() <= 1.0
    assert not np.allclose(image[0, 0, 0], image[0, 0, 4])   # different values, different colours
