"""The training losses of each family, as weighted means over their predictions.

The softmax kernels they use (exact, tied and sampled) are in `bert4rec_tf.models.softmax`.
"""

import tensorflow as tf
from keras import ops

from bert4rec_tf.constants import LOSS_EPSILON
from bert4rec_tf.models.softmax import sampled_softmax_cross_entropy, sparse_softmax_cross_entropy


def pooled_mean(*terms):
    """One weighted mean over several kinds of loss terms: sum(w * loss) / (sum(w) + LOSS_EPSILON).

    Every term weighs by its own weight, whatever its kind, so a batch's loss is the mean over all
    its predictions (e.g. the masked slots and the matching targets of BERT4Rec with matching).

    Args:
        *terms: (losses, weights) pairs, float [...] each with matching shapes within a pair.

    Returns:
        Scalar float32 loss.
    """
    total = sum(ops.sum(ops.cast(weights, "float32") * ops.cast(losses, "float32")) for losses, weights in terms)
    count = sum(ops.sum(ops.cast(weights, "float32")) for _, weights in terms)
    return total / (count + LOSS_EPSILON)


def masked_lm_losses(labels, logits):
    """Cross-entropy of every masked slot, float32 [...] (any leading shape; see `masked_lm_loss`)."""
    logits = ops.cast(logits, "float32")
    classes = ops.shape(logits)[-1]
    return ops.reshape(
        sparse_softmax_cross_entropy(ops.reshape(ops.cast(labels, "int32"), (-1,)), ops.reshape(logits, (-1, classes))),
        ops.shape(labels),
    )  # [...]


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
    return pooled_mean((masked_lm_losses(labels, logits), weights))


def _gather_rows(table, ids):
    """Rows of `table` [vocab, d] (as float32) at int `ids` [...] -> [..., d]."""
    return ops.take(ops.cast(table, "float32"), ids, axis=0)


def next_item_bce_loss(hidden, item_table, positive_ids, negative_ids):
    """SASRec's loss: binary cross-entropy of the next item against one negative, per position.

    mean over positions with a next item of -log s(h . e_pos) - log(1 - s(h . e_neg)), where s is
    the logistic function; positions with positive id 0 (padding) do not count.

    Args:
        hidden: [batch, seq_len, d] sequence output.
        item_table: [vocab_size, d] the shared item embedding.
        positive_ids: int [batch, seq_len] next items, 0 at padding.
        negative_ids: int [batch, seq_len] sampled negatives.

    Returns:
        Scalar float32 loss.
    """
    hidden = ops.cast(hidden, "float32")
    positive = ops.sum(hidden * _gather_rows(item_table, positive_ids), axis=-1)  # [batch, seq_len]
    negative = ops.sum(hidden * _gather_rows(item_table, negative_ids), axis=-1)  # [batch, seq_len]
    losses = ops.softplus(-positive) + ops.softplus(negative)  # -log s(p) - log(1 - s(n))
    return pooled_mean((losses, positive_ids != 0))


def next_item_ce_loss(hidden, item_table, positive_ids):
    """Softmax cross-entropy of the next item over the whole vocabulary, at every non-padding position.

    Only the positions with a next item are scored (packed), so padding costs nothing.

    Args:
        hidden: [batch, seq_len, d] sequence output.
        item_table: [vocab_size, d] the shared item embedding.
        positive_ids: int [batch, seq_len] next items, 0 at padding.

    Returns:
        Scalar float32 loss.
    """
    states, labels = _real_positions(hidden, positive_ids)
    logits = ops.matmul(states, ops.transpose(ops.cast(item_table, "float32")))
    return masked_lm_loss(labels, logits, ops.ones_like(labels, dtype="float32"))


def _real_positions(hidden, positive_ids):
    """The states float32 [num_real, d] and next items [num_real] of the positions with a next item,
    packed, from hidden [batch, seq_len, d] and positive_ids [batch, seq_len] (0 at padding)."""
    flat_ids = ops.reshape(positive_ids, (-1,))  # [batch * seq_len]
    real = ops.nonzero(flat_ids)[0]  # [num_real]
    flat_hidden = ops.reshape(ops.cast(hidden, "float32"), (-1, ops.shape(hidden)[-1]))
    return ops.take(flat_hidden, real, axis=0), ops.take(flat_ids, real)


def next_item_sampled_softmax_loss(hidden, item_table, positive_ids, negatives, log_q):
    """`next_item_ce_loss` estimated by the sampled softmax (`sampled_softmax_cross_entropy`, no
    output bias): the next item against K negatives shared by the batch, at every non-padding
    position. Not the papers' loss.

    Args:
        hidden: [batch, seq_len, d] sequence output.
        item_table: [vocab_size, d] the shared item embedding.
        positive_ids: int [batch, seq_len] next items, 0 at padding.
        negatives: int [K] item ids.
        log_q: float [vocab_size] log of each id's sampling probability.

    Returns:
        Scalar float32 loss.
    """
    states, labels = _real_positions(hidden, positive_ids)
    losses = sampled_softmax_cross_entropy(states, item_table, tf.zeros(ops.shape(item_table)[:1]), labels,
                                           negatives, log_q)
    return pooled_mean((losses, ops.ones_like(labels, dtype="float32")))


def matching_losses(user_vectors, item_table, positive_ids, negative_ids, scale: float):
    """The matching task's loss per instance (Zhang & Li): the [UID] output against its matched item.

    -(log s(c * e_pos . H_1) + log(1 - s(c * mean_j(e_neg_j . H_1)))), float32 [batch].

    Args:
        user_vectors: [batch, d] H_1, the output at the [UID] token.
        item_table: [vocab_size, d] the shared item embedding.
        positive_ids: int [batch] the matched item (the sequence's last item).
        negative_ids: int [batch, n] sampled negatives.
        scale: c.
    """
    user_vectors = ops.cast(user_vectors, "float32")
    positive = ops.sum(user_vectors * _gather_rows(item_table, positive_ids), axis=-1)  # [batch]
    negative = ops.mean(ops.einsum("bd,bnd->bn", user_vectors, _gather_rows(item_table, negative_ids)), axis=-1)
    return ops.softplus(-scale * positive) + ops.softplus(scale * negative)  # [batch]


def balanced_bce_loss(positive_scores, negative_scores, positive_weights, negative_weights):
    """Caser's loss: the mean of -log s(y) over the targets plus the mean of -log(1 - s(y)) over the
    negatives, two means that weigh equally whatever their numbers of terms (s: the logistic function).

    Args:
        positive_scores: float [...] the targets' scores.
        negative_scores: float [...] the negatives' scores (any shape).
        positive_weights: [...] 1 for a real target, 0 for padding.
        negative_weights: [...] 1 for a real negative, 0 for padding.

    Returns:
        Scalar float32 loss (0 for a side without terms).
    """
    return (pooled_mean((ops.softplus(-ops.cast(positive_scores, "float32")), positive_weights))
            + pooled_mean((ops.softplus(ops.cast(negative_scores, "float32")), negative_weights)))


def pairwise_bpr_loss(positive_scores, negative_scores):
    """BPR's loss (Rendle et al. 2009): the mean over the (positive, negative) pairs of
    -log s(x_pos - x_neg) (s: the logistic function).

    Args:
        positive_scores: float [batch] the positives' scores.
        negative_scores: float [batch, k] the scores of each positive's k negatives.

    Returns:
        Scalar float32 loss.
    """
    positive = ops.expand_dims(ops.cast(positive_scores, "float32"), -1)  # [batch, 1]
    return ops.mean(ops.softplus(ops.cast(negative_scores, "float32") - positive))


def pointwise_bce_loss(positive_scores, negative_scores):
    """NCF's log loss: binary cross-entropy of the logits, label 1 for every positive and 0 for
    every negative, averaged over all batch x (1 + k) terms alike.

    Args:
        positive_scores: float [batch] the positives' logits.
        negative_scores: float [batch, k] the logits of each positive's k negatives.

    Returns:
        Scalar float32 loss.
    """
    positive = ops.softplus(-ops.cast(positive_scores, "float32"))  # -log s(y), [batch]
    negative = ops.softplus(ops.cast(negative_scores, "float32"))  # -log(1 - s(y)), [batch, k]
    return ops.mean(ops.concatenate([ops.expand_dims(positive, -1), negative], axis=-1))


def squared_norm_penalty(*rows):
    """The L2 penalty of the embedding rows a batch uses: for each group of rows, the mean of the
    rows' squared norms, summed over the groups.

    With one group per role (the users' rows [batch, d], the positives' [batch, d], the negatives'
    [batch, k, d]) it is ||p_u||^2 + ||q_i||^2 + ||q_j||^2 averaged over the batch's (u, i, j)
    triples: the penalty one SGD step of BPR applies per triple.

    Args:
        *rows: float [..., d] each.

    Returns:
        Scalar float32.
    """
    return sum(ops.mean(ops.sum(ops.square(ops.cast(group, "float32")), axis=-1)) for group in rows)


# The score given to the negatives that do not count, so that no softmax or log-sum-exp weighs them.
_EXCLUDED_SCORE = -1e9


def _mean_over_valid(terms, valid):
    """The mean of `terms` [..., K] over the entries where `valid` [..., K], float32 [...] (0 where none)."""
    valid = ops.cast(valid, "float32")
    return ops.sum(terms * valid, axis=-1) / ops.maximum(ops.sum(valid, axis=-1), 1.0)


def _pair_scores(positive_scores, negative_scores):
    """float32 r_i [..., 1] and r_j [..., K] from the targets' and the negatives' scores."""
    return (ops.expand_dims(ops.cast(positive_scores, "float32"), -1), ops.cast(negative_scores, "float32"))


def _negative_softmax(negative_scores, valid):
    """GRU4Rec+'s weights s_j = softmax of the counted negatives' scores, float32 [..., K] (0 where
    not counted), and the log-sum-exp of those scores [...]."""
    masked = ops.where(valid, negative_scores, _EXCLUDED_SCORE)
    normaliser = ops.logsumexp(masked, axis=-1)  # [...]
    return ops.exp(masked - ops.expand_dims(normaliser, -1)) * ops.cast(valid, "float32"), normaliser


def top1_losses(positive_scores, negative_scores, valid):
    """GRU4Rec's TOP1 per target (Hidasi et al. 2016): mean_j [s(r_j - r_i) + s(r_j^2)] over its
    counted negatives j (s: the logistic function; the second term pushes the negatives' scores to 0).

    Args:
        positive_scores: float [...] r_i, the targets' scores.
        negative_scores: float [..., K] r_j, the scores of each target's negatives.
        valid: bool [..., K] whether each negative counts.

    Returns:
        float32 [...]; 0 for a target without a counted negative.
    """
    positive, negative = _pair_scores(positive_scores, negative_scores)
    return _mean_over_valid(ops.sigmoid(negative - positive) + ops.sigmoid(ops.square(negative)), valid)


def bpr_losses(positive_scores, negative_scores, valid):
    """GRU4Rec's BPR per target: -mean_j log s(r_i - r_j) over its counted negatives j.

    Args and returns as `top1_losses`.
    """
    positive, negative = _pair_scores(positive_scores, negative_scores)
    return _mean_over_valid(ops.softplus(negative - positive), valid)  # -log s(x) = softplus(-x)


def top1_max_losses(positive_scores, negative_scores, valid):
    """GRU4Rec+'s TOP1-max per target (Hidasi & Karatzoglou 2018): sum_j s_j [s(r_j - r_i) + s(r_j^2)],
    with s_j the softmax of the counted negatives' scores (the weights carry gradient, as in the paper).

    Args and returns as `top1_losses`.
    """
    positive, negative = _pair_scores(positive_scores, negative_scores)
    weights, _ = _negative_softmax(negative, valid)
    return ops.sum(weights * (ops.sigmoid(negative - positive) + ops.sigmoid(ops.square(negative))), axis=-1)


def bpr_max_losses(positive_scores, negative_scores, valid, regularization: float):
    """GRU4Rec+'s BPR-max per target: -log sum_j s_j s(r_i - r_j) + lambda sum_j s_j r_j^2, with s_j
    the softmax of the counted negatives' scores.

    The sum is taken in log space: log sum_j s_j s(r_i - r_j) = logsumexp_j(r_j - softplus(r_j - r_i))
    - logsumexp_j(r_j), exact where the paper's code adds 1e-24 inside the logarithm.

    Args:
        positive_scores, negative_scores, valid: as `top1_losses`.
        regularization: lambda (`bpr_max_reg`).

    Returns:
        float32 [...]; 0 for a target without a counted negative.
    """
    positive, negative = _pair_scores(positive_scores, negative_scores)
    weights, normaliser = _negative_softmax(negative, valid)
    log_terms = ops.where(valid, negative - ops.softplus(negative - positive), _EXCLUDED_SCORE)  # [..., K]
    ranking = normaliser - ops.logsumexp(log_terms, axis=-1)
    return ranking + regularization * ops.sum(weights * ops.square(negative), axis=-1)
