"""BERT4Rec with a matching task (Zhang & Li): a [UID] token in front, matched against the last item."""

from __future__ import annotations

import keras
from keras import ops

from bert4rec_tf.models.bert4rec import BERT4Rec
from bert4rec_tf.models.losses import masked_lm_losses, matching_losses, pooled_mean


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class BERT4RecMatch(BERT4Rec):
    """BERT4Rec whose sequence starts with a [UID] token; its output H_1 is the user's vector.

    [UID] is one token shared by every user, like BERT's [CLS]: the matching paper does not say
    whether it is one token or one per user, and a per-user embedding would neither serve users
    unseen in training nor fit the serving export, which knows only item histories. Its id is
    `vocab_size` (one row after [MASK] in the item table) and it sits at position 0, so the
    position table has max_len + 1 rows; the model adds it inside `encode`, so the inputs and the
    masked positions are exactly BERT4Rec's.

    Loss: one mean over every prediction of the batch, each masked slot's cross-entropy and each
    matching target's -(log s(c * e_pos . H_1) + log(1 - s(c * mean(e_neg . H_1)))) weighing the
    same (`match_positive` > 0 marks the instances with a matching target; c = `config.match_scale`).
    The paper writes the sum of the masked-item mean and the matching mean; there a matching target
    weighs as much as all the masked slots of its instance together (0.6 of its items, up to 30, at
    Beauty's settings), its gradient sets the step of every shared weight under Adam, and the masked
    task barely trains: on a planted-order data set the model learned only popularity in 1,000 steps
    (issue 20). Extra training features
    (`BERT4RecMatchTask.training_stream`): `match_positive` int [batch, 1] (0: no matching task) and
    `match_negatives` int [batch, n]. Prediction appends [MASK] as BERT4Rec does.
    """

    EXTRA_TOKENS = 1

    @property
    def uid_token(self) -> int:
        """The [UID] id, after [MASK]."""
        return self.model_config.vocab_size

    def _encode_with_user(self, features: dict, training=None, return_attention_scores: bool = False):
        """([batch, seq_len, hidden] item outputs, [batch, hidden] H_1, attention over the items)."""
        ids = features["input_ids"]
        batch = ops.shape(ids)[0]
        uid = ops.full((batch, 1), self.uid_token, dtype=ids.dtype)
        ones = ops.ones((batch, 1), dtype=features["input_mask"].dtype)
        hidden, scores = super().encode({"input_ids": ops.concatenate([uid, ids], axis=1),
                                         "input_mask": ops.concatenate([ones, features["input_mask"]], axis=1)},
                                        training=training, return_attention_scores=True)
        return hidden[:, 1:, :], hidden[:, 0, :], [probs[:, :, 1:, 1:] for probs in scores]

    def encode(self, features: dict, training=None, return_attention_scores: bool = False):
        """The Transformer's output at the item positions (the [UID] output left out).

        With `return_attention_scores`, also the attention among the item positions.
        """
        hidden, _, scores = self._encode_with_user(features, training=training)
        return (hidden, scores) if return_attention_scores else hidden

    def call(self, features: dict, training=None):
        """(masked-slot logits as `BERT4Rec.call`, H_1 [batch, hidden])."""
        hidden, user, _ = self._encode_with_user(features, training=training)
        return self._masked_logits(features, hidden), user

    def loss_terms(self, features):
        """The predictions of the batch (the loss is their mean): masked slots plus matching targets."""
        return (ops.sum(ops.cast(features["masked_lm_weights"], "float32"))
                + ops.sum(ops.cast(features["match_positive"] > 0, "float32")))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The mean over the masked slots and the matching targets (see the class docstring)."""
        logits, user = y_pred
        labels, weights = self._slot_targets(x, y)
        return pooled_mean((masked_lm_losses(labels, logits), weights), self._matching_terms(x, user))

    def training_loss(self, features: dict, labels=None):
        """`compute_loss` of the training forward pass, the masked-item part fused (see `BERT4Rec`)."""
        hidden, user, _ = self._encode_with_user(features, training=True)
        table = self.embedding.output_table()  # once a step: with attributes at the output, E + F of every id
        return pooled_mean(self._masked_slot_losses(features, labels, hidden, table),
                           self._matching_terms(features, user, table))

    def _matching_terms(self, features: dict, user, table=None):
        """(matching loss, weight) of every instance, from H_1 `user` [batch, hidden]; weight 0 without a
        matching target; `table` as `_masked_slot_losses`'."""
        positive = ops.cast(features["match_positive"][:, 0], "int32")  # [batch]
        table = self.embedding.output_table() if table is None else table
        matching = matching_losses(user, table, positive,
                                   ops.cast(features["match_negatives"], "int32"), self.model_config.match_scale)
        return matching, positive > 0

    def user_representation(self, history, training=None):
        """H_1, the output at [UID], float32 [batch, hidden_size]."""
        _, user, _ = self._encode_with_user(self.history_inputs(history), training=training)
        return ops.cast(user, "float32")
