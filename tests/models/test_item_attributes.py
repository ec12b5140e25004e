"""Item attributes in the item representation (`ItemEmbedding`, BERT4Rec, SASRec) against NumPy references."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.data.features import EncodedFeatures
from bert4rec_tf.layers import ItemEmbedding
from tests.conftest import family_config

ATTRIBUTES = [{"name": "genres", "kind": "multi", "size": 4, "width": 2},
              {"name": "year", "kind": "numeric"}]
VOCAB = 8  # padding, items 1..6, [MASK]
GENRES = np.array([[0, 0], [1, 2], [3, 0], [1, 0], [2, 3], [0, 0], [3, 1], [0, 0]], np.int32)  # item 5: none
YEAR = np.array([0.0, -1.0, 0.5, 1.5, 0.0, 2.0, -0.5, 0.0], np.float32)
ENCODED = EncodedFeatures("item", {"genres": GENRES, "year": YEAR}, {"genres": ["", "a", "b", "c"]},
                          {"year": (1990.0, 10.0)}, 6)


def attribute_rows(layer) -> np.ndarray:
    """F of every id from the layer's own tables, in NumPy."""
    genres = layer.item_features.embeddings["genres"].numpy()
    direction = layer.item_features.embeddings["year"].numpy()
    rows = np.zeros((VOCAB, layer.hidden_size), np.float32)
    for item in range(VOCAB):
        chosen = [genres[value] for value in GENRES[item] if value]
        if chosen:
            rows[item] += np.mean(chosen, axis=0)
        rows[item] += YEAR[item] * direction
    return rows


def layer_norm(x, gamma, beta, epsilon=1e-12):
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


@pytest.mark.parametrize("at_output", [False, True])
def test_the_item_embedding_adds_the_attributes_at_the_input_and_at_the_output(at_output):
    keras.utils.set_random_seed(3)
    layer = ItemEmbedding(VOCAB, 4, max_len=5, item_attributes=ATTRIBUTES, attributes_at_output=at_output)
    layer.build()
    layer.item_features.assign_values(ENCODED.arrays)
    ids = np.array([[1, 5, 3, 0], [6, 2, 7, 4]], np.int32)
    table = layer.item_embeddings.numpy()
    positions = layer.position_embedding.embeddings.numpy()[:4]
    expected = layer_norm(table[ids] + attribute_rows(layer)[ids] + positions, layer.layer_norm.gamma.numpy(),
                          layer.layer_norm.beta.numpy(), layer.layer_norm.epsilon)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(ids)), expected, rtol=1e-5, atol=1e-6)
    output = layer.output_table()
    if at_output:
        np.testing.assert_allclose(keras.ops.convert_to_numpy(output), table + attribute_rows(layer), rtol=1e-6,
                                   atol=1e-7)
    else:
        assert output is layer.item_embeddings  # the variable itself: the id-only head, as before


def test_without_attributes_the_layer_and_its_config_are_those_of_before():
    layer = ItemEmbedding(VOCAB, 4, max_len=5)
    layer.build()
    assert layer.item_features is None and layer.output_table() is layer.item_embeddings
    assert "item_attributes" not in layer.get_config() and "attributes_at_output" not in layer.get_config()
    with pytest.raises(ValueError, match="attributes_at_output needs item attributes"):
        ItemEmbedding(VOCAB, 4, max_len=5, attributes_at_output=True)


def built(name: str, at_output: bool):
    from bert4rec_tf.tasks import get_task

    keras.utils.set_random_seed(5)
    config = family_config(name, vocab_size=VOCAB, hidden_size=4, max_len=5, num_heads=2, intermediate_size=8,
                           num_layers=1, hidden_dropout=0.0, attention_dropout=0.0, item_attributes=ATTRIBUTES,
                           attributes_at_output=at_output)
    model = get_task(name).build_model(config)
    model.set_attributes({"item": ENCODED})
    return model


@pytest.mark.parametrize("name", ["bert4rec", "sasrec"])
@pytest.mark.parametrize("at_output", [False, True])
def test_the_scores_are_the_user_vector_times_ids_plus_attributes_at_the_output(name, at_output):
    model = built(name, at_output)
    history = np.array([[1, 2, 3], [4, 0, 0]], np.int32)
    user = keras.ops.convert_to_numpy(model.user_representation(history))
    table = model.embedding.item_embeddings.numpy() + (attribute_rows(model.embedding) if at_output else 0.0)
    expected = user @ table.T
    if name == "bert4rec":
        expected = expected + model.head.output_bias.numpy()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model.score_next(history)), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["bert4rec", "sasrec"])
def test_the_fused_training_loss_is_the_loss_of_the_scores_and_reaches_the_attribute_tables(name):
    from bert4rec_tf.tasks import get_task

    model = built(name, True)
    histories = np.array([[1, 2, 3], [4, 6, 0]], np.int32)
    features = get_task(name).loss_features(model, histories, np.array([5, 1]), np.array([[6], [2]]))
    if name == "sasrec":
        features["positive_ids"] = np.where(features["input_ids"] > 0, 5, 0).astype(np.int32)
        features["negative_ids"] = np.where(features["input_ids"] > 0, 2, 0).astype(np.int32)
    with tf.GradientTape() as tape:
        fused = model.training_loss(features)
    exact = model.compute_loss(x=features, y_pred=model(features, training=False), training=False)
    np.testing.assert_allclose(float(fused), float(exact), rtol=1e-5)
    tables = [model.embedding.item_features.embeddings[key] for key in ("genres", "year")]
    for table, gradient in zip(tables, tape.gradient(fused, tables)):
        assert gradient is not None and float(tf.norm(tf.convert_to_tensor(gradient))) > 0, table.path


def test_a_model_with_attributes_saves_and_loads_with_them(tmp_path):
    model = built("bert4rec", True)
    history = np.array([[1, 2, 3]], np.int32)
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras", safe_mode=True)
    np.testing.assert_array_equal(loaded.embedding.item_features.value_tables["genres"].numpy(), GENRES)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded.score_next(history)),
                                  keras.ops.convert_to_numpy(model.score_next(history)))


def test_a_model_that_reads_attributes_refuses_data_without_them():
    model = built("sasrec", False)
    with pytest.raises(ValueError, match="the model reads item attributes; the data have none"):
        model.set_attributes({"item": None})


def test_the_matching_models_extra_tokens_have_no_attributes():
    model = built("bert4rec_match", True)
    genres = model.embedding.item_features.value_tables["genres"].numpy()
    extra = model.EXTRA_TOKENS
    assert extra >= 1 and genres.shape == (VOCAB + extra, 2)
    np.testing.assert_array_equal(genres[:VOCAB], GENRES)
    np.testing.assert_array_equal(genres[VOCAB:], 0)
    assert np.isfinite(keras.ops.convert_to_numpy(model.score_next(np.array([[1, 2, 3]], np.int32)))).all()


USER_ATTRIBUTES = [{"name": "age", "kind": "categorical", "size": 3}]
USER_ENCODED = EncodedFeatures("user", {"age": np.array([0, 1, 2, 1], np.int32)}, {"age": ["", "18", "25"]}, {}, 3)


def test_the_user_attributes_are_added_at_every_position_before_the_normalisation():
    keras.utils.set_random_seed(4)
    layer = ItemEmbedding(VOCAB, 4, max_len=5)
    layer.build()
    ids = np.array([[1, 5, 3], [6, 2, 0]], np.int32)
    added = np.random.default_rng(0).normal(size=(2, 1, 4)).astype(np.float32)
    expected = layer_norm(layer.item_embeddings.numpy()[ids] + added + layer.position_embedding.embeddings.numpy()[:3],
                          layer.layer_norm.gamma.numpy(), layer.layer_norm.beta.numpy(), layer.layer_norm.epsilon)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(ids, added=added)), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["bert4rec", "sasrec"])
def test_a_model_with_user_attributes_scores_users_by_their_attributes(name, tmp_path):
    from bert4rec_tf.tasks import get_task

    keras.utils.set_random_seed(5)
    config = family_config(name, vocab_size=VOCAB, num_users=3, hidden_size=4, max_len=5, num_heads=2,
                           intermediate_size=8, num_layers=1, hidden_dropout=0.0, attention_dropout=0.0,
                           user_attributes=USER_ATTRIBUTES)
    model = get_task(name).build_model(config)
    model.set_attributes({"user": USER_ENCODED})
    assert model.reads_users
    history = np.array([[1, 2, 3]] * 4, np.int32)
    scores = keras.ops.convert_to_numpy(model.score_next(history, users=np.array([0, 1, 2, 3])))
    np.testing.assert_array_equal(scores[1], scores[3])  # users 1 and 3 are both "18"
    assert np.abs(scores[1] - scores[2]).max() > 1e-4 and np.abs(scores[0] - scores[1]).max() > 1e-4
    with pytest.raises(ValueError, match="this model reads user attributes: score with users="):
        model.score_next(history)
    # The validation loss's features carry the users too.
    features = get_task(name).loss_features(model, history[:2], np.array([5, 4]), np.array([[6], [6]]),
                                            users=np.array([1, 2]))
    np.testing.assert_array_equal(features["info"], [[1], [2]])
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras", safe_mode=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded.score_next(history, users=np.arange(4))), scores)


def test_the_attention_maps_of_a_model_with_user_attributes_read_its_users():
    from bert4rec_tf.evaluation.attention import average_last_attention
    from bert4rec_tf.tasks import get_task

    config = family_config("sasrec", vocab_size=VOCAB, num_users=3, hidden_size=4, max_len=5, num_heads=2,
                           intermediate_size=8, num_layers=1, user_attributes=USER_ATTRIBUTES)
    model = get_task("sasrec").build_model(config)
    model.set_attributes({"user": USER_ENCODED})
    histories = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    assert average_last_attention(model, histories, last=2, users=np.array([1, 2])).shape == (1, 2, 2, 2)
    with pytest.raises(ValueError, match="score with users="):
        average_last_attention(model, histories, last=2)
