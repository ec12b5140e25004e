"""FeatureEmbedding against a NumPy reference: categorical, multi (masked mean) and numeric attributes."""

import keras
import numpy as np
import pytest

from bert4rec_tf.data.features import encode, read_features
from bert4rec_tf.layers.feature_embedding import FeatureEmbedding
from tests.keras_test_utils import run_layer_test

ATTRIBUTES = [{"name": "brand", "kind": "categorical", "size": 3},
              {"name": "genres", "kind": "multi", "size": 4, "width": 2},
              {"name": "year", "kind": "numeric"}]
VALUES = {"brand": np.array([0, 1, 2, 0, 2], np.int32),
          "genres": np.array([[0, 0], [1, 3], [2, 0], [0, 0], [3, 3]], np.int32),
          "year": np.array([0.0, -1.5, 0.5, 0.0, 1.0], np.float32)}
IDS = np.array([[1, 2, 0], [4, 3, 1]], np.int32)


def reference(layer, ids):
    brand, genres, year = (layer.embeddings[name].numpy() for name in ("brand", "genres", "year"))
    out = np.zeros((*ids.shape, layer.hidden_size), np.float32)
    for position, item in np.ndenumerate(ids):
        if VALUES["brand"][item]:
            out[position] += brand[VALUES["brand"][item]]
        chosen = [value for value in VALUES["genres"][item] if value]
        if chosen:
            out[position] += np.mean([genres[value] for value in chosen], axis=0)
        out[position] += VALUES["year"][item] * year
    return out


def test_the_attribute_embedding_is_the_references_and_missing_values_add_nothing():
    layer = FeatureEmbedding(ATTRIBUTES, rows=5, hidden_size=4, values=VALUES)
    got = keras.ops.convert_to_numpy(layer(IDS))
    np.testing.assert_allclose(got, reference(layer, IDS), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(got[0, 2], 0.0)  # the padding id 0 has no attribute
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.all_rows()), reference(layer, np.arange(5)),
                               rtol=1e-6, atol=1e-7)
    assert [w.name for w in layer.trainable_weights] == ["brand_embeddings", "genres_embeddings", "year_direction"]


@pytest.mark.slow
def test_layer_contract_and_the_values_travel_in_the_saved_file(tmp_path):

    layer = run_layer_test(FeatureEmbedding, dict(attributes=ATTRIBUTES, rows=5, hidden_size=4, values=VALUES),
                           IDS, (2, 3, 4), tmp_path)
    np.testing.assert_array_equal(layer.value_tables["genres"].numpy(), VALUES["genres"])


def test_values_of_another_shape_are_refused():
    with pytest.raises(ValueError, match=r"attribute 'brand': values of shape \(4,\), the layer holds \(5,\)"):
        FeatureEmbedding(ATTRIBUTES, rows=5, hidden_size=4, values={**VALUES, "brand": np.zeros(4)})(IDS)


def test_a_feature_file_gives_the_layers_attributes(tmp_path):
    path = tmp_path / "items.csv"
    path.write_text("item,genres:multi,year:numeric,brand\n1,a|b|c,2000,x\n2,b,1990,\n", encoding="utf-8")
    encoded = encode(read_features(str(path)), [None, "1", "2"])
    assert encoded.attributes() == [{"name": "genres", "kind": "multi", "size": 4, "width": 3},
                                      {"name": "year", "kind": "numeric"},
                                      {"name": "brand", "kind": "categorical", "size": 2}]
    layer = FeatureEmbedding(encoded.attributes(), rows=3, hidden_size=2, values=encoded.arrays)
    assert keras.ops.convert_to_numpy(layer(np.array([0, 1, 2]))).shape == (3, 2)
