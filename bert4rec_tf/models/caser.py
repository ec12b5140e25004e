"""Caser (Tang & Wang, WSDM 2018): convolutions over the embeddings of a user's latest L items."""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from bert4rec_tf.constants import PAD_ID
from bert4rec_tf.layers import Dropout
from bert4rec_tf.models.base import SequentialRecommender
from bert4rec_tf.models.history import last_items
from bert4rec_tf.models.losses import balanced_bce_loss


def _fan_in_uniform(fan_in: int) -> keras.initializers.Initializer:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): the authors' code's (PyTorch's) default for its convolutions
    and fully connected layer, kernels and biases alike."""
    limit = 1.0 / math.sqrt(fan_in)
    return keras.initializers.RandomUniform(-limit, limit)


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class Caser(SequentialRecommender):
    """Caser: horizontal and vertical convolutions over the latest L items, plus a vector per user.

    E (L x d) holds the embeddings of the user's latest L items, oldest first, padded on the left
    with zero rows (item 0 is padding and embeds to 0; with `learned_padding`, to its own learned
    row, as in the authors' code). For each height h in 1..L, `conv_filters`
    (n_h) horizontal filters F (h x d) give o_h = max over i of ReLU(sum(E[i:i+h] * F) + b), one number
    per filter; `vertical_filters` (n_v) vertical filters w (L) give o_v = sum_l w_l E_l + b, d numbers
    per filter (the authors' code leaves them linear). z = ReLU(W [o_v, o_h] + b) after dropout
    (`hidden_dropout`) on [o_v, o_h]; with the user's vector P_u (d), the score of item i is
    [z, P_u] . W'_i + b'_i, W' an output table of 2d per item and b' a bias. An unknown user (id 0)
    has the zero vector.

    Loss: each training window (user, L items, T targets, N negatives per target) scores its targets
    and negatives; the loss is the mean of -log s(y) over the targets plus the mean of -log(1 - s(y))
    over the negatives (`balanced_bce_loss`), as the authors' code averages it. Training adds
    (l2 / 2) times the sum of squares of every weight (`training_loss`), which is the authors' Adam
    `weight_decay` l2 (coupled: it passes through Adam's scaling); the validation loss leaves it out.

    Features (from `CaserTask.training_stream`):
        user_ids: int [batch] model user ids, 1..num_users (0: unknown).
        input_ids: int [batch, L] items, padded on the left with 0.
        target_ids: int [batch, T] the next T items (0: none).
        negative_ids: int [batch, T, N] sampled negatives (0: none).

    Args:
        config: the model section of the configuration (or its dict form); `max_len` is L,
            `num_users` the users with a vector.
        **kwargs: passed to `keras.Model`.
    """

    reads_users = True

    def build(self, input_shape=None):
        """Creates every weight; the shapes come from the configuration."""
        config = self.model_config
        width, length = config.hidden_size, config.max_len
        horizontal, vertical = config.conv_filters, config.vertical_filters
        normal = keras.initializers.RandomNormal
        # The authors' initialisation: embeddings N(0, 1/d) (standard deviation 1/d), W' N(0, 1/2d), b' 0.
        self.item_embeddings = self.add_weight(shape=(config.vocab_size, width), initializer=normal(stddev=1 / width),
                                               name="item_embeddings")
        self.user_embeddings = self.add_weight(shape=(config.num_users + 1, width),
                                               initializer=normal(stddev=1 / width), name="user_embeddings")
        self.horizontal_kernels, self.horizontal_biases = [], []
        for height in range(1, length + 1):
            initializer = _fan_in_uniform(height * width)
            self.horizontal_kernels.append(self.add_weight(shape=(height, width, horizontal), initializer=initializer,
                                                           name=f"horizontal_kernel_{height}"))
            self.horizontal_biases.append(self.add_weight(shape=(horizontal,), initializer=initializer,
                                                          name=f"horizontal_bias_{height}"))
        if vertical:
            self.vertical_kernel = self.add_weight(shape=(length, vertical), initializer=_fan_in_uniform(length),
                                                   name="vertical_kernel")
            self.vertical_bias = self.add_weight(shape=(vertical,), initializer=_fan_in_uniform(length),
                                                 name="vertical_bias")
        features = vertical * width + horizontal * length
        self.hidden_kernel = self.add_weight(shape=(features, width), initializer=_fan_in_uniform(features),
                                             name="hidden_kernel")
        self.hidden_bias = self.add_weight(shape=(width,), initializer=_fan_in_uniform(features), name="hidden_bias")
        self.output_table = self.add_weight(shape=(config.vocab_size, 2 * width),
                                            initializer=normal(stddev=1 / (2 * width)), name="output_table")
        self.output_bias = self.add_weight(shape=(config.vocab_size,), initializer="zeros", name="output_bias")
        self.dropout = Dropout(config.hidden_dropout, name="dropout")
        self.built = True

    def history_inputs(self, history) -> dict:
        """The latest L known items, padded on the left to exactly L: `input_ids` int32 [batch, L]."""
        length = self.model_config.max_len
        items, _ = last_items(history, length, pad_left=True)  # [batch, min(L, width)]
        items = ops.pad(items, [[0, 0], [length - ops.shape(items)[1], 0]])
        return {"input_ids": ops.reshape(items, (-1, length))}

    def _user_vectors(self, users, batch):
        """P_u float32 [batch, d]; the zero vector for user 0, a user id outside 1..num_users or no `users`."""
        if users is None:
            return ops.zeros((batch, self.model_config.hidden_size), "float32")
        users = ops.cast(users, "int32")
        known = ops.logical_and(users > 0, users <= self.model_config.num_users)
        vectors = ops.take(self.user_embeddings, ops.where(known, users, 0), axis=0)
        return ops.cast(vectors, "float32") * ops.cast(known, "float32")[:, None]

    def encode(self, input_ids, users=None, training=None):
        """[z, P_u], float32 [batch, 2d], for items int [batch, L] padded on the left."""
        if not self.built:
            self.build()
        ids = ops.cast(input_ids, "int32")
        embedded = ops.cast(ops.take(self.item_embeddings, ids, axis=0), "float32")  # [batch, L, d]
        if not self.model_config.learned_padding:
            embedded = embedded * ops.cast(ids != PAD_ID, "float32")[:, :, None]
        pooled = [self._horizontal(embedded)] if self.horizontal_kernels else []
        if self.model_config.vertical_filters:
            vertical = ops.einsum("bld,lv->bvd", embedded, self.vertical_kernel) + self.vertical_bias[:, None]
            pooled.insert(0, ops.reshape(vertical, (-1, self.model_config.vertical_filters
                                                    * self.model_config.hidden_size)))  # [batch, n_v * d]
        convolved = self.dropout(ops.concatenate(pooled, axis=1), training=training)  # [batch, n_v d + n_h L]
        hidden = ops.relu(ops.matmul(convolved, self.hidden_kernel) + self.hidden_bias)  # [batch, d]
        return ops.concatenate([hidden, self._user_vectors(users, ops.shape(ids)[0])], axis=1)  # [batch, 2d]

    def _horizontal(self, embedded):
        """o_h of every height h = 1..L, float32 [batch, n_h L] (height 1's n_h first), in one convolution.

        Every height's kernel is padded with zero rows to height L and the L kernels side by side make
        one [L, d, n_h L] kernel, run over E padded with L - 1 zero rows at the end: position i of
        height h's filters is then sum(E[i:i+h] * F_h), its own convolution, wherever i + h <= L, and
        the other positions (a window past E's end) are set to 0 after the ReLU, below or at every
        valid position's value, so the max over positions is height h's own.
        """
        length, filters = self.model_config.max_len, self.model_config.conv_filters
        kernel = ops.concatenate([ops.pad(ops.cast(kernel, "float32"), [[0, length - height], [0, 0], [0, 0]])
                                  for height, kernel in enumerate(self.horizontal_kernels, start=1)], axis=2)
        bias = ops.concatenate([ops.cast(bias, "float32") for bias in self.horizontal_biases], axis=0)
        padded = ops.pad(embedded, [[0, 0], [0, length - 1], [0, 0]])  # [batch, 2L - 1, d]
        maps = ops.relu(ops.conv(padded, kernel, padding="valid") + bias)  # [batch, L, n_h L]
        positions = np.arange(length)[:, None]  # window start i
        heights = np.repeat(np.arange(1, length + 1), filters)[None, :]  # each column's height h
        valid = ops.convert_to_tensor((positions + heights <= length).astype(np.float32))  # [L, n_h L]
        return ops.max(maps * valid, axis=1)  # [batch, n_h L]

    def call(self, features: dict, training=None):
        """[z, P_u] [batch, 2d] of the training windows; the loss scores their targets and negatives."""
        return self.encode(features["input_ids"], features["user_ids"], training=training)

    def _scores(self, representation, items):
        """[z, P_u] . W'_i + b'_i for items int [batch, ...] -> float32 [batch, ...]."""
        items = ops.cast(items, "int32")
        rows = ops.cast(ops.take(self.output_table, items, axis=0), "float32")  # [batch, ..., 2d]
        batch = ops.shape(representation)[0]
        flat = ops.reshape(rows, (batch, -1, ops.shape(rows)[-1]))  # [batch, K, 2d]
        scores = ops.reshape(ops.einsum("bk,bnk->bn", representation, flat), ops.shape(items))
        return scores + ops.cast(ops.take(self.output_bias, items, axis=0), "float32")

    def loss_terms(self, features):
        """The real targets (the loss's first mean)."""
        return ops.sum(ops.cast(ops.not_equal(features["target_ids"], PAD_ID), "float32"))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """`balanced_bce_loss` of the windows' targets against their negatives (see the class docstring)."""
        targets, negatives = x["target_ids"], x["negative_ids"]
        return balanced_bce_loss(self._scores(y_pred, targets), self._scores(y_pred, negatives),
                                 ops.not_equal(targets, PAD_ID), ops.not_equal(negatives, PAD_ID))

    def training_loss(self, features: dict, labels=None):
        """The loss plus (l2 / 2) times the sum of squares of every trainable weight."""
        loss = super().training_loss(features, labels)
        if not self.model_config.l2:
            return loss
        squares = sum(ops.sum(ops.square(ops.cast(weight, "float32"))) for weight in self.trainable_weights)
        return loss + 0.5 * self.model_config.l2 * squares

    def user_representation(self, history, training=None, users=None):
        """[z, P_u] of the latest L items and the user, float32 [batch, 2d]."""
        return self.encode(self.history_inputs(history)["input_ids"], users, training=training)

    def score_next(self, history, training=None, users=None):
        """[z, P_u] . W'^T + b', float32 [batch, vocab_size]."""
        representation = self.user_representation(history, training=training, users=users)
        return ops.matmul(representation, ops.transpose(ops.cast(self.output_table, "float32"))) + ops.cast(
            self.output_bias, "float32")
