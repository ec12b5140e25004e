"""Element-wise chains of the training step fused into one pass each, forward and backward.

Without fusion, TensorFlow runs every element-wise op of a chain as its own kernel, each reading
and writing the whole tensor: the attention's mask, softmax and dropout on [batch, heads, N, N]
take about 13 passes forward and 10 backward, the exact GELU on [batch, N, 4d] about 5 and 8, and a
dropout (random bits, comparison, factors, product) 4 and 1.
Here each chain is a function compiled by XLA (`jit_compile=True`), which fuses it into one loop,
inside the otherwise unchanged graph (the matrix products stay TensorFlow's oneDNN kernels). The
gradients are written by hand (`tf.custom_gradient`) and fused the same way; the dropout mask is
drawn again in the backward pass from the same stateless seed instead of being stored.

These run only in training (`training=True`); inference uses the plain ops, so exported models
need no XLA. The values agree with the plain ops to float32 round-off (tests compare them).
"""

from __future__ import annotations

import math

import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _keep_mask(shape, rate: float, seed):
    """bool [shape]: True with probability 1 - `rate` (a uint32 Philox draw against a threshold,
    exact to 2^-32), from the stateless int32 [2] `seed`."""
    bits = tf.random.stateless_uniform(shape, seed, dtype=tf.uint32, minval=None, maxval=None, alg="philox")
    return bits >= tf.constant(min(round(rate * 2.0 ** 32), 2 ** 32 - 1), tf.uint32)


@tf.function(jit_compile=True, reduce_retracing=True)
def _gelu_forward(x):
    return 0.5 * x * tf.math.erfc(-x * _SQRT_HALF)


@tf.function(jit_compile=True, reduce_retracing=True)
def _gelu_backward(x, upstream):
    # d/dx x Phi(x) = Phi(x) + x phi(x)
    return upstream * (0.5 * tf.math.erfc(-x * _SQRT_HALF) + x * _INV_SQRT_2PI * tf.exp(-0.5 * x * x))


@tf.custom_gradient
def gelu(x):
    """The exact (erf) GELU x * Phi(x), one fused pass forward and one backward.

    Args:
        x: float tensor.

    Returns:
        A tensor shaped like `x`.
    """
    return _gelu_forward(x), lambda upstream: _gelu_backward(x, upstream)


def _scale(rate: float) -> float:
    return 1.0 / (1.0 - rate)


@tf.function(jit_compile=True, reduce_retracing=True)
def _dropout_kernel(x, seed, rate):
    return tf.where(_keep_mask(tf.shape(x), rate, seed), x * tf.cast(_scale(rate), x.dtype), tf.zeros_like(x))


def dropout(x, rate: float, seed):
    """Zeroes each element with probability `rate` and scales the rest by 1 / (1 - rate), one fused
    pass forward and one backward (the same mask, drawn again from `seed`).

    Args:
        x: float tensor.
        rate: drop probability in (0, 1) (a Python float: one compiled kernel per rate).
        seed: int32 [2] stateless seed.

    Returns:
        A tensor shaped like `x`.
    """
    seed = tf.convert_to_tensor(seed, tf.int32)

    @tf.custom_gradient
    def fused(x):
        return _dropout_kernel(x, seed, rate), lambda upstream: _dropout_kernel(upstream, seed, rate)

    return fused(x)


@tf.function(jit_compile=True, reduce_retracing=True)
def _softmax_dropout_forward(scores, bias, seed, rate):
    probs = tf.nn.softmax(scores + bias, axis=-1)
    if rate == 0.0:
        return probs, probs
    dropped = tf.where(_keep_mask(tf.shape(probs), rate, seed), probs * _scale(rate), tf.zeros_like(probs))
    return probs, dropped


@tf.function(jit_compile=True, reduce_retracing=True)
def _softmax_dropout_backward(probs, upstream, seed, rate):
    if rate != 0.0:
        upstream = tf.where(_keep_mask(tf.shape(probs), rate, seed), upstream * _scale(rate),
                            tf.zeros_like(upstream))
    # The softmax's Jacobian: p * (g - sum(g * p)) along the keys.
    return probs * (upstream - tf.reduce_sum(upstream * probs, axis=-1, keepdims=True))


def softmax_dropout(scores, bias, rate: float, seed):
    """softmax(scores + bias) along the last axis, then dropout, fused; also the probabilities.

    Args:
        scores: float32 [..., keys], e.g. the attention scores [batch, heads, queries, keys].
        bias: float32, broadcastable to `scores` (0 where attention is allowed, a large negative
            value where not); receives no gradient.
        rate: dropout rate in [0, 1) (a Python float: one compiled kernel per rate).
        seed: int32 [2] stateless seed of the dropout mask.

    Returns:
        (probabilities before dropout, probabilities after dropout), float32 like `scores`;
        the gradient flows through the second to `scores`.
    """
    seed = tf.convert_to_tensor(seed, tf.int32)

    @tf.custom_gradient
    def fused(scores):
        probs, dropped = _softmax_dropout_forward(scores, bias, seed, rate)

        def gradient(_, upstream):  # the gradient through the probabilities before dropout is not used
            return _softmax_dropout_backward(probs, upstream, seed, rate)

        return (tf.stop_gradient(probs), dropped), gradient

    return fused(scores)
