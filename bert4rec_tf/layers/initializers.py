"""The original code's initialisers: truncated normal kernels and embeddings, zero biases."""

import keras

from bert4rec_tf.constants import INITIALIZER_STDDEV


def kernel_initializer() -> keras.initializers.Initializer:
    """A fresh truncated normal initialiser (stddev INITIALIZER_STDDEV, cut at 2 stddev).

    A new instance per weight, so unseeded weights do not share values.
    """
    return keras.initializers.TruncatedNormal(stddev=INITIALIZER_STDDEV)


def bias_initializer() -> keras.initializers.Initializer:
    """Zeros, for every bias (Dense biases and the output bias over the vocabulary)."""
    return keras.initializers.Zeros()
