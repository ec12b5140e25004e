import keras
import numpy as np
import pytest

from bert4rec_tf.layers import ItemEmbedding
from tests.keras_test_utils import run_layer_test

_IDS = np.array([[3, 5, 9, 0, 0], [1, 2, 3, 4, 11]], dtype="int32")
_ARGS = dict(vocab_size=12, hidden_size=8, max_len=6)


@pytest.mark.slow
def test_layer_contract(tmp_path):
    layer = run_layer_test(ItemEmbedding, dict(_ARGS, hidden_dropout=0.1), _IDS, (2, 5, 8), tmp_path)
    assert any(w is layer.position_embedding.embeddings for w in layer.trainable_weights)


def test_position_embedding_trains_inside_a_functional_model():
    layer = ItemEmbedding(**_ARGS, name="embedding")
    ids = keras.Input(shape=(None,), dtype="int32")
    model = keras.Model(ids, layer(ids))
    paths = {w.path for w in model.trainable_weights}
    assert "embedding/position_embedding/embeddings" in paths
    assert len(model.trainable_weights) == 4  # items, positions, LayerNorm gamma and beta


def test_item_table_is_exposed_and_positions_are_added():
    layer = ItemEmbedding(**_ARGS)
    outputs = np.asarray(layer(_IDS))
    raw = layer.item_embeddings.numpy()[_IDS] + layer.position_embedding.embeddings.numpy()[:5]
    mean = raw.mean(-1, keepdims=True)
    expected = (raw - mean) / np.sqrt(raw.var(-1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(outputs, expected, atol=1e-4)
    assert layer.item_embeddings is layer.item_embedding.embeddings


def test_appended_padding_leaves_real_positions_unchanged():
    layer = ItemEmbedding(**_ARGS)
    outputs = np.asarray(layer(_IDS))
    longer = np.asarray(layer(np.pad(_IDS, ((0, 0), (0, 1)))))
    np.testing.assert_allclose(longer[:, :5], outputs, atol=1e-6)


def test_without_position_embedding_the_table_is_gone_and_order_does_not_matter():
    layer = ItemEmbedding(**_ARGS, use_position_embedding=False)
    outputs = np.asarray(layer(_IDS))
    assert len(layer.trainable_weights) == 3
    np.testing.assert_allclose(np.asarray(layer(_IDS[:, ::-1]))[:, ::-1], outputs, atol=1e-6)
