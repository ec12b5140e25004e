"""Every random stream of the data, in one table, and the stateless seed of one instance.

All randomness of preparation and training derives from the data seed (`DataConfig.seed`):

- the streams of `Stream`: each instance's stateless seed is `instance_seed(seed, stream, *keys)`, so a
  stream is a pure function of its keys (a resumed run continues it exactly, and two streams never
  share draws);
- the evaluation candidates (`bert4rec_tf.data.candidates`): user u's generator is seeded with
  (seed, protocol, stage, u);
- the model's initial weights and dropout: `keras.utils.set_random_seed(seed)` before the model is built.

A new stream takes the next free number here; an old number is never reused, since that would
change what existing runs drew.
"""

from __future__ import annotations

import enum
from typing import Callable

import numpy as np
import tensorflow as tf


class Stream(enum.IntEnum):
    """The stateless random streams, by number (part of every instance's seed)."""

    STATIC_INSTANCES = 0    # the masked TFRecords: (window, copy) masks and the files' order
    DYNAMIC_MASKING = 1     # fresh masks: (epoch) window order, (epoch, window) masks
    NEXT_ITEM = 2           # next-item instances: (epoch) window order (and formerly their negatives)
    MATCH_NEGATIVES = 3     # the matching task's negatives, by instance number
    LENGTH_GROUPS = 4       # length-grouped batches: (chunk) the order of a chunk's batches
    INTERACTIONS = 5        # (user, item) instances: (epoch) interaction order (and formerly their negatives)
    SEQUENCE_WINDOWS = 6    # short windows of L items and T targets (Caser): (epoch) order, (epoch, window) negatives
    SHARED_NEGATIVES = 7    # negatives shared by a whole batch: (batch number)
    INTERACTION_NEGATIVES = 8  # the (user, item) instances' negatives, a whole batch at once: (batch number)
    WINDOW_NEGATIVES = 9    # Caser's windows' negatives, a whole batch at once: (batch number)
    NEXT_ITEM_NEGATIVES = 10  # the next-item instances' negatives, a whole batch at once: (batch number)


def instance_seed(base_seed: int, stream: Stream, *keys: tf.Tensor) -> tf.Tensor:
    """A stateless seed [2] for one instance: `base_seed` folded with `stream` and `keys`."""
    seed = tf.constant([base_seed, int(stream)], dtype=tf.int64)
    for key in keys:
        seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(key, tf.int64))
    return seed


def batch_positions(batch: tf.Tensor, size: int, count: int, base_seed: int, stream: Stream) -> tf.Tensor:
    """int64 [size]: the positions, among `count`, of the instances of batch `batch` of an epoch-shuffled
    stream: instance n (of batch n // size) is position index_shuffle(n mod count) of epoch n // count,
    the order seeded by (base_seed, stream, epoch). The same positions as instance by instance, for
    the whole batch at once.
    """
    rows = tf.range(size, dtype=tf.int64)
    numbers = tf.cast(batch, tf.int64) * size + rows
    epochs, slots = numbers // count, numbers % count
    first = epochs[0]

    def order(epoch):  # the epoch's order, at every slot of the batch
        return tf.random.experimental.index_shuffle(slots, instance_seed(base_seed, stream, epoch), count - 1)

    if size <= count:  # the batch spans one or two epochs: both orders, each row taking its own
        return tf.where(epochs == first, order(first), order(first + 1))
    orders = tf.map_fn(lambda offset: order(first + offset), tf.range(epochs[-1] - first + 1),
                       fn_output_signature=tf.TensorSpec([size], tf.int64))
    return tf.gather_nd(orders, tf.stack([epochs - first, rows], axis=1))


def batch_stream(make: Callable[[tf.Tensor], dict], batch_size: int | None, start: int, name: str) -> tf.data.Dataset:
    """The endless stream of the batches `make(b)` makes, from the batch that instance `start` begins
    (b = start / B, B the batch size; 1 unbatched, when the instances come one by one): a pure
    function of the batch number, so it resumes exactly at a batch's start.

    Raises:
        ValueError: naming the `name` stream, when `start` is not a multiple of `batch_size`.
    """
    block = batch_size or 1
    if start % block:
        raise ValueError(f"the {name} stream resumes at a batch's start: instance {start} is not a multiple of the "
                         f"batch size {block}")
    dataset = tf.data.Dataset.range(start // block, np.iinfo(np.int64).max).map(
        make, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if not batch_size:
        dataset = dataset.unbatch()
    return dataset.prefetch(tf.data.AUTOTUNE)
