import numpy as np
import pytest

from bert4rec_tf.layers import MultiHeadAttention
from tests.keras_test_utils import run_layer_test


@pytest.mark.slow
def test_layer_contract(padded_batch, tmp_path):
    hidden, padding_mask = padded_batch
    run_layer_test(
        MultiHeadAttention,
        dict(num_heads=2, hidden_size=8, attention_dropout=0.1),
        hidden,
        (2, 5, 8),
        tmp_path,
        padding_mask=padding_mask,
    )


def test_padded_keys_get_zero_attention(padded_batch):
    hidden, padding_mask = padded_batch
    layer = MultiHeadAttention(num_heads=2, hidden_size=8)
    _, probs = layer(hidden, padding_mask=padding_mask, return_attention_scores=True)
    probs = np.asarray(probs)
    assert probs.shape == (2, 2, 5, 5)
    np.testing.assert_array_equal(probs[0, :, :, 3:], 0.0)
    assert np.all(probs[1] > 0)
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-6)


def test_appended_padding_leaves_real_positions_unchanged(padded_batch):
    hidden, padding_mask = padded_batch
    layer = MultiHeadAttention(num_heads=2, hidden_size=8)
    outputs = np.asarray(layer(hidden, padding_mask=padding_mask))
    noise = np.random.default_rng(2).normal(size=(2, 3, 8)).astype("float32")
    longer = np.asarray(
        layer(
            np.concatenate([hidden, noise], axis=1),
            padding_mask=np.pad(padding_mask, ((0, 0), (0, 3))),
        )
    )
    np.testing.assert_allclose(longer[0, :3], outputs[0, :3], atol=1e-6)
    np.testing.assert_allclose(longer[1, :5], outputs[1, :5], atol=1e-6)


def test_causal_attention_ignores_later_positions(padded_batch):
    hidden, _ = padded_batch
    layer = MultiHeadAttention(num_heads=2, hidden_size=8, causal=True)
    outputs, probs = layer(hidden, return_attention_scores=True)
    np.testing.assert_array_equal(np.triu(np.asarray(probs)[0, 0], k=1), 0.0)
    changed = hidden.copy()
    changed[:, 3:] += 1.0
    np.testing.assert_allclose(np.asarray(layer(changed))[:, :3], np.asarray(outputs)[:, :3], atol=1e-6)


def test_hidden_size_must_divide_by_heads():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(num_heads=3, hidden_size=8)
