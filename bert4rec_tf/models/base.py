"""The boundary between a sequential recommender and the shared training, evaluation and export code.

A model is a `SequentialRecommender` subclass. The trainer, the evaluator, the serving export,
TensorBoard and the checkpoints only use what is declared here (what feeds a model in training, and
how it is built, is its Task's: `bert4rec_tf.tasks`):

- `history_inputs(history)`: how a raw history becomes the model's input;
- `score_next(history)`: scores of every vocabulary entry as the next item, [batch, vocab_size];
- `user_representation(history)`: the user vector the model scores with, [batch, d];
- `call(features)` and `compute_loss(x, y_pred)`: the training forward pass and loss, and
  `training_loss(features)`, the two together in the training step (a model may fuse them);
- `fit_statistics(train_sequences)`: counts a model takes from the training data before training.

`history` is int [batch, L] model item ids, oldest first, any L; 0 (padding or an unknown id) may
appear anywhere and is skipped. A model that learns a vector per training user (`reads_users`) also
takes `users`, int [batch] model user ids (1..`num_users` of its configuration; 0 is no known user),
as a keyword of `score_next` and `user_representation`; the evaluator and the serving export pass it
only to such a model. `train_step` is shared: it also reports the global norm of the
gradient (before clipping) and the learning rate.
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert4rec_tf.config import PADDING_FREE_CHOICES, ModelConfig, model_section
from bert4rec_tf.layers import TransformerBlock


class SequentialRecommender(keras.Model):
    """Base class of every model; see the module docstring for the contract.

    Args:
        config: the model section of the configuration, its family's class
            (`bert4rec_tf.config.model_section`), or its dict form; `vocab_size` set.
        **kwargs: passed to `keras.Model`.

    Raises:
        ValueError: when `config.vocab_size` is not set, or a setting is out of range (`Section.check`).
    """

    # True: the model scores with a vector per training user and needs `users` (see the module docstring).
    reads_users: bool = False
    # True: `score_items` costs far less than `score_next` for a few items (NCF scores each (user, item)
    # pair through its MLP), so the sampled protocols score only each user's target and candidates.
    scores_chosen_items: bool = False
    # Whether the Transformer blocks pack the real positions of a batch (padding-free); None: the
    # model has no such blocks.
    pack_positions: bool | None = None
    # The users' attribute embedding (`layers.FeatureEmbedding`) a model trained with user attributes
    # adds at every position of its input (`user_attribute_inputs`); None: the model reads none.
    user_features = None

    def __init__(self, config: ModelConfig | dict, **kwargs):
        super().__init__(**kwargs)
        config = model_section(config)
        if config.vocab_size <= 0:
            raise ValueError(f"vocab_size must be set from the data, got {config.vocab_size}")
        config.check()  # its loss one of the family's, its sizes in range
        self.model_config = config

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(config=dataclasses.asdict(self.model_config))
        return config

    def history_inputs(self, history) -> dict:
        """The model's input features for raw histories int [batch, L]."""
        raise NotImplementedError

    def score_next(self, history, training=None):
        """float32 [batch, vocab_size]: the score of every vocabulary entry as the next item (a model
        that `reads_users` also takes `users=`)."""
        raise NotImplementedError

    def score_items(self, history, items, training=None, **users):
        """float32 [batch, n]: what `score_next` gives the item ids `items` int [batch, n] (`users=` as
        for `score_next`)."""
        return ops.take_along_axis(self.score_next(history, training=training, **users), ops.cast(items, "int32"),
                                   axis=1)

    def user_representation(self, history, training=None):
        """float32 [batch, d]: the user vector that `score_next` scores the items with."""
        raise NotImplementedError

    def fit_statistics(self, train_sequences: list) -> None:
        """Takes what the model needs from the training sequences (nothing by default)."""

    def user_attribute_inputs(self, features: dict):
        """The user attributes' embedding [batch, 1, d] to add at every position of the input, from
        `features["info"]` (int [batch, 1], model user ids, 0: unknown, as in the training instances);
        None for a model without user attributes (`user_features` None)."""
        if self.user_features is None:
            return None
        if "info" not in features:
            raise ValueError("this model reads user attributes: its inputs need the users (`info`, or users= when "
                             "scoring)")
        return self.user_features(ops.cast(features["info"], "int32"))  # [batch, 1, d]

    def with_users(self, features: dict, users) -> dict:
        """`features` with `info` [batch, 1] from model user ids `users` [batch] for a model with user
        attributes; `features` as they are otherwise."""
        if self.user_features is None:
            return features
        if users is None:
            raise ValueError("this model reads user attributes: score with users=")
        return {**features, "info": ops.reshape(ops.cast(users, "int32"), (-1, 1))}

    def set_attributes(self, features: dict) -> None:
        """Gives every `FeatureEmbedding` of the model the attributes of its ids.

        Args:
            features: "item" (and "user") -> `bert4rec_tf.data.features.EncodedFeatures` of the
                prepared data (`PreparedData.features`); rows a model adds after them (its extra
                tokens) get no attribute.

        Raises:
            ValueError: the model reads attributes the data lack.
        """
        from bert4rec_tf.layers.feature_embedding import FeatureEmbedding

        for layer in self._flatten_layers():
            if isinstance(layer, FeatureEmbedding):
                encoded = features.get(layer.of)
                if encoded is None:
                    raise ValueError(f"the model reads {layer.of} attributes; the data have none")
                rows = len(next(iter(encoded.arrays.values())))
                layer.assign_values(encoded.arrays, extra_rows=layer.rows - rows)

    def training_loss(self, features: dict, labels=None):
        """The loss of one training batch with dropout on: `compute_loss` of `self(features, training=True)`
        (a model may compute the same value faster, e.g. BERT4Rec's fused head and loss)."""
        return self.compute_loss(x=features, y=labels, y_pred=self(features, training=True))

    def loss_terms(self, features):
        """The number of terms the loss of this batch averages (None: unknown; the replicas of a
        distributed step then weigh equally)."""
        return None

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        """Skips Keras' build from a data batch when every layer is built already (always, after
        `Task.build_model`). Under a strategy, Keras 3 would reduce the first batch's dict of per-replica
        values with "MEAN" across replicas, which fails under MultiWorkerMirroredStrategy."""
        if self._distribute_strategy is None or not all(layer.built for layer in self._flatten_layers()):
            return super()._maybe_symbolic_build(iterator, data_batch)
        with self.distribute_strategy.scope():
            self._symbolic_build(data_batch={})

    def train_step(self, data):
        """One optimisation step that also logs `grad_norm` (before clipping) and `learning_rate`.

        `data` is the features, or (features, labels) as `fit(x, y)` passes them.

        Under a `tf.distribute` strategy with several replicas, each replica's loss is weighted by its
        share of the global batch's loss terms (`loss_terms`; equal shares when None) and the
        replicas' gradients are summed here (all-reduce), so `grad_norm`, the clipping and the update
        all use the gradient of the whole global batch, as on one device (the optimizer,
        `bert4rec_tf.training.optimization.AdamW`, does not sum them again).
        The step is TensorFlow's (tf.GradientTape), as `model.fit` runs on the TensorFlow backend.
        """
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        features, labels, _ = keras.utils.unpack_x_y_sample_weight(data)
        share = 1.0 / replicas
        terms = self.loss_terms(features) if replicas > 1 else None
        if terms is not None:
            # The loss is a mean over this replica's terms: weighted by its share of the global batch's
            # terms, the replicas' gradients sum to the gradient of the whole batch's mean.
            terms = tf.cast(terms, tf.float32)
            total = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, terms)
            share = tf.math.divide_no_nan(terms, total)
        with tf.GradientTape() as tape:
            loss = self.training_loss(features, labels)
            scaled = self.optimizer.scale_loss(loss * share)
        gradients = tape.gradient(scaled, self.trainable_variables)
        # Lookups give IndexedSlices whose rows may repeat (an item twice in a batch, the position rows
        # of two replicas): made dense, the norm, the clipping and the all-reduce see the true gradient.
        # An optimizer that updates sparse rows (`SparseRowsAdamW`) gets them with each row once
        # instead, on one replica.
        sparse = getattr(self.optimizer, "updates_sparse_rows", False) and replicas == 1
        gradients = [(unique_rows(g) if sparse else tf.convert_to_tensor(g)) if isinstance(g, tf.IndexedSlices) else g
                     for g in gradients]
        if replicas > 1:
            gradients = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        norm = tf.linalg.global_norm(gradients)
        rate = self.optimizer.learning_rate  # the rate of this step
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        self._loss_tracker.update_state(loss * share * replicas)  # the replicas' mean is the batch's loss
        logs = {"loss": self._loss_tracker.result(), "grad_norm": norm, "learning_rate": tf.convert_to_tensor(rate)}
        if isinstance(tf.distribute.get_strategy(), tf.distribute.MultiWorkerMirroredStrategy):
            # Keras 3 averages the replicas' logs with strategy.reduce("MEAN", value, axis=0) under this
            # strategy, which needs an axis to average over: give each value one.
            logs = {name: tf.reshape(value, [1]) for name, value in logs.items()}
        return logs


def unique_rows(gradient: tf.IndexedSlices) -> tf.IndexedSlices:
    """`gradient` with each row once, the values of a repeated row summed (as in its dense form)."""
    rows, position = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(gradient.values, position, tf.shape(rows)[0])
    return tf.IndexedSlices(values, rows, gradient.dense_shape)


def transformer_blocks(config: ModelConfig, dtype, causal: bool = False, activation: str = "gelu") -> list:
    """The `config.num_layers` Transformer blocks of a model, with the configuration's ablations."""
    return [
        TransformerBlock(
            hidden_size=config.hidden_size,
            num_heads=config.num_heads,
            intermediate_size=config.intermediate_size,
            hidden_dropout=config.hidden_dropout,
            attention_dropout=config.attention_dropout,
            use_ffn=config.use_ffn,
            use_layer_norm=config.use_layer_norm,
            use_residual=config.use_residual,
            causal=causal,
            activation=activation,
            dtype=dtype,
            name=f"transformer_block_{index}",
        )
        for index in range(config.num_layers)
    ]


# The packed rows are padded to a multiple of this: the fused GELU (`bert4rec_tf.layers.fused`) is
# compiled by XLA once per shape, and an exact count of real positions would be a new shape, so a
# new compilation, at nearly every step.
PACKED_ROWS_MULTIPLE = 256

# `model.padding_free` "auto" packs the real positions when the training windows are on average
# less full than this (`window_fill`). Packing costs a gather and a scatter around every attention
# layer: on Beauty's windows (13% full) it pays, on ML-1m's (57%) it costs more than it saves.
PACK_BELOW_FILL = 0.5


def window_fill(train_sequences: list, max_len: int) -> float:
    """The share of the training windows' positions that hold an item: each history cut into
    ceil(n / max_len) windows of `max_len` (at least one), over all users (1.0 when none)."""
    lengths = np.asarray([len(sequence) for sequence in train_sequences], dtype=np.float64)
    windows = np.maximum(1.0, np.ceil(lengths / max_len))
    return float(lengths.sum() / (windows.sum() * max_len)) if len(lengths) else 1.0


def packs_positions(choice: str, train_sequences: list, max_len: int) -> bool:
    """Whether the Transformer blocks run on the real positions only (`run_blocks(packed=True)`):
    `model.padding_free` "on", or "auto" with training windows under `PACK_BELOW_FILL` full."""
    if choice not in PADDING_FREE_CHOICES:
        raise ValueError(f"padding_free must be one of {', '.join(PADDING_FREE_CHOICES)}, got {choice!r}")
    return choice == "on" or (choice == "auto" and window_fill(train_sequences, max_len) < PACK_BELOW_FILL)


def fit_transformer_statistics(model, train_sequences: list) -> None:
    """What the Transformer models (BERT4Rec, SASRec) take from the training sequences: the sampled
    softmax's item counts, and whether their blocks run packed (`model.padding_free`)."""
    fit_sampler(model.sampler, train_sequences)
    model.pack_positions = packs_positions(model.model_config.padding_free, train_sequences,
                                           model.model_config.max_len)


def run_blocks(blocks: list, hidden, padding_mask, training=None, packed: bool = False):
    """Runs `hidden` [batch, seq_len, d] through `blocks`; returns it and each block's attention.

    With `packed` (a Python bool, fixed when the model is built: `packs_positions`), only the real
    positions (`padding_mask` 1) are kept, packed, between the blocks: each block's per-position
    work (projections, dropouts, residual additions, LayerNorms, the feed-forward network) skips the
    padding (`TransformerBlock.call_packed`) and the output holds zeros at the padding. At the real
    positions the outputs, and the loss and gradients of what reads them, equal the whole window's
    within float32 rounding (with dropout on, the random masks differ).
    """
    if not packed or not blocks:
        attention_scores = []
        for block in blocks:
            hidden, probs = block(hidden, padding_mask=padding_mask, training=training, return_attention_scores=True)
            attention_scores.append(probs)  # [batch, heads, seq_len, seq_len]
        return hidden, attention_scores
    for block in blocks:
        if not block.built:
            block.build(hidden.shape)
    real_mask = tf.not_equal(padding_mask, 0)
    real = tf.where(real_mask)  # int64 [num_real, 2]
    count = tf.shape(real, out_type=tf.int64)[0]
    multiple = PACKED_ROWS_MULTIPLE if training else 1  # inference runs the plain GELU, compiled for no shape
    rows = (count + multiple - 1) // multiple * multiple
    # The packed rows past the real ones are copies of the first position, which no output reads.
    index = tf.concat([real, tf.zeros(tf.stack([rows - count, 2]), tf.int64)], axis=0)  # [rows, 2]
    shape = tf.shape(hidden, out_type=tf.int64)
    packed_rows = tf.gather_nd(hidden, index)
    attention_scores = []
    for block in blocks:
        packed_rows, probs = block.call_packed(packed_rows, index, count, shape, padding_mask, training=training)
        attention_scores.append(probs)
    return tf.scatter_nd(real, packed_rows[:count], shape), attention_scores


def sampled_softmax_sampler(config: ModelConfig):
    """The negatives' sampler of `--loss sampled_softmax` (`config.sampled_negatives` items a batch,
    drawn by training popularity ** `config.negative_alpha`); None for any other loss."""
    if config.loss != "sampled_softmax":
        return None
    from bert4rec_tf.layers.catalogue_sampler import CatalogueSampler

    return CatalogueSampler(config.vocab_size, config.sampled_negatives, config.negative_alpha,
                            name="catalogue_sampler")


def fit_sampler(sampler, train_sequences: list) -> None:
    """Gives `sampler` (None: nothing to do) every item's count in the training sequences."""
    if sampler is None:
        return
    if not sampler.built:
        sampler.build()
    from bert4rec_tf.data.negatives import item_counts

    sampler.fit_counts(item_counts(train_sequences, sampler.vocab_size))
