"""Training windows and the static masked instances written as sharded TFRecords.

Mirrors the original ``gen_data_fin.py``: sliding windows over each training sequence,
`dupe_factor` random-mask copies of each window plus one mask-last instance, all shuffled, written
right-padded. Every random choice derives from one seed, so the same seed gives byte-identical files
whatever the number of parallel workers.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
from typing import Callable

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from bert4rec_tf.config import DataConfig
from bert4rec_tf.constants import mask_id
from bert4rec_tf.data import masking
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.seeds import Stream, instance_seed
from bert4rec_tf.files import atomic_path, write_error, write_failure_cause


def window_starts(length: int, max_len: int, prop_sliding_window: float) -> list[int]:
    """Start indices of the windows over a sequence of `length` items, ascending.

    A sequence of at most `max_len` items gives one window at 0. A longer one gives windows ending
    at its end and stepping back by int(prop_sliding_window * max_len) (max_len when -1), while the
    start stays above 0, plus one starting at 0.

    Raises:
        ValueError: when the step would be smaller than one item.
    """
    if length <= max_len:
        return [0]
    step = max_len if prop_sliding_window == -1 else int(prop_sliding_window * max_len)
    if step < 1:
        raise ValueError(f"prop_sliding_window {prop_sliding_window} with max_len {max_len} gives a step "
                         "below one item")
    return [0] + list(range(length - max_len, 0, -step))[::-1]


@dataclasses.dataclass
class Windows:
    """Right-padded windows of the training sequences.

    Attributes:
        tokens: [num_windows, max_len] int32 item ids, 0 padding.
        lengths: [num_windows] int32 real items per window.
        users: [num_windows] int32 1-based user ids.
    """

    tokens: np.ndarray
    lengths: np.ndarray
    users: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)


def make_windows(sequences: list[np.ndarray], users: np.ndarray, max_len: int,
                 prop_sliding_window: float) -> Windows:
    """Cuts every non-empty sequence into windows (see `window_starts`).

    Args:
        sequences: per user, the training items in time order.
        users: [len(sequences)] 1-based user ids.
        max_len: window length.
        prop_sliding_window: window step as a fraction of max_len.
    """
    starts = [window_starts(len(seq), max_len, prop_sliding_window) if len(seq) else [] for seq in sequences]
    count = sum(len(s) for s in starts)
    tokens = np.zeros((count, max_len), dtype=np.int32)
    lengths = np.zeros(count, dtype=np.int32)
    owners = np.zeros(count, dtype=np.int32)
    row = 0
    for seq, user, user_starts in zip(sequences, users, starts):
        for start in user_starts:
            window = seq[start:start + max_len]
            tokens[row, :len(window)] = window
            lengths[row] = len(window)
            owners[row] = user
            row += 1
    return Windows(tokens=tokens, lengths=lengths, users=owners)


def window_masker(windows: Windows, config: DataConfig, num_items: int) -> Callable[..., dict[str, tf.Tensor]]:
    """`mask(window, seed, mask_last)`: `masking.mask_window` applied to window number `window`.

    A mask-last instance when `mask_last`; otherwise the kind follows the configuration (see
    `masking.instance_kind`). The windows become constants of the returned function; the
    configuration's masking settings are bound.
    """
    tokens = tf.constant(windows.tokens)
    lengths = tf.constant(windows.lengths)
    users = tf.constant(windows.users)

    def mask(window, seed, mask_last):
        match_only = config.match_only_prob if config.matching else 0.0  # read where it has effect only
        kind = masking.instance_kind(seed, mask_last, config.matching, match_only)
        return masking.mask_window(
            tf.gather(tokens, window), tf.gather(lengths, window), tf.gather(users, window), seed, kind,
            max_predictions=config.max_predictions_per_seq, masked_lm_prob=config.masked_lm_prob,
            mask_prob=config.mask_prob, mask_id=mask_id(num_items), num_items=num_items,
            matching=config.matching, mask_runs=config.mask_runs)

    return mask


def static_instances(windows: Windows, config: DataConfig, num_items: int,
                     instance_ids: np.ndarray) -> tf.data.Dataset:
    """The static instances with the given ids, in that order, as a `tf.data.Dataset`.

    Instance id i is copy i % (dupe_factor + 1) of window i // (dupe_factor + 1); the last copy is the
    mask-last instance.
    """
    copies = config.dupe_factor + 1
    mask = window_masker(windows, config, num_items)

    def make(instance):
        window, copy = instance // copies, instance % copies
        seed = instance_seed(config.seed, Stream.STATIC_INSTANCES, window, copy)
        return mask(window, seed, tf.equal(copy, copies - 1))

    return (tf.data.Dataset.from_tensor_slices(tf.constant(instance_ids, tf.int64))
            .map(make, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True))


def shard_name(shard: int, num_shards: int) -> str:
    return f"train-{shard:05d}-of-{num_shards:05d}.tfrecord"


def write_static_instances(windows: Windows, config: DataConfig, num_items: int, directory: str,
                           workers: int = 2, progress: bool = True) -> dict[str, int]:
    """Writes all static instances, shuffled, into `config.num_shards` TFRecord files.

    Each file is written under a temporary name and renamed when complete.

    Returns:
        The file names mapped to their instance counts.
    """
    if len(windows) == 0:
        raise DataError("no training windows: every training sequence is empty")
    total = len(windows) * (config.dupe_factor + 1)
    order = np.random.default_rng([config.seed, int(Stream.STATIC_INSTANCES)]).permutation(total)
    shards = np.array_split(order, config.num_shards)
    bar = tqdm(total=total, desc="writing instances", unit=" instances", disable=not progress, mininterval=1.0)

    def write(shard: int) -> tuple[str, int]:
        name = shard_name(shard, config.num_shards)
        final = os.path.join(directory, name)
        dataset = static_instances(windows, config, num_items, shards[shard]).batch(512)
        try:
            with atomic_path(final) as temporary, tf.io.TFRecordWriter(temporary) as writer:
                for batch in dataset.as_numpy_iterator():
                    for row in range(len(batch["info"])):
                        writer.write(_serialize(batch, row))
                    bar.update(len(batch["info"]))
        except tf.errors.OpError as error:  # TensorFlow's file system reports a failed write so
            if write_failure_cause(error) is None:
                raise
            raise write_error(final, error) from None
        return name, len(shards[shard])

    with bar, concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return dict(pool.map(write, range(config.num_shards)))


def _serialize(batch: dict[str, np.ndarray], row: int) -> bytes:
    """Row `row` of `batch` as a serialized `tf.train.Example`.

    Deterministic serialization writes the feature map in key order; otherwise the order depends on
    the process, and two runs with one seed would give equal records in different bytes.
    """
    feature = {}
    for name in sorted(batch):
        values = batch[name][row].tolist()
        if batch[name].dtype == np.float32:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)
