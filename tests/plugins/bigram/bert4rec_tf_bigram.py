"""The example model family of docs/architecture.md: a bigram model, as a plugin in one file.

It scores the next item from the last item alone (a first-order Markov chain with learned
embeddings): the user vector is the last item's input embedding, and the scores are its inner
products with an output table plus a bias. Its training stream is every (item, next item) pair of
the training sequences, shuffled from the data seed.

Everything the package needs from a family is here: its configuration (the model section's class),
the model (a `SequentialRecommender`), and the Task with its preset, its stream and its
validation-loss features. The distribution's pyproject.toml declares the Task in the entry-point
group `bert4rec_tf.tasks`; once it is installed, `bert4rec-train --model bigram`, `api.train`,
`bert4rec-reproduce --only` and the shared Task harness take it, and no file of the package names it.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert4rec_tf.config import DataConfig, EmbeddingPart, ExperimentConfig, TrainConfig, TrainedModelConfig
from bert4rec_tf.models.base import SequentialRecommender
from bert4rec_tf.tasks.base import Task, history_features


@dataclasses.dataclass
class BigramConfig(EmbeddingPart, TrainedModelConfig):
    """The bigram model's settings: d (`hidden_size`, from `EmbeddingPart`) and its loss.

    Attributes:
        loss: "ce", the softmax cross-entropy of the next item over the vocabulary.
    """

    name: str = "bigram"
    loss: str = "ce"
    losses: ClassVar[tuple[str, ...]] = ("ce",)


@keras.saving.register_keras_serializable(package="bert4rec_tf_example")
class Bigram(SequentialRecommender):
    """Next-item scores from the last item: E_in[last] . E_out^T + b.

    Features: `input_ids` int [batch, L] (the last non-zero id is read) and, in training,
    `positive_ids` int [batch] the next item.
    """

    def build(self, input_shape=None):
        vocab, width = self.model_config.vocab_size, self.model_config.hidden_size
        self.inputs_table = keras.layers.Embedding(vocab, width, name="input_items")
        self.outputs_table = keras.layers.Embedding(vocab, width, name="output_items")
        self.inputs_table.build((None,))
        self.outputs_table.build((None,))
        self.bias = self.add_weight(shape=(vocab,), initializer="zeros", name="output_bias")
        self.built = True

    def history_inputs(self, history) -> dict:
        return {"input_ids": ops.convert_to_tensor(history, dtype="int32")}

    def user_representation(self, history, training=None):
        ids = self.history_inputs(history)["input_ids"]  # [batch, L]
        positions = ops.arange(ops.shape(ids)[1])[None, :]
        last = ops.max(ops.where(ids != 0, positions, -1), axis=1)  # [batch], -1: no item
        items = ops.take_along_axis(ids, ops.maximum(last, 0)[:, None], axis=1)[:, 0]
        return self.inputs_table(ops.where(last >= 0, items, 0))  # [batch, d]

    def score_next(self, history, training=None):
        user = self.user_representation(history, training=training)
        return ops.matmul(user, ops.transpose(self.outputs_table.embeddings)) + self.bias  # [batch, vocab]

    def call(self, features, training=None):
        return self.score_next(features["input_ids"], training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return ops.mean(ops.sparse_categorical_crossentropy(x["positive_ids"], y_pred, from_logits=True))


class BigramTask(Task):
    """The bigram family: (item, next item) pairs, softmax over the vocabulary."""

    name = "bigram"
    presets = {"bigram": {"*": {"learning_rate": 1e-2}}}
    data_config = DataConfig  # it reads the newest item of a history, no window
    model_config = BigramConfig
    train_config = TrainConfig

    def model_class(self):
        return Bigram

    def training_stream(self, config: ExperimentConfig, prepared, train: list[np.ndarray]):
        pairs = np.concatenate([np.stack([items[:-1], items[1:]], axis=1) for items in train if len(items) > 1])
        dataset = tf.data.Dataset.from_tensor_slices({"input_ids": pairs[:, :1].astype(np.int32),
                                                      "positive_ids": pairs[:, 1].astype(np.int32)})
        dataset = dataset.repeat().shuffle(10_000, seed=config.data.seed)
        return lambda start: dataset.skip(start).batch(config.train.batch_size, drop_remainder=True).prefetch(2)

    def loss_features(self, model, histories, targets, negatives, users=None):
        return {**history_features(model, histories), "positive_ids": np.asarray(targets, dtype=np.int32)}
