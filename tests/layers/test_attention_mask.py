import numpy as np

from bert4rec_tf.layers import attention_mask


def test_padding_mask_hides_padded_keys_for_every_query():
    mask = np.asarray(attention_mask(np.array([[1, 1, 0], [1, 0, 0]])))
    assert mask.shape == (2, 1, 3)
    np.testing.assert_array_equal(mask[:, 0], [[True, True, False], [True, False, False]])


def test_causal_mask_is_lower_triangular_and_hides_padding():
    mask = np.asarray(attention_mask(np.array([[1, 1, 0]]), causal=True))
    expected = [[True, False, False], [True, True, False], [True, True, False]]
    np.testing.assert_array_equal(mask, [expected])


def test_boolean_padding_mask_is_accepted():
    mask = np.asarray(attention_mask(np.array([[True, False]]), causal=True))
    np.testing.assert_array_equal(mask, [[[True, False], [True, False]]])
