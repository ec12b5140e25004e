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
        negatives = sampler.sample(interactions.users[index], 3, instance_seed(SEED, Stream.INTERACTIONS, epoch, index))
        np.testing.assert_array_equal(instances[number]["negative_ids"], negatives.numpy())


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


def test_batches_are_the_instances_in_order_and_int32():
    instances = take(stream(start=5), 8)
    batches = take(stream(start=5, batch_size=4), 2)
    for number, batch in enumerate(batches):
        assert batch["user_ids"].shape == (4,) and batch["negative_ids"].shape == (4, 3)
        for name, value in batch.items():
            assert value.dtype == np.int32, name
            np.testing.assert_array_equal(value, np.stack([i[name] for i in instances[4 * number:4 * number + 4]]))


def test_no_interaction_is_an_error():
    empty = [np.array([], dtype=np.int32)]
    with pytest.raises(DataError, match="no interaction"):
        interaction_training_dataset(training_interactions(empty), SEED, NegativeSampler(empty, NUM_ITEMS), 1)
