"""BPR-MF against a NumPy reference; also the helpers of the NCF and FPMC tests (the families trained
on single interactions with a vector per user)."""

from __future__ import annotations

import types

import keras
import numpy as np
import pytest

from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.constants import vocab_size
from bert4rec_tf.tasks import get_task, preset, validate
from tests.conftest import family_config

NUM_ITEMS = 7
NUM_USERS = 3
HISTORY = np.array([[1, 0, 2, 0], [3, 0, 0, 0], [0, 0, 0, 0]])
USERS = np.array([2, 0, 3])  # user 0: unknown


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(3)


def model_config(name: str, **changes) :
    values = dict(name=name, loss=get_task(name).losses[0], vocab_size=vocab_size(NUM_ITEMS), num_users=NUM_USERS,
                  hidden_size=4, num_layers=2, train_negatives=2, l2=0.0)
    values.update(changes)
    return family_config(**values)


def randomised(model, seed: int = 0):
    """`model` with every weight drawn from N(0, 1): scores far from the initial ones, so that a
    mix-up of weights shows."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(size=variable.shape).astype("float32"))
    return model


def training_features(negatives: int = 2) -> dict[str, np.ndarray]:
    """A batch of three interactions: users 1..3, their previous item (0: none), item and negatives."""
    rng = np.random.default_rng(1)
    return {"user_ids": np.array([1, 2, 3], np.int32), "previous_ids": np.array([0, 4, 6], np.int32),
            "positive_ids": np.array([1, 5, 7], np.int32),
            "negative_ids": rng.integers(1, NUM_ITEMS + 1, (3, negatives)).astype(np.int32)}


def softplus(x):
    return np.log1p(np.exp(x))


def check_keras_round_trip(model, tmp_path) -> None:
    """`model.keras` loads back (safe mode) with the same scores, user vectors and training outputs."""
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert type(loaded) is type(model)
    np.testing.assert_array_equal(loaded.score_next(HISTORY, users=USERS), model.score_next(HISTORY, users=USERS))
    np.testing.assert_array_equal(loaded.user_representation(HISTORY, users=USERS),
                                  model.user_representation(HISTORY, users=USERS))
    features = training_features(model.model_config.train_negatives)
    np.testing.assert_array_equal(loaded(features)["negative_scores"], model(features)["negative_scores"])


def check_stream_trains_every_weight(name: str, **changes) -> None:
    """Two batches of the Task's own stream train the model's every weight, with a finite loss."""
    task = get_task(name)
    config = ExperimentConfig.for_family(name)
    config.model = model_config(name, **changes)
    config.train.batch_size = 4
    train = [np.array([1, 2, 3]), np.array([4, 5]), np.array([6, 7, 1, 2])]
    stream = task.training_stream(config, types.SimpleNamespace(num_items=NUM_ITEMS), train)
    model = task.build_model(config.model)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    before = [variable.numpy().copy() for variable in model.trainable_variables]
    logs = model.fit(stream(0).take(2), epochs=1, verbose=0).history
    assert np.isfinite(logs["loss"][0])
    unchanged = [v.path for v, old in zip(model.trainable_variables, before) if np.array_equal(v.numpy(), old)]
    assert not unchanged


def check_loss_features(name: str) -> None:
    """The validation loss's features: one row per user, the target against the first negatives."""
    model = get_task(name).build_model(model_config(name, train_negatives=2))
    histories = np.array([[3, 4, 0], [5, 0, 0]])
    negatives = np.array([[7, 6, 1], [2, 1, 3]])
    features = get_task(name).loss_features(model, histories, np.array([2, 4]), negatives, users=np.array([1, 3]))
    np.testing.assert_array_equal(features["user_ids"], [1, 3])
    np.testing.assert_array_equal(features["positive_ids"], [2, 4])
    np.testing.assert_array_equal(features["previous_ids"], [4, 5])
    np.testing.assert_array_equal(features["negative_ids"], [[7, 6], [2, 1]])
    assert np.isfinite(float(model.compute_loss(x=features, y_pred=model(features, training=False))))
    with pytest.raises(ValueError, match="need the users"):
        get_task(name).loss_features(model, histories, np.array([2, 4]), negatives)


def build(**changes):
    return randomised(get_task("bpr_mf").build_model(model_config("bpr_mf", **changes)))


def test_scores_are_the_user_and_item_inner_products():
    model = build()
    users, items = model.user_embeddings.numpy(), model.item_embeddings.numpy()
    expected = users[USERS] @ items.T
    expected[USERS == 0] = 0.0  # no known user: the zero vector
    expected[:, 0] = 0.0  # the padding id's vector is zero too
    np.testing.assert_allclose(model.score_next(HISTORY, users=USERS), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.user_representation(HISTORY, users=USERS), users[USERS] * (USERS > 0)[:, None],
                               rtol=1e-6)
    assert np.all(np.asarray(model.score_next(HISTORY)) == 0.0)  # no users given: none known
    assert model.score_next(HISTORY, users=USERS).shape == (3, vocab_size(NUM_ITEMS))


def test_the_loss_is_bpr_over_every_pair_plus_the_penalty_of_the_rows_in_training():
    model = build(l2=0.3)
    features = training_features()
    users = model.user_embeddings.numpy()[features["user_ids"]]  # [3, d]
    items = model.item_embeddings.numpy()
    positive, negative = items[features["positive_ids"]], items[features["negative_ids"]]  # [3, d], [3, 2, d]
    differences = np.sum(users * positive, -1)[:, None] - np.einsum("bd,bkd->bk", users, negative)
    ranking = softplus(-differences).mean()
    penalty = (users ** 2).sum(-1).mean() + (positive ** 2).sum(-1).mean() + (negative ** 2).sum(-1).mean()
    trained = float(model.compute_loss(x=features, y_pred=model(features, training=True)))
    np.testing.assert_allclose(trained, ranking + 0.3 * penalty, rtol=1e-5)
    validated = float(model.compute_loss(x=features, y_pred=model(features, training=False)))
    np.testing.assert_allclose(validated, ranking, rtol=1e-5)
    assert float(model.loss_terms(features)) == 6


def test_the_loss_of_a_hand_made_pair():
    model = get_task("bpr_mf").build_model(model_config("bpr_mf", hidden_size=1, l2=0.1))
    model.user_embeddings.assign(np.full((NUM_USERS + 1, 1), 1.0, "float32"))
    model.item_embeddings.assign(np.arange(vocab_size(NUM_ITEMS), dtype="float32")[:, None] / 2)  # q_i = i / 2
    features = {"user_ids": np.array([1]), "positive_ids": np.array([4]), "negative_ids": np.array([[1]])}
    # x_ui - x_uj = 2 - 0.5 = 1.5: -log s(1.5) = 0.201413; penalty 0.1 * (1 + 4 + 0.25)
    assert float(model.compute_loss(x=features, y_pred=model(features, training=True))) == pytest.approx(
        0.201413 + 0.525, abs=1e-5)


def test_the_task_stream_trains_every_weight():
    check_stream_trains_every_weight("bpr_mf", l2=0.01)


def test_loss_features():
    check_loss_features("bpr_mf")


def test_keras_round_trip(tmp_path):
    check_keras_round_trip(build(), tmp_path)


def test_the_preset_and_the_refused_loss():
    config = preset("ml-1m", "bpr_mf")
    assert (config.model.name, config.model.loss, config.model.hidden_size, config.model.l2,
            config.model.train_negatives, config.train.weight_decay) == ("bpr_mf", "bpr", 64, 0.001, 1, 0.0)
    assert preset("beauty", "bpr_mf").model.l2 == 0.01
    config.model.loss = "ce"
    with pytest.raises(ValueError, match="--loss must be 'bpr'"):
        validate(config)
    assert get_task("bpr_mf").sequential is False and get_task("bpr_mf").build_model(model_config("bpr_mf")).reads_users
