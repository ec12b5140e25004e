import math

import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.constants import LOSS_EPSILON
from bert4rec_tf.models import masked_lm_loss, matching_losses, next_item_bce_loss, next_item_ce_loss
from bert4rec_tf.models.losses import pooled_mean
from bert4rec_tf.models.softmax import sparse_softmax_cross_entropy


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


def _log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x))


def test_next_item_bce_loss_by_hand():
    # d = 2, vocab 4; two sequences of 2 positions, the second's first position is padding.
    table = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], "float32")
    hidden = np.array([[[0.5, -1.0], [2.0, 0.0]], [[9.0, 9.0], [0.0, 1.0]]], "float32")
    positives = np.array([[1, 3], [0, 2]])
    negatives = np.array([[2, 2], [3, 1]])
    # position (0,0): h.e1 = 0.5, h.e2 = -1; (0,1): h.e3 = 2, h.e2 = 0; (1,1): h.e2 = 1, h.e1 = 0
    terms = [(0.5, -1.0), (2.0, 0.0), (1.0, 0.0)]
    by_hand = sum(-_log_sigmoid(p) - math.log(1 - 1 / (1 + math.exp(-n))) for p, n in terms) / (3 + LOSS_EPSILON)
    loss = float(next_item_bce_loss(hidden, table, positives, negatives))
    assert loss == pytest.approx(by_hand, rel=1e-6)


def test_next_item_ce_loss_scores_every_item_at_real_positions():
    table = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], "float32")
    hidden = np.array([[[1.0, 2.0], [3.0, -1.0]]], "float32")
    positives = np.array([[2, 0]])  # the second position is padding
    # logits at position 0: [0, 1, 2]; label 2: log(1 + e + e^2) - 2
    by_hand = math.log(1 + math.e + math.e ** 2) - 2
    assert float(next_item_ce_loss(hidden, table, positives)) == pytest.approx(by_hand / (1 + LOSS_EPSILON), rel=1e-6)


def test_matching_losses_by_hand():
    table = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], "float32")
    users = np.array([[0.2, 0.1], [5.0, 5.0]], "float32")
    positives = np.array([1, 3])
    negatives = np.array([[2, 3], [1, 2]])
    # user 0: pos 0.2, negatives 0.1 and 0.3 -> mean 0.2; user 1: pos 10, negatives 5 and 5 -> mean 5
    c = 10.0
    # -log s(x) = log(1 + e^-x) and -log(1 - s(x)) = log(1 + e^x)
    by_hand = [np.logaddexp(0, -c * p) + np.logaddexp(0, c * n) for p, n in ((0.2, 0.2), (10.0, 5.0))]
    losses = matching_losses(users, table, positives, negatives, c)
    np.testing.assert_allclose(np.asarray(losses), by_hand, rtol=1e-5)


def test_pooled_mean_weighs_every_term_alike_whatever_its_kind():
    slots, slot_weights = np.array([1.0, 2.0, 9.0], "float32"), np.array([1.0, 1.0, 0.0], "float32")
    matches, match_weights = np.array([4.0, 7.0], "float32"), np.array([1.0, 0.0], "float32")
    loss = pooled_mean((slots, slot_weights), (matches, match_weights))
    assert float(loss) == pytest.approx((1.0 + 2.0 + 4.0) / (3 + LOSS_EPSILON), rel=1e-6)


@pytest.mark.parametrize("scale", [1.0, 30.0, 1e4])
def test_fused_cross_entropy_against_numpy_values_and_gradient(scale):
    rng = np.random.default_rng(int(scale))
    logits = rng.normal(size=(6, 11)) * scale
    labels = rng.integers(0, 11, 6)
    upstream = rng.random(6)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    expected = -log_softmax[np.arange(6), labels]
    expected_gradient = (np.exp(log_softmax) - np.eye(11)[labels]) * upstream[:, None]
    z = tf.constant(logits, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(z)
        losses = sparse_softmax_cross_entropy(tf.constant(labels, tf.int32), z)
        total = tf.reduce_sum(losses * tf.constant(upstream, tf.float32))
    np.testing.assert_allclose(losses.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tape.gradient(total, z).numpy(), expected_gradient, atol=1e-6)


def test_tied_cross_entropy_against_numpy_values_and_gradients():
    from bert4rec_tf.models.softmax import tied_softmax_cross_entropy

    rng = np.random.default_rng(7)
    hidden, table, bias = rng.normal(size=(6, 4)), rng.normal(size=(9, 4)) * 2, rng.normal(size=9)
    labels = np.array([3, 3, 0, 8, 5, 3])  # a repeated label: its row of the table gets every share
    upstream = rng.random(6)
    logits = hidden @ table.T + bias
    softmax = np.exp(logits - logits.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    expected = -np.log(softmax[np.arange(6), labels])
    d_logits = (softmax - np.eye(9)[labels]) * upstream[:, None]
    variables = [tf.constant(v, tf.float32) for v in (hidden, table, bias)]
    with tf.GradientTape() as tape:
        tape.watch(variables)
        losses = tied_softmax_cross_entropy(*variables, tf.constant(labels, tf.int32))
        total = tf.reduce_sum(losses * tf.constant(upstream, tf.float32))
    grads = tape.gradient(total, variables)
    np.testing.assert_allclose(losses.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[0].numpy(), d_logits @ table, atol=1e-5)
    np.testing.assert_allclose(grads[1].numpy(), d_logits.T @ hidden, atol=1e-5)
    np.testing.assert_allclose(grads[2].numpy(), d_logits.sum(0), atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert4rec", "bert4rec_match"])
def test_the_fused_training_loss_equals_compute_loss_with_the_same_gradients(name):
    import keras

    from tests.models.test_relatives import build_model, config, training_batch

    model = build_model(config(name, hidden_dropout=0.0, attention_dropout=0.0))
    batch = {key: tf.constant(value) for key, value in training_batch(name).items()}
    results = []
    for loss in (lambda: model.training_loss(batch),
                 lambda: model.compute_loss(x=batch, y_pred=model(batch, training=True))):
        with tf.GradientTape() as tape:
            value = loss()
        grads = tape.gradient(value, model.trainable_variables)
        results.append((float(value), [keras.ops.convert_to_numpy(tf.convert_to_tensor(g)) for g in grads]))
    assert np.isclose(results[0][0], results[1][0], rtol=1e-6)
    for fused, plain in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(fused, plain, rtol=1e-4, atol=1e-6)


def test_sampled_softmax_with_every_class_as_negative_is_the_exact_loss_and_gradients():
    from bert4rec_tf.models.softmax import sampled_softmax_cross_entropy, tied_softmax_cross_entropy

    rng = np.random.default_rng(11)
    hidden, table, bias = rng.normal(size=(6, 4)), rng.normal(size=(9, 4)) * 2, rng.normal(size=9)
    labels = tf.constant([3, 3, 0, 8, 5, 3], tf.int32)
    upstream = tf.constant(rng.random(6), tf.float32)
    variables = [tf.constant(v, tf.float32) for v in (hidden, table, bias)]
    results = []
    # Every class once, in a shuffled order, q uniform (any constant log q: it shifts every logit alike).
    for loss in (lambda h, t, b: tied_softmax_cross_entropy(h, t, b, labels),
                 lambda h, t, b: sampled_softmax_cross_entropy(h, t, b, labels, rng.permutation(9),
                                                               tf.fill([9], -np.log(9.0)))):
        with tf.GradientTape() as tape:
            tape.watch(variables)
            losses = loss(*variables)
            total = tf.reduce_sum(losses * upstream)
        results.append([losses] + [tf.convert_to_tensor(g) for g in tape.gradient(total, variables)])
    for exact, sampled in zip(*results):
        np.testing.assert_allclose(sampled.numpy(), exact.numpy(), rtol=1e-5, atol=1e-5)


def test_sampled_softmax_by_hand():
    """Two rows, d 1, K 3 negatives (1, 2, 2) with popularity log q: the correction, the accidental
    hit and the repeated negative, computed by hand."""
    from bert4rec_tf.models.softmax import sampled_softmax_cross_entropy

    table = np.array([[0.0], [1.0], [2.0], [3.0]])
    bias = np.array([0.0, 0.5, 0.0, -0.5])
    log_q = np.log([0.1, 0.2, 0.3, 0.4])
    hidden = np.array([[1.0], [-1.0]])
    labels, negatives = np.array([3, 2]), np.array([1, 2, 2])

    def logit(row, item):
        return hidden[row, 0] * table[item, 0] + bias[item] - log_q[item]

    # Row 0, label 3: negatives 1, 2, 2 all count. Row 1, label 2: both 2s are hits, only 1 counts.
    expected = [np.log(np.exp(logit(0, 3)) + np.exp(logit(0, 1)) + 2 * np.exp(logit(0, 2))) - logit(0, 3),
                np.log(np.exp(logit(1, 2)) + np.exp(logit(1, 1))) - logit(1, 2)]
    got = sampled_softmax_cross_entropy(hidden, table, bias, labels, negatives, log_q)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
