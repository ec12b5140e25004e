"""Cloze masking of one window, as a TensorFlow function shared by the static TFRecords and the
dynamic pipeline.

Mirrors the original ``create_masked_lm_predictions``: k = min(P, max(1, round(len * masked_lm_prob)))
distinct positions (Python's round-half-to-even), masked positions sorted ascending; a chosen item
becomes [MASK] with probability `mask_prob`, else is kept or replaced by a random item (half each).
A mask-last instance masks only the last item. Randomness is stateless: the same seed gives the same
instance whatever the order or parallelism of the work.

For BERT4Rec with the matching task (`matching`), an instance is one of three kinds: mask+matching
and matching-only instances move the window's last item out of the input into `match_positive`,
the item the [UID] output is matched against (mask+matching then masks the rest as usual,
matching-only masks nothing); mask-last instances have no matching target (`match_positive` 0).
With `mask_runs`, a chosen item masks the whole run of equal successive items it belongs to.
"""

from __future__ import annotations

import tensorflow as tf

MATCH_FEATURE = "match_positive"

# Instance kinds.
MASK_RANDOM, MASK_LAST, MATCH_ONLY = 0, 1, 2


def feature_spec(max_len: int, max_predictions: int, matching: bool = False) -> dict[str, tf.io.FixedLenFeature]:
    """The TFRecord features of a training instance (SPEC.md) for `tf.io.parse_example`.

    With `matching`, also `match_positive` int64 [1] (0: no matching task in the instance).
    """
    spec = {
        "info": tf.io.FixedLenFeature([1], tf.int64),
        "input_ids": tf.io.FixedLenFeature([max_len], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_len], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions], tf.float32),
    }
    if matching:
        spec[MATCH_FEATURE] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def instance_kind(seed: tf.Tensor, mask_last: tf.Tensor, matching: bool, match_only_prob: float) -> tf.Tensor:
    """The kind of an instance: `MASK_LAST` when `mask_last`; otherwise, with `matching`,
    `MATCH_ONLY` with probability `match_only_prob` (drawn from `seed`), else `MASK_RANDOM`."""
    kind = tf.where(mask_last, MASK_LAST, MASK_RANDOM)
    if not matching:
        return kind
    draw = tf.random.stateless_uniform([], tf.random.experimental.stateless_fold_in(seed, -2))
    return tf.where(tf.logical_and(tf.logical_not(mask_last), draw < match_only_prob), MATCH_ONLY, kind)


def mask_window(
    tokens: tf.Tensor,
    length: tf.Tensor,
    user: tf.Tensor,
    seed: tf.Tensor,
    kind: tf.Tensor,
    *,
    max_predictions: int,
    masked_lm_prob: float,
    mask_prob: float,
    mask_id: int,
    num_items: int,
    matching: bool = False,
    mask_runs: bool = False,
) -> dict[str, tf.Tensor]:
    """Masks one right-padded window.

    Args:
        tokens: [max_len] int item ids, 0 after `length`.
        length: scalar, the number of real items (>= 1).
        user: scalar user id, stored as `info`.
        seed: [2] stateless seed.
        kind: scalar int, `MASK_RANDOM`, `MASK_LAST` (only the last real item is masked) or
            `MATCH_ONLY` (nothing masked; with `matching` only).
        max_predictions: P, the masked slots of an instance.
        masked_lm_prob, mask_prob: as in `bert4rec_tf.config.DataConfig`.
        mask_id: the [MASK] id.
        num_items: real items are 1..num_items (for random replacement).
        matching: add `match_positive` (see the module docstring).
        mask_runs: mask whole runs of equal successive items.

    Returns:
        The features of `feature_spec`, unbatched.
    """
    tokens = tf.cast(tokens, tf.int64)
    length = tf.cast(length, tf.int64)
    max_len = tokens.shape[0]
    choice_seed, action_seed, replace_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    positions = tf.range(max_len, dtype=tf.int64)
    last_only = tf.equal(kind, MASK_LAST)
    if matching:
        matched = tf.logical_and(tf.logical_not(last_only), length >= 2)
        match_positive = tf.where(matched, tokens[tf.maximum(length - 1, 0)], 0)
        length = tf.where(matched, length - 1, length)  # the matched item leaves the input
    real = positions < length
    tokens = tf.where(real, tokens, 0)

    num_random = tf.cast(tf.round(tf.cast(length, tf.float64) * masked_lm_prob), tf.int64)
    num_random = tf.minimum(tf.cast(max_predictions, tf.int64), tf.maximum(tf.constant(1, tf.int64), num_random))
    num_masked = tf.where(last_only, tf.constant(1, tf.int64), num_random)
    num_masked = tf.where(tf.equal(kind, MATCH_ONLY), tf.constant(0, tf.int64), num_masked)

    noise = tf.random.stateless_uniform([max_len], choice_seed, dtype=tf.float32)
    noise = tf.where(real, noise, 2.0)
    noise = tf.where(last_only, tf.where(positions == length - 1, -1.0, 2.0), noise)
    slots = min(max_predictions, max_len)
    chosen = tf.argsort(noise, stable=True)[:slots]  # [slots] positions in random order
    chosen = tf.cast(chosen, tf.int64)
    chosen = tf.where(tf.range(slots, dtype=tf.int64) < num_masked, chosen, max_len)
    if mask_runs:
        chosen = _expand_to_runs(tokens, real, chosen, slots)
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
    features = {
        "info": tf.reshape(tf.cast(user, tf.int64), [1]),
        "input_ids": input_ids,
        "input_mask": tf.cast(real, tf.int64),
        "masked_lm_positions": tf.pad(tf.where(valid, chosen, 0), pad),
        "masked_lm_ids": tf.pad(labels, pad),
        "masked_lm_weights": tf.pad(tf.cast(valid, tf.float32), pad),
    }
    if matching:
        features[MATCH_FEATURE] = tf.reshape(match_positive, [1])
    return features


def _expand_to_runs(tokens: tf.Tensor, real: tf.Tensor, chosen: tf.Tensor, slots: int) -> tf.Tensor:
    """The chosen positions [slots] (max_len: none) grown to the whole runs of equal successive items
    they fall in; the first `slots` positions of the runs, in position order, the rest max_len."""
    max_len = tokens.shape[0]
    starts = tf.concat([[True], tokens[1:] != tokens[:-1]], axis=0)
    run = tf.cumsum(tf.cast(starts, tf.int64)) - 1  # [max_len] run index of every position
    picked = tf.scatter_nd(tf.boolean_mask(chosen, chosen < max_len)[:, None],
                           tf.ones_like(tf.boolean_mask(chosen, chosen < max_len), tf.int32), [max_len]) > 0
    run_picked = tf.math.unsorted_segment_max(tf.cast(picked, tf.int32), run, max_len) > 0
    expanded = tf.logical_and(tf.gather(run_picked, run), real)  # [max_len]
    grown = tf.where(expanded, tf.range(max_len, dtype=tf.int64), max_len)
    return tf.sort(grown)[:slots]
