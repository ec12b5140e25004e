import numpy as np
import pytest

from bert4rec_tf.layers import TransformerBlock
from tests.keras_test_utils import run_layer_test

_ARGS = dict(hidden_size=8, num_heads=2, intermediate_size=16)


# Slow: the block is its sublayers' contracts (each tested) put together, and every model's one-step
# training test checks that the gradient reaches every weight of its blocks.
@pytest.mark.slow
def test_layer_contract(padded_batch, tmp_path):
    hidden, padding_mask = padded_batch
    run_layer_test(
        TransformerBlock,
        dict(_ARGS, hidden_dropout=0.1, attention_dropout=0.1),
        hidden,
        (2, 5, 8),
        tmp_path,
        padding_mask=padding_mask,
    )


def test_appended_padding_leaves_real_positions_unchanged(padded_batch):
    hidden, padding_mask = padded_batch
    block = TransformerBlock(**_ARGS)
    outputs = np.asarray(block(hidden, padding_mask=padding_mask))
    longer = np.asarray(
        block(np.pad(hidden, ((0, 0), (0, 2), (0, 0))), padding_mask=np.pad(padding_mask, ((0, 0), (0, 2))))
    )
    np.testing.assert_allclose(longer[0, :3], outputs[0, :3], atol=1e-5)
    np.testing.assert_allclose(longer[1, :5], outputs[1, :5], atol=1e-5)


def test_returns_attention_probabilities(padded_batch):
    hidden, padding_mask = padded_batch
    _, probs = TransformerBlock(**_ARGS)(hidden, padding_mask=padding_mask, return_attention_scores=True)
    assert probs.shape == (2, 2, 5, 5)
    np.testing.assert_array_equal(np.asarray(probs)[0, :, :, 3:], 0.0)


def _weight_count(block, shape=(2, 5, 8)) -> int:
    block.build(shape)
    return sum(int(np.prod(w.shape)) for w in block.trainable_weights)


def test_ablation_switches_remove_exactly_their_weights():
    d, inner = 8, 16
    full = _weight_count(TransformerBlock(**_ARGS))
    assert full == 4 * (d * d + d) + (d * inner + inner + inner * d + d) + 2 * (2 * d)
    assert full - _weight_count(TransformerBlock(**_ARGS, use_ffn=False)) == (
        d * inner + inner + inner * d + d + 2 * d
    )
    assert full - _weight_count(TransformerBlock(**_ARGS, use_layer_norm=False)) == 2 * (2 * d)
    assert _weight_count(TransformerBlock(**_ARGS, use_residual=False)) == full


def test_without_residual_the_output_ignores_the_skip_path(padded_batch):
    hidden, _ = padded_batch
    block = TransformerBlock(**_ARGS, use_ffn=False, use_residual=False)
    outputs = np.asarray(block(hidden))
    attention = np.asarray(block.self_attention(hidden))
    np.testing.assert_allclose(outputs, np.asarray(block.attention_layer_norm(attention)), atol=1e-6)
