import math

import numpy as np
import pytest

from bert4rec_tf.layers import ItemEmbedding, MaskedItemHead
from tests.keras_test_utils import run_layer_test


def _embedding() -> ItemEmbedding:
    return ItemEmbedding(vocab_size=12, hidden_size=8, max_len=6, name="embedding")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Gradients do not exist")
def test_layer_contract(padded_batch, tmp_path):
    hidden, _ = padded_batch
    # Standing alone, the head uses only the item table of its embedding layer.
    unused = tuple(
        f"embedding/{name}"
        for name in ("position_embedding/embeddings", "layer_norm/gamma", "layer_norm/beta")
    )
    run_layer_test(
        MaskedItemHead,
        dict(embedding=_embedding()),
        hidden,
        (2, 5, 12),
        tmp_path,
        unused_weights=unused,
    )


def _reference_logits(head, embedding, hidden):
    transformed = hidden @ head.transform.kernel.numpy() + head.transform.bias.numpy()
    transformed = np.vectorize(lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))))(transformed)
    mean = transformed.mean(-1, keepdims=True)
    normed = (transformed - mean) / np.sqrt(transformed.var(-1, keepdims=True) + 1e-12)
    normed = normed * head.layer_norm.gamma.numpy() + head.layer_norm.beta.numpy()
    return normed @ embedding.item_embeddings.numpy().T + head.output_bias.numpy()


def test_logits_use_the_embedding_variable_itself(padded_batch):
    hidden, _ = padded_batch
    embedding = _embedding()
    head = MaskedItemHead(embedding)
    logits = np.asarray(head(hidden))
    np.testing.assert_array_equal(head.output_bias.numpy(), np.zeros(12))
    np.testing.assert_allclose(logits, _reference_logits(head, embedding, hidden), atol=1e-5)

    embedding.item_embeddings.assign(embedding.item_embeddings.numpy() * 3.0)
    changed = np.asarray(head(hidden))
    assert not np.allclose(changed, logits)
    np.testing.assert_allclose(changed, _reference_logits(head, embedding, hidden), atol=1e-5)
    assert sum(w is embedding.item_embeddings for w in head.weights) == 1
