"""The fused training kernels against the plain ops they replace, values and gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.layers.fused import _keep_mask, gelu, softmax_dropout


def gradient_of(function, x, weights):
    with tf.GradientTape() as tape:
        tape.watch(x)
        value = function(x)
        loss = tf.reduce_sum(value * weights)
    return value, tape.gradient(loss, x)


def test_gelu_and_its_gradient_match_the_exact_erf_gelu():
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(0, 3, (7, 5, 33)).astype(np.float32))
    weights = tf.constant(rng.normal(size=(7, 5, 33)).astype(np.float32))
    value, grad = gradient_of(gelu, x, weights)
    reference = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))(x.numpy().astype(np.float64))
    derivative = np.vectorize(lambda v: 0.5 * (1 + math.erf(v / math.sqrt(2)))
                              + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi))(x.numpy().astype(np.float64))
    np.testing.assert_allclose(value.numpy(), reference, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad.numpy(), derivative * weights.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rate", [0.0, 0.3])
def test_softmax_dropout_matches_mask_softmax_and_dropout_with_the_same_mask(rate):
    rng = np.random.default_rng(1)
    scores = tf.constant(rng.normal(0, 2, (3, 2, 9, 9)).astype(np.float32))
    allowed = rng.random((3, 1, 1, 9)) < 0.7
    allowed[..., 0] = True
    bias = tf.constant((1.0 - allowed) * -10000.0, tf.float32)
    weights = tf.constant(rng.normal(size=(3, 2, 9, 9)).astype(np.float32))
    seed = tf.constant([4, 7], tf.int32)

    def plain(s):
        probs = tf.nn.softmax(s + bias, axis=-1)
        if not rate:
            return probs
        return tf.where(_keep_mask(tf.shape(s), rate, seed), probs / (1 - rate), 0.0)

    value, grad = gradient_of(lambda s: softmax_dropout(s, bias, rate, seed)[1], scores, weights)
    expected, expected_grad = gradient_of(plain, scores, weights)
    np.testing.assert_allclose(value.numpy(), expected.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(grad.numpy(), expected_grad.numpy(), rtol=1e-4, atol=1e-6)
    probs = softmax_dropout(scores, bias, rate, seed)[0].numpy()
    np.testing.assert_allclose(probs, tf.nn.softmax(scores + bias).numpy(), rtol=1e-5, atol=1e-7)
    assert np.all(probs[np.broadcast_to(~allowed, probs.shape)] == 0)  # masked keys get nothing
    again, _ = gradient_of(lambda s: softmax_dropout(s, bias, rate, seed)[1], scores, weights)
    assert np.array_equal(value.numpy(), again.numpy())  # the same seed draws the same mask


def test_the_fused_dropout_keeps_each_entry_with_probability_one_minus_the_rate():
    scores = tf.zeros((64, 4, 32, 32))
    _, dropped = softmax_dropout(scores, 0.0, 0.2, tf.constant([1, 2], tf.int32))
    kept = float(np.mean(dropped.numpy() > 0))
    assert abs(kept - 0.8) < 0.005  # 262,144 draws: the standard error is 0.0008
    np.testing.assert_allclose(dropped.numpy()[dropped.numpy() > 0], 1 / 32 / 0.8, rtol=1e-6)
