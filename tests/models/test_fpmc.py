"""FPMC against a NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

from bert4rec_tf.constants import vocab_size
from bert4rec_tf.tasks import get_task, preset
from tests.models.test_bpr_mf import (
    NUM_ITEMS,
    NUM_USERS,
    check_keras_round_trip,
    check_loss_features,
    check_stream_trains_every_weight,
    model_config,
    randomised,
    softplus,
    training_features,
)

# Newest known items 2, 3 and none; users 2, unknown and 3.
HISTORY = np.array([[1, 0, 2, 0], [3, 0, 0, 0], [0, 0, 0, 0]])
USERS = np.array([2, 0, 3])
NEWEST = np.array([2, 3, 0])


def build(**changes):
    return randomised(get_task("fpmc").build_model(model_config("fpmc", **changes)))


def numpy_scores(model, users: np.ndarray, last: np.ndarray, items: np.ndarray) -> np.ndarray:
    """x(u, l, i) = <V_u^UI, V_i^IU> + <V_i^IL, V_l^LI> for users, previous items [n] and items [n, m],
    an id 0 of a user or a previous item adding nothing."""
    user = model.user_to_item.numpy()[users] * (users > 0)[:, None]  # [n, d]
    previous = model.last_to_item.numpy()[last] * (last > 0)[:, None]
    return (np.einsum("nd,nmd->nm", user, model.item_to_user.numpy()[items])
            + np.einsum("nd,nmd->nm", previous, model.item_to_last.numpy()[items]))


def test_the_history_input_is_its_newest_known_item():
    model = get_task("fpmc").build_model(model_config("fpmc"))
    np.testing.assert_array_equal(model.history_inputs(HISTORY)["input_ids"], NEWEST[:, None])


def test_scores_are_the_user_term_plus_the_newest_items_transition_term():
    model = build()
    items = np.broadcast_to(np.arange(vocab_size(NUM_ITEMS)), (3, vocab_size(NUM_ITEMS)))
    expected = numpy_scores(model, USERS, NEWEST, items)
    expected[:, 0] = 0.0  # the padding id's vectors are zero
    np.testing.assert_allclose(model.score_next(HISTORY, users=USERS), expected, rtol=1e-5, atol=1e-5)
    user = np.concatenate([model.user_to_item.numpy()[USERS] * (USERS > 0)[:, None],
                           model.last_to_item.numpy()[NEWEST] * (NEWEST > 0)[:, None]], axis=-1)
    np.testing.assert_allclose(model.user_representation(HISTORY, users=USERS), user, rtol=1e-6)
    # Without users the scores are the transitions from the newest item alone.
    alone = numpy_scores(model, np.zeros(3, int), NEWEST, items)
    alone[:, 0] = 0.0
    np.testing.assert_allclose(model.score_next(HISTORY), alone, rtol=1e-5, atol=1e-5)


def test_the_loss_is_s_bpr_plus_the_penalty_of_the_six_rows_in_training():
    model = build(l2=0.1)
    features = training_features()
    items = np.concatenate([features["positive_ids"][:, None], features["negative_ids"]], axis=1)  # [3, 3]
    scores = numpy_scores(model, features["user_ids"], features["previous_ids"], items)
    ranking = softplus(scores[:, 1:] - scores[:, :1]).mean()
    previous = features["previous_ids"]
    norms = {name: (getattr(model, name).numpy() ** 2).sum(-1) for name in
             ("user_to_item", "item_to_user", "item_to_last", "last_to_item")}
    penalty = (norms["user_to_item"][features["user_ids"]].mean() + (norms["last_to_item"][previous]
                                                                       * (previous > 0)).mean()
               + (norms["item_to_user"] + norms["item_to_last"])[items[:, 0]].mean()
               + (norms["item_to_user"] + norms["item_to_last"])[items[:, 1:]].mean())
    trained = float(model.compute_loss(x=features, y_pred=model(features, training=True)))
    np.testing.assert_allclose(trained, ranking + 0.1 * penalty, rtol=1e-5)
    validated = float(model.compute_loss(x=features, y_pred=model(features, training=False)))
    np.testing.assert_allclose(validated, ranking, rtol=1e-5)


def test_the_loss_of_a_hand_made_quadruple():
    model = get_task("fpmc").build_model(model_config("fpmc", hidden_size=1))
    for table in (model.user_to_item, model.item_to_user, model.item_to_last, model.last_to_item):
        table.assign(np.ones(table.shape, "float32"))
    model.item_to_user.assign(np.where(np.arange(vocab_size(NUM_ITEMS)) == 5, 0.0, 1.0)[:, None].astype("float32"))
    model.item_to_last.assign(np.where(np.arange(vocab_size(NUM_ITEMS)) == 5, -1.0, 1.0)[:, None].astype("float32"))
    features = {"user_ids": np.array([1]), "previous_ids": np.array([2]), "positive_ids": np.array([3]),
                "negative_ids": np.array([[5]])}
    # x(u, l, 3) = 1 + 1 = 2, x(u, l, 5) = 0 - 1 = -1: -log s(3) = 0.048587
    assert float(model.compute_loss(x=features, y_pred=model(features))) == pytest.approx(0.048587, abs=1e-5)
    # A user's first item: no previous item, the user's term alone: x = 1 and 0, -log s(1) = 0.313262
    features["previous_ids"] = np.array([0])
    assert float(model.compute_loss(x=features, y_pred=model(features))) == pytest.approx(0.313262, abs=1e-5)


def test_the_task_stream_trains_every_weight():
    check_stream_trains_every_weight("fpmc", l2=0.01)


def test_loss_features():
    check_loss_features("fpmc")


def test_keras_round_trip(tmp_path):
    check_keras_round_trip(build(), tmp_path)


def test_the_preset():
    config = preset("ml-1m", "fpmc")
    assert (config.model.name, config.model.loss, config.model.hidden_size, config.model.train_negatives,
            config.model.l2) == ("fpmc", "bpr", 64, 1, 0.001)
    assert preset("beauty", "fpmc").model.l2 == 0.01
    assert get_task("fpmc").sequential and get_task("fpmc").build_model(model_config("fpmc")).reads_users
    assert get_task("fpmc").build_model(model_config("fpmc")).user_to_item.shape == (NUM_USERS + 1, 4)
