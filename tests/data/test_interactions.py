"""The interaction training stream (BPR-MF, NCF, FPMC) on hand-made sequences."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.interactions import interaction_training_dataset, training_interactions
from bert4rec_tf.data.negatives import NegativeSampler
from bert4rec_tf.data.seeds import Stream, instance_seed

NUM_ITEMS = 12
SEED = 7
# User 2 has no training item; user 4 had item 3 twice.
TRAIN = [np.array([5, 6, 7]), np.array([], dtype=np.int32), np.array([8, 9]), np.array([3, 1, 3, 2])]
COUNT = 9


def stream(start: int = 0, negatives: int = 3, batch_size: int | None = None):
    sampler = NegativeSampler(TRAIN, NUM_ITEMS)
    return interaction_training_dataset(training_interactions(TRAIN), SEED, sampler, negatives, batch_size, start)


def take(dataset, count: int) -> list[dict]:
    return [{name: value.numpy() for name, value in element.items()} for element in dataset.take(count)]


def triple(instance: dict) -> tuple[int, int, int]:
    return int(instance["user_ids"]), int(instance["positive_ids"]), int(instance["previous_ids"])


def test_interactions_are_every_training_item_with_the_one_before():
    interactions = training_interactions(TRAIN)
    np.testing.assert_array_equal(interactions.users, [1, 1, 1, 3, 3, 4, 4, 4, 4])
    np.testing.assert_array_equal(interactions.items, [5, 6, 7, 8, 9, 3, 1, 3, 2])
    np.testing.assert_array_equal(interactions.previous, [0, 5, 6, 0, 8, 0, 3, 1, 3])
    assert len(interactions) == COUNT
    assert all(values.dtype == np.int32 for values in (interactions.users, interactions.items, interactions.previous))


def test_each_epoch_visits_every_interaction_once_in_its_own_order():
    interactions = training_interactions(TRAIN)
    expected = sorted(zip(interactions.users.tolist(), interactions.items.tolist(), interactions.previous.tolist()))
    instances = take(stream(), 3 * COUNT)
    epochs = [[triple(instance) for instance in instances[epoch * COUNT:(epoch + 1) * COUNT]] for epoch in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == expected
    assert epochs[0] != epochs[1] != epochs[2]


def test_the_order_and_the_negatives_follow_their_documented_seeds():
    interactions = training_interactions(TRAIN)
    sampler = NegativeSampler(TRAIN, NUM_ITEMS)
    instances = take(stream(), 2 * COUNT)
    for number in (0, 4, COUNT + 3):
        epoch, slot = divmod(number, COUNT)
        index = int(tf.random.experimental.index_shuffle(
            tf.constant(slot, tf.int64), instance_seed(SEED, Stream.INTERACTIONS, epoch), COUNT - 1))
        assert triple(instances[number]) == (interactions.users[index], interactions.items[index],
                                             interactions.previous[index])
        # Unbatched, every instance is its own batch: its negatives are drawn with the seed (seed, n).
        negatives = sampler.sample_rows(tf.constant([interactions.users[index]]), 3,
                                        instance_seed(SEED, Stream.INTERACTION_NEGATIVES, number))
        np.testing.assert_array_equal(instances[number]["negative_ids"], negatives.numpy()[0])


def test_negatives_are_items_the_user_never_had():
    for instance in take(stream(negatives=5), 4 * COUNT):
        user = int(instance["user_ids"])
        assert instance["negative_ids"].shape == (5,) and instance["negative_ids"].dtype == np.int32
        assert not set(instance["negative_ids"]) & set(TRAIN[user - 1].tolist())
        assert set(instance["negative_ids"]) <= set(range(1, NUM_ITEMS + 1))


def test_the_stream_is_deterministic_and_resumes_at_any_instance():
    whole = take(stream(), 2 * COUNT + 4)
    again = take(stream(), 2 * COUNT + 4)
    resumed = take(stream(start=COUNT - 2), COUNT + 6)  # across an epoch's end
    for mine, theirs in zip(again + resumed, whole + whole[COUNT - 2:], strict=True):
        assert mine.keys() == theirs.keys()
        for name in mine:
            np.testing.assert_array_equal(mine[name], theirs[name])


def test_batches_are_the_instances_in_order_with_one_draw_of_negatives_each():
    sampler = NegativeSampler(TRAIN, NUM_ITEMS)
    instances = take(stream(start=4), 8)
    batches = take(stream(start=4, batch_size=4), 2)  # batches 1 and 2, across the first epoch's end
    for number, batch in enumerate(batches, start=1):
        assert batch["user_ids"].shape == (4,) and batch["negative_ids"].shape == (4, 3)
        for name, value in batch.items():
            assert value.dtype == np.int32, name
            if name != "negative_ids":
                rows = instances[4 * (number - 1):4 * number]
                np.testing.assert_array_equal(value, np.stack([row[name] for row in rows]))
        drawn = sampler.sample_rows(tf.constant(batch["user_ids"]), 3, instance_seed(SEED, Stream.INTERACTION_NEGATIVES,
                                                                                     number))
        np.testing.assert_array_equal(batch["negative_ids"], drawn.numpy())


def test_batched_streams_resume_at_a_batch_boundary_only():
    whole = take(stream(batch_size=4), 5)
    resumed = take(stream(start=8, batch_size=4), 3)
    for mine, theirs in zip(resumed, whole[2:], strict=True):
        for name in mine:
            np.testing.assert_array_equal(mine[name], theirs[name])
    with pytest.raises(ValueError, match="instance 6 is not a multiple of the batch size 4"):
        stream(start=6, batch_size=4)


def test_a_batch_larger_than_an_epoch_keeps_each_epochs_order():
    instances = take(stream(), 3 * COUNT)
    [batch] = take(stream(batch_size=3 * COUNT), 1)  # three epochs in one batch
    for name in ("user_ids", "positive_ids", "previous_ids"):
        np.testing.assert_array_equal(batch[name], np.stack([instance[name] for instance in instances]))


def test_rows_of_negatives_are_uniform_over_each_users_non_items():
    sampler = NegativeSampler(TRAIN, NUM_ITEMS)
    users = tf.constant([1, 2, 3, 4] * 500)
    drawn = sampler.sample_rows(users, 6, tf.constant([5, 9], tf.int64)).numpy()
    assert drawn.shape == (2000, 6) and drawn.dtype == np.int64
    for user in (1, 2, 3, 4):
        values = drawn[np.asarray(users) == user].ravel()
        free = sorted(set(range(1, NUM_ITEMS + 1)) - set(TRAIN[user - 1].tolist()))
        assert set(values) == set(free)  # every non-item, and only those, in 3,000 draws
        shares = np.array([np.mean(values == item) for item in free])
        np.testing.assert_allclose(shares, 1 / len(free), atol=0.03)
    np.testing.assert_array_equal(drawn, sampler.sample_rows(users, 6, tf.constant([5, 9], tf.int64)).numpy())


def test_no_interaction_is_an_error():
    empty = [np.array([], dtype=np.int32)]
    with pytest.raises(DataError, match="no interaction"):
        interaction_training_dataset(training_interactions(empty), SEED, NegativeSampler(empty, NUM_ITEMS), 1)


def many(sampler, user: int, rows: int = 2000) -> np.ndarray:
    """`rows` samples of 5 negatives for `user`, seeds (row, user), concatenated."""
    seeds = tf.data.Dataset.range(rows).map(lambda row: tf.stack([row, tf.constant(user, tf.int64)]))
    return np.concatenate(list(seeds.map(lambda seed: sampler.sample(tf.constant(user), 5, seed)).as_numpy_iterator()))


def test_popular_negatives_follow_popularity_among_the_items_the_user_never_had():
    from bert4rec_tf.data.negatives import PopularNegativeSampler

    # Training counts: item 1 x2, 2 x2, 3 x4, 4 x5, 5 x10, 6 none. User 1 had item 5, user 2 items
    # 1-4, user 3 every item but 6.
    train = [np.array([5]), np.array([1, 2, 3, 4]), np.array([2, 5, 5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 3, 3, 3, 1])]
    sampler = PopularNegativeSampler(train, 6, alpha=1.0)
    draws = {user: many(sampler, user) for user in (1, 2, 3)}
    share = np.bincount(draws[1], minlength=7)[1:] / len(draws[1])
    # Among items 1-4 in proportion 2 : 2 : 4 : 5 (13); with 20 draws for 5 negatives at P(item 5) 10/23,
    # a uniform fill (item 6 among them) is needed about once in 1,000 rows.
    np.testing.assert_allclose(share[:4], np.array([2, 2, 4, 5]) / 13, atol=0.015)
    assert share[4] == 0 and share[5] < 0.002
    # User 2 never had 5 and 6, and 6 never occurs in training: the popularity draws give 5, the
    # uniform fill the rare 6; user 3's only non-item is 6, which only the uniform fill gives.
    assert set(draws[2]) <= {5, 6} and np.mean(draws[2] == 5) > 0.95
    assert set(draws[3]) == {6}
    # Stateless: the same seed gives the same draws; alpha 0.5 flattens the shares.
    seed = tf.constant([3, 1], tf.int64)
    np.testing.assert_array_equal(sampler.sample(tf.constant(1), 5, seed), sampler.sample(tf.constant(1), 5, seed))
    flat = PopularNegativeSampler(train, 6, alpha=0.5)
    halves = many(flat, 1)
    np.testing.assert_allclose(np.bincount(halves, minlength=7)[1:5] / len(halves),
                               np.sqrt([2, 2, 4, 5]) / np.sqrt([2, 2, 4, 5]).sum(), atol=0.015)


def test_the_stream_draws_popular_negatives_at_a_positive_alpha():
    from bert4rec_tf.data.negatives import PopularNegativeSampler

    sampler = PopularNegativeSampler(TRAIN, NUM_ITEMS, alpha=1.0)
    dataset = interaction_training_dataset(training_interactions(TRAIN), SEED, sampler, 4)
    for instance in take(dataset, 4 * COUNT):
        user = int(instance["user_ids"])
        assert not set(instance["negative_ids"]) & set(TRAIN[user - 1].tolist())
        # Items 4, 10, 11 and 12 never occur in training: only a uniform fill could give them, and
        # with 16 draws for 4 negatives none is needed here.
        assert set(instance["negative_ids"]) <= {1, 2, 3, 5, 6, 7, 8, 9}


def test_negative_sampler_is_uniform_at_alpha_0_and_by_popularity_above():
    from bert4rec_tf.data.negatives import PopularNegativeSampler, negative_sampler

    assert type(negative_sampler(TRAIN, NUM_ITEMS)) is NegativeSampler
    assert type(negative_sampler(TRAIN, NUM_ITEMS, 0.0)) is NegativeSampler
    assert type(negative_sampler(TRAIN, NUM_ITEMS, 0.75)) is PopularNegativeSampler
