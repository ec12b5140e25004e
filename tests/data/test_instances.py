"""Windows, masks, padding, the mask-last instance, TFRecord files and their determinism."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os

import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.config import DataConfig, ExperimentConfig, MaskedData, MatchingData
from bert4rec_tf.data import instances, masking
from bert4rec_tf.data.instances import make_windows, window_starts, write_static_instances
from bert4rec_tf.data.pipeline import static_training_dataset

NUM_ITEMS = 50
MASK = NUM_ITEMS + 1


@pytest.mark.parametrize("length, max_len, prop, starts", [
    (3, 5, 0.5, [0]),
    (5, 5, 0.5, [0]),
    (6, 5, 0.5, [0, 1]),                 # range(1, 0, -2) = [1]
    (250, 200, 0.5, [0, 50]),
    (450, 200, 0.5, [0, 50, 150, 250]),  # range(250, 0, -100)
    (400, 200, 0.5, [0, 100, 200]),      # range(200, 0, -100) stops above 0, then 0
    (60, 50, 0.1, [0, 5, 10]),           # step int(0.1 * 50) = 5
    (12, 5, -1, [0, 2, 7]),              # -1: step max_len
])
def test_window_starts(length, max_len, prop, starts):
    assert window_starts(length, max_len, prop) == starts


def test_window_step_below_one_item_is_an_error():
    with pytest.raises(ValueError, match="step below one item"):
        window_starts(30, 5, 0.1)


def test_make_windows_pads_right_and_keeps_owner():
    windows = make_windows([np.arange(1, 8), np.array([], dtype=np.int32), np.array([9, 8])],
                           np.array([1, 2, 3]), max_len=5, prop_sliding_window=0.4)
    assert windows.users.tolist() == [1, 1, 3]
    assert windows.lengths.tolist() == [5, 5, 2]
    assert windows.tokens.tolist() == [[1, 2, 3, 4, 5], [3, 4, 5, 6, 7], [9, 8, 0, 0, 0]]


def masked(length, *, max_len=12, max_predictions=4, prob=0.5, last_only=False, seed=(3, 4), mask_prob=1.0,
           tokens=None, kind=None, matching=False, mask_runs=False):
    if tokens is None:
        tokens = np.zeros(max_len, dtype=np.int64)
        tokens[:length] = np.arange(11, 11 + length)
    if kind is None:
        kind = masking.MASK_LAST if last_only else masking.MASK_RANDOM
    out = masking.mask_window(tf.constant(tokens), tf.constant(length), tf.constant(7),
                              tf.constant(seed, tf.int64), tf.constant(kind), max_predictions=max_predictions,
                              masked_lm_prob=prob, mask_prob=mask_prob, mask_id=MASK, num_items=NUM_ITEMS,
                              matching=matching, mask_runs=mask_runs)
    return tokens, {k: v.numpy() for k, v in out.items()}


@pytest.mark.parametrize("length, prob, expected", [
    (1, 0.5, 1),     # max(1, round(0.5)) = max(1, 0) = 1
    (5, 0.5, 2),     # round(2.5) = 2: half to even, as Python's round
    (7, 0.5, 4),     # round(3.5) = 4
    (3, 0.2, 1),     # round(0.6) = 1
    (12, 0.5, 4),    # round(6) capped at P = 4
    (5, 0.6, 3),
])
def test_number_of_masks_follows_the_formula(length, prob, expected):
    tokens, out = masked(length, prob=prob)
    weights = out["masked_lm_weights"]
    assert weights.sum() == expected == min(4, max(1, round(length * prob)))
    assert weights.tolist() == [1.0] * expected + [0.0] * (4 - expected)
    positions = out["masked_lm_positions"][:expected]
    assert list(positions) == sorted(set(positions)) and positions.max() < length
    assert out["masked_lm_positions"][expected:].tolist() == [0] * (4 - expected)
    assert out["masked_lm_ids"][:expected].tolist() == tokens[positions].tolist()
    assert out["masked_lm_ids"][expected:].tolist() == [0] * (4 - expected)
    expected_ids = tokens.copy()
    expected_ids[positions] = MASK
    assert out["input_ids"].tolist() == expected_ids.tolist()
    assert out["input_mask"].tolist() == [1] * length + [0] * (12 - length)
    assert out["info"].tolist() == [7]


def test_mask_last_masks_only_the_last_item():
    tokens, out = masked(6, last_only=True)
    assert out["masked_lm_positions"].tolist() == [5, 0, 0, 0]
    assert out["masked_lm_ids"].tolist() == [16, 0, 0, 0]
    assert out["masked_lm_weights"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert out["input_ids"][:7].tolist() == [11, 12, 13, 14, 15, MASK, 0]


def test_matching_kinds_move_the_last_item_into_the_matching_target():
    tokens, out = masked(6, kind=masking.MASK_RANDOM, matching=True)
    assert out["match_positive"].tolist() == [16]                 # the last item is the matching target
    assert out["input_mask"].tolist() == [1] * 5 + [0] * 7 and 16 not in out["input_ids"].tolist()
    assert out["masked_lm_weights"].sum() == 2                   # round(5 * 0.5) masks among the 5 left
    _, only = masked(6, kind=masking.MATCH_ONLY, matching=True)
    assert only["match_positive"].tolist() == [16] and only["masked_lm_weights"].sum() == 0
    assert only["input_ids"].tolist() == [11, 12, 13, 14, 15] + [0] * 7
    _, last = masked(6, kind=masking.MASK_LAST, matching=True)
    assert last["match_positive"].tolist() == [0] and last["masked_lm_positions"][0] == 5
    _, plain = masked(6, kind=masking.MASK_RANDOM)
    assert "match_positive" not in plain


def test_mask_runs_masks_whole_runs_of_equal_items():
    tokens = np.array([11, 12, 12, 12, 13, 14, 14, 15, 0, 0, 0, 0])
    for seed in range(20):
        _, out = masked(8, tokens=tokens, prob=0.25, max_predictions=8, seed=(seed, 1), mask_runs=True)
        masked_positions = set(out["masked_lm_positions"][out["masked_lm_weights"] > 0].tolist())
        for run in ({1, 2, 3}, {5, 6}):
            assert not masked_positions & run or run <= masked_positions, (seed, masked_positions)
        assert masked_positions and all(out["input_ids"][p] == MASK for p in masked_positions)


def test_mask_prob_zero_keeps_or_replaces_with_a_real_item():
    tokens, out = masked(12, prob=1.0, max_predictions=12, mask_prob=0.0)
    assert MASK not in out["input_ids"].tolist()
    assert 0 < (out["input_ids"] != tokens).sum() < 12      # some kept, some replaced
    assert out["input_ids"].min() >= 1 and out["input_ids"].max() <= NUM_ITEMS + 11


def test_same_seed_same_mask_other_seed_other_mask():
    _, first = masked(12, seed=(1, 2))
    _, again = masked(12, seed=(1, 2))
    others = [masked(12, seed=(1, s))[1]["masked_lm_positions"].tolist() for s in range(3, 8)]
    assert first["masked_lm_positions"].tolist() == again["masked_lm_positions"].tolist()
    assert any(o != first["masked_lm_positions"].tolist() for o in others)


def small_config(**overrides) -> DataConfig:
    values = dict(dataset="custom", max_len=6, masked_lm_prob=0.4, max_predictions_per_seq=3,
                  prop_sliding_window=0.5, dupe_factor=3, num_shards=3, seed=5)
    values.update(overrides)
    matching = values.pop("matching", False)
    return (MatchingData if matching else MaskedData)(**values)


def small_experiment(name: str, **overrides) -> ExperimentConfig:
    """The configuration of family `name` with the settings of `small_config(**overrides)` it has."""
    import bert4rec_tf.tasks  # noqa: F401  (registers the families' sections)

    config = ExperimentConfig.for_family(name)
    data = dataclasses.asdict(small_config(**overrides))
    config.apply({f"data.{key}": value for key, value in data.items()}, only_known=True)
    return config


def small_windows(config: DataConfig):
    rng = np.random.default_rng(0)
    sequences = [rng.integers(1, NUM_ITEMS + 1, size=n) for n in (2, 6, 9, 14, 3)]
    return make_windows(sequences, np.arange(1, 6), config.max_len, config.prop_sliding_window)


def read_records(directory, config):
    files = sorted(os.path.join(directory, f) for f in os.listdir(directory))
    return [{k: v.numpy() for k, v in example.items()}
            for example in static_training_dataset(files, config, shuffle_buffer=0, repeat=False)]


def test_static_files_hold_dupe_copies_and_one_mask_last_per_window(tmp_path):
    config = small_config()
    windows = small_windows(config)
    written = write_static_instances(windows, config, NUM_ITEMS, str(tmp_path), progress=False)
    assert sorted(written) == [instances.shard_name(s, 3) for s in range(3)]
    assert sorted(os.listdir(tmp_path)) == sorted(written)      # no temporary file left
    records = read_records(tmp_path, config)
    assert len(records) == sum(written.values()) == len(windows) * (config.dupe_factor + 1)
    assert {k: (v.dtype, v.shape) for k, v in records[0].items()} == {
        "info": (np.int64, (1,)), "input_ids": (np.int64, (6,)), "input_mask": (np.int64, (6,)),
        "masked_lm_positions": (np.int64, (3,)), "masked_lm_ids": (np.int64, (3,)),
        "masked_lm_weights": (np.float32, (3,))}
    per_window = collections.defaultdict(list)
    for record in records:
        original = record["input_ids"].copy()
        real = record["masked_lm_weights"] > 0
        original[record["masked_lm_positions"][real]] = record["masked_lm_ids"][real]
        per_window[(int(record["info"][0]), tuple(original))].append(record)
    assert len(per_window) == len(windows)
    checked_multi = 0
    for (user, tokens), group in per_window.items():
        length = int(np.count_nonzero(tokens))
        assert len(group) == config.dupe_factor + 1
        counts = collections.Counter(int(r["masked_lm_weights"].sum()) for r in group)
        expected_k = min(3, max(1, round(length * 0.4)))
        if expected_k == 1:
            assert counts == {1: config.dupe_factor + 1}
        else:  # the mask-last instance is the only one with a single mask, and it is the last item
            assert counts == {expected_k: config.dupe_factor, 1: 1}
            (last,) = [r for r in group if r["masked_lm_weights"].sum() == 1]
            assert last["masked_lm_positions"][0] == length - 1
            assert last["input_ids"][length - 1] == MASK
        checked_multi += expected_k > 1
        for r in group:
            assert r["input_mask"].tolist() == [1] * length + [0] * (6 - length)
    assert checked_multi >= 3


def digests(directory):
    return {name: hashlib.sha256(open(os.path.join(directory, name), "rb").read()).hexdigest()
            for name in sorted(os.listdir(directory))}


@pytest.mark.slow
def test_same_seed_identical_bytes_whatever_the_parallelism(tmp_path):
    config = small_config()
    windows = small_windows(config)
    runs = []
    for index, workers in enumerate((1, 3, 3)):
        directory = tmp_path / f"run{index}"
        directory.mkdir()
        write_static_instances(windows, config, NUM_ITEMS, str(directory), workers=workers, progress=False)
        runs.append(digests(directory))
    assert runs[0] == runs[1] == runs[2]
    other = tmp_path / "other"
    other.mkdir()
    write_static_instances(windows, dataclasses.replace(config, seed=6), NUM_ITEMS, str(other), progress=False)
    assert digests(other) != runs[0]
