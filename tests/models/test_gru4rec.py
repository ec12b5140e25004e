"""GRU4Rec and GRU4Rec+: scores and losses against NumPy written from the papers, the training
streams on a small hand-made data set, the settings checks and a `.keras` round trip."""

from __future__ import annotations

import math
import types

import keras
import numpy as np
import pytest

from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.constants import vocab_size
from bert4rec_tf.data.negatives import popularity_sampler
from bert4rec_tf.models.losses import bpr_losses, bpr_max_losses, top1_losses, top1_max_losses
from bert4rec_tf.tasks import get_task, preset, recipe_overrides, validate
from tests.data.test_instances import small_config
from tests.conftest import family_config

NUM_ITEMS = 12
MAX_LEN = 6


def build(loss: str = "top1", num_layers: int = 2, dropout: float = 0.0, **changes):
    """A small GRU4Rec (GRU4Rec+ for its losses) with weights drawn from one seed."""
    keras.utils.set_random_seed(7)
    name = "gru4rec_plus" if loss.endswith("_max") else "gru4rec"
    config = family_config(name=name, vocab_size=vocab_size(NUM_ITEMS), max_len=MAX_LEN, hidden_size=4,
                         num_layers=num_layers, hidden_dropout=dropout, loss=loss, **changes)
    model = get_task(name).build_model(config)
    # Non-zero biases, so that the reference checks where each one enters.
    rng = np.random.default_rng(1)
    for weight in model.weights:
        if "bias" in weight.path:
            weight.assign(rng.normal(0.0, 0.3, weight.shape).astype("float32"))
    return model


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_states(model, ids: np.ndarray) -> np.ndarray:
    """The paper's GRU in NumPy, float64 [batch, width, hidden]: z = s(W_z x + U_z h + b_z),
    r = s(W_r x + U_r h + b_r), h' = tanh(W x + U (r * h) + b), h = z * h_prev + (1 - z) * h'
    (Keras' gate order z, r, h'), h = 0 before the first item, padding (0) skipped."""
    table = np.asarray(model.embedding.embeddings, np.float64)
    inputs = table[ids]  # [batch, width, d]
    for layer in model.recurrent_layers:
        kernel, recurrent, bias = (np.asarray(w, np.float64) for w in layer.weights)
        units = recurrent.shape[0]
        state = np.zeros((ids.shape[0], units))
        outputs = np.zeros(ids.shape + (units,))
        for t in range(ids.shape[1]):
            gates = inputs[:, t] @ kernel + bias  # [batch, 3 units]
            z = sigmoid(gates[:, :units] + state @ recurrent[:, :units])
            r = sigmoid(gates[:, units:2 * units] + state @ recurrent[:, units:2 * units])
            candidate = np.tanh(gates[:, 2 * units:] + (r * state) @ recurrent[:, 2 * units:])
            new = z * state + (1 - z) * candidate
            real = (ids[:, t] != 0)[:, None]
            state = np.where(real, new, state)
            outputs[:, t] = state
        inputs = outputs
    return inputs


def output_scores(model, states: np.ndarray) -> np.ndarray:
    """h . W^T + b with the output table, [..., vocab]."""
    return states @ np.asarray(model.output_items, np.float64).T + np.asarray(model.output_bias, np.float64)


HISTORY = np.array([[1, 2, 3, 4, 5, 6, 7], [0, 0, 9, 0, 0, 0, 0], [3, 0, 11, 8, 0, 0, 0]])
# The last MAX_LEN known items of each row, padded on the left.
PACKED = np.array([[2, 3, 4, 5, 6, 7], [0, 0, 0, 0, 0, 9], [0, 0, 0, 3, 11, 8]])


def test_scores_are_the_papers_gru_then_the_output_table_and_bias():
    model = build()
    expected = output_scores(model, reference_states(model, PACKED)[:, -1])
    np.testing.assert_allclose(np.asarray(model.score_next(HISTORY)), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(model.history_inputs(HISTORY)["input_ids"]), PACKED)
    # The output table is not the input table.
    assert model.output_items.shape == model.embedding.embeddings.shape
    assert not np.allclose(np.asarray(model.output_items), np.asarray(model.embedding.embeddings))


def test_a_padded_and_an_unpadded_history_give_the_same_scores():
    model = build()
    unpadded = np.array([[3, 11, 8]])
    reference = np.asarray(model.score_next(unpadded))
    for padded in ([[0, 0, 0, 3, 11, 8]], [[3, 0, 11, 0, 0, 8, 0, 0]], [[0, 3, 11, 8]]):
        np.testing.assert_allclose(np.asarray(model.score_next(np.array(padded))), reference, atol=1e-6)
    # The states at the real positions do not depend on the padding before them.
    short = np.asarray(model.encode({"input_ids": unpadded}))
    wide = np.asarray(model.encode({"input_ids": np.array([[0, 0, 0, 3, 11, 8]])}))
    np.testing.assert_allclose(wide[:, 3:], short, atol=1e-6)


def test_dropout_only_in_training():
    model = build(dropout=0.5)
    features = {"input_ids": PACKED}
    np.testing.assert_array_equal(np.asarray(model(features)), np.asarray(model(features)))
    assert not np.allclose(np.asarray(model(features, training=True)), np.asarray(model(features)))


# A batch of three rows, width 3: row 1 starts with padding; at column 2 rows 0 and 2 share target 5.
INPUTS = np.array([[1, 2, 3], [0, 4, 6], [7, 8, 9]])
POSITIVES = np.array([[2, 3, 5], [0, 6, 10], [8, 9, 5]])
SHARED = np.array([11, 5, 12, 11])


def reference_terms(model, features: dict) -> tuple[list, list]:
    """Per real position, r_i and the r_j of its counted negatives, from the model's states."""
    scores = output_scores(model, np.asarray(model(features), np.float64))  # [batch, width, vocab]
    positives = features["positive_ids"]
    positive, negatives = [], []
    for b, t in zip(*np.nonzero(positives)):
        target = positives[b, t]
        if "negatives" in features:
            ids = list(features["negatives"][b])
        else:
            ids = [positives[c, t] for c in range(len(positives)) if c != b]
            ids += list(features.get("shared_negatives", [[]])[0])
        counted = [item for item in ids if item not in (0, target)]
        positive.append(scores[b, t, target])
        negatives.append(np.array([scores[b, t, item] for item in counted]))
    return positive, negatives


def by_hand(loss: str, positive: float, negative: np.ndarray, reg: float = 1.0) -> float:
    if not len(negative):
        return 0.0
    if loss == "top1":
        return float(np.mean(sigmoid(negative - positive) + sigmoid(negative ** 2)))
    if loss == "bpr":
        return float(np.mean(-np.log(sigmoid(positive - negative))))
    weights = np.exp(negative - negative.max())
    weights /= weights.sum()
    if loss == "top1_max":
        return float(np.sum(weights * (sigmoid(negative - positive) + sigmoid(negative ** 2))))
    return float(-np.log(np.sum(weights * sigmoid(positive - negative))) + reg * np.sum(weights * negative ** 2))


@pytest.mark.parametrize("loss", ["top1", "bpr", "top1_max", "bpr_max"])
@pytest.mark.parametrize("shared", [False, True])
def test_the_loss_uses_the_other_rows_targets_and_the_shared_negatives(loss, shared):
    model = build(loss, num_layers=1, bpr_max_reg=0.7)
    features = {"input_ids": INPUTS, "positive_ids": POSITIVES}
    if shared:
        features["shared_negatives"] = np.tile(SHARED, (3, 1))
    positive, negatives = reference_terms(model, features)
    # Row 1's padding has no term; rows 0 and 2 at column 2 are not each other's negative (both 5).
    assert len(positive) == 8 and len(negatives[2]) == (1 + 3 * shared)
    expected = np.mean([by_hand(loss, p, n, 0.7) for p, n in zip(positive, negatives)])
    actual = float(model.compute_loss(x=features, y_pred=model(features)))
    assert actual == pytest.approx(expected, rel=2e-4)
    assert float(model.loss_terms(features)) == 8


@pytest.mark.parametrize("loss", ["top1", "bpr_max"])
def test_given_negatives_replace_the_batchs(loss):
    model = build(loss, num_layers=1)
    features = {"input_ids": PACKED, "positive_ids": np.array([[0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 2],
                                                                 [0, 0, 0, 0, 0, 9]]),
                "negatives": np.array([[3, 4, 1], [5, 6, 7], [10, 11, 12]])}
    positive, negatives = reference_terms(model, features)
    assert [len(n) for n in negatives] == [2, 3, 3]  # row 0's own target among its negatives does not count
    expected = np.mean([by_hand(loss, p, n) for p, n in zip(positive, negatives)])
    assert float(model.compute_loss(x=features, y_pred=model(features))) == pytest.approx(expected, rel=2e-4)


def test_ce_is_the_softmax_over_every_item():
    model = build("ce", num_layers=1)
    features = {"input_ids": INPUTS, "positive_ids": POSITIVES}
    scores = output_scores(model, np.asarray(model(features), np.float64))
    rows, columns = np.nonzero(POSITIVES)
    logits = scores[rows, columns]  # [8, vocab]
    expected = np.mean(np.log(np.exp(logits).sum(axis=1)) - logits[np.arange(8), POSITIVES[rows, columns]])
    assert float(model.compute_loss(x=features, y_pred=model(features))) == pytest.approx(expected, rel=1e-5)


def test_ranking_losses_by_hand():
    # r_i = 1; negatives 0 and 2 count, 5 does not.
    positive, negative, valid = np.array([1.0]), np.array([[0.0, 2.0, 5.0]]), np.array([[True, True, False]])
    s = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    top1 = ((s(-1) + s(0)) + (s(1) + s(4))) / 2
    bpr = (-math.log(s(1)) - math.log(s(-1))) / 2
    w0, w2 = 1 / (1 + math.e ** 2), math.e ** 2 / (1 + math.e ** 2)  # softmax of 0 and 2
    top1_max = w0 * (s(-1) + s(0)) + w2 * (s(1) + s(4))
    bpr_max = -math.log(w0 * s(1) + w2 * s(-1)) + 0.5 * (w2 * 4)
    assert float(top1_losses(positive, negative, valid)[0]) == pytest.approx(top1, rel=1e-6)
    assert float(bpr_losses(positive, negative, valid)[0]) == pytest.approx(bpr, rel=1e-6)
    assert float(top1_max_losses(positive, negative, valid)[0]) == pytest.approx(top1_max, rel=1e-6)
    assert float(bpr_max_losses(positive, negative, valid, 0.5)[0]) == pytest.approx(bpr_max, rel=1e-6)
    # No counted negative: 0, finite gradients.
    none = np.zeros_like(valid)
    for losses in (top1_losses(positive, negative, none), bpr_losses(positive, negative, none),
                   top1_max_losses(positive, negative, none), bpr_max_losses(positive, negative, none, 1.0)):
        assert float(losses[0]) == 0.0


def test_bpr_max_is_finite_far_from_zero():
    positive, negative = np.array([-60.0]), np.array([[40.0, 80.0]])
    value = float(bpr_max_losses(positive, negative, np.ones((1, 2), bool), 0.0)[0])
    # s_40 s(-100) + s_80 s(-140) = e^-40 e^-100 + e^-140 to float precision: the two terms weigh alike.
    assert value == pytest.approx(140.0 - math.log(2.0), rel=1e-5)


def test_model_keras_round_trip_gives_the_same_scores(tmp_path):
    model = build("bpr_max")
    path = tmp_path / "gru4rec.keras"
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert type(restored) is type(model) and restored.model_config == model.model_config
    np.testing.assert_array_equal(np.asarray(restored.score_next(HISTORY)), np.asarray(model.score_next(HISTORY)))


def test_one_fit_step_trains_every_weight():
    model = build("bpr_max", num_layers=2)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    before = [np.asarray(v).copy() for v in model.trainable_variables]
    features = {"input_ids": INPUTS, "positive_ids": POSITIVES, "shared_negatives": np.tile(SHARED, (3, 1))}
    model.fit(features, batch_size=3, epochs=1, verbose=0)
    assert [v.path for v, old in zip(model.trainable_variables, before) if np.array_equal(np.asarray(v), old)] == []


# The training streams on a hand-made data set: users' training items, items 1..10 (10 never seen).
TRAIN = [np.array([1, 2, 3]), np.array([4, 5, 6, 7, 8, 2]), np.array([2, 9]), np.array([3, 1, 2, 4])]


def stream(name: str, **model_changes):
    config = ExperimentConfig.for_family(name)
    config.data, config.train.batch_size = small_config(max_len=4, prop_sliding_window=0.5), 3
    config.model.train_negatives, config.model.negative_alpha = 50, 1.0
    for key, value in model_changes.items():
        setattr(config.model, key, value)
    return get_task(name).training_stream(config, types.SimpleNamespace(num_items=10), TRAIN)


def batches(make, start: int, count: int) -> list[dict]:
    return [{name: value.numpy() for name, value in batch.items()} for batch in make(start).take(count)]


def test_gru4rec_stream_is_sasrecs_windows_without_negatives():
    every = batches(stream("gru4rec"), 0, 4)
    assert set(every[0]) == {"input_ids", "positive_ids"}
    # Windows of 5 items: users 1, 3, 4 one each, user 2 (6 items) two; each is left-padded and shifted.
    rows = {tuple(np.concatenate([batch["input_ids"][r], batch["positive_ids"][r, -1:]]))
            for batch in every[:2] for r in range(3)}
    assert {(0, 0, 1, 2, 3), (0, 0, 0, 2, 9), (0, 3, 1, 2, 4), (4, 5, 6, 7, 8), (5, 6, 7, 8, 2)} <= rows
    for batch in every:
        inputs, positives = batch["input_ids"], batch["positive_ids"]
        real = inputs[:, :-1] != 0  # each real position's target is the next input
        np.testing.assert_array_equal(positives[:, :-1][real], inputs[:, 1:][real])
        assert np.all((positives == 0) == (inputs == 0))
    again = batches(stream("gru4rec"), 0, 4)
    for mine, theirs in zip(again, every):
        for key in mine:
            np.testing.assert_array_equal(mine[key], theirs[key])
    resumed = batches(stream("gru4rec"), 6, 2)  # from instance 6: batches 2 and 3
    for mine, theirs in zip(resumed, every[2:]):
        for key in mine:
            np.testing.assert_array_equal(mine[key], theirs[key])


def test_gru4rec_plus_draws_the_shared_negatives_by_popularity_from_the_first_instance_number():
    every = batches(stream("gru4rec_plus"), 0, 4)
    shared = [batch["shared_negatives"] for batch in every]
    assert shared[0].shape == (3, 50) and shared[0].dtype == np.int32
    for rows in shared:
        assert (rows == rows[0]).all()  # one draw for the whole batch
        assert set(rows[0]) <= set(range(1, 10))  # never item 10, absent from training (alpha 1)
    assert not np.array_equal(shared[0][0], shared[1][0])
    for start in (3, 6, 9):  # started at a batch, the stream gives that batch's bytes
        resumed = batches(stream("gru4rec_plus"), start, 1)[0]
        for key in resumed:
            np.testing.assert_array_equal(resumed[key], every[start // 3][key])


def test_popularity_sampler_follows_popularity_to_the_power_alpha():
    import tensorflow as tf

    counts = np.bincount(np.concatenate(TRAIN), minlength=11)[1:]  # items 1..10
    for alpha in (1.0, 0.5, 0.0):
        draws = popularity_sampler(TRAIN, 10, alpha)(40_000, tf.constant([1, 2], tf.int64)).numpy()
        assert draws.min() >= 1 and draws.max() <= 10
        expected = counts ** alpha / np.sum(counts ** alpha)
        np.testing.assert_allclose(np.bincount(draws, minlength=11)[1:] / len(draws), expected, atol=0.01)
    same = popularity_sampler(TRAIN, 10, 0.75)
    seed = tf.constant([3, 4], tf.int64)
    np.testing.assert_array_equal(same(20, seed).numpy(), same(20, seed).numpy())


def test_loss_features_put_the_target_last_with_the_given_negatives():
    model = build("top1")
    features = get_task("gru4rec").loss_features(model, HISTORY, np.array([8, 10, 1]), np.array([[5, 6], [1, 2],
                                                                                                  [4, 7]]))
    np.testing.assert_array_equal(features["input_ids"], PACKED)
    np.testing.assert_array_equal(features["positive_ids"][:, -1], [8, 10, 1])
    assert not features["positive_ids"][:, :-1].any() and set(features) == {"input_ids", "positive_ids",
                                                                          "negatives"}


def test_presets_and_settings_checks():
    config = preset("ml-1m", "gru4rec")
    assert (config.data.max_len, config.model.hidden_size, config.model.num_layers, config.train.batch_size,
            config.model.loss) == (200, 100, 1, 50, "top1")
    plus = preset("beauty", "gru4rec_plus")
    assert (plus.data.max_len, plus.model.train_negatives, plus.model.negative_alpha, plus.model.loss) == (
        50, 2048, 0.75, "bpr_max")
    assert recipe_overrides("cpu-1h", "beauty", "gru4rec")["hidden_dropout"] == 0.5
    validate(config)
    config.model.loss = "bpr_max"
    with pytest.raises(ValueError, match="--loss must be 'top1' or 'bpr' or 'ce' for gru4rec"):
        validate(config)
    config.model.loss, config.train.batch_size = "bpr", 1
    with pytest.raises(ValueError, match="--batch_size must be at least 2 for gru4rec's 'bpr' loss"):
        validate(config)
    with pytest.raises(ValueError, match="--loss must be 'top1' or 'bpr' or 'ce' for gru4rec"):
        build("hinge")
