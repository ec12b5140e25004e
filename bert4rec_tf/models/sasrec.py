"""SASRec (Kang & McAuley, ICDM 2018): causal self-attention over the latest items, next-item training."""

from __future__ import annotations

import keras
from keras import ops

from bert4rec_tf.config import ModelConfig
from bert4rec_tf.constants import PAD_ID
from bert4rec_tf.layers import ItemEmbedding
from bert4rec_tf.layers.code_sasrec_block import CODE_LAYER_NORM_EPSILON, CodeSASRecBlock
from bert4rec_tf.layers.feature_embedding import user_attribute_layer
from bert4rec_tf.models.base import (SequentialRecommender, fit_transformer_statistics, run_blocks,
                                     sampled_softmax_sampler, transformer_blocks)
from bert4rec_tf.models.history import last_items
from bert4rec_tf.models.losses import next_item_bce_loss, next_item_ce_loss, next_item_sampled_softmax_loss



@keras.saving.register_keras_serializable(package="bert4rec_tf")
class SASRec(SequentialRecommender):
    """SASRec as SPEC.md describes it, from the shared layers.

    F0 = LN(Dropout(E[item] + P[position])) over the latest max_len items padded at the beginning;
    `num_layers` post-LN blocks LN(x + Dropout(g(x))) with causal attention and a point-wise ReLU
    FFN of width `intermediate_size` (d in the paper); the score of item i after position l is
    F_l . E_i with the shared item table, no output bias and no transform.

    Loss (`config.loss`): "bce", the paper's binary cross-entropy of the next item against one
    negative per position (drawn by the input pipeline from items the user never had), padding
    ignored; "ce", softmax cross-entropy over all items at every non-padding position; or
    "sampled_softmax", its estimate over K negatives shared by the batch (not the paper's loss).

    Features for training (a dict of tensors, from `SASRecTask.training_stream`):
        input_ids: int [batch, max_len] items, padded on the left with 0.
        positive_ids: int [batch, max_len] the next item at each position, 0 at padding.
        negative_ids: int [batch, max_len] a sampled negative at each position ("bce").

    Args:
        config: the model section of the configuration (or its dict form).
        **kwargs: passed to `keras.Model`.
    """

    def __init__(self, config: ModelConfig | dict, **kwargs):
        super().__init__(config, **kwargs)
        config = self.model_config
        self.embedding = ItemEmbedding(
            vocab_size=config.vocab_size,
            hidden_size=config.hidden_size,
            max_len=config.max_len,
            hidden_dropout=config.hidden_dropout,
            use_position_embedding=config.use_position_embedding,
            dropout_before_norm=True,
            positions_from_end=True,
            scaled_no_norm=config.code_network,
            item_attributes=config.item_attributes,
            attributes_at_output=config.attributes_at_output,
            dtype=self.dtype_policy,
            name="embedding",
        )
        if config.code_network:
            self.transformer_blocks = [
                CodeSASRecBlock(hidden_size=config.hidden_size, num_heads=config.num_heads,
                                intermediate_size=config.intermediate_size, hidden_dropout=config.hidden_dropout,
                                attention_dropout=config.attention_dropout, dtype=self.dtype_policy,
                                name=f"transformer_block_{index}")
                for index in range(config.num_layers)]
            self.final_layer_norm = keras.layers.LayerNormalization(
                epsilon=CODE_LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="final_layer_norm")
        else:
            self.transformer_blocks = transformer_blocks(config, self.dtype_policy, causal=True, activation="relu")
        # With user attributes the model reads its users (`info`; `users=` when scoring).
        self.user_features = user_attribute_layer(config, self.dtype_policy)
        self.reads_users = self.user_features is not None
        self.sampler = sampled_softmax_sampler(config)
        # Decided again from the training data by `fit_statistics` when "auto".
        self.pack_positions = config.padding_free == "on"

    def build(self, input_shape=None):
        """Creates every weight; the shapes come from the configuration."""
        self.embedding.build()
        for block in self.transformer_blocks:
            block.build((None, self.model_config.max_len, self.model_config.hidden_size))
        if self.model_config.code_network:
            self.final_layer_norm.build((None, None, self.model_config.hidden_size))
        if self.user_features is not None:
            self.user_features.build()
        if self.sampler is not None:
            self.sampler.build()
        self.built = True

    def encode(self, features: dict, training=None, return_attention_scores: bool = False):
        """The causal Transformer's output [batch, width, hidden] (and per-layer attention).

        The inputs are padded on the left and may be narrower than max_len (a batch trimmed to its
        longest sequence): the last column is always position max_len - 1, so the output at a real
        item does not depend on how much padding precedes it.
        """
        if not self.built:
            self.build()
        padding_mask = ops.cast(features["input_ids"] != PAD_ID, "int32")
        hidden = self.embedding(features["input_ids"], training=training,
                                added=self.user_attribute_inputs(features))  # [b, n, hidden]
        code_network = self.model_config.code_network
        if code_network:  # the code zeroes the padding's inputs
            hidden = hidden * ops.cast(ops.expand_dims(padding_mask, -1), hidden.dtype)
        hidden, attention_scores = run_blocks(self.transformer_blocks, hidden, padding_mask, training,
                                               packed=self.pack_positions)
        if code_network:
            hidden = self.final_layer_norm(hidden)
        if return_attention_scores:
            return hidden, attention_scores
        return hidden

    def _item_scores(self, hidden):
        """hidden [..., d] . E^T -> float32 [..., vocab_size]."""
        table = ops.cast(self.embedding.output_table(), "float32")
        return ops.matmul(ops.cast(hidden, "float32"), ops.transpose(table))

    def call(self, features: dict, training=None):
        """The sequence output [batch, max_len, hidden]; the loss scores it."""
        return self.encode(features, training=training)

    def loss_terms(self, features):
        """The positions with a next item (the loss is their mean)."""
        return ops.sum(ops.cast(ops.not_equal(features["positive_ids"], 0), "float32"))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The configured loss over the non-padding positions (see the class docstring); "ce" for
        "sampled_softmax" (the exact loss that the sampled one estimates: the validation loss)."""
        positives = ops.cast(x["positive_ids"], "int32")
        if self.model_config.loss == "bce":
            return next_item_bce_loss(y_pred, self.embedding.output_table(), positives,
                                      ops.cast(x["negative_ids"], "int32"))
        return next_item_ce_loss(y_pred, self.embedding.output_table(), positives)

    def training_loss(self, features: dict, labels=None):
        """`compute_loss` of the training forward pass; with `--loss sampled_softmax`, the sampled
        softmax over K negatives shared by the batch (`next_item_sampled_softmax_loss`)."""
        if self.sampler is None:
            return super().training_loss(features, labels)
        return next_item_sampled_softmax_loss(self(features, training=True), self.embedding.output_table(),
                                              ops.cast(features["positive_ids"], "int32"), self.sampler(),
                                              self.sampler.log_q)

    def fit_statistics(self, train_sequences: list) -> None:
        """The sampled softmax's sampler takes the items' training counts; `model.padding_free` "auto"
        is decided by how full the training windows are (`packs_positions`); the code network's blocks
        never run packed."""
        fit_transformer_statistics(self, train_sequences)
        self.pack_positions = self.pack_positions and not self.model_config.code_network

    def history_inputs(self, history) -> dict:
        """The latest max_len known items, padded on the left: `input_ids` int32 [batch, min(L, max_len)]."""
        items, _ = last_items(history, self.model_config.max_len, pad_left=True)
        return {"input_ids": items}

    def user_representation(self, history, training=None, users=None):
        """F at the last position (the newest item), float32 [batch, hidden_size] (`users`: model user
        ids [batch], for a model with user attributes)."""
        hidden = self.encode(self.with_users(self.history_inputs(history), users),
                             training=training)  # [batch, width, hidden]
        return ops.cast(hidden[:, -1, :], "float32")

    def score_next(self, history, training=None, users=None):
        """F_last . E^T, float32 [batch, vocab_size]."""
        return self._item_scores(self.user_representation(history, training=training, users=users))
