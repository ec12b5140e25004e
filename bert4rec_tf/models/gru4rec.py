"""GRU4Rec (Hidasi et al., ICLR 2016) and GRU4Rec+ (Hidasi & Karatzoglou, CIKM 2018): a GRU over
the history, every position scoring the next item with a separate output table."""

from __future__ import annotations

import keras
from keras import ops

from bert4rec_tf.config import ModelConfig
from bert4rec_tf.constants import PAD_ID
from bert4rec_tf.layers import Dropout
from bert4rec_tf.layers.initializers import bias_initializer, kernel_initializer
from bert4rec_tf.models.base import SequentialRecommender
from bert4rec_tf.models.history import last_items
from bert4rec_tf.models.losses import (
    bpr_losses,
    bpr_max_losses,
    pooled_mean,
    top1_losses,
    top1_max_losses,
)
from bert4rec_tf.models.softmax import tied_softmax_cross_entropy

# The ranking losses over sampled negatives, by `config.loss`; "ce" is the softmax over every item.
RANKING_LOSSES = {"top1": top1_losses, "bpr": bpr_losses, "top1_max": top1_max_losses, "bpr_max": bpr_max_losses}


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class GRU4Rec(SequentialRecommender):
    """GRU4Rec: item embedding, dropout, `num_layers` GRU layers each followed by dropout, and an
    output table.

    x_t = Dropout(E[item_t]) (E: d = `hidden_size` per item; the paper fed one-hot vectors, the
    embedding is its code's `embedding` option); each layer is a GRU of d units as in the paper,
    z_t = s(W_z x_t + U_z h_{t-1} + b_z), r_t = s(W_r x_t + U_r h_{t-1} + b_r),
    h'_t = tanh(W x_t + U (r_t * h_{t-1}) + b), h_t = z_t * h_{t-1} + (1 - z_t) * h'_t (Keras' labels:
    the paper calls 1 - z the update gate), starting from h = 0 and skipping padding (a masked GRU:
    a padding step leaves the state unchanged), then dropout (`hidden_dropout`, both places). The score
    of item i after position t is h_t . W_i + b_i with an output table W and bias b separate from E,
    as in GRU4Rec (linear scores: its code's default final activation).

    Loss (`config.loss`), at every position with a next item; the negatives of that target are the
    next items of the batch's other rows at the same column, plus `shared_negatives` when the batch
    has them; a row with its own `negatives` (the validation instances) uses those instead. A
    negative equal to the target (padding, or the same item by accident) does not count (GRU4Rec's
    code counts accidental hits); a target left with no negative adds 0 to the mean. "top1" (GRU4Rec's
    default) and "bpr": the means over the negatives of `top1_losses` and `bpr_losses`; "bpr_max"
    (GRU4Rec+'s default, `bpr_max_reg` its lambda) and "top1_max": the softmax-weighted sums of
    `bpr_max_losses` and `top1_max_losses`; "ce": softmax cross-entropy over every item.

    Features for training (from `GRU4RecTask.training_stream`):
        input_ids: int [batch, max_len] items, padded on the left with 0.
        positive_ids: int [batch, max_len] the next item at each position, 0 at padding.
        shared_negatives: int [batch, S] (GRU4Rec+) the batch's S extra negatives, the same in
            every row (the first row's are read).
        negatives: int [batch, C] (validation) each row's own negatives, which replace the batch's.

    Args:
        config: the model section of the configuration (or its dict form).
        **kwargs: passed to `keras.Model`.
    """

    def __init__(self, config: ModelConfig | dict, **kwargs):
        super().__init__(config, **kwargs)
        config = self.model_config
        self.embedding = keras.layers.Embedding(config.vocab_size, config.hidden_size,
                                                embeddings_initializer=kernel_initializer(), dtype=self.dtype_policy,
                                                name="item_embedding")
        # GRU4Rec's GRU: the reset gate applied before the recurrent kernel (reset_after=False).
        self.recurrent_layers = [keras.layers.GRU(config.hidden_size, return_sequences=True, reset_after=False,
                                                  dtype=self.dtype_policy, name=f"gru_{index}")
                                 for index in range(config.num_layers)]
        self.dropout = Dropout(config.hidden_dropout, dtype=self.dtype_policy, name="dropout")
        self.dropout.supports_masking = True  # element-wise: it passes on the GRU's padding mask

    def build(self, input_shape=None):
        """Creates every weight; the shapes come from the configuration."""
        config = self.model_config
        self.embedding.build()
        for layer in self.recurrent_layers:
            layer.build((None, None, config.hidden_size))
        self.output_items = self.add_weight(shape=(config.vocab_size, config.hidden_size),
                                            initializer=kernel_initializer(), name="output_items")
        self.output_bias = self.add_weight(shape=(config.vocab_size,), initializer=bias_initializer(),
                                           name="output_bias")
        self.built = True

    def encode(self, features: dict, training=None):
        """The state h_t after every position, float32 [batch, width, hidden] (dropout applied).

        The inputs are padded on the left: the state starts at zero and stays there through the
        padding, so a real item's state does not depend on how much padding precedes it.
        """
        if not self.built:
            self.build()
        ids = ops.cast(features["input_ids"], "int32")
        mask = ids != PAD_ID  # [batch, width]
        hidden = self.dropout(self.embedding(ids), training=training)  # [batch, width, hidden]
        for layer in self.recurrent_layers:
            hidden = self.dropout(layer(hidden, mask=mask, training=training), training=training)
        return ops.cast(hidden, "float32")

    def call(self, features: dict, training=None):
        """The states [batch, max_len, hidden]; the loss scores them."""
        return self.encode(features, training=training)

    def history_inputs(self, history) -> dict:
        """The latest max_len known items, padded on the left: `input_ids` int32 [batch, min(L, max_len)]."""
        items, _ = last_items(history, self.model_config.max_len, pad_left=True)
        return {"input_ids": items}

    def user_representation(self, history, training=None):
        """h after the newest item, float32 [batch, hidden_size]."""
        hidden = self.encode(self.history_inputs(history), training=training)  # [batch, width, hidden]
        return hidden[:, -1, :]

    def score_next(self, history, training=None):
        """h . W^T + b, float32 [batch, vocab_size]."""
        table = ops.cast(self.output_items, "float32")
        return ops.matmul(self.user_representation(history, training=training), ops.transpose(table)) + ops.cast(
            self.output_bias, "float32")

    def loss_terms(self, features):
        """The positions with a next item (the loss is their mean)."""
        return ops.sum(ops.cast(ops.not_equal(features["positive_ids"], PAD_ID), "float32"))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The configured loss over the positions with a next item (see the class docstring)."""
        positives = ops.cast(x["positive_ids"], "int32")  # [batch, width]
        width = ops.shape(positives)[1]
        flat_targets = ops.reshape(positives, (-1,))
        real = ops.nonzero(flat_targets)[0]  # [n] flat indices of the positions with a next item
        targets = ops.take(flat_targets, real)  # [n]
        sequence = ops.cast(y_pred, "float32")  # [batch, width, hidden]
        states = ops.take(ops.reshape(sequence, (-1, ops.shape(sequence)[-1])), real, axis=0)  # [n, hidden]
        table, bias = ops.cast(self.output_items, "float32"), ops.cast(self.output_bias, "float32")
        if self.model_config.loss == "ce":
            losses = tied_softmax_cross_entropy(states, table, bias, targets)
            return pooled_mean((losses, ops.ones_like(losses)))
        positive = ops.sum(states * ops.take(table, targets, axis=0), axis=-1) + ops.take(bias, targets)  # [n]
        if "negatives" in x:  # each row's own negatives
            ids = ops.take(ops.cast(x["negatives"], "int32"), real // width, axis=0)  # [n, C]
            scores = ops.einsum("nd,ncd->nc", states, ops.take(table, ids, axis=0)) + ops.take(bias, ids)
        else:  # the next items of the other rows at the same column
            column_rows = ops.take(table, positives, axis=0)  # [batch, width, hidden]
            grid = (ops.einsum("bwd,cwd->bwc", sequence, column_rows)
                    + ops.expand_dims(ops.transpose(ops.take(bias, positives)), 0))  # [batch, width, batch]
            scores = ops.take(ops.reshape(grid, (-1, ops.shape(positives)[0])), real, axis=0)  # [n, batch]
            ids = ops.take(ops.transpose(positives), real % width, axis=0)  # [n, batch]
        # (scores [n, k], whether each counts [n, k]): a negative that is padding or the target does not.
        blocks = [(scores, ops.logical_and(ids != PAD_ID, ids != ops.expand_dims(targets, -1)))]
        if "shared_negatives" in x:
            shared = ops.cast(x["shared_negatives"][0], "int32")  # [S] real items, the same in every row
            scores = ops.matmul(states, ops.transpose(ops.take(table, shared, axis=0))) + ops.take(bias, shared)
            blocks.append((scores, ops.expand_dims(shared, 0) != ops.expand_dims(targets, -1)))  # [n, S]
        negative_scores = ops.concatenate([scores for scores, _ in blocks], axis=-1)  # [n, K]
        valid = ops.concatenate([counted for _, counted in blocks], axis=-1)
        ranking = RANKING_LOSSES[self.model_config.loss]
        if self.model_config.loss == "bpr_max":
            losses = ranking(positive, negative_scores, valid, self.model_config.bpr_max_reg)
        else:
            losses = ranking(positive, negative_scores, valid)
        return pooled_mean((losses, ops.ones_like(losses)))
