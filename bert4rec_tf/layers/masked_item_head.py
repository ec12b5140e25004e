"""The tied output head: logits over the item vocabulary from the input item embedding."""

import keras
from keras import ops

from bert4rec_tf.constants import LAYER_NORM_EPSILON
from bert4rec_tf.layers.initializers import bias_initializer, kernel_initializer
from bert4rec_tf.layers.item_embedding import ItemEmbedding


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class MaskedItemHead(keras.layers.Layer):
    """logits = LN(GELU(Dense(h))) . E^T + b, with E the embedding layer's item table.

    The head holds the `ItemEmbedding` layer itself, not a copy of its weights, so a single
    variable serves the input lookup and the output projection; inside a model that owns the
    same embedding layer, saving and reloading keep it single. Standing alone, its config
    carries the embedding layer's config, so it reloads with its own table.

    Args:
        embedding: the model's `ItemEmbedding`; its vocab_size and hidden_size size the head.
        **kwargs: passed to `keras.layers.Layer`.
    """

    def __init__(self, embedding: ItemEmbedding, **kwargs):
        super().__init__(**kwargs)
        self.embedding = embedding

    def build(self, input_shape=None):
        hidden_size = self.embedding.hidden_size
        if not self.embedding.built:
            self.embedding.build()
        self.transform = keras.layers.Dense(
            hidden_size,
            kernel_initializer=kernel_initializer(),
            bias_initializer=bias_initializer(),
            dtype=self.dtype_policy,
            name="transform",
        )
        self.transform.build((None, hidden_size))
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="layer_norm"
        )
        self.layer_norm.build((None, hidden_size))
        self.output_bias = self.add_weight(
            shape=(self.embedding.vocab_size,),
            initializer=bias_initializer(),
            name="output_bias",
        )
        self.built = True

    def transform_hidden(self, inputs):
        """LN(GELU(Dense(h))): the vector that is scored against the item table, [..., hidden_size]."""
        return self.layer_norm(ops.gelu(self.transform(inputs), approximate=False))

    def call(self, inputs, padding_mask=None, training=None):
        """Scores every vocabulary entry at each given hidden state.

        Args:
            inputs: [..., hidden_size] hidden states (e.g. [batch, num_predictions, hidden]).
            padding_mask: unused; accepted for a uniform signature.
            training: unused.

        Returns:
            [..., vocab_size] logits, in the head's compute dtype.
        """
        hidden = self.transform_hidden(inputs)
        table = ops.cast(self.embedding.output_table(), hidden.dtype)  # [vocab, hidden]
        return ops.matmul(hidden, ops.transpose(table)) + self.output_bias  # [..., vocab]

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(embedding=keras.saving.serialize_keras_object(self.embedding))
        return config

    @classmethod
    def from_config(cls, config: dict) -> "MaskedItemHead":
        config = dict(config)
        config["embedding"] = keras.saving.deserialize_keras_object(config["embedding"])
        return cls(**config)
