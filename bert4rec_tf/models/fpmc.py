"""FPMC (Rendle et al., WWW 2010): factorised personalised Markov chains, the basket one item."""

from __future__ import annotations

import keras
from keras import ops

from bert4rec_tf.models.bpr_mf import BPRMF, batch_users, embedding_initializer, known_rows
from bert4rec_tf.models.history import last_items


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class FPMC(BPRMF):
    """x(u, l, i) = <V_u^{UI}, V_i^{IU}> + <V_i^{IL}, V_l^{LI}>, trained with S-BPR.

    The paper's basket is the previous item l alone (the newest item of the history when scoring),
    so its mean over the basket's items is that item's term; the paper's user-basket term
    <V_u^{UL}, V_l^{LU}> does not depend on i and drops out of the ranking, as in the paper. Both
    factorisations have d = `hidden_size` dimensions. Loss: the mean over the batch's (u, l, i, j) of
    -log s(x(u, l, i) - x(u, l, j)), plus `l2` x the squared norms of the rows used, in training only.
    A missing previous item (a user's first item, an empty history) or user (0, unknown) has the zero
    vector: its term adds nothing.

    It is BPR-MF's training and scoring (the class derives from `BPRMF`) with longer vectors: the
    user representation is [V_u^{UI} ; V_l^{LI}] (2d), whose inner product with an item's
    [V_i^{IU} ; V_i^{IL}] is x(u, l, i).

    Features for training (from `bert4rec_tf.data.interactions`):
        user_ids: int [batch] model user ids.
        previous_ids: int [batch] the item the user had just before (0: none).
        positive_ids: int [batch] the items the users had next.
        negative_ids: int [batch, k] items they never had.

    Args:
        config: the model section (`hidden_size` d, `num_users`, `l2`); `loss` is not read (S-BPR is
            the only one).
        **kwargs: passed to `keras.Model`.
    """

    def build(self, input_shape=None):
        """Creates V^{UI} [num_users + 1, d] (row 0: no known user) and V^{IU}, V^{IL}, V^{LI} [vocab, d]."""
        config = self.model_config
        width = config.hidden_size
        self.user_to_item = self.add_weight(shape=(config.num_users + 1, width), initializer=embedding_initializer(),
                                            name="user_to_item")  # V^{UI}
        self.item_to_user = self.add_weight(shape=(config.vocab_size, width), initializer=embedding_initializer(),
                                            name="item_to_user")  # V^{IU}
        self.item_to_last = self.add_weight(shape=(config.vocab_size, width), initializer=embedding_initializer(),
                                            name="item_to_last")  # V^{IL}
        self.last_to_item = self.add_weight(shape=(config.vocab_size, width), initializer=embedding_initializer(),
                                            name="last_to_item")  # V^{LI}
        self.built = True

    def history_inputs(self, history) -> dict:
        """The newest known item: `input_ids` int32 [batch, min(1, L)] (0: an empty history)."""
        items, _ = last_items(history, 1)
        return {"input_ids": items}

    def _user_vectors(self, users, previous):
        """[V_u^{UI} ; V_l^{LI}], float32 [batch, 2d]."""
        return ops.concatenate([known_rows(self.user_to_item, users), known_rows(self.last_to_item, previous)], -1)

    def user_representation(self, history, training=None, users=None):
        """[V_u^{UI} ; V_l^{LI}] with l the newest item of `history`, float32 [batch, 2d]."""
        # A sum over the (at most one) column: 0 also for a history with no column at all.
        newest = ops.sum(self.history_inputs(history)["input_ids"], axis=1)  # [batch]
        return self._user_vectors(batch_users(users, history), newest)

    def _training_users(self, features: dict):
        """[V_u^{UI} ; V_l^{LI}] of training features (l: `previous_ids`), float32 [batch, 2d]."""
        return self._user_vectors(features["user_ids"], features["previous_ids"])

    def _item_vectors(self, items):
        """[V_i^{IU} ; V_i^{IL}], float32 [..., 2d]; a row's squared norm is the sum of its two parts',
        so BPR-MF's penalty of these rows is the penalty of all six rows a pair uses."""
        return ops.concatenate([known_rows(self.item_to_user, items), known_rows(self.item_to_last, items)], -1)
