"""The exact GELU of the training step fused into one pass forward and one backward.

Without fusion, TensorFlow runs every element-wise op of x * Phi(x) as its own kernel, each reading
and writing the whole [batch, N, 4d] tensor: about 5 passes forward and 8 backward. Here the
forward and the hand-written backward (`tf.custom_gradient`) are each a function compiled by XLA
(`jit_compile=True`) into one loop, inside the otherwise unchanged graph (the matrix products stay
TensorFlow's oneDNN kernels). It runs only in training; inference uses the plain op, so exported
models need no XLA. The values agree with the plain op to float32 round-off (a test compares them).

The same treatment made the attention's mask, softmax and dropout and the hidden dropout slower on
an idle 2-core machine (XLA's fused loops against oneDNN's multi-threaded kernels), so those stay
TensorFlow's ops (docs/speed.md).
"""

from __future__ import annotations

import math

import tensorflow as tf

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


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
