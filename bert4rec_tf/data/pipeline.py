"""tf.data input pipelines: static instances from TFRecords, dynamic masking, evaluation inputs.

The static and dynamic training pipelines yield the same feature dictionary (names, dtypes and
shapes of `masking.feature_spec`), so a model cannot tell them apart.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert4rec_tf.config import DataConfig
from bert4rec_tf.constants import PAD_ID
from bert4rec_tf.data import masking
from bert4rec_tf.data.candidates import sample_negatives
from bert4rec_tf.data.instances import Windows, window_masker
from bert4rec_tf.data.negatives import NegativeSampler
from bert4rec_tf.data.preprocess import UserSequences
from bert4rec_tf.data.seeds import Stream, batch_positions, batch_stream, instance_seed
from bert4rec_tf.data.split import target_from_end


def static_training_dataset(files: list[str], config: DataConfig, batch_size: int | None = None,
                            shuffle_buffer: int = 10_000, seed: int | None = None, repeat: bool = True,
                            start: int = 0, sampler: NegativeSampler | None = None,
                            match_negatives: int = 0) -> tf.data.Dataset:
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
        sampler, match_negatives: with the matching task, each instance also gets
            `match_negatives` negatives (int64 [n]) of its user, seeded by its stream position.
    """
    spec = masking.feature_spec(config.max_len, config.max_predictions_per_seq, config.matching)
    dataset = tf.data.TFRecordDataset(files, num_parallel_reads=min(len(files), 4) or None)
    if repeat:
        dataset = dataset.repeat()
    if shuffle_buffer:
        dataset = dataset.shuffle(shuffle_buffer, seed=config.seed if seed is None else seed)
    dataset = dataset.skip(start)
    if sampler is not None:
        dataset = dataset.enumerate(start).map(
            lambda number, record: _with_match_negatives(tf.io.parse_single_example(record, spec), number, sampler,
                                                         match_negatives, config.seed),
            num_parallel_calls=tf.data.AUTOTUNE)
        return _batched(dataset, batch_size)
    if batch_size:
        return (dataset.batch(batch_size, drop_remainder=True)
                .map(lambda records: tf.io.parse_example(records, spec), num_parallel_calls=tf.data.AUTOTUNE)
                .prefetch(tf.data.AUTOTUNE))
    return dataset.map(lambda record: tf.io.parse_single_example(record, spec),
                       num_parallel_calls=tf.data.AUTOTUNE)


def dynamic_training_dataset(windows: Windows, config: DataConfig, num_items: int,
                             batch_size: int | None = None, start: int = 0, sampler: NegativeSampler | None = None,
                             match_negatives: int = 0) -> tf.data.Dataset:
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
        sampler, match_negatives: as in `static_training_dataset`.
    """
    count = len(windows)
    mask = window_masker(windows, config, num_items)
    last_share = 1.0 / (config.dupe_factor + 1)

    def make(number):
        epoch, slot = number // count, number % count
        epoch_seed = instance_seed(config.seed, Stream.DYNAMIC_MASKING, epoch)
        window = tf.random.experimental.index_shuffle(slot, epoch_seed, count - 1)
        seed = instance_seed(config.seed, Stream.DYNAMIC_MASKING, epoch, window)
        kind_seed = tf.random.experimental.stateless_fold_in(seed, -1)
        features = mask(window, seed, tf.random.stateless_uniform([], kind_seed) < last_share)
        if sampler is None:
            return features
        return _with_match_negatives(features, number, sampler, match_negatives, config.seed)

    return _batched(tf.data.Dataset.range(start, np.iinfo(np.int64).max).map(
        make, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True), batch_size)


def _with_match_negatives(features: dict, number: tf.Tensor, sampler: NegativeSampler, count: int,
                          seed: int) -> dict:
    """`features` plus `match_negatives` int64 [count] of its user, seeded by instance `number`."""
    user = features["info"][0]
    return {**features, "match_negatives": sampler.sample(user, count,
                                                          instance_seed(seed, Stream.MATCH_NEGATIVES, number))}


def _batched(dataset: tf.data.Dataset, batch_size: int | None) -> tf.data.Dataset:
    """`dataset` in full batches of `batch_size` (unbatched when None), prefetched."""
    if batch_size:
        dataset = dataset.batch(batch_size, drop_remainder=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


# Trimmed widths are rounded up to a multiple of this: fewer distinct shapes, aligned rows.
WIDTH_MULTIPLE = 8


def padded_width(longest: int, max_len: int, multiple: int = WIDTH_MULTIPLE) -> int:
    """The width a batch whose longest sequence has `longest` items is trimmed to: rounded up to a
    multiple of `multiple`, at least 1 and at most `max_len` (an int, or a tensor for a tensor
    `longest`). Example: padded_width(13, 50) == 16."""
    rounded = (longest + multiple - 1) // multiple * multiple
    if tf.is_tensor(longest):
        return tf.minimum(max_len, tf.maximum(1, rounded))
    return min(max_len, max(1, rounded))


def length_grouped(make_stream, start: int, batch_size: int, groups: int, sequence_features: tuple[str, ...],
                   padded_left: bool, max_len: int, seed: int) -> tf.data.Dataset:
    """A batched training stream in batches of similar length, each trimmed to its longest sequence.

    The stream is cut into chunks of `groups` consecutive batches. The instances of a chunk are
    sorted by length (stably) and cut into `groups` batches again, which come out in an order shuffled
    by (seed, chunk); each batch keeps only the columns up to its longest sequence (rounded up by
    `padded_width`). Every chunk holds the instances it held in stream order, so an epoch sees the
    same instances: only the batches' composition and width change. `groups` 1 trims without
    sorting. A pure function of the chunk number: a resumed run rebuilds the chunk it stopped in
    and skips the batches it had trained on.

    Args:
        make_stream: a function of the first instance number giving the full-width batched stream
            (dicts of [batch_size, ...] tensors, `input_ids` among them).
        start: the first instance of the stream (instances already consumed), a multiple of
            `batch_size`.
        batch_size: instances per batch.
        groups: batches sorted together (at least 1).
        sequence_features: the features that run along the sequence (trimmed); the others (such as
            masked positions) do not depend on the padding.
        padded_left: whether the sequence features are padded on the left (else on the right).
        max_len: the full width.
        seed: the data seed.

    Returns:
        Batches of the same features, the sequence features [batch_size, width] with
        width <= max_len varying from batch to batch.
    """
    if start % batch_size:
        raise ValueError(f"the stream must start at a whole batch, got instance {start} with batches of {batch_size}")
    first_chunk, skip = divmod(start // batch_size, groups)
    chunk_size = groups * batch_size

    def regroup(chunk, batches):  # batches: dict of [groups, batch_size, ...]
        flat = {name: tf.reshape(value, tf.concat([[chunk_size], tf.shape(value)[2:]], 0))
                for name, value in batches.items()}  # [groups * batch_size, ...]
        lengths = tf.math.count_nonzero(flat["input_ids"], axis=1)  # [groups * batch_size]
        by_length = tf.argsort(lengths, stable=True)
        shuffle_seed = instance_seed(seed, Stream.LENGTH_GROUPS, chunk)
        order = tf.argsort(tf.random.stateless_uniform([groups], shuffle_seed))  # [groups]
        return {name: tf.gather(tf.reshape(tf.gather(value, by_length),
                                           tf.concat([[groups, batch_size], tf.shape(value)[1:]], 0)), order)
                for name, value in flat.items()}

    def trim(batch):
        width = padded_width(tf.cast(tf.reduce_max(tf.math.count_nonzero(batch["input_ids"], axis=1)), tf.int32),
                             max_len)
        return {name: (value[:, max_len - width:] if padded_left else value[:, :width])
                if name in sequence_features else value
                for name, value in batch.items()}

    batches = make_stream(first_chunk * chunk_size)
    if groups > 1:
        batches = (batches.batch(groups, drop_remainder=True).enumerate(first_chunk)
                   .map(regroup, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch())
    return batches.map(trim, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).skip(skip).prefetch(
        tf.data.AUTOTUNE)


def evaluation_histories(sequences: UserSequences, stage: str, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Every user's history for `stage` (its last `length` items, right-padded) and target.

    Each model turns the history into its own input (`history_inputs`), e.g. BERT4Rec keeps the
    last max_len - 1 items and appends [MASK].

    Args:
        sequences: all users' sequences.
        stage: "valid" (history without the last two items, target the second last) or "test"
            (history without the last item, target the last).
        length: history items kept (the model's max_len is enough for every model).

    Returns:
        histories int32 [U, length] (0 padding on the right) and targets int64 [U].
    """
    back = target_from_end(stage)
    short = np.flatnonzero(sequences.lengths < back)
    if len(short):
        raise ValueError(f"user {short[0] + 1} has {sequences.lengths[short[0]]} item(s): no {stage} target")
    ends = sequences.offsets[1:] - back  # each user's target, in `sequences.items`
    starts = np.maximum(sequences.offsets[:-1], ends - length)  # [U]
    positions = np.arange(length)
    real = positions[None, :] < (ends - starts)[:, None]  # [U, length]
    index = np.where(real, starts[:, None] + positions[None, :], 0)
    histories = np.where(real, sequences.items[index], PAD_ID).astype(np.int32)
    return histories, sequences.items[ends].astype(np.int64)


def sampled_candidates(sequences: UserSequences, config: DataConfig) -> dict[str, np.ndarray]:
    """The negatives of both sampled protocols for both stages, keyed "pop_valid", "uniform_test", ..."""
    stages = ("valid", "test") if config.split == "valid" else ("test",)
    return {f"{protocol}_{stage}": sample_negatives(sequences, protocol, stage, config.num_negatives, config.seed)
            for protocol in ("pop", "uniform") for stage in stages}


def next_item_training_dataset(windows: Windows, config: DataConfig, sampler: NegativeSampler | None,
                               batch_size: int | None = None, start: int = 0,
                               with_users: bool = False) -> tf.data.Dataset:
    """SASRec's training instances: every position predicts the next item, against a negative; made
    a whole batch at a time.

    Instance n of the endless stream is window index_shuffle(n mod W) of epoch n // W (as in
    `dynamic_training_dataset`). Its items are padded on the left; position j reads items up to j
    and its target is item j + 1. Each target of batch b (instances b * B to b * B + B - 1, B the
    batch size, 1 unbatched) gets one negative drawn from the items its user never had, for the
    whole batch at once with the seed (data seed, b). A pure function of the batch number: `start`,
    a multiple of B, resumes it exactly.

    Args:
        windows: the training windows, made with max_len + 1 items (max_len inputs and the last target).
        config: the data configuration (seed).
        sampler: draws the negatives; None: no `negative_ids` (GRU4Rec's negatives are the batch's).
        batch_size: batch the instances when given.
        start: the first instance number (instances already consumed), a multiple of `batch_size`.
        with_users: also `info` int32 [1], the window's model user id (for user attributes).

    Returns:
        Instances of int32 `input_ids`, `positive_ids` and `negative_ids` [max_len], 0 at padding,
        with a leading batch dimension when batched.

    Raises:
        ValueError: when `start` is not a multiple of `batch_size`.
    """
    count, width = len(windows), windows.tokens.shape[1]
    block = batch_size or 1
    tokens, lengths, users = (tf.constant(values) for values in (windows.tokens, windows.lengths, windows.users))
    columns = tf.range(width, dtype=tf.int32)

    def make(batch):
        window = batch_positions(batch, block, count, config.seed, Stream.NEXT_ITEM)  # [B]
        # Each row rotated right by its padding (width - length), so that its items end the row.
        rotated = (columns[tf.newaxis, :] + tf.gather(lengths, window)[:, tf.newaxis]) % width  # [B, width]
        aligned = tf.gather(tf.gather(tokens, window), rotated, batch_dims=1)
        inputs, positives = aligned[:, :-1], aligned[:, 1:]  # [B, width - 1] each
        positives = tf.where(inputs != PAD_ID, positives, PAD_ID)
        features = {"input_ids": inputs, "positive_ids": positives}
        if with_users:
            features["info"] = tf.cast(tf.gather(users, window), tf.int32)[:, tf.newaxis]
        if sampler is None:
            return features
        negatives = sampler.sample_rows(tf.gather(users, window), width - 1,
                                        instance_seed(config.seed, Stream.NEXT_ITEM_NEGATIVES, batch))
        return {**features, "negative_ids": tf.where(positives != PAD_ID, tf.cast(negatives, tf.int32), PAD_ID)}

    return batch_stream(make, batch_size, start, "next-item")
