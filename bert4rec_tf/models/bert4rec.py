"""BERT4Rec: a bidirectional Transformer over item sequences with a tied masked-item head."""

from __future__ import annotations

import keras
from keras import ops

from bert4rec_tf.config import ModelConfig
from bert4rec_tf.layers import ItemEmbedding, MaskedItemHead
from bert4rec_tf.layers.feature_embedding import user_attribute_layer
from bert4rec_tf.models.base import (SequentialRecommender, fit_transformer_statistics, run_blocks,
                                     sampled_softmax_sampler, transformer_blocks)
from bert4rec_tf.models.history import last_items
from bert4rec_tf.models.losses import masked_lm_loss, pooled_mean
from bert4rec_tf.models.softmax import sampled_softmax_cross_entropy, tied_softmax_cross_entropy


def real_slot_indices(masked_lm_weights, capacity: int | None = None):
    """Flat indices of the masked slots that hold a prediction (weight > 0).

    Args:
        masked_lm_weights: float [batch, P], 0 for padding slots.
        capacity: None: exactly the real slots, a dynamic count. An int C <= batch * P: a static
            count of C slots, the real ones first (in slot order) then padding slots (weight 0),
            which XLA needs; real slots beyond the first C are left out.

    Returns:
        int [num_real] (or [capacity]) indices into the row-major flattened [batch * P] slots.
    """
    is_real = ops.cast(ops.reshape(masked_lm_weights, (-1,)) > 0, "int32")  # [batch * P]
    if capacity is None:
        return ops.nonzero(is_real)[0]
    # Each slot's place in the packed order: real slots first, then padding, each in slot order.
    # A scatter, not a sort: XLA on CPU runs sort-based compaction (top_k, argsort) ~15x slower.
    place = ops.where(
        is_real > 0, ops.cumsum(is_real) - 1, ops.sum(is_real) + ops.cumsum(1 - is_real) - 1
    )
    slots = ops.arange(ops.shape(is_real)[0], dtype="int32")
    order = ops.scatter(ops.expand_dims(place, 1), slots, ops.shape(is_real))  # [batch * P]
    return order[:capacity]


def _flat_positions(positions, seq_len):
    """Row-major indices into [batch * seq_len] of per-row positions [batch, ...]."""
    batch = ops.shape(positions)[0]
    offsets = ops.arange(batch, dtype=positions.dtype) * ops.cast(seq_len, positions.dtype)
    return positions + ops.reshape(offsets, (-1,) + (1,) * (len(positions.shape) - 1))


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class BERT4Rec(SequentialRecommender):
    """BERT4Rec (Sun et al., CIKM 2019): ItemEmbedding -> L TransformerBlocks -> MaskedItemHead.

    The head reads the embedding layer's item table (tied weights) and always runs in float32,
    so under a mixed precision policy the logits and the loss stay float32.

    Features (a dict of tensors):
        input_ids: int [batch, seq_len], 0 padding, items 1..n, [MASK] = vocab_size - 1;
            sequences are padded on the right.
        input_mask: int [batch, seq_len], 1 at items (and [MASK]), 0 at padding.
        masked_lm_positions: int [batch, P] positions whose logits are wanted.
        masked_lm_weights: float [batch, P], 0 for padding slots.
        masked_lm_ids: int [batch, P] true items; read by `compute_loss` when no `y` is given.

    Args:
        config: the model section of the experiment configuration (or its dict form).
        packed: compute the head and logits only for real slots (weight > 0): `call` then returns
            [num_real, vocab_size] in row-major slot order instead of [batch, P, vocab_size]. The
            loss is the same; the work on the padding slots of P is skipped.
        packed_capacity: with `packed`, a static number of slots per batch instead of the
            dynamic count (needed under XLA, where dynamic shapes are very slow): `call` returns
            [packed_capacity, vocab_size], real slots first, padding slots after with weight 0
            in the loss. Must be at most batch * P and should cover every batch's real slots:
            real slots beyond it are left out of the loss.
        **kwargs: passed to `keras.Model` (name, dtype, ...).

    Example:
        >>> model = BERT4Rec(BERT4RecConfig(vocab_size=3418))  # bert4rec_tf.tasks.bert4rec
        >>> model.compile(optimizer=keras.optimizers.AdamW(1e-4))
        >>> model.fit(features, features["masked_lm_ids"], batch_size=256)
        >>> scores = model.score_next(history)  # [batch, vocab_size]
    """

    # Tokens a subclass adds after the vocabulary (their rows in the item table, positions in front
    # of the sequence); their logits are never returned.
    EXTRA_TOKENS = 0

    def __init__(
        self,
        config: ModelConfig | dict,
        packed: bool = False,
        packed_capacity: int | None = None,
        **kwargs,
    ):
        super().__init__(config, **kwargs)
        config = self.model_config
        self.packed = packed
        self.packed_capacity = packed_capacity
        self.embedding = ItemEmbedding(
            vocab_size=config.vocab_size + self.EXTRA_TOKENS,
            hidden_size=config.hidden_size,
            max_len=config.max_len + self.EXTRA_TOKENS,
            hidden_dropout=config.hidden_dropout,
            use_position_embedding=config.use_position_embedding,
            item_attributes=config.item_attributes,
            attributes_at_output=config.attributes_at_output,
            dtype=self.dtype_policy,
            name="embedding",
        )
        self.transformer_blocks = transformer_blocks(config, self.dtype_policy)
        self.head = MaskedItemHead(self.embedding, dtype="float32", name="masked_item_head")
        # With user attributes the model reads its users (`info`; `users=` when scoring).
        self.user_features = user_attribute_layer(config, self.dtype_policy)
        self.reads_users = self.user_features is not None
        self.sampler = sampled_softmax_sampler(config)
        # Decided again from the training data by `fit_statistics` when "auto".
        self.pack_positions = config.padding_free == "on"

    def build(self, input_shape=None):
        """Creates every weight; the shapes come from the configuration, not `input_shape`."""
        self.embedding.build()
        for block in self.transformer_blocks:
            block.build((None, self.model_config.max_len + self.EXTRA_TOKENS, self.model_config.hidden_size))
        self.head.build()
        if self.user_features is not None:
            self.user_features.build()
        if self.sampler is not None:
            self.sampler.build()
        self.built = True

    def fit_statistics(self, train_sequences: list) -> None:
        """The sampled softmax's sampler takes the items' training counts; `model.padding_free` "auto"
        is decided by how full the training windows are (`packs_positions`)."""
        fit_transformer_statistics(self, train_sequences)

    def encode(self, features: dict, training=None, return_attention_scores: bool = False):
        """The Transformer's sequence output.

        Args:
            features: dict with `input_ids` and `input_mask`, int [batch, seq_len].
            training: enables dropout.
            return_attention_scores: also return each layer's attention probabilities.

        Returns:
            [batch, seq_len, hidden_size], and with `return_attention_scores` also a list of
            num_layers tensors [batch, num_heads, seq_len, seq_len].
        """
        if not self.built:
            self.build()
        hidden = self.embedding(features["input_ids"], training=training,
                                added=self.user_attribute_inputs(features))  # [b, n, hidden]
        hidden, attention_scores = run_blocks(self.transformer_blocks, hidden, features["input_mask"], training,
                                               packed=self.pack_positions)
        if return_attention_scores:
            return hidden, attention_scores
        return hidden

    def _states_at(self, sequence_output, flat_positions):
        """The rows at row-major positions [...] of sequence_output [batch, seq_len, hidden]: [..., hidden]."""
        flat_output = ops.reshape(sequence_output, (-1, self.model_config.hidden_size))
        return ops.take(flat_output, flat_positions, axis=0)

    def _logits_at(self, sequence_output, flat_positions):
        """Head logits at row-major positions [...] of sequence_output [batch, seq_len, hidden]."""
        logits = self.head(self._states_at(sequence_output, flat_positions))  # [..., vocab + extra tokens]
        return logits[..., :self.model_config.vocab_size] if self.EXTRA_TOKENS else logits

    def call(self, features: dict, training=None):
        """Logits at the masked positions.

        Args:
            features: dict with `input_ids`, `input_mask`, `masked_lm_positions` and (packed)
                `masked_lm_weights`; see the class docstring.
            training: enables dropout.

        Returns:
            float32 [batch, P, vocab_size]; when `packed`, [num_real, vocab_size] or
            [packed_capacity, vocab_size].
        """
        return self._masked_logits(features, self.encode(features, training=training))

    def _slot_positions(self, features: dict, seq_len):
        """Row-major positions into [batch * seq_len] of the masked slots: [batch, P], or when
        `packed` [num_real] (or [packed_capacity])."""
        positions = ops.cast(features["masked_lm_positions"], "int32")
        flat_positions = _flat_positions(positions, seq_len)  # [batch, P]
        if self.packed:
            flat_positions = ops.take(
                ops.reshape(flat_positions, (-1,)),
                real_slot_indices(features["masked_lm_weights"], self.packed_capacity),
            )  # [num_real] or [packed_capacity]
        return flat_positions

    def _masked_logits(self, features: dict, sequence_output):
        """Logits at the masked positions of sequence_output [batch, seq, hidden] (see `call`)."""
        return self._logits_at(sequence_output, self._slot_positions(features, ops.shape(sequence_output)[1]))

    def training_loss(self, features: dict, labels=None):
        """The training step's loss, equal to `compute_loss(features, labels, self(features, training=True))`,
        computed without forming the logits' gradient (`tied_softmax_cross_entropy`); with `--loss
        sampled_softmax`, the sampled softmax over K negatives shared by the batch instead (not the
        paper's loss; `compute_loss`, the validation loss, stays the exact cross-entropy)."""
        return pooled_mean(self._masked_slot_losses(features, labels, self.encode(features, training=True)))

    def _masked_slot_losses(self, features: dict, labels, sequence_output, table=None):
        """(cross-entropy, weight) of every masked slot, flat, from the sequence output [batch, seq, hidden],
        the head and the loss fused; `table`: the step's `embedding.output_table()`, when the caller
        has it already (None: read here)."""
        flat_positions = ops.reshape(self._slot_positions(features, ops.shape(sequence_output)[1]), (-1,))
        hidden = self.head.transform_hidden(ops.cast(self._states_at(sequence_output, flat_positions), "float32"))
        labels, weights = self._slot_targets(features, labels)
        vocab = self.model_config.vocab_size
        table = self.embedding.output_table() if table is None else table
        bias, labels = self.head.output_bias, ops.reshape(labels, (-1,))
        if self.sampler is None:
            if table.shape[0] != vocab:  # extra tokens' rows (a slice's gradient is a copy of the table)
                table, bias = table[:vocab], bias[:vocab]
            losses = tied_softmax_cross_entropy(hidden, table, bias, labels)
        else:  # --loss sampled_softmax: K negatives for the whole batch. The whole variables, read at a
            # few rows: their gradients stay sparse (a slice's would be dense).
            losses = sampled_softmax_cross_entropy(hidden, table, bias, labels, self.sampler(), self.sampler.log_q)
        return losses, ops.reshape(weights, (-1,))

    def _slot_targets(self, features: dict, labels=None):
        """(true items, weights) of the masked slots, laid out as `_slot_positions`."""
        labels = features["masked_lm_ids"] if labels is None else labels
        weights = features["masked_lm_weights"]
        if self.packed:
            index = real_slot_indices(weights, self.packed_capacity)
            labels = ops.take(ops.reshape(labels, (-1,)), index)  # [num_real]
            weights = ops.take(ops.reshape(weights, (-1,)), index)  # [num_real]
        return ops.cast(labels, "int32"), weights

    @property
    def mask_token(self) -> int:
        """The [MASK] id: the first id after the real items."""
        return self.model_config.vocab_size - 1

    def history_inputs(self, history) -> dict:
        """The last max_len - 1 known items with [MASK] appended, right-padded.

        Args:
            history: int [batch, L] model item ids, oldest first, 0 anywhere for none.

        Returns:
            `input_ids` and `input_mask`, int32 [batch, min(L + 1, max_len)]: a batch of short
            histories gives a narrower input.
        """
        items, lengths = last_items(history, self.model_config.max_len - 1)  # [batch, width - 1], [batch]
        items = ops.pad(items, ((0, 0), (0, 1)))  # [batch, width]
        positions = ops.expand_dims(ops.arange(ops.shape(items)[1], dtype="int32"), 0)
        at_mask = positions == ops.expand_dims(lengths, 1)
        return {"input_ids": ops.where(at_mask, self.mask_token, items),
                "input_mask": ops.cast(positions <= ops.expand_dims(lengths, 1), "int32")}

    def score_last(self, features: dict, training=None):
        """Logits at each row's last real position (the appended [MASK]), for ranking.

        Args:
            features: dict with `input_ids` and `input_mask`, int [batch, seq_len], padded on
                the right; the last real position is sum(input_mask) - 1.
            training: enables dropout (normally off).

        Returns:
            float32 [batch, vocab_size].
        """
        sequence_output = self.encode(features, training=training)  # [batch, seq, hidden]
        last = ops.sum(ops.cast(features["input_mask"], "int32"), axis=1) - 1  # [batch]
        return self._logits_at(sequence_output, _flat_positions(last, ops.shape(sequence_output)[1]))

    def score_next(self, history, training=None, users=None):
        """Logits at the [MASK] appended to each history, float32 [batch, vocab_size] (`users`: model
        user ids [batch], for a model with user attributes)."""
        return self.score_last(self.with_users(self.history_inputs(history), users), training=training)

    def user_representation(self, history, training=None, users=None):
        """The head's transformed state at the appended [MASK], float32 [batch, hidden_size].

        `score_next` is this vector times the item table, plus the output bias.
        """
        features = self.with_users(self.history_inputs(history), users)
        sequence_output = self.encode(features, training=training)  # [batch, seq, hidden]
        last = ops.sum(ops.cast(features["input_mask"], "int32"), axis=1) - 1  # [batch]
        hidden = self._states_at(sequence_output, _flat_positions(last, ops.shape(sequence_output)[1]))
        return ops.cast(self.head.transform_hidden(ops.cast(hidden, "float32")), "float32")

    def loss_terms(self, features):
        """The masked slots of the batch (the loss is their weighted mean): sum of `masked_lm_weights`."""
        return ops.sum(ops.cast(features["masked_lm_weights"], "float32"))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Weighted masked-item cross-entropy (see `masked_lm_loss`).

        Args:
            x: the features; `masked_lm_weights` weights the slots.
            y: int [batch, P] true items; None: `x["masked_lm_ids"]`.
            y_pred: the output of `call`.
            sample_weight: unused; the slot weights come from the features.
            training: unused.

        Returns:
            Scalar float32 loss.
        """
        labels, weights = self._slot_targets(x, y)
        return masked_lm_loss(labels, y_pred, weights)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(packed=self.packed, packed_capacity=self.packed_capacity)
        return config
