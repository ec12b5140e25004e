"""Short training windows of L items and the T items after them (Caser's training instances).

Caser (Tang & Wang, 2018) reads only a user's latest L items. Its training instances slide a window
of L + T items over each user's training items, one item at a time: the first L items are the input,
the last T the targets. As in the authors' code, only whole windows are taken, so an item becomes a
target only once L items precede it; a user with fewer than L + T training items gives one window
instead, padded with 0 on the left (its inputs, and its first targets when the user has fewer than T
items, are then padding).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from bert4rec_tf.data.negatives import NegativeSampler
from bert4rec_tf.data.seeds import Stream, batch_positions, batch_stream, instance_seed


@dataclasses.dataclass
class SequenceWindows:
    """The windows of every user, as offsets into one flat array (memory: the interactions, not L + T
    copies of them).

    Attributes:
        items: int32 [total] every user's training items in turn, a short user's preceded by 0s.
        starts: int64 [num_windows] where each window begins in `items`.
        users: int32 [num_windows] each window's 1-based user id.
        length: L, the input items of a window.
        targets: T, the target items of a window.
    """

    items: np.ndarray
    starts: np.ndarray
    users: np.ndarray
    length: int
    targets: int

    def __len__(self) -> int:
        return len(self.starts)

    def window(self, number: int) -> np.ndarray:
        """int32 [L + T]: window `number`'s inputs, then its targets."""
        begin = int(self.starts[number])
        return self.items[begin:begin + self.length + self.targets]


def sequence_windows(sequences: list[np.ndarray], length: int, targets: int) -> SequenceWindows:
    """Every window of `length` + `targets` consecutive items of each user, stepping by one item.

    Args:
        sequences: per user (user id u is index u - 1), the training items in time order; a user
            without items gives no window.
        length: L, the input items.
        targets: T, the items after them to predict.

    Example:
        With L 2 and T 1, items [4, 5, 6, 7] give the windows [4, 5, 6] and [5, 6, 7]; items [8, 9]
        give the one window [0, 8, 9].
    """
    span = length + targets
    pieces, starts, users = [], [], []
    offset = 0
    for user, items in enumerate(sequences, start=1):
        if not len(items):
            continue
        padded = np.concatenate([np.zeros(max(0, span - len(items)), np.int32), np.asarray(items, np.int32)])
        count = len(padded) - span + 1
        pieces.append(padded)
        starts.append(offset + np.arange(count, dtype=np.int64))
        users.append(np.full(count, user, dtype=np.int32))
        offset += len(padded)
    if not pieces:
        raise ValueError("no user has a training item: there is no training window")
    return SequenceWindows(items=np.concatenate(pieces), starts=np.concatenate(starts), users=np.concatenate(users),
                           length=length, targets=targets)


def sequence_window_dataset(windows: SequenceWindows, seed: int, sampler: NegativeSampler, negatives: int,
                            batch_size: int | None = None, start: int = 0) -> tf.data.Dataset:
    """Caser's endless training stream: windows in a fresh order each epoch, with sampled negatives,
    made a whole batch at a time.

    Instance n is window index_shuffle(n mod W) of epoch n // W, its order seeded by (seed, epoch).
    Each target of batch b (instances b * B to b * B + B - 1, B the batch size, 1 unbatched) gets
    `negatives` items its user never had, drawn for the whole batch at once with the seed (seed, b).
    A pure function of the batch number: `start`, a multiple of B, resumes it exactly.

    Args:
        windows: the training windows (`sequence_windows`).
        seed: the data seed.
        sampler: draws the negatives.
        negatives: N, negatives per target.
        batch_size: full batches of this many instances when given.
        start: the first instance number (instances already consumed), a multiple of `batch_size`.

    Returns:
        Instances of int32 `user_ids` [] (1-based), `input_ids` [L] (0: padding), `target_ids` [T]
        (0: no target) and `negative_ids` [T, N] (0 where the target is 0), with a leading batch
        dimension when batched.

    Raises:
        ValueError: when `start` is not a multiple of `batch_size`.
    """
    count, length, span = len(windows), windows.length, windows.length + windows.targets
    block = batch_size or 1
    items, starts, users = (tf.constant(values) for values in (windows.items, windows.starts, windows.users))
    offsets = tf.range(span, dtype=tf.int64)

    def make(batch):
        window = batch_positions(batch, block, count, seed, Stream.SEQUENCE_WINDOWS)  # [B]
        user = tf.gather(users, window)
        span_items = tf.gather(items, tf.gather(starts, window)[:, tf.newaxis] + offsets)  # [B, L + T]
        targets = span_items[:, length:]  # [B, T]
        drawn = sampler.sample_rows(user, windows.targets * negatives,
                                    instance_seed(seed, Stream.WINDOW_NEGATIVES, batch))
        drawn = tf.reshape(tf.cast(drawn, tf.int32), [block, windows.targets, negatives])  # [B, T, N]
        return {"user_ids": user, "input_ids": span_items[:, :length], "target_ids": targets,
                "negative_ids": tf.where(targets[..., tf.newaxis] != 0, drawn, 0)}

    return batch_stream(make, batch_size, start, "window")
