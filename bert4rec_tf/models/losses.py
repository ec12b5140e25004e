"""The masked-item training loss."""

from keras import ops

from bert4rec_tf.constants import LOSS_EPSILON


def masked_lm_loss(labels, logits, weights):
    """Weighted mean cross-entropy over masked slots: sum(w * CE) / (sum(w) + LOSS_EPSILON).

    Computed in float32 whatever the logits' dtype. The slots may be laid out as [batch, P] or
    packed flat as [num_slots]: any leading shape works as long as the three arguments agree.

    Args:
        labels: int [...] true item ids of the masked slots.
        logits: [..., vocab_size] scores.
        weights: float [...] slot weights, 0 for padding slots.

    Returns:
        Scalar float32 loss.
    """
    logits = ops.cast(logits, "float32")
    weights = ops.cast(weights, "float32")
    cross_entropy = ops.sparse_categorical_crossentropy(
        ops.cast(labels, "int32"), logits, from_logits=True
    )  # [...]
    return ops.sum(weights * cross_entropy) / (ops.sum(weights) + LOSS_EPSILON)
