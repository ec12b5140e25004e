"""BERT4Rec with a matching task (Zhang & Li): a [UID] token in front, matched against the last item."""

from __future__ import annotations

import keras
from keras import ops

from bert4rec_tf.models.bert4rec import BERT4Rec
from bert4rec_tf.models.losses import matching_loss


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class BERT4RecMatch(BERT4Rec):
    """BERT4Rec whose sequence starts with a [UID] token; its output H_1 is the user's vector.

    [UID] is one token shared by every user, like BERT's [CLS]: the matching paper does not say
    whether it is one token or one per user, and a per-user embedding would neither serve users
    unseen in training nor fit the serving export, which knows only item histories. Its id is
    `vocab_size` (one row after [MASK] in the item table) and it sits at position 0, so the
    position table has max_len + 1 rows; the model adds it inside `encode`, so the inputs and the
    masked positions are exactly BERT4Rec's.

    Loss: the masked-item loss plus the matching loss
    -(log s(c * e_pos . H_1) + log(1 - s(c * mean(e_neg . H_1)))) over the instances that carry a
    matching target (`match_positive` > 0), with c = `config.match_scale`. Extra training features
    (the "masked_matching" pipeline): `match_positive` int [batch, 1] (0: no matching task) and
    `match_negatives` int [batch, n]. Prediction appends [MASK] as BERT4Rec does.
    """

    TRAINING_INSTANCES = "masked_matching"
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
        """None: the loss adds two means over different terms (masked slots, matched instances), so
        the replicas of a distributed step weigh equally, which is close but not exact."""
        return None

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Masked-item loss + matching loss (see the class docstring)."""
        logits, user = y_pred
        return super().compute_loss(x=x, y=y, y_pred=logits) + self._matching_loss(x, user)

    def training_loss(self, features: dict, labels=None):
        """`compute_loss` of the training forward pass, the masked-item part fused (see `BERT4Rec`)."""
        hidden, user, _ = self._encode_with_user(features, training=True)
        return self._masked_loss(features, labels, hidden) + self._matching_loss(features, user)

    def _matching_loss(self, features: dict, user):
        """The matching loss of H_1 `user` [batch, hidden] (see the class docstring)."""
        positive = ops.cast(features["match_positive"][:, 0], "int32")  # [batch]
        return matching_loss(user, self.embedding.item_embeddings, positive,
                             ops.cast(features["match_negatives"], "int32"), self.model_config.match_scale,
                             weights=ops.cast(positive > 0, "float32"))

    def user_representation(self, history, training=None):
        """H_1, the output at [UID], float32 [batch, hidden_size]."""
        _, user, _ = self._encode_with_user(self.history_inputs(history), training=training)
        return ops.cast(user, "float32")
