"""Caser: its scores and loss against a NumPy reference, its training windows and stream, its Task."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from bert4rec_tf import cli
from tests.conftest import family_config
from bert4rec_tf.constants import LOSS_EPSILON, vocab_size
from bert4rec_tf.data.negatives import NegativeSampler
from bert4rec_tf.data.windows import sequence_window_dataset, sequence_windows
from bert4rec_tf.evaluation.validation_loss import validation_loss_function
from bert4rec_tf.models.caser import Caser
from bert4rec_tf.models.losses import balanced_bce_loss
from bert4rec_tf.tasks import get_task, recipe_overrides

NUM_ITEMS = 9
LENGTH = 3
# Right-padded histories with gaps; the second is narrower than L once packed, the third empty.
HISTORY = np.array([[1, 2, 0, 3, 4, 5], [0, 7, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [9, 8, 0, 0, 0, 6]])
USERS = np.array([1, 3, 2, 0])
LATEST = np.array([[3, 4, 5], [0, 0, 7], [0, 0, 0], [9, 8, 6]])  # HISTORY's latest L items, padded on the left


def caser_config(**changes) :
    values = dict(name="caser", vocab_size=vocab_size(NUM_ITEMS), max_len=LENGTH, hidden_size=4, num_users=3,
                  conv_filters=2, vertical_filters=2, next_targets=2, train_negatives=2, hidden_dropout=0.0,
                  loss="bce")
    values.update(changes)
    return family_config(**values)


def built(**changes) -> Caser:
    """A small Caser whose every weight (biases too) is drawn anew, so every term of the model counts."""
    keras.utils.set_random_seed(4)
    model = get_task("caser").build_model(caser_config(**changes))
    rng = np.random.default_rng(0)
    for weight in model.weights:
        if weight.trainable:
            weight.assign(rng.normal(scale=0.5, size=weight.shape).astype("float32"))
    return model


def weights_of(model: Caser) -> dict[str, np.ndarray]:
    return {weight.path.split("/")[-1]: np.asarray(weight, np.float64) for weight in model.weights if weight.trainable}


def reference_representation(model: Caser, items: np.ndarray, users: np.ndarray) -> np.ndarray:
    """[z, P_u] by the paper's equations, in NumPy: items [batch, L] padded on the left."""
    w = weights_of(model)
    length = items.shape[1]
    embedded = w["item_embeddings"][items]  # [b, L, d]
    if not model.model_config.learned_padding:
        embedded = embedded * (items != 0)[:, :, None]  # padding embeds to 0
    # Vertical filters: a weighted sum of the L rows per filter, plus its bias.
    vertical = np.einsum("bld,lv->bvd", embedded, w["vertical_kernel"]) + w["vertical_bias"][None, :, None]
    features = [vertical.reshape(len(items), -1)]
    for height in range(1, length + 1):
        kernel, bias = w[f"horizontal_kernel_{height}"], w[f"horizontal_bias_{height}"]
        at = [np.einsum("bhd,hdf->bf", embedded[:, start:start + height], kernel) + bias
              for start in range(length - height + 1)]
        features.append(np.max(np.maximum(np.stack(at), 0.0), axis=0))  # ReLU, then max over time
    hidden = np.maximum(np.concatenate(features, axis=1) @ w["hidden_kernel"] + w["hidden_bias"], 0.0)
    known = (users >= 1) & (users <= model.model_config.num_users)
    user = w["user_embeddings"][np.where(known, users, 0)] * known[:, None]
    return np.concatenate([hidden, user], axis=1)


def softplus(x):
    return np.logaddexp(0.0, x)


def test_history_inputs_are_the_latest_l_items_padded_on_the_left():
    inputs = np.asarray(built().history_inputs(HISTORY)["input_ids"])
    np.testing.assert_array_equal(inputs, LATEST)


def test_scores_match_the_numpy_reference():
    model = built()
    w = weights_of(model)
    expected = reference_representation(model, LATEST, USERS) @ w["output_table"].T + w["output_bias"]
    scores = np.asarray(model.score_next(HISTORY, users=USERS))
    assert scores.shape == (4, vocab_size(NUM_ITEMS))
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-4)
    # A history narrower than L (a trimmed batch) is read as the padded one.
    np.testing.assert_allclose(np.asarray(model.score_next(HISTORY[1:3, :2], users=USERS[1:3])), expected[1:3],
                               rtol=1e-4, atol=1e-4)


def test_learned_padding_embeds_item_0_with_its_own_row_as_the_authors_code():
    for learned in (False, True):
        model = built(learned_padding=learned)
        w = weights_of(model)
        expected = reference_representation(model, LATEST, USERS) @ w["output_table"].T + w["output_bias"]
        before = np.asarray(model.score_next(HISTORY, users=USERS))
        np.testing.assert_allclose(before, expected, rtol=1e-4, atol=1e-4)
        # Row 0 moves the padded histories' scores only when it is learned; full windows never read it.
        shift = np.zeros((vocab_size(NUM_ITEMS), 4), "float32")
        shift[0] = 1.0
        model.item_embeddings.assign(model.item_embeddings + shift)
        after = np.asarray(model.score_next(HISTORY, users=USERS))
        np.testing.assert_array_equal(after[[0, 3]], before[[0, 3]])
        assert np.allclose(after[[1, 2]], before[[1, 2]]) is not learned


def test_the_user_vector_counts_and_an_unknown_user_has_none():
    model = built()
    without = np.asarray(model.score_next(HISTORY))
    for unknown in (np.zeros(4, np.int64), np.full(4, 7)):  # 0, and ids beyond num_users
        np.testing.assert_array_equal(np.asarray(model.score_next(HISTORY, users=unknown)), without)
    assert not np.allclose(np.asarray(model.score_next(HISTORY, users=np.array([1, 1, 1, 1]))), without)


def test_balanced_bce_loss_by_hand():
    # Targets 0 and ln 3: softplus(0) = ln 2, softplus(-ln 3) = ln 4/3; their mean. Negatives ln 3 and 0
    # (the third is padding): softplus(ln 3) = ln 4, softplus(0) = ln 2; their mean. The two added.
    loss = balanced_bce_loss(np.array([[0.0, math.log(3.0)]]), np.array([[math.log(3.0), 0.0, 5.0]]),
                             np.array([[1.0, 1.0]]), np.array([[1.0, 1.0, 0.0]]))
    by_hand = (math.log(2) + math.log(4 / 3)) / (2 + LOSS_EPSILON) + (math.log(4) + math.log(2)) / (2 + LOSS_EPSILON)
    assert float(loss) == pytest.approx(by_hand, rel=1e-6)
    assert float(loss) == pytest.approx(0.5 * math.log(64 / 3), rel=1e-4)


def training_features() -> dict[str, np.ndarray]:
    """Three windows (L 3, T 2, N 2); the second has one target (the other is padding)."""
    return {"user_ids": np.array([1, 2, 3], np.int32),
            "input_ids": np.array([[1, 2, 3], [0, 0, 4], [5, 6, 7]], np.int32),
            "target_ids": np.array([[4, 5], [0, 6], [8, 9]], np.int32),
            "negative_ids": np.array([[[7, 8], [9, 1]], [[0, 0], [2, 3]], [[1, 2], [3, 4]]], np.int32)}


def test_loss_is_the_mean_over_targets_plus_the_mean_over_negatives():
    model = built()
    features = training_features()
    w = weights_of(model)
    representation = reference_representation(model, features["input_ids"], features["user_ids"])

    def scores(items):
        return np.einsum("bk,b...k->b...", representation, w["output_table"][items]) + w["output_bias"][items]

    targets, negatives = features["target_ids"], features["negative_ids"]
    positive = softplus(-scores(targets))[targets != 0]  # 5 real targets
    negative = softplus(scores(negatives))[negatives != 0]  # 10 real negatives
    assert len(positive) == 5 and len(negative) == 10
    expected = positive.sum() / (5 + LOSS_EPSILON) + negative.sum() / (10 + LOSS_EPSILON)
    loss = model.compute_loss(x=features, y_pred=model(features))
    assert float(loss) == pytest.approx(expected, rel=1e-4)
    assert float(model.loss_terms(features)) == 5


def test_training_adds_half_l2_times_the_squares_of_every_weight():
    model = built(l2=0.1)
    features = training_features()
    data_loss = float(model.compute_loss(x=features, y_pred=model(features)))
    squares = sum(float(np.sum(np.square(np.asarray(w, np.float64)))) for w in model.trainable_weights)
    assert float(model.training_loss(features)) == pytest.approx(data_loss + 0.05 * squares, rel=1e-5)


def test_one_fit_step_trains_every_weight():
    model = built(l2=1e-3)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    before = [np.asarray(w).copy() for w in model.trainable_weights]
    logs = model.fit(training_features(), batch_size=3, epochs=1, verbose=0).history
    assert np.isfinite(logs["loss"][0]) and logs["grad_norm"][0] > 0
    unchanged = [w.path for w, old in zip(model.trainable_weights, before) if np.array_equal(np.asarray(w), old)]
    assert not unchanged, unchanged


def test_the_one_convolution_has_the_gradients_of_one_per_height():
    """Every height's filters in one convolution: the loss's gradients equal those of one convolution
    per height (the layout before), to float32 round-off."""
    def per_height(model, embedded):
        pooled = []
        for kernel, bias in zip(model.horizontal_kernels, model.horizontal_biases):
            maps = ops.relu(ops.conv(embedded, kernel, padding="valid") + bias)  # [batch, L - h + 1, n_h]
            pooled.append(ops.max(maps, axis=1))
        return ops.concatenate(pooled, axis=1)

    model = built(l2=1e-3)
    features = {name: tf.constant(value) for name, value in training_features().items()}

    def gradients():
        with tf.GradientTape() as tape:
            loss = model.training_loss(features)
        return loss, tape.gradient(loss, model.trainable_weights)

    loss, fused = gradients()
    original = Caser._horizontal
    try:
        Caser._horizontal = lambda self, embedded: per_height(self, embedded)
        reference_loss, reference = gradients()
    finally:
        Caser._horizontal = original
    assert float(loss) == pytest.approx(float(reference_loss), rel=1e-6)
    for weight, mine, theirs in zip(model.trainable_weights, fused, reference, strict=True):
        np.testing.assert_allclose(tf.convert_to_tensor(mine), tf.convert_to_tensor(theirs), rtol=1e-5, atol=1e-6,
                                   err_msg=weight.path)


def test_keras_round_trip_gives_the_same_scores(tmp_path):
    model = built(hidden_dropout=0.5)
    path = tmp_path / "caser.keras"
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert type(restored) is Caser and restored.reads_users
    np.testing.assert_array_equal(np.asarray(restored.score_next(HISTORY, users=USERS)),
                                  np.asarray(model.score_next(HISTORY, users=USERS)))


TRAIN = [np.array([1, 2, 3, 4, 5, 6, 7]), np.array([8, 9]), np.array([], np.int64), np.array([2, 4, 6, 8, 1]),
         np.array([3])]


def test_windows_slide_by_one_and_a_short_user_gives_one_window_padded_on_the_left():
    windows = sequence_windows(TRAIN, 3, 2)
    rows = [windows.window(number).tolist() for number in range(len(windows))]
    assert rows == [[1, 2, 3, 4, 5], [2, 3, 4, 5, 6], [3, 4, 5, 6, 7],  # user 1: 7 items, 3 windows
                    [0, 0, 0, 8, 9],  # user 2: fewer than L + T items
                    [2, 4, 6, 8, 1],  # user 4: exactly L + T items (user 3 has none)
                    [0, 0, 0, 0, 3]]  # user 5: fewer than T items: a padding target
    assert windows.users.tolist() == [1, 1, 1, 2, 4, 5]


def stream_instances(start: int = 0, count: int = 12, batch_size: int | None = None, seed: int = 7) -> list[dict]:
    windows = sequence_windows(TRAIN, 3, 2)
    dataset = sequence_window_dataset(windows, seed, NegativeSampler(TRAIN, 10), 4, batch_size=batch_size,
                                      start=start)
    return [{name: value.numpy() for name, value in instance.items()} for instance in dataset.take(count)]


def test_each_epoch_is_every_window_once_with_negatives_the_user_never_had():
    windows = sequence_windows(TRAIN, 3, 2)
    every = sorted((int(windows.users[n]), tuple(windows.window(n).tolist())) for n in range(len(windows)))
    instances = stream_instances(count=3 * len(windows))
    orders = []
    for epoch in range(3):
        seen = [(int(x["user_ids"]), tuple(x["input_ids"].tolist() + x["target_ids"].tolist()))
                for x in instances[epoch * len(windows):(epoch + 1) * len(windows)]]
        assert sorted(seen) == every
        orders.append(seen)
    assert orders[0] != orders[1] or orders[1] != orders[2]  # a fresh order each epoch
    drawn = {}  # user 1's first window: its negatives in each epoch
    for x in instances:
        if x["input_ids"].tolist() == [1, 2, 3]:
            drawn.setdefault(int(x["user_ids"]), []).append(x["negative_ids"])
    assert len(drawn[1]) == 3 and not np.array_equal(drawn[1][0], drawn[1][1])  # fresh negatives each epoch
    for x in instances:
        negatives, targets = x["negative_ids"], x["target_ids"]  # [T, N], [T]
        assert negatives.shape == (2, 4) and x["input_ids"].dtype == np.int32
        np.testing.assert_array_equal(negatives[targets == 0], 0)
        real = negatives[targets != 0].ravel()
        assert real.size and real.min() >= 1 and real.max() <= 10
        assert not set(real.tolist()) & set(TRAIN[int(x["user_ids"]) - 1].tolist())


def test_the_stream_is_a_pure_function_of_the_batch_number():
    first, again = stream_instances(count=14), stream_instances(count=14)
    resumed = stream_instances(start=5, count=9)  # unbatched, every instance is a batch
    for mine, theirs in zip(first, again, strict=True):
        for name in mine:
            np.testing.assert_array_equal(mine[name], theirs[name])
    for mine, theirs in zip(first[5:], resumed, strict=True):
        for name in mine:
            np.testing.assert_array_equal(mine[name], theirs[name])
    other_seed = stream_instances(count=14, seed=8)
    assert any(not np.array_equal(a["negative_ids"], b["negative_ids"]) for a, b in zip(first, other_seed))
    # Batches of 4 from instance 4 are instances 4-11 in order (their negatives drawn a batch at a
    # time), and resume at a batch's start.
    batches = stream_instances(start=4, count=2, batch_size=4)
    for name in ("user_ids", "input_ids", "target_ids"):
        np.testing.assert_array_equal(batches[1][name], np.stack([x[name] for x in first[8:12]]))
    later = stream_instances(start=8, count=1, batch_size=4)
    for name in later[0]:
        np.testing.assert_array_equal(later[0][name], batches[1][name])
    with pytest.raises(ValueError, match="instance 5 is not a multiple of the batch size 4"):
        stream_instances(start=5, count=1, batch_size=4)


def test_preset_and_cpu_recipes_keep_caser_at_l_5():
    paper = cli.experiment_config("beauty", [], model="caser")
    assert (paper.data.max_len, paper.model.max_len, paper.model.hidden_size, paper.model.next_targets) == (5, 5, 50, 3)
    assert (paper.model.vertical_filters, paper.model.conv_filters, paper.model.train_negatives) == (4, 16, 3)
    assert (paper.train.batch_size, paper.train.learning_rate, paper.train.weight_decay) == (512, 1e-3, 0.0)
    assert (paper.model.l2, paper.model.hidden_dropout, paper.model.loss) == (1e-6, 0.5, "bce")
    for dataset in ("ml-1m", "beauty"):
        assert recipe_overrides("cpu-1h", dataset, "caser")["max_len"] == 5
        config = cli.experiment_config(dataset, [], model="caser", recipe="cpu-30m")
        assert (config.data.max_len, config.model.max_len, config.train.batch_size) == (5, 5, 512)
    with pytest.raises(ValueError, match="--loss must be 'bce'"):
        cli.experiment_config("beauty", ["loss=ce"], model="caser")


def test_validation_loss_is_one_window_per_user_with_its_target_against_the_first_negatives():
    model = built(train_negatives=2)
    task = get_task("caser")
    histories = np.array([[1, 2, 3, 4, 0], [5, 0, 0, 0, 0], [6, 7, 0, 0, 0]])
    targets, negatives = np.array([5, 6, 8]), np.array([[6, 7, 8], [1, 2, 3], [1, 2, 3]])
    features = task.loss_features(model, histories, targets, negatives, users=np.array([1, 2, 3]))
    np.testing.assert_array_equal(features["input_ids"], [[2, 3, 4], [0, 0, 5], [0, 6, 7]])
    np.testing.assert_array_equal(features["target_ids"], [[5], [6], [8]])
    np.testing.assert_array_equal(features["negative_ids"], [[[6, 7]], [[1, 2]], [[1, 2]]])
    # The validation loss (users 1..3, as the trainer numbers them) is the model's own loss there.
    w = weights_of(model)
    representation = reference_representation(model, features["input_ids"], np.array([1, 2, 3]))
    scores = representation @ w["output_table"].T + w["output_bias"]
    rows = np.arange(3)
    expected = softplus(-scores[rows, targets]).mean() + softplus(scores[rows[:, None], negatives[:, :2]]).mean()
    loss = validation_loss_function(model, task.loss_features, histories, targets, negatives)()
    assert loss == pytest.approx(expected, rel=1e-4)


def test_the_stream_feeds_the_model_in_a_graph():
    model = built()
    windows = sequence_windows(TRAIN, LENGTH, 2)
    batch = next(iter(sequence_window_dataset(windows, 1, NegativeSampler(TRAIN, NUM_ITEMS), 2, batch_size=3)))
    loss = tf.function(lambda features: model.compute_loss(x=features, y_pred=model(features)))(batch)
    assert np.isfinite(float(loss))
