import math

import numpy as np
import pytest

from bert4rec_tf.constants import LOSS_EPSILON
from bert4rec_tf.models import masked_lm_loss


def _cross_entropy(logits: list[float], label: int) -> float:
    return -(logits[label] - math.log(sum(math.exp(x) for x in logits)))


def test_weighted_mean_cross_entropy_by_hand():
    logits = [[[2.0, 1.0, 0.0], [0.0, 1.0, 3.0]], [[1.0, 1.0, 1.0], [5.0, 0.0, 0.0]]]
    labels = [[0, 2], [1, 0]]
    weights = [[1.0, 0.5], [1.0, 0.0]]
    # 2, 1, 0 -> label 0: log(e^2 + e + 1) - 2 = 0.40761; 0, 1, 3 -> label 2: 0.16985;
    # 1, 1, 1 -> any label: log 3 = 1.09861; the last slot has weight 0.
    by_hand = (0.40760596 + 0.5 * 0.16984602 + 1.09861229) / (2.5 + LOSS_EPSILON)
    assert _cross_entropy([2.0, 1.0, 0.0], 0) == pytest.approx(0.40760596, abs=1e-8)
    assert _cross_entropy([0.0, 1.0, 3.0], 2) == pytest.approx(0.16984602, abs=1e-8)
    loss = float(masked_lm_loss(np.array(labels), np.array(logits, "float32"), np.array(weights)))
    assert loss == pytest.approx(by_hand, rel=1e-6)


def test_flat_packed_layout_gives_the_same_loss():
    logits = np.random.default_rng(0).normal(size=(2, 3, 5)).astype("float32")
    labels = np.array([[1, 2, 0], [4, 0, 0]])
    weights = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], "float32")
    real = weights.reshape(-1) > 0
    packed = masked_lm_loss(labels.reshape(-1)[real], logits.reshape(-1, 5)[real], np.ones(3))
    np.testing.assert_allclose(float(packed), float(masked_lm_loss(labels, logits, weights)), rtol=1e-6)


def test_no_real_slot_gives_zero():
    loss = masked_lm_loss(np.zeros((1, 2), "int32"), np.zeros((1, 2, 3), "float32"), np.zeros((1, 2)))
    assert float(loss) == 0.0
