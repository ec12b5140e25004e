"""A user's history as a model reads it: the last known items, packed to one side.

Every model turns a raw history into its input through `last_items`; the evaluator and the serving
SavedModel both call the model's `history_inputs`, so there is one implementation of it.
"""

from __future__ import annotations

from keras import ops

from bert4rec_tf.constants import PAD_ID


def last_items(history, count: int, pad_left: bool = False):
    """The last `count` known items of each row, packed to one side.

    The result is min(count, L) wide: a history narrower than `count` (a batch of short histories
    trimmed to its longest) gives a narrower input, which the models read like the padded one.

    Args:
        history: int [batch, L] model item ids, oldest first; 0 (padding or an unknown id) may
            appear anywhere and is skipped.
        count: the number of items kept (the newest ones).
        pad_left: pack the items to the right end and pad on the left (SASRec); default: pack to
            the left and pad on the right (BERT4Rec).

    Returns:
        int32 items [batch, min(count, L)] and int32 lengths [batch] (known items kept).

    Example:
        `last_items([[0, 3, 0, 4, 5]], 2)` gives `[[4, 5]]` and `[2]`;
        `last_items([[7, 0, 0]], 3, pad_left=True)` gives `[[0, 0, 7]]` and `[1]`;
        `last_items([[7, 8]], 5)` gives `[[7, 8]]` and `[2]`.
    """
    history = ops.cast(history, "int32")
    width = ops.shape(history)[1]
    count = min(count, width) if isinstance(width, int) else ops.minimum(count, width)
    known = ops.cast(history != PAD_ID, "int32")  # [batch, L]
    from_end = ops.flip(ops.cumsum(ops.flip(known, axis=1), axis=1), axis=1)  # 1 at the newest known item
    keep = ops.logical_and(known > 0, from_end <= count)
    lengths = ops.sum(ops.cast(keep, "int32"), axis=1)  # [batch]
    if pad_left:
        position = count - from_end  # [batch, L]
    else:
        position = ops.expand_dims(lengths, 1) - from_end
    position = ops.where(keep, position, count)  # dropped items go to a spare column
    batch = ops.shape(history)[0]
    rows = ops.broadcast_to(ops.expand_dims(ops.arange(batch, dtype="int32"), 1), ops.shape(history))
    indices = ops.reshape(ops.stack([rows, position], axis=-1), (-1, 2))
    values = ops.reshape(ops.where(keep, history, PAD_ID), (-1,))
    packed = ops.scatter(indices, values, (batch, count + 1))  # [batch, count + 1]
    return packed[:, :count], lengths
