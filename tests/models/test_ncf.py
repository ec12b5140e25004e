"""NCF (NeuMF) against a NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

from bert4rec_tf.constants import vocab_size
from bert4rec_tf.models import ncf
from bert4rec_tf.tasks import get_task, preset
from tests.models.test_bpr_mf import (
    HISTORY,
    NUM_ITEMS,
    NUM_USERS,
    USERS,
    check_keras_round_trip,
    check_loss_features,
    check_stream_trains_every_weight,
    model_config,
    randomised,
    softplus,
    training_features,
)


def build(**changes):
    return randomised(get_task("ncf").build_model(model_config("ncf", **changes)))


def numpy_logits(model, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """y_ui = h^T [p_u^G * q_i^G ; MLP([p_u^M ; q_i^M])] + b for users [n] and items [n, m] -> [n, m],
    every user and item row as stored (user 0 made the zero vector, as the model does)."""
    known = (users > 0)[:, None]
    gmf_user, mlp_user = model.gmf_users.numpy()[users] * known, model.mlp_users.numpy()[users] * known
    gmf_item, mlp_item = model.gmf_items.numpy()[items], model.mlp_items.numpy()[items]  # [n, m, .]
    hidden = np.concatenate([np.broadcast_to(mlp_user[:, None], mlp_item.shape), mlp_item], axis=-1)
    for layer in model.mlp_layers:
        hidden = np.maximum(hidden @ layer.kernel.numpy() + layer.bias.numpy(), 0.0)
    joint = np.concatenate([gmf_user[:, None] * gmf_item, hidden], axis=-1)  # [n, m, 2d]
    return (joint @ model.prediction.kernel.numpy())[..., 0] + model.prediction.bias.numpy()[0]


def test_the_mlp_halves_down_to_the_predictive_factors():
    assert ncf.mlp_widths(64, 3) == [256, 128, 64] and ncf.mlp_widths(16, 1) == [16]
    model = get_task("ncf").build_model(model_config("ncf", hidden_size=8, num_layers=3))
    assert model.mlp_users.shape == (NUM_USERS + 1, 32) and model.mlp_items.shape == (vocab_size(NUM_ITEMS), 32)
    assert [tuple(layer.kernel.shape) for layer in model.mlp_layers] == [(64, 32), (32, 16), (16, 8)]
    assert tuple(model.prediction.kernel.shape) == (16, 1) and model.gmf_users.shape == (NUM_USERS + 1, 8)


@pytest.mark.parametrize("chunk", [2 ** 17, 3 * 8, 5 * 8])  # one chunk; several; several, the last padded
def test_scores_of_every_item_match_the_network_in_any_chunking(chunk, monkeypatch):
    monkeypatch.setattr(ncf, "ACTIVATIONS_PER_USER_CHUNK", chunk)  # the first layer is 8 wide: 3 or 5 items
    model = build(num_layers=2)
    items = np.broadcast_to(np.arange(vocab_size(NUM_ITEMS)), (len(USERS), vocab_size(NUM_ITEMS)))
    np.testing.assert_allclose(model.score_next(HISTORY, users=USERS), numpy_logits(model, USERS, items),
                               rtol=1e-4, atol=1e-4)


def test_the_user_representation_is_what_the_scores_read_of_the_user():
    model = build(num_layers=2)
    d, first = 4, model.mlp_layers[0]
    known = (USERS > 0)[:, None]
    gmf = model.gmf_users.numpy()[USERS] * known * model.prediction.kernel.numpy()[:d, 0]
    mlp = (model.mlp_users.numpy()[USERS] * known) @ first.kernel.numpy()[:8] + first.bias.numpy()  # [p ; q]: p
    np.testing.assert_allclose(model.user_representation(HISTORY, users=USERS), np.concatenate([gmf, mlp], -1),
                               rtol=1e-5, atol=1e-6)
    assert model.user_representation(HISTORY, users=USERS).shape == (3, d + 8)


def test_the_loss_is_binary_cross_entropy_over_positives_and_negatives_plus_the_penalty():
    model = build(l2=0.2)
    features = training_features()
    items = np.concatenate([features["positive_ids"][:, None], features["negative_ids"]], axis=1)  # [3, 3]
    logits = numpy_logits(model, features["user_ids"], items)
    outputs = model(features, training=True)
    np.testing.assert_allclose(outputs["positive_scores"], logits[:, 0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outputs["negative_scores"], logits[:, 1:], rtol=1e-4, atol=1e-5)
    cross_entropy = np.concatenate([softplus(-logits[:, :1]), softplus(logits[:, 1:])], axis=1).mean()
    users = features["user_ids"]
    penalty = sum((rows ** 2).sum(-1).mean() for rows in (
        model.gmf_users.numpy()[users], model.mlp_users.numpy()[users], model.gmf_items.numpy()[items[:, 0]],
        model.mlp_items.numpy()[items[:, 0]], model.gmf_items.numpy()[items[:, 1:]],
        model.mlp_items.numpy()[items[:, 1:]]))
    np.testing.assert_allclose(float(model.compute_loss(x=features, y_pred=outputs)), cross_entropy + 0.2 * penalty,
                               rtol=1e-4)
    validated = model.compute_loss(x=features, y_pred=model(features, training=False))
    np.testing.assert_allclose(float(validated), cross_entropy, rtol=1e-4)
    assert float(model.loss_terms(features)) == 9


def test_the_loss_of_hand_made_logits():
    model = get_task("ncf").build_model(model_config("ncf"))
    # (-log s(2) - log(1 - s(-1)) - log(1 - s(0))) / 3 = (0.126928 + 0.313262 + 0.693147) / 3
    outputs = {"positive_scores": np.array([2.0]), "negative_scores": np.array([[-1.0, 0.0]]), "penalty": 0.0}
    assert float(model.compute_loss(y_pred=outputs)) == pytest.approx(0.377779, abs=1e-5)


def test_the_task_stream_trains_every_weight():
    check_stream_trains_every_weight("ncf", l2=0.01)


def test_loss_features():
    check_loss_features("ncf")


def test_keras_round_trip(tmp_path):
    check_keras_round_trip(build(), tmp_path)


def test_the_preset():
    config = preset("beauty", "ncf")
    assert (config.model.loss, config.model.hidden_size, config.model.num_layers, config.model.train_negatives,
            config.train.learning_rate, config.train.batch_size) == ("bce", 64, 3, 4, 1e-3, 256)
    assert not get_task("ncf").sequential


def test_the_cpu_recipes_keep_the_preset_on_ml_1m_and_shrink_and_penalise_on_beauty():
    from bert4rec_tf import cli

    ml1m = cli.experiment_config("ml-1m", [], model="ncf", recipe="cpu-1h")
    assert (ml1m.model.hidden_size, ml1m.model.num_layers, ml1m.model.l2, ml1m.train.batch_size) == (64, 3, 0.0, 256)
    beauty = cli.experiment_config("beauty", [], model="ncf", recipe="cpu-1h")
    assert (beauty.model.hidden_size, beauty.model.num_layers, beauty.model.l2, beauty.train.batch_size) == (
        16, 1, 0.01, 1024)
    assert cli.experiment_config("beauty", ["l2=0"], model="ncf", recipe="cpu-1h").model.l2 == 0.0  # --config wins


def test_scores_of_chosen_items_match_the_network():
    model = build(num_layers=2)
    items = np.random.default_rng(5).integers(1, NUM_ITEMS + 1, size=(len(USERS), 7))
    np.testing.assert_allclose(model.score_items(HISTORY, items, users=USERS), numpy_logits(model, USERS, items),
                               rtol=1e-4, atol=1e-4)
