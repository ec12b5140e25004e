"""The one place that turns a padding mask into an attention mask."""

from keras import ops


def attention_mask(padding_mask, causal: bool = False):
    """Which keys each query may attend to.

    Padded keys are never attended to. With `causal`, query i also sees only keys j <= i.
    Padded queries are not masked (as in BERT): their outputs are garbage that nothing reads.

    Args:
        padding_mask: [batch, seq_len], nonzero (or True) at real items, 0 at padding.
        causal: also hide future keys (left-to-right attention, as in SASRec).

    Returns:
        Boolean tensor, True where attention is allowed: [batch, 1, seq_len] (broadcasts over
        queries) without `causal`, [batch, seq_len, seq_len] with it.

    Example: `attention_mask([[1, 1, 0]], causal=True)` gives, rows queries and columns keys,
        `[[[True, False, False], [True, True, False], [True, True, False]]]`.
    """
    keys = ops.expand_dims(ops.cast(padding_mask, "bool"), axis=1)  # [batch, 1, seq_len]
    if not causal:
        return keys
    seq_len = ops.shape(padding_mask)[1]
    positions = ops.arange(seq_len)
    lower = ops.expand_dims(positions, 1) >= ops.expand_dims(positions, 0)  # [seq_len, seq_len]
    return ops.logical_and(keys, ops.expand_dims(lower, 0))  # [batch, seq_len, seq_len]
