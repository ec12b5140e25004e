"""BPR-MF (Rendle et al., UAI 2009): matrix factorisation trained with Bayesian personalised ranking.

Also the user-id helpers of every model that learns a vector per user (`reads_users`): NCF and FPMC
import them from here.
"""

from __future__ import annotations

import keras
from keras import ops

from bert4rec_tf.models.base import SequentialRecommender
from bert4rec_tf.models.losses import pairwise_bpr_loss, squared_norm_penalty

# The embeddings' initial standard deviation: NCF's code draws from N(0, 0.01^2); the BPR and FPMC
# papers draw from a zero-mean normal without fixing it for their experiments, so the same here.
EMBEDDING_STDDEV = 0.01


def embedding_initializer() -> keras.initializers.Initializer:
    """A new N(0, EMBEDDING_STDDEV^2) initializer (one per weight: Keras warns when an unseeded
    initializer is reused, as it would draw the same values)."""
    return keras.initializers.RandomNormal(stddev=EMBEDDING_STDDEV)


def batch_users(users, history):
    """int32 [batch] model user ids: `users`, or 0 (no known user) for every row of `history` [batch, L]
    when None."""
    if users is None:
        return ops.zeros((ops.shape(history)[0],), dtype="int32")
    return ops.cast(users, "int32")


def known_rows(table, ids):
    """float32 [..., d]: the rows of `table` [rows, d] at int `ids` [...], the zero vector where an
    id is 0 (no known user, or no previous item): such a row adds nothing to a score."""
    rows = ops.take(ops.cast(table, "float32"), ops.cast(ids, "int32"), axis=0)
    return rows * ops.expand_dims(ops.cast(ops.not_equal(ids, 0), "float32"), -1)


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class BPRMF(SequentialRecommender):
    """x_ui = <p_u, q_i>, trained with BPR against sampled negatives.

    The score is the paper's plain inner product (its section 4.3.1), with no item bias: popularity
    is left to the factors, as in the paper. Loss: the mean over the batch's (u, i, j) triples of
    -log s(x_ui - x_uj), plus `l2` x (||p_u||^2 + ||q_i||^2 + ||q_j||^2) averaged over the triples
    (the regularisation of the paper's LearnBPR step), in training only: the validation loss is the
    ranking term. The model reads no history: it scores with its vector of the user (`reads_users`);
    user 0 (unknown) has the zero vector, which scores every item 0.

    Features for training (from `bert4rec_tf.data.interactions`):
        user_ids: int [batch] model user ids.
        positive_ids: int [batch] the items the users had.
        negative_ids: int [batch, k] items they never had.

    Args:
        config: the model section (`hidden_size` d, `num_users`, `l2`); `loss` is not read (BPR is
            the only one).
        **kwargs: passed to `keras.Model`.
    """

    reads_users = True

    def build(self, input_shape=None):
        """Creates the user table [num_users + 1, d] (row 0: no known user) and the item table [vocab, d]."""
        config = self.model_config
        self.user_embeddings = self.add_weight(shape=(config.num_users + 1, config.hidden_size),
                                               initializer=embedding_initializer(), name="user_embeddings")
        self.item_embeddings = self.add_weight(shape=(config.vocab_size, config.hidden_size),
                                               initializer=embedding_initializer(), name="item_embeddings")
        self.built = True

    def history_inputs(self, history) -> dict:
        """BPR-MF reads no history: only the batch size matters (as POP)."""
        return {"input_ids": history}

    def user_representation(self, history, training=None, users=None):
        """p_u, float32 [batch, d] (the zero vector for user 0 or `users` None)."""
        return known_rows(self.user_embeddings, batch_users(users, history))

    def _training_users(self, features: dict):
        """The user vectors of training features, float32 [batch, d]: p_u."""
        return known_rows(self.user_embeddings, features["user_ids"])

    def _item_vectors(self, items):
        """The item vectors the user vectors score, float32 [..., d] for int `items` [...]: q_i."""
        return known_rows(self.item_embeddings, items)

    def score_next(self, history, training=None, users=None):
        """The inner product of the user vector with every vocabulary entry's, float32 [batch, vocab_size]."""
        user = self.user_representation(history, training=training, users=users)  # [batch, d]
        return ops.matmul(user, ops.transpose(self._item_vectors(ops.arange(self.model_config.vocab_size))))

    def call(self, features: dict, training=None):
        """The positives' scores [batch], the negatives' [batch, k] and, in training, the L2 penalty of
        the rows used (0 when `l2` is 0)."""
        user = self._training_users(features)  # [batch, d]
        positive = self._item_vectors(features["positive_ids"])  # [batch, d]
        negative = self._item_vectors(features["negative_ids"])  # [batch, k, d]
        penalty = squared_norm_penalty(user, positive, negative) if training and self.model_config.l2 else 0.0
        return {"positive_scores": ops.sum(user * positive, axis=-1),
                "negative_scores": ops.einsum("bd,bkd->bk", user, negative), "penalty": penalty}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """BPR's loss over the batch's pairs, plus `l2` times the penalty of `call`."""
        return (pairwise_bpr_loss(y_pred["positive_scores"], y_pred["negative_scores"])
                + self.model_config.l2 * y_pred["penalty"])

    def loss_terms(self, features):
        """The (positive, negative) pairs."""
        return ops.sum(ops.ones_like(features["negative_ids"], dtype="float32"))
