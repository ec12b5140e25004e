"""The fused GELU against the exact erf GELU, values and gradient."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from bert4rec_tf.layers.fused import gelu


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
