"""tf.data input pipelines: static instances from TFRecords, dynamic masking, evaluation inputs.

The static and dynamic training pipelines yield the same feature dictionary (names, dtypes and
shapes of `masking.feature_spec`), so a model cannot tell them apart.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert4rec_tf.config import DataConfig
from bert4rec_tf.constants import PAD_ID, mask_id
from bert4rec_tf.data import masking
from bert4rec_tf.data.candidates import sample_negatives
from bert4rec_tf.data.instances import Windows, window_masker
from bert4rec_tf.data.preprocess import UserSequences
from bert4rec_tf.data.split import history_and_target

_DYNAMIC_STREAM = 1


def static_training_dataset(files: list[str], config: DataConfig, batch_size: int | None = None,
                            shuffle_buffer: int = 10_000, seed: int | None = None,
                            repeat: bool = True, start: int = 0) -> tf.data.Dataset:
    """Parsed training instances from the TFRecord shards.

    Args:
        files: the shard paths.
        config: the data configuration the shards were written with (for the shapes).
        batch_size: batch the instances when given.
        shuffle_buffer: instances shuffled in memory (0: no shuffling; the files are pre-shuffled).
        seed: shuffling seed (the data seed when None).
        repeat: cycle through the files forever.
        start: the first instance of the stream (instances already consumed), so that a resumed
            run continues it exactly.
    """
    spec = masking.feature_spec(config.max_len, config.max_predictions_per_seq)
    dataset = tf.data.TFRecordDataset(files, num_parallel_reads=min(len(files), 4) or None)
    if repeat:
        dataset = dataset.repeat()
    if shuffle_buffer:
        dataset = dataset.shuffle(shuffle_buffer, seed=config.seed if seed is None else seed)
    dataset = dataset.skip(start)
    if batch_size:
        return (dataset.batch(batch_size, drop_remainder=True)
                .map(lambda records: tf.io.parse_example(records, spec), num_parallel_calls=tf.data.AUTOTUNE)
                .prefetch(tf.data.AUTOTUNE))
    return dataset.map(lambda record: tf.io.parse_single_example(record, spec),
                       num_parallel_calls=tf.data.AUTOTUNE)


def dynamic_training_dataset(windows: Windows, config: DataConfig, num_items: int,
                             batch_size: int | None = None, start: int = 0) -> tf.data.Dataset:
    """Fresh masks every epoch from the same windows, no files.

    Instance n of the endless stream is window index_shuffle(n mod W) of epoch n // W, masked with
    a seed folded from (data seed, epoch, window); it is the mask-last instance with probability
    1 / (dupe_factor + 1), as in the static files. The stream is a pure function of n, so a resumed
    run continues it exactly with `start`.

    Args:
        windows: the training windows.
        config: the data configuration.
        num_items: real items are 1..num_items.
        batch_size: batch the instances when given.
        start: the first instance number (instances already consumed).
    """
    count = len(windows)
    mask = window_masker(windows, config, num_items)
    last_share = 1.0 / (config.dupe_factor + 1)

    def make(number):
        epoch, slot = number // count, number % count
        epoch_seed = masking.instance_seed(config.seed, _DYNAMIC_STREAM, epoch)
        window = tf.random.experimental.index_shuffle(slot, epoch_seed, count - 1)
        seed = masking.instance_seed(config.seed, _DYNAMIC_STREAM, epoch, window)
        kind_seed = tf.random.experimental.stateless_fold_in(seed, -1)
        last_only = tf.random.stateless_uniform([], kind_seed) < last_share
        return mask(window, seed, last_only)

    dataset = tf.data.Dataset.range(start, np.iinfo(np.int64).max).map(
        make, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if batch_size:
        dataset = dataset.batch(batch_size, drop_remainder=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def evaluation_features(sequences: UserSequences, stage: str, max_len: int) -> dict[str, np.ndarray]:
    """Every user's history (last max_len - 1 items) with [MASK] appended, right-padded.

    Args:
        sequences: all users' sequences.
        stage: "valid" (history without the last two items, target the second last) or "test"
            (history without the last item, target the last).
        max_len: the model's sequence length.

    Returns:
        info [U, 1] user ids, input_ids [U, max_len], input_mask [U, max_len],
        masked_lm_positions [U, 1] (the [MASK] position), masked_lm_ids [U, 1] (the target),
        masked_lm_weights [U, 1] ones; int64 except the float32 weights.
    """
    num_users = sequences.num_users
    input_ids = np.full((num_users, max_len), PAD_ID, dtype=np.int64)
    targets = np.zeros(num_users, dtype=np.int64)
    positions = np.zeros(num_users, dtype=np.int64)
    token = mask_id(sequences.num_items)
    for user in range(num_users):
        history, target = history_and_target(sequences, user, stage)
        history = history[len(history) - (max_len - 1):] if len(history) > max_len - 1 else history
        input_ids[user, :len(history)] = history
        input_ids[user, len(history)] = token
        positions[user] = len(history)
        targets[user] = target
    return {
        "info": np.arange(1, num_users + 1, dtype=np.int64)[:, None],
        "input_ids": input_ids,
        "input_mask": (input_ids != PAD_ID).astype(np.int64),
        "masked_lm_positions": positions[:, None],
        "masked_lm_ids": targets[:, None],
        "masked_lm_weights": np.ones((num_users, 1), dtype=np.float32),
    }


def sampled_candidates(sequences: UserSequences, config: DataConfig) -> dict[str, np.ndarray]:
    """The negatives of both sampled protocols for both stages, keyed "pop_valid", "uniform_test", ..."""
    stages = ("valid", "test") if config.split == "valid" else ("test",)
    return {f"{protocol}_{stage}": sample_negatives(sequences, protocol, stage, config.num_negatives, config.seed)
            for protocol in ("pop", "uniform") for stage in stages}
