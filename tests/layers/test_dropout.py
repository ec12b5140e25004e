"""The fast dropout: its distribution, scaling, gradient and reproducibility."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.layers import Dropout
from bert4rec_tf.layers.dropout import dropout


def test_drops_the_rate_and_scales_the_rest():
    x = tf.ones([1000, 1000])
    y = dropout(x, 0.1, tf.constant([3, 4], tf.int32)).numpy()
    kept = y != 0
    # 1e6 Bernoulli(0.9) draws: the share is within 5 standard deviations (0.0003) of 0.9.
    assert abs(kept.mean() - 0.9) < 5 * np.sqrt(0.9 * 0.1 / 1e6)
    np.testing.assert_allclose(y[kept], 1 / 0.9, rtol=1e-6)


def test_the_gradient_is_the_same_mask_and_scale():
    x = tf.random.normal([64, 50])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = dropout(x, 0.3, tf.constant([1, 2], tf.int32))
        loss = tf.reduce_sum(y * 2.0)
    factors = np.where(y.numpy() != 0, 1 / 0.7, 0.0)
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), 2.0 * factors, rtol=1e-6)


def test_a_seed_gives_one_mask_and_another_seed_another():
    x = tf.ones([100, 100])
    first = dropout(x, 0.5, tf.constant([7, 8], tf.int32)).numpy()
    np.testing.assert_array_equal(first, dropout(x, 0.5, tf.constant([7, 8], tf.int32)).numpy())
    assert (first != dropout(x, 0.5, tf.constant([7, 9], tf.int32)).numpy()).any()


def test_layer_is_the_identity_outside_training_and_reproducible_under_set_random_seed():
    x = tf.ones([20, 30])
    layer = Dropout(0.2)
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
    np.testing.assert_array_equal(Dropout(0.0)(x, training=True).numpy(), x.numpy())
    masks = []
    for _ in range(2):
        keras.utils.set_random_seed(5)
        layer = Dropout(0.2)
        masks.append([layer(x, training=True).numpy() for _ in range(2)])
    np.testing.assert_array_equal(masks[0][0], masks[1][0])
    np.testing.assert_array_equal(masks[0][1], masks[1][1])
    assert (masks[0][0] != masks[0][1]).any()  # every call draws a new mask


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5])
def test_rates_outside_0_1_are_refused(rate):
    with pytest.raises(ValueError, match="dropout rate"):
        Dropout(rate)
