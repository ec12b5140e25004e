"""NCF (He et al., WWW 2017): NeuMF, a generalised matrix factorisation and an MLP fused into one logit."""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from bert4rec_tf.models.base import SequentialRecommender
from bert4rec_tf.models.bpr_mf import batch_users, embedding_initializer, known_rows
from bert4rec_tf.models.losses import pointwise_bce_loss, squared_norm_penalty

# Scoring every item: the MLP runs on [batch, items per chunk, width] at a time. A chunk holds this
# many first-layer activations per user: for the evaluation's batches of 256 users, 2^25 float32
# (128 MB), and the later layers, each half as wide, less than as much again together.
ACTIVATIONS_PER_USER_CHUNK = 2 ** 17


def mlp_widths(factors: int, layers: int) -> list[int]:
    """The MLP's ReLU layers, halving down to `factors` (the paper's predictive factors).

    Each MLP embedding is as wide as the first layer, so the layer halves its input too, as the
    authors' code (its default: embeddings 32, input 64, layers 32 -> 16 -> 8 for 8 factors).
    Example: `mlp_widths(64, 3)` is [256, 128, 64].
    """
    return [factors * 2 ** (layers - 1 - layer) for layer in range(layers)]


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class NCF(SequentialRecommender):
    """NeuMF: y_ui = h^T [p_u^G * q_i^G ; MLP(p_u^M, q_i^M)] + b, trained as binary classification.

    GMF: the elementwise product of the user's and the item's GMF embeddings (d = `hidden_size`, the
    predictive factors). MLP: separate user and item embeddings as wide as the first layer,
    concatenated, then `num_layers` ReLU layers halving in width down to d (`mlp_widths`). The
    final linear layer takes both towers' d-vectors to one logit. Loss: binary cross-entropy, the
    positive labelled 1 and its `train_negatives` sampled negatives 0 (the paper's 4), averaged over
    all terms; `l2` x the squared norms of the embedding rows used, in training only (the paper's
    code regularises nothing by default, l2 0). No dropout: the paper has none.

    The user representation is what the scores read of the user: [p_u^G * h^G ; W_u p_u^M + b_1]
    (d + first width), the GMF user vector weighted by the final layer, and the user's part of the
    MLP's first layer, whose input is [p_u^M ; q_i^M] so that W_1 [p ; q] = W_u p + W_i q. Scoring
    every item adds the item's part W_i q_i^M to it and runs the rest of the MLP on
    [batch, items, width] in chunks of items (`ACTIVATIONS_PER_USER_CHUNK`). User 0 (unknown) has
    zero user embeddings: its scores are the items' alone.

    Features for training (from `bert4rec_tf.data.interactions`):
        user_ids: int [batch] model user ids.
        positive_ids: int [batch] the items the users had.
        negative_ids: int [batch, k] items they never had.

    Args:
        config: the model section (`hidden_size` d, `num_layers`, `num_users`, `l2`); `loss` is not
            read (binary cross-entropy is the only one).
        **kwargs: passed to `keras.Model`.
    """

    reads_users = True
    scores_chosen_items = True

    def build(self, input_shape=None):
        """Creates the four embedding tables (user row 0: no known user), the MLP and the final layer."""
        config = self.model_config
        widths = mlp_widths(config.hidden_size, config.num_layers)
        embedding = widths[0]  # each MLP embedding
        users, items = config.num_users + 1, config.vocab_size
        self.gmf_users = self.add_weight(shape=(users, config.hidden_size), initializer=embedding_initializer(),
                                         name="gmf_user_embeddings")
        self.gmf_items = self.add_weight(shape=(items, config.hidden_size), initializer=embedding_initializer(),
                                         name="gmf_item_embeddings")
        self.mlp_users = self.add_weight(shape=(users, embedding), initializer=embedding_initializer(),
                                         name="mlp_user_embeddings")
        self.mlp_items = self.add_weight(shape=(items, embedding), initializer=embedding_initializer(),
                                         name="mlp_item_embeddings")
        # As the authors' (Keras) code: glorot_uniform MLP kernels, a lecun_uniform final kernel, zero biases.
        self.mlp_layers = [keras.layers.Dense(width, activation="relu", dtype=self.dtype_policy, name=f"mlp_{index}")
                           for index, width in enumerate(widths)]
        for layer, fan_in in zip(self.mlp_layers, [2 * embedding] + widths[:-1]):
            layer.build((None, fan_in))
        self.prediction = keras.layers.Dense(1, kernel_initializer="lecun_uniform", dtype=self.dtype_policy,
                                             name="prediction")
        self.prediction.build((None, config.hidden_size + widths[-1]))
        self.built = True

    def history_inputs(self, history) -> dict:
        """NCF reads no history: only the batch size matters (as POP)."""
        return {"input_ids": history}

    def _first_kernel(self, part: str):
        """The first MLP layer's kernel rows that read the user's ("user") or the item's ("item") embedding."""
        kernel = ops.cast(self.mlp_layers[0].kernel, "float32")  # [2 * embedding, first width]
        half = ops.shape(kernel)[0] // 2
        return kernel[:half] if part == "user" else kernel[half:]

    def _user_vectors(self, users):
        """[p_u^G * h^G ; W_u p_u^M + b_1], float32 [batch, d + first width]."""
        gmf_weights = ops.cast(self.prediction.kernel[:self.model_config.hidden_size, 0], "float32")  # h^G [d]
        gmf = known_rows(self.gmf_users, users) * gmf_weights
        mlp = (ops.matmul(known_rows(self.mlp_users, users), self._first_kernel("user"))
               + ops.cast(self.mlp_layers[0].bias, "float32"))
        return ops.concatenate([gmf, mlp], axis=-1)

    def _mlp_logits(self, first_layer):
        """The MLP tower's share of the logit, float32 [...], from its first layer's pre-activation [..., width]."""
        hidden = ops.relu(first_layer)
        for layer in self.mlp_layers[1:]:
            hidden = layer(hidden)
        mlp_weights = ops.cast(self.prediction.kernel[self.model_config.hidden_size:], "float32")  # [d, 1]
        return ops.matmul(ops.cast(hidden, "float32"), mlp_weights)[..., 0]

    def user_representation(self, history, training=None, users=None):
        """float32 [batch, d + first width] (see the class docstring)."""
        return self._user_vectors(batch_users(users, history))

    def score_next(self, history, training=None, users=None):
        """The logit of every vocabulary entry, float32 [batch, vocab_size]."""
        factors = self.model_config.hidden_size
        user = self.user_representation(history, training=training, users=users)  # [batch, d + width]
        gmf = ops.matmul(user[:, :factors], ops.transpose(ops.cast(self.gmf_items, "float32")))  # [batch, vocab]
        item_parts = ops.matmul(ops.cast(self.mlp_items, "float32"), self._first_kernel("item"))  # [vocab, width]
        vocab, width = self.model_config.vocab_size, int(item_parts.shape[-1])
        chunk = max(1, min(vocab, ACTIVATIONS_PER_USER_CHUNK // width))
        chunks = -(-vocab // chunk)
        item_parts = ops.reshape(ops.pad(item_parts, [[0, chunks * chunk - vocab], [0, 0]]),
                                 (chunks, chunk, width))
        user_part = user[:, None, factors:]  # [batch, 1, width]
        # One chunk at a time (parallel_iterations=1): chunks run side by side would each hold their
        # [batch, chunk, width] activations. keras.ops.map cannot say so.
        mlp = tf.map_fn(lambda part: self._mlp_logits(user_part + part[None]), item_parts,
                        fn_output_signature=tf.float32, parallel_iterations=1)  # [chunks, batch, chunk]
        mlp = ops.reshape(ops.transpose(mlp, (1, 0, 2)), (-1, chunks * chunk))[:, :vocab]  # [batch, vocab]
        return gmf + mlp + ops.cast(self.prediction.bias, "float32")

    def _item_logits(self, user, gmf_items, mlp_items):
        """Logits [batch, n] of the users' vectors `user` [batch, d + width] against their items'
        GMF [batch, n, d] and MLP [batch, n, width] embeddings."""
        factors = self.model_config.hidden_size
        gmf = ops.einsum("bd,bnd->bn", user[:, :factors], gmf_items)
        mlp = self._mlp_logits(user[:, None, factors:] + ops.matmul(mlp_items, self._first_kernel("item")))
        return gmf + mlp + ops.cast(self.prediction.bias, "float32")

    def score_items(self, history, items, training=None, users=None):
        """The logits of chosen items, float32 [batch, n] for item ids `items` [batch, n]: what
        `score_next` gives at those ids, for n (user, item) pairs instead of the whole vocabulary."""
        items = ops.cast(items, "int32")
        user = self.user_representation(history, training=training, users=users)
        return self._item_logits(user, known_rows(self.gmf_items, items), known_rows(self.mlp_items, items))

    def call(self, features: dict, training=None):
        """The positives' logits [batch], the negatives' [batch, k] and, in training, the L2 penalty."""
        users = ops.cast(features["user_ids"], "int32")
        items = ops.concatenate([ops.cast(features["positive_ids"], "int32")[:, None],
                                 ops.cast(features["negative_ids"], "int32")], axis=1)  # [batch, 1 + k]
        gmf_items, mlp_items = known_rows(self.gmf_items, items), known_rows(self.mlp_items, items)
        logits = self._item_logits(self._user_vectors(users), gmf_items, mlp_items)  # [batch, 1 + k]
        penalty = 0.0
        if training and self.model_config.l2:
            penalty = squared_norm_penalty(known_rows(self.gmf_users, users), known_rows(self.mlp_users, users),
                                           gmf_items[:, 0], mlp_items[:, 0], gmf_items[:, 1:], mlp_items[:, 1:])
        return {"positive_scores": logits[:, 0], "negative_scores": logits[:, 1:], "penalty": penalty}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Binary cross-entropy over the positives and negatives, plus `l2` times the penalty of `call`."""
        return (pointwise_bce_loss(y_pred["positive_scores"], y_pred["negative_scores"])
                + self.model_config.l2 * y_pred["penalty"])

    def loss_terms(self, features):
        """The positives and negatives."""
        return ops.sum(ops.ones_like(features["negative_ids"], dtype="float32")) + ops.cast(
            ops.shape(features["negative_ids"])[0], "float32")
