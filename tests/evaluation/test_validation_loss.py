"""The validation loss: of the Transformer families against their loss written out by hand from the
model's scores (the other families check theirs in their own tests), and of every family a mean of one
term per user."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.conftest import family_config
from bert4rec_tf.constants import vocab_size
from bert4rec_tf.evaluation.validation_loss import validation_loss_function
from bert4rec_tf.tasks import TASKS, get_task

NUM_ITEMS = 12
HISTORIES = np.array([[1, 2, 3, 4, 5, 6, 7], [5, 0, 0, 0, 0, 0, 0], [7, 8, 9, 10, 11, 0, 0],
                      [2, 4, 6, 0, 0, 0, 0], [3, 1, 0, 0, 0, 0, 0]])
TARGETS = np.array([8, 6, 12, 7, 9])
NEGATIVES = np.array([[9, 10, 11, 12, 2, 3], [1, 2, 3, 4, 7, 8], [1, 2, 3, 4, 5, 6], [1, 3, 5, 8, 9, 10],
                      [2, 4, 5, 6, 7, 8]])


def build(name: str, loss: str = "ce"):
    keras.utils.set_random_seed(3)
    config = family_config(name=name, vocab_size=vocab_size(NUM_ITEMS), max_len=6, hidden_size=8, num_heads=2,
                         intermediate_size=16, num_layers=1, hidden_dropout=0.5, attention_dropout=0.5, loss=loss,
                         num_users=len(TARGETS))
    return get_task(name).build_model(config)


def softplus(x):
    return np.logaddexp(0.0, x)


def by_hand(model, users: np.ndarray) -> float:
    """The model's loss at each user's validation target from `score_next` and the item table."""
    histories, targets, negatives = HISTORIES[users], TARGETS[users], NEGATIVES[users]
    scores = keras.ops.convert_to_numpy(model.score_next(histories, training=False)).astype(np.float64)
    rows = np.arange(len(users))
    cross_entropy = np.log(np.exp(scores).sum(axis=1)) - scores[rows, targets]
    name, config = model.model_config.name, model.model_config
    if name == "sasrec" and config.loss == "bce":
        return float(np.mean(softplus(-scores[rows, targets]) + softplus(scores[rows, negatives[:, 0]])))
    if name == "bert4rec_match":
        user = keras.ops.convert_to_numpy(model.user_representation(histories, training=False)).astype(np.float64)
        table = keras.ops.convert_to_numpy(model.embedding.item_embeddings).astype(np.float64)
        positive = (user * table[targets]).sum(axis=1)
        negative = np.einsum("ud,und->un", user, table[negatives[:, :config.match_negatives]]).mean(axis=1)
        matching = softplus(-config.match_scale * positive) + softplus(config.match_scale * negative)
        return float((cross_entropy.sum() + matching.sum()) / (cross_entropy.size + matching.size))  # one pooled mean
    return float(cross_entropy.mean())


# The families whose loss `by_hand` writes out.
BY_HAND = ("bert4rec", "sasrec", "bert4rec_match")


@pytest.mark.slow
@pytest.mark.parametrize("name,loss", [(name, loss) for name in BY_HAND for loss in get_task(name).losses])
def test_the_loss_is_the_models_loss_at_the_validation_target_without_dropout(name, loss):
    model = build(name, loss)
    every = validation_loss_function(model, get_task(name).loss_features, HISTORIES, TARGETS, NEGATIVES)
    first, second = every(), every()
    assert first == second                                   # no dropout: the same value twice
    np.testing.assert_allclose(first, by_hand(model, np.arange(5)), rtol=1e-4)
    # At most `users` users, spread evenly: 0, 2 and 4 of 5, in batches of 2.
    some = validation_loss_function(model, get_task(name).loss_features, HISTORIES, TARGETS, NEGATIVES, users=3,
                                    batch_size=2)
    np.testing.assert_allclose(some(), by_hand(model, np.array([0, 2, 4])), rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name,loss", [(name, loss) for name, task in TASKS.items() if task.trains
                                       for loss in task.losses])
def test_every_familys_validation_loss_is_a_mean_of_one_term_per_user_without_dropout(name, loss):
    model = build(name, loss)
    task = get_task(name)
    every = validation_loss_function(model, task.loss_features, HISTORIES, TARGETS, NEGATIVES)
    first = every()
    assert np.isfinite(first) and first == every()  # no dropout: the same value twice
    alone = []
    for user in range(len(TARGETS)):  # each user's term, the user given its own id
        features = task.loss_features(model, HISTORIES[[user]], TARGETS[[user]], NEGATIVES[[user]],
                                      users=np.array([user + 1]))
        alone.append(float(model.compute_loss(x=features, y_pred=model(features, training=False))))
    np.testing.assert_allclose(first, np.mean(alone), rtol=1e-4)
    some = validation_loss_function(model, task.loss_features, HISTORIES, TARGETS, NEGATIVES, users=3, batch_size=2)
    np.testing.assert_allclose(some(), np.mean(np.array(alone)[[0, 2, 4]]), rtol=1e-4)


@pytest.mark.slow
def test_cloze_instances_mask_the_appended_mask_and_pop_has_none():
    model = build("bert4rec")
    features = get_task("bert4rec").loss_features(model, HISTORIES[:2], TARGETS[:2], NEGATIVES[:2])
    # The last max_len - 1 = 5 items, then [MASK] (id 13) at position 5; user 2: [MASK] at position 1.
    np.testing.assert_array_equal(features["input_ids"], [[3, 4, 5, 6, 7, 13], [5, 13, 0, 0, 0, 0]])
    np.testing.assert_array_equal(features["masked_lm_positions"], [[5], [1]])
    np.testing.assert_array_equal(features["masked_lm_ids"], [[8], [6]])
    pop = get_task("pop")
    assert validation_loss_function(build("pop"), pop.loss_features, HISTORIES, TARGETS, NEGATIVES) is None
