import numpy as np

from bert4rec_tf.constants import INITIALIZER_STDDEV
from bert4rec_tf.layers.initializers import bias_initializer, kernel_initializer


def test_kernel_initializer_is_truncated_normal_with_the_paper_stddev():
    values = np.asarray(kernel_initializer()((200, 200)))
    assert np.abs(values).max() <= 2 * INITIALIZER_STDDEV
    # A normal cut at 2 stddev has 0.880 of the untruncated standard deviation.
    np.testing.assert_allclose(values.std(), 0.880 * INITIALIZER_STDDEV, rtol=0.02)


def test_fresh_kernel_initializers_give_different_values():
    assert np.any(np.asarray(kernel_initializer()((4, 4))) != np.asarray(kernel_initializer()((4, 4))))


def test_biases_start_at_zero():
    np.testing.assert_array_equal(np.asarray(bias_initializer()((3,))), np.zeros(3))
