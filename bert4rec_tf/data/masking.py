"""Cloze masking of one window, as a TensorFlow function shared by the static TFRecords and the
dynamic pipeline.

Mirrors the original ``create_masked_lm_predictions``: k = min(P, max(1, round(len * masked_lm_prob)))
distinct positions (Python's round-half-to-even), masked positions sorted ascending; a chosen item
becomes [MASK] with probability `mask_prob`, else is kept or replaced by a random item (half each).
A mask-last instance masks only the last item. Randomness is stateless: the same seed gives the same
instance whatever the order or parallelism of the work.
"""

from __future__ import annotations

import tensorflow as tf

FEATURE_NAMES = ("info", "input_ids", "input_mask", "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights")


def feature_spec(max_len: int, max_predictions: int) -> dict[str, tf.io.FixedLenFeature]:
    """The TFRecord features of a training instance (SPEC.md) for `tf.io.parse_example`."""
    return {
        "info": tf.io.FixedLenFeature([1], tf.int64),
        "input_ids": tf.io.FixedLenFeature([max_len], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_len], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions], tf.float32),
    }


def instance_seed(base_seed: int, stream: int, *keys: tf.Tensor) -> tf.Tensor:
    """A stateless seed [2] for one instance: `base_seed` folded with a stream id and `keys`."""
    seed = tf.constant([base_seed, stream], dtype=tf.int64)
    for key in keys:
        seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(key, tf.int64))
    return seed


def mask_window(
    tokens: tf.Tensor,
    length: tf.Tensor,
    user: tf.Tensor,
    seed: tf.Tensor,
    last_only: tf.Tensor,
    *,
    max_predictions: int,
    masked_lm_prob: float,
    mask_prob: float,
    mask_id: int,
    num_items: int,
) -> dict[str, tf.Tensor]:
    """Masks one right-padded window.

    Args:
        tokens: [max_len] int item ids, 0 after `length`.
        length: scalar, the number of real items (>= 1).
        user: scalar user id, stored as `info`.
        seed: [2] stateless seed.
        last_only: scalar bool; True masks only the last real item.
        max_predictions: P, the masked slots of an instance.
        masked_lm_prob, mask_prob: as in `bert4rec_tf.config.DataConfig`.
        mask_id: the [MASK] id.
        num_items: real items are 1..num_items (for random replacement).

    Returns:
        The features of `feature_spec`, unbatched.
    """
    tokens = tf.cast(tokens, tf.int64)
    length = tf.cast(length, tf.int64)
    max_len = tokens.shape[0]
    choice_seed, action_seed, replace_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    positions = tf.range(max_len, dtype=tf.int64)
    real = positions < length

    num_random = tf.cast(tf.round(tf.cast(length, tf.float64) * masked_lm_prob), tf.int64)
    num_random = tf.minimum(tf.cast(max_predictions, tf.int64), tf.maximum(tf.constant(1, tf.int64), num_random))
    num_masked = tf.where(last_only, tf.constant(1, tf.int64), num_random)

    noise = tf.random.stateless_uniform([max_len], choice_seed, dtype=tf.float32)
    noise = tf.where(real, noise, 2.0)
    noise = tf.where(last_only, tf.where(positions == length - 1, -1.0, 2.0), noise)
    slots = min(max_predictions, max_len)
    chosen = tf.argsort(noise, stable=True)[:slots]  # [slots] positions in random order
    chosen = tf.cast(chosen, tf.int64)
    chosen = tf.where(tf.range(slots, dtype=tf.int64) < num_masked, chosen, max_len)
    chosen = tf.sort(chosen)
    valid = chosen < max_len  # [slots]
    safe = tf.minimum(chosen, max_len - 1)
    labels = tf.where(valid, tf.gather(tokens, safe), 0)

    action = tf.random.stateless_uniform([slots, 2], action_seed, dtype=tf.float32)
    random_items = tf.random.stateless_uniform([slots], replace_seed, minval=1, maxval=num_items + 1,
                                               dtype=tf.int64)
    replacement = tf.where(action[:, 0] < mask_prob, tf.constant(mask_id, tf.int64),
                           tf.where(action[:, 1] < 0.5, labels, random_items))
    valid_positions = tf.boolean_mask(safe, valid)
    input_ids = tf.tensor_scatter_nd_update(tokens, valid_positions[:, None],
                                            tf.boolean_mask(replacement, valid))

    pad = [[0, max_predictions - slots]]
    return {
        "info": tf.reshape(tf.cast(user, tf.int64), [1]),
        "input_ids": input_ids,
        "input_mask": tf.cast(real, tf.int64),
        "masked_lm_positions": tf.pad(tf.where(valid, chosen, 0), pad),
        "masked_lm_ids": tf.pad(labels, pad),
        "masked_lm_weights": tf.pad(tf.cast(valid, tf.float32), pad),
    }
