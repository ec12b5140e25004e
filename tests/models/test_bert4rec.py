import dataclasses
import math

import keras
import numpy as np
import pytest

from tests.conftest import family_config
from bert4rec_tf.constants import ATTENTION_MASK_VALUE, LAYER_NORM_EPSILON, mask_id, vocab_size
from bert4rec_tf.models import BERT4Rec
from bert4rec_tf.tasks import preset

NUM_ITEMS = 18
CONFIG = family_config(
    vocab_size=vocab_size(NUM_ITEMS),
    max_len=8,
    hidden_size=8,
    num_layers=2,
    num_heads=2,
    intermediate_size=16,
    hidden_dropout=0.1,
    attention_dropout=0.1,
)


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(3)


def _features(seq_len: int = 8) -> dict[str, np.ndarray]:
    """Three right-padded rows of 8, 5 and 3 items; slot 0 of each row masks its last item."""
    rng = np.random.default_rng(0)
    lengths, masked = [8, 5, 3], [[7, 2, 4], [4, 0], [2]]
    features = {
        "input_ids": np.zeros((3, seq_len), "int32"),
        "input_mask": np.zeros((3, seq_len), "int32"),
        "masked_lm_positions": np.zeros((3, 3), "int32"),
        "masked_lm_ids": np.zeros((3, 3), "int32"),
        "masked_lm_weights": np.zeros((3, 3), "float32"),
    }
    for row, (length, positions) in enumerate(zip(lengths, masked)):
        items = rng.integers(1, NUM_ITEMS + 1, length)
        features["masked_lm_positions"][row, : len(positions)] = positions
        features["masked_lm_ids"][row, : len(positions)] = items[positions]
        features["masked_lm_weights"][row, : len(positions)] = 1.0
        items[positions] = mask_id(NUM_ITEMS)
        features["input_ids"][row, :length] = items
        features["input_mask"][row, :length] = 1
    return features


def _model(packed: bool = False, packed_capacity: int | None = None, **changes) -> BERT4Rec:
    model = BERT4Rec(
        dataclasses.replace(CONFIG, **changes),
        packed=packed,
        packed_capacity=packed_capacity,
        name="bert4rec",
    )
    model.build()
    return model


def _copy_weights(source: BERT4Rec, target: BERT4Rec) -> None:
    for mine, theirs in zip(target.weights, source.weights):
        mine.assign(theirs)


def test_output_shapes():
    features = _features()
    model = _model()
    assert model(features).shape == (3, 3, CONFIG.vocab_size)
    assert model.score_last(features).shape == (3, CONFIG.vocab_size)
    sequence_output, scores = model.encode(features, return_attention_scores=True)
    assert sequence_output.shape == (3, 8, 8)
    assert [s.shape for s in scores] == [(3, 2, 8, 8)] * 2
    np.testing.assert_array_equal(np.asarray(scores[1])[2, :, :, 3:], 0.0)
    assert _model(packed=True)(features).shape == (6, CONFIG.vocab_size)
    assert _model(packed=True, packed_capacity=8)(features).shape == (8, CONFIG.vocab_size)


def test_score_last_scores_the_last_real_position():
    features = _features()
    model = _model()
    np.testing.assert_allclose(
        np.asarray(model.score_last(features)), np.asarray(model(features))[:, 0], atol=1e-6
    )


@pytest.mark.slow
@pytest.mark.parametrize("capacity", [None, 6, 8])
def test_packed_and_unpacked_losses_agree(capacity):
    features = _features()
    labels = features["masked_lm_ids"]
    model = _model()
    packed = _model(packed=True, packed_capacity=capacity)
    _copy_weights(model, packed)
    loss = model.compute_loss(features, labels, model(features), training=False)
    packed_loss = packed.compute_loss(features, labels, packed(features), training=False)
    np.testing.assert_allclose(float(packed_loss), float(loss), rtol=1e-6)
    real = features["masked_lm_weights"].reshape(-1) > 0
    np.testing.assert_allclose(
        np.asarray(packed(features))[:6],
        np.asarray(model(features)).reshape(-1, CONFIG.vocab_size)[real],
        atol=1e-6,
    )


@pytest.mark.slow
@pytest.mark.parametrize("packed,capacity", [(False, None), (True, None), (True, 8)])
def test_one_fit_step_trains_every_weight(packed, capacity):
    features = _features()
    model = _model(packed=packed, packed_capacity=capacity)
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=1e-2))
    before = [w.numpy().copy() for w in model.trainable_weights]
    history = model.fit(features, batch_size=3, epochs=1, verbose=0)  # labels: masked_lm_ids
    assert np.isfinite(history.history["loss"][0])
    for variable, old in zip(model.trainable_weights, before):
        assert np.any(variable.numpy() != old), f"{variable.path} did not train"


def test_appended_padding_leaves_logits_unchanged():
    short = _features(seq_len=8)
    model = _model(max_len=12)
    longer = dict(short)
    longer["input_ids"] = np.pad(short["input_ids"], ((0, 0), (0, 4)))
    longer["input_mask"] = np.pad(short["input_mask"], ((0, 0), (0, 4)))
    np.testing.assert_allclose(np.asarray(model(longer)), np.asarray(model(short)), atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(model.score_last(longer)), np.asarray(model.score_last(short)), atol=1e-5
    )


def test_config_round_trip():
    model = _model(packed=True, packed_capacity=8)
    config = model.get_config()
    restored = BERT4Rec.from_config(config)
    assert restored.get_config() == config
    assert restored.model_config == model.model_config
    assert (restored.packed, restored.packed_capacity) == (True, 8)


def test_vocab_size_must_be_set():
    with pytest.raises(ValueError, match="vocab_size"):
        BERT4Rec(family_config())


def _item_tables(model: BERT4Rec) -> list:
    return [w for w in model.weights if w.path.endswith("item_embedding/embeddings")]


@pytest.mark.slow
def test_save_and_load_keep_logits_and_one_shared_item_table(tmp_path):
    features = _features()
    model = _model()
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate=1e-2))
    model.fit(features, batch_size=3, epochs=1, verbose=0)
    path = tmp_path / "bert4rec.keras"
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)

    np.testing.assert_array_equal(np.asarray(restored(features)), np.asarray(model(features)))
    np.testing.assert_array_equal(
        np.asarray(restored.score_last(features)), np.asarray(model.score_last(features))
    )
    assert restored.head.embedding is restored.embedding
    assert len(_item_tables(restored)) == 1 and len(restored.weights) == len(model.weights)
    table = _item_tables(restored)[0]
    assert table is restored.embedding.item_embeddings
    assert sum(w is table for w in restored.head.weights) == 1

    # One variable, two uses: a change reaches both the input lookup and the output projection.
    encoded = np.asarray(restored.encode(features))
    table.assign(np.zeros(table.shape, "float32"))
    assert not np.allclose(np.asarray(restored.encode(features)), encoded, atol=1e-3)
    bias = restored.head.output_bias.numpy()
    np.testing.assert_allclose(np.asarray(restored(features)), np.broadcast_to(bias, (3, 3, 20)))


def test_trainable_weights_include_the_position_table():
    model = _model()
    paths = [w.path for w in model.trainable_weights]
    assert "bert4rec/embedding/position_embedding/embeddings" in paths
    # Embedding: items, positions, LayerNorm (2). Each block: Q, K, V, O kernels and biases,
    # two LayerNorms (2 each), two FFN kernels and biases. Head: output bias, Dense (2), LN (2).
    assert len(paths) == 4 + CONFIG.num_layers * (8 + 4 + 4) + 5


def tied_bert4rec_parameters(
    vocab: int,
    max_len: int,
    d: int,
    layers: int,
    inner: int,
    position: bool = True,
    ffn: bool = True,
    layer_norm: bool = True,
) -> int:
    """Parameters of a tied BERT4Rec, written out by hand."""
    embedding = vocab * d + (max_len * d if position else 0) + 2 * d
    attention = 4 * (d * d + d) + (2 * d if layer_norm else 0)
    feed_forward = (d * inner + inner + inner * d + d + (2 * d if layer_norm else 0)) if ffn else 0
    head = d * d + d + 2 * d + vocab  # transform, its LayerNorm, output bias; E is tied
    return embedding + layers * (attention + feed_forward) + head


def _ml_1m(**changes) -> BERT4Rec:
    config = dataclasses.replace(preset("ml-1m").model, vocab_size=vocab_size(3416), **changes)
    model = BERT4Rec(config)
    model.build()
    return model


def test_ml_1m_parameter_count():
    expected = tied_bert4rec_parameters(3418, 200, 64, 2, 256)
    assert expected == 339_354
    assert _ml_1m().count_params() == expected


@pytest.mark.parametrize(
    "switch,removed",
    [
        ("use_position_embedding", 200 * 64),
        ("use_ffn", 2 * (64 * 256 + 256 + 256 * 64 + 64 + 2 * 64)),
        ("use_layer_norm", 2 * 2 * (2 * 64)),
        ("use_residual", 0),
    ],
)
def test_each_ablation_switch_removes_exactly_its_parameters(switch, removed):
    keyword = {"use_position_embedding": "position", "use_ffn": "ffn", "use_layer_norm": "layer_norm"}
    ablated = _ml_1m(**{switch: False}).count_params()
    assert ablated == 339_354 - removed
    if switch in keyword:
        assert ablated == tied_bert4rec_parameters(3418, 200, 64, 2, 256, **{keyword[switch]: False})


def test_residual_switch_changes_the_output():
    features = _features()
    model = _model()
    plain = _model(use_residual=False)
    _copy_weights(model, plain)
    assert not np.allclose(np.asarray(plain(features)), np.asarray(model(features)), atol=1e-3)


def test_mixed_precision_keeps_logits_and_loss_float32():
    features = _features()
    model = BERT4Rec(CONFIG, dtype="mixed_bfloat16")
    logits = model(features)
    dtype = keras.backend.standardize_dtype
    assert dtype(model.encode(features).dtype) == "bfloat16"
    assert dtype(logits.dtype) == "float32" and model.head.compute_dtype == "float32"
    loss = model.compute_loss(features, features["masked_lm_ids"], logits)
    assert dtype(loss.dtype) == "float32" and np.isfinite(float(loss))


# A NumPy forward pass written from the paper's equations, independent of the layers.


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + LAYER_NORM_EPSILON) * gamma + beta


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _dense(w, prefix, x):
    return x @ w[prefix + "/kernel"] + w[prefix + "/bias"]


def _attention(w, prefix, x, input_mask, heads):
    batch, seq_len, d = x.shape
    size = d // heads

    def split(t):  # [batch, seq, d] -> [batch, heads, seq, size]
        return t.reshape(batch, seq_len, heads, size).transpose(0, 2, 1, 3)

    q, k, v = (split(_dense(w, f"{prefix}/{name}", x)) for name in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size)
    scores = scores + (1.0 - input_mask[:, None, None, :]) * ATTENTION_MASK_VALUE
    context = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch, seq_len, d)
    return _dense(w, f"{prefix}/output", context)


def _numpy_bert4rec(w, features, config):
    ids, input_mask = features["input_ids"], features["input_mask"].astype(np.float64)
    p = "bert4rec"
    x = w[f"{p}/embedding/item_embedding/embeddings"][ids]
    x = x + w[f"{p}/embedding/position_embedding/embeddings"][: ids.shape[1]]
    x = _layer_norm(x, w[f"{p}/embedding/layer_norm/gamma"], w[f"{p}/embedding/layer_norm/beta"])
    for layer in range(config.num_layers):
        b = f"{p}/transformer_block_{layer}"
        x = x + _attention(w, f"{b}/self_attention", x, input_mask, config.num_heads)
        x = _layer_norm(x, w[f"{b}/attention_layer_norm/gamma"], w[f"{b}/attention_layer_norm/beta"])
        x = x + _dense(w, f"{b}/feed_forward/output", _gelu(_dense(w, f"{b}/feed_forward/intermediate", x)))
        x = _layer_norm(
            x, w[f"{b}/feed_forward_layer_norm/gamma"], w[f"{b}/feed_forward_layer_norm/beta"]
        )
    rows = np.arange(len(ids))[:, None]
    h = x[rows, features["masked_lm_positions"]]  # [batch, P, d]
    h = _gelu(_dense(w, f"{p}/masked_item_head/transform", h))
    h = _layer_norm(h, w[f"{p}/masked_item_head/layer_norm/gamma"], w[f"{p}/masked_item_head/layer_norm/beta"])
    e = w[f"{p}/embedding/item_embedding/embeddings"]
    return h @ e.T + w[f"{p}/masked_item_head/output_bias"]


def test_logits_match_an_independent_numpy_forward_pass():
    features = _features()
    model = _model()
    rng = np.random.default_rng(5)
    for variable in model.weights:  # weights far from their initial values exercise every term
        scale = 0.1 if variable.path.endswith("gamma") else 0.5
        offset = 1.0 if variable.path.endswith("gamma") else 0.0
        variable.assign(offset + scale * rng.normal(size=variable.shape))
    weights = {v.path: v.numpy().astype(np.float64) for v in model.weights}
    expected = _numpy_bert4rec(weights, features, CONFIG)
    logits = np.asarray(model(features, training=False))
    assert np.abs(expected).max() > 1.0
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-5)
