"""Dynamic masking, evaluation inputs and sampled candidates on hand-made sequences."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.data.candidates import item_popularity, sample_negatives
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.instances import make_windows, write_static_instances
from bert4rec_tf.data.negatives import NegativeSampler
from bert4rec_tf.data.pipeline import (
    dynamic_training_dataset,
    evaluation_histories,
    length_grouped,
    next_item_training_dataset,
    padded_width,
    static_training_dataset,
)
from bert4rec_tf.data.preprocess import UserSequences
from bert4rec_tf.data.split import history_and_target, training_sequences
from bert4rec_tf.tasks import get_task
from tests.data.test_instances import NUM_ITEMS, small_config, small_windows


def sequences_of(lists: list[list[int]], num_items: int) -> UserSequences:
    lengths = [len(x) for x in lists]
    return UserSequences(user_ids=np.asarray([str(u + 1) for u in range(len(lists))]),
                         item_ids=np.asarray([str(i) for i in range(1, num_items + 1)]),
                         offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                         items=np.concatenate([np.asarray(x, dtype=np.int32) for x in lists]))


def take(dataset, count):
    return [{k: v.numpy() for k, v in element.items()} for element in dataset.take(count)]


def test_dynamic_pipeline_matches_the_static_feature_dictionary(tmp_path):
    config = small_config(num_shards=1)
    windows = small_windows(config)
    write_static_instances(windows, config, NUM_ITEMS, str(tmp_path), progress=False)
    static = static_training_dataset([os.path.join(tmp_path, f) for f in os.listdir(tmp_path)], config,
                                     batch_size=4)
    dynamic = dynamic_training_dataset(windows, config, NUM_ITEMS, batch_size=4)
    assert static.element_spec == dynamic.element_spec


def test_dynamic_masks_are_fresh_each_epoch_deterministic_and_resumable():
    config = small_config()
    windows = small_windows(config)
    count = len(windows)
    stream = take(dynamic_training_dataset(windows, config, NUM_ITEMS), 3 * count)
    again = take(dynamic_training_dataset(windows, config, NUM_ITEMS), 3 * count)
    assert all(np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(stream, again))
    resumed = take(dynamic_training_dataset(windows, config, NUM_ITEMS, start=count + 2), 5)
    assert all(np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(stream[count + 2:], resumed))
    for epoch in range(3):  # each epoch visits every window once
        users = sorted(int(e["info"][0]) for e in stream[epoch * count:(epoch + 1) * count])
        assert users == sorted(windows.users.tolist())
    epoch0 = {tuple(e["input_ids"]) for e in stream[:count]}
    epoch1 = {tuple(e["input_ids"]) for e in stream[count:2 * count]}
    assert epoch0 != epoch1


def test_evaluation_histories_keep_the_last_items_before_the_target():
    sequences = sequences_of([[1, 2, 3, 4, 5, 6, 7, 8], [9, 8, 7]], num_items=9)
    histories, targets = evaluation_histories(sequences, "test", length=4)
    assert histories.tolist() == [[4, 5, 6, 7], [9, 8, 0, 0]] and targets.tolist() == [8, 7]
    histories, targets = evaluation_histories(sequences, "valid", length=4)
    assert histories.tolist() == [[3, 4, 5, 6], [9, 0, 0, 0]] and targets.tolist() == [7, 8]


def test_evaluation_histories_are_each_users_history_and_target_and_refuse_a_user_without_one():
    # The reference: `history_and_target` user by user, its last `length` items left-aligned.
    rng = np.random.default_rng(3)
    lists = [rng.integers(1, 30, size=n).tolist() for n in (2, 3, 5, 9, 14, 4, 2)]
    sequences = sequences_of(lists, num_items=30)
    for stage in ("valid", "test"):
        for length in (1, 4, 20):
            histories, targets = evaluation_histories(sequences, stage, length)
            assert histories.dtype == np.int32 and targets.dtype == np.int64
            for user in range(len(lists)):
                history, target = history_and_target(sequences, user, stage)
                kept = history[max(0, len(history) - length):].tolist()
                assert histories[user].tolist() == kept + [0] * (length - len(kept)) and targets[user] == target
    with pytest.raises(ValueError, match="user 2 has 1 item"):
        evaluation_histories(sequences_of([[1, 2, 3], [4]], num_items=4), "valid", 4)
    with pytest.raises(ValueError, match="unknown evaluation stage 'train'"):
        evaluation_histories(sequences, "train", 4)


@pytest.mark.parametrize("protocol", ["pop", "uniform"])
def test_negatives_exclude_history_are_distinct_and_deterministic(protocol):
    rng = np.random.default_rng(1)
    lists = [list(rng.choice(np.arange(1, 301), 40, replace=False)) for _ in range(20)]
    sequences = sequences_of(lists, num_items=300)
    negatives = sample_negatives(sequences, protocol, "test", 100, seed=9)
    assert negatives.shape == (20, 100)
    for user, row in enumerate(negatives):
        assert len(set(row.tolist())) == 100
        assert not set(row.tolist()) & set(lists[user])
        assert row.min() >= 1 and row.max() <= 300
    assert np.array_equal(negatives, sample_negatives(sequences, protocol, "test", 100, seed=9))
    assert not np.array_equal(negatives, sample_negatives(sequences, protocol, "test", 100, seed=10))
    assert not np.array_equal(negatives, sample_negatives(sequences, protocol, "valid", 100, seed=9))


def test_pop_negatives_follow_popularity():
    # Item 1 is in every sequence of the other users; items 2..201 appear once each.
    lists = [[1, 2 + u] for u in range(200)] + [[250, 251]]
    sequences = sequences_of(lists, num_items=251)
    assert item_popularity(sequences)[1] == 200
    negatives = sample_negatives(sequences, "pop", "test", 5, seed=0)[-1]
    assert 1 in negatives.tolist()   # weight 200 of 400: drawn first almost surely
    uniform = sample_negatives(sequences, "uniform", "test", 5, seed=0)
    assert (uniform[:200] == 1).sum() == 0                 # users with item 1 never get it


def test_too_few_items_to_sample_is_an_error():
    sequences = sequences_of([[1, 2, 3], [1, 2]], num_items=5)
    with pytest.raises(DataError, match="fewer than 3 items left"):
        sample_negatives(sequences, "pop", "test", 3, seed=0)


def test_next_item_instances_shift_by_one_pad_on_the_left_and_draw_foreign_negatives():
    from bert4rec_tf.config import MaskedData
    from bert4rec_tf.data.negatives import NegativeSampler
    from bert4rec_tf.data.pipeline import next_item_training_dataset

    train = [np.array([1, 2, 3, 4, 5, 6, 7]), np.array([8, 9, 10])]
    config = MaskedData(max_len=4)
    windows = make_windows(train, np.array([1, 2]), 5, 0.5)  # max_len 4 + 1
    sampler = NegativeSampler(train, 40)
    instances = list(next_item_training_dataset(windows, config, sampler, start=0).take(len(windows) * 20)
                     .as_numpy_iterator())
    seen = set()
    for instance in instances:
        inputs, positives, negatives = instance["input_ids"], instance["positive_ids"], instance["negative_ids"]
        row = [int(x) for x in inputs if x]
        seen.add(tuple(row))
        real = positives > 0
        assert (inputs[real] > 0).all() and list(positives[real]) == row[1:] + [positives[real][-1]]
        assert (inputs[: len(inputs) - len(row)] == 0).all()          # padding on the left
        user_items = set(train[0]) if row[0] < 8 else set(train[1])
        assert not set(negatives[real]) & user_items and (negatives[~real] == 0).all()
    assert seen == {(1, 2, 3, 4), (3, 4, 5, 6), (8, 9)}
    again = list(next_item_training_dataset(windows, config, sampler, start=5).take(3).as_numpy_iterator())
    for first, second in zip(instances[5:8], again):
        assert all((first[k] == second[k]).all() for k in first)      # resumable from any instance


@pytest.mark.parametrize("source", ["static", "dynamic"])
def test_matching_instances_come_in_the_configured_proportions_with_foreign_negatives(tmp_path, source):
    from bert4rec_tf.data.negatives import NegativeSampler

    config = small_config(matching=True, match_only_prob=0.3, dupe_factor=9, num_shards=1)
    rng = np.random.default_rng(3)
    train = [rng.choice(np.arange(1, NUM_ITEMS + 1), size=int(n), replace=False) for n in rng.integers(3, 7, 80)]
    windows = make_windows(train, np.arange(1, 81), config.max_len, config.prop_sliding_window)
    sampler = NegativeSampler(train, NUM_ITEMS)
    total = len(windows) * 10
    if source == "static":
        write_static_instances(windows, config, NUM_ITEMS, str(tmp_path), progress=False)
        files = [os.path.join(tmp_path, name) for name in os.listdir(tmp_path)]
        dataset = static_training_dataset(files, config, sampler=sampler, match_negatives=5, repeat=False)
    else:
        dataset = dynamic_training_dataset(windows, config, NUM_ITEMS, sampler=sampler, match_negatives=5)
    kinds = {"mask_last": 0, "match_only": 0, "mask_match": 0}
    for instance in take(dataset, total):
        user = int(instance["info"][0])
        assert not set(instance["match_negatives"].tolist()) & set(train[user - 1].tolist())
        assert instance["match_negatives"].shape == (5,)
        if instance["match_positive"][0] == 0:
            kinds["mask_last"] += 1
        elif instance["masked_lm_weights"].sum() == 0:
            kinds["match_only"] += 1
            assert instance["match_positive"][0] in train[user - 1]
        else:
            kinds["mask_match"] += 1
    shares = {kind: count / total for kind, count in kinds.items()}
    if source == "static":
        assert kinds["mask_last"] == len(windows)      # exactly one per window
    assert shares["mask_last"] == pytest.approx(0.1, abs=0.03)
    assert shares["match_only"] == pytest.approx(0.9 * 0.3, abs=0.04)
    assert shares["mask_match"] == pytest.approx(0.9 * 0.7, abs=0.04)


def _restored(batch: dict, keys: tuple, max_len: int, left: bool = False) -> list[tuple]:
    """The batch's instances with the sequence features padded back to max_len, as hashable rows."""
    rows = []
    for row in range(len(batch["input_ids"])):
        parts = []
        for name in sorted(batch):
            value = batch[name][row]
            if name in keys:
                pad = max_len - len(value)
                value = np.pad(value, (pad, 0) if left else (0, pad))
            parts.append(tuple(np.ravel(value).tolist()))
        rows.append(tuple(parts))
    return rows


@pytest.mark.slow
def test_length_grouped_batches_hold_each_chunks_instances_sorted_trimmed_and_resumable():
    config = small_config(max_len=24, prop_sliding_window=1.0)
    rng = np.random.default_rng(3)
    sequences = [rng.integers(1, NUM_ITEMS + 1, size=n) for n in (2, 3, 5, 9, 17, 30, 4, 12, 21, 2, 7, 40)]
    windows = make_windows(sequences, np.arange(1, 13), config.max_len, config.prop_sliding_window)

    def full(start):
        return dynamic_training_dataset(windows, config, NUM_ITEMS, batch_size=4, start=start)

    keys = get_task("bert4rec").sequence_features
    grouped = take(length_grouped(full, 0, 4, 3, keys, False, config.max_len, config.seed), 6)
    plain = take(full(0), 6)
    for chunk in range(2):
        mine, theirs = grouped[3 * chunk:3 * chunk + 3], plain[3 * chunk:3 * chunk + 3]
        assert sorted(sum((_restored(b, keys, 24) for b in mine), [])) == sorted(
            sum((_restored(b, keys, 24) for b in theirs), []))
        spans = sorted((np.count_nonzero(b["input_ids"], axis=1).min(), np.count_nonzero(b["input_ids"], axis=1).max())
                       for b in mine)
        assert all(longest <= shortest for (_, longest), (shortest, _) in zip(spans, spans[1:]))  # sorted together
    for batch in grouped:
        longest = np.count_nonzero(batch["input_ids"], axis=1).max()
        assert batch["input_ids"].shape == batch["input_mask"].shape == (4, padded_width(longest, 24))
        assert batch["masked_lm_positions"].shape == (4, config.max_predictions_per_seq)
    assert {b["input_ids"].shape[1] for b in grouped} != {24}  # some batches are narrower
    resumed = take(length_grouped(full, 16, 4, 3, keys, False, config.max_len, config.seed), 2)  # chunk 1, batch 2
    assert all(_restored(a, keys, 24) == _restored(b, keys, 24) for a, b in zip(grouped[4:6], resumed))
    with pytest.raises(ValueError, match="whole batch"):
        length_grouped(full, 5, 4, 3, keys, False, config.max_len, config.seed)


def test_length_grouped_trims_left_padded_next_item_batches_from_the_left():
    config = small_config(max_len=16)
    sequences = [np.arange(1, n + 1) for n in (3, 4, 5, 6)]
    windows = make_windows(sequences, np.arange(1, 5), config.max_len + 1, config.prop_sliding_window)
    sampler = NegativeSampler(sequences, NUM_ITEMS)

    def full(start):
        return next_item_training_dataset(windows, config, sampler, batch_size=4, start=start)

    task = get_task("sasrec")
    trimmed = take(length_grouped(full, 0, 4, 1, task.sequence_features, task.padded_left, config.max_len,
                                  config.seed), 2)
    for batch, whole in zip(trimmed, take(full(0), 2)):
        assert batch["input_ids"].shape == (4, 8)
        for name in task.sequence_features:
            assert np.array_equal(batch[name], whole[name][:, -8:]) and not whole[name][:, :-8].any()


@pytest.mark.parametrize("longest, width", [(0, 1), (1, 8), (8, 8), (9, 16), (47, 48), (49, 50), (50, 50)])
def test_padded_width_rounds_up_to_eight_within_max_len(longest, width):
    assert padded_width(longest, 50) == width
    assert int(padded_width(tf.constant(longest), 50)) == width


def test_the_splits_keep_the_test_item_out_of_training_and_original_trains_on_the_validation_item():
    sequences = sequences_of([[1, 2, 3, 4, 5], [6, 7, 8]], 8)
    assert [s.tolist() for s in training_sequences(sequences, "valid")] == [[1, 2, 3], [6]]
    assert [s.tolist() for s in training_sequences(sequences, "original")] == [[1, 2, 3, 4], [6, 7]]
    for stage, history, target in (("valid", [1, 2, 3], 4), ("test", [1, 2, 3, 4], 5)):
        given, expected = history_and_target(sequences, 0, stage)
        assert (given.tolist(), expected) == (history, target)


def test_next_item_batches_hold_the_windows_of_the_instance_order_rotated_to_the_right():
    # The reference: instance n is window index_shuffle(n mod W) of epoch n // W, its items rolled to
    # the row's end; the stream makes whole batches, so its rows must be those instances in order,
    # batched or not, across an epoch's end.
    from bert4rec_tf.data.seeds import Stream, instance_seed

    train = [np.arange(1, 8), np.arange(8, 11), np.arange(11, 20), np.array([20, 21])]
    config = small_config(max_len=6)
    windows = make_windows(train, np.arange(1, 5), config.max_len + 1, 0.5)
    count = len(windows)
    sampler = NegativeSampler(train, 30)
    batched = take(next_item_training_dataset(windows, config, sampler, batch_size=4), 2 * count)
    single = list(next_item_training_dataset(windows, config, None).take(8 * count).as_numpy_iterator())
    for number in range(8 * count):
        epoch = number // count
        window = int(tf.random.experimental.index_shuffle(
            number % count, instance_seed(config.seed, Stream.NEXT_ITEM, epoch), count - 1))
        aligned = np.roll(windows.tokens[window], windows.tokens.shape[1] - windows.lengths[window])
        inputs, positives = aligned[:-1], np.where(aligned[:-1] > 0, aligned[1:], 0)
        row = batched[number // 4]
        assert np.array_equal(row["input_ids"][number % 4], inputs)
        assert np.array_equal(row["positive_ids"][number % 4], positives)
        assert np.array_equal(single[number]["input_ids"], inputs) and "negative_ids" not in single[number]
        user_items = set(train[windows.users[window] - 1].tolist())
        negatives = row["negative_ids"][number % 4]
        assert not set(negatives[positives > 0].tolist()) & user_items and not negatives[positives == 0].any()
    again = take(next_item_training_dataset(windows, config, sampler, batch_size=4, start=8), 3)
    for first, second in zip(batched[2:5], again):
        assert all(np.array_equal(first[name], second[name]) for name in first)  # resumed at a batch
    with pytest.raises(ValueError, match="next-item stream resumes at a batch's start"):
        next_item_training_dataset(windows, config, sampler, batch_size=4, start=6)
