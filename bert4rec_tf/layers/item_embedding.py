"""Item embedding plus learned absolute position embedding, LayerNorm and dropout."""

import keras
from keras import ops

from bert4rec_tf.constants import LAYER_NORM_EPSILON
from bert4rec_tf.layers.dropout import Dropout
from bert4rec_tf.layers.feature_embedding import FeatureEmbedding
from bert4rec_tf.layers.initializers import kernel_initializer


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class ItemEmbedding(keras.layers.Layer):
    """Dropout(LN(E[item] + P[position])), BERT's embedding_postprocessor without token types.

    With item attributes, each item is represented by its id and its attributes: E[item] + F[item]
    (`FeatureEmbedding`) at the input, and with `attributes_at_output` also in the table the tied
    head scores against (`output_table`), so that an item whose id row never trained is scored from
    its attributes. Without attributes the layer is exactly the one of before.

    The original also added a one-row token-type embedding; a constant vector added before the
    LayerNorm is absorbed exactly by the position embedding, so it is left out.
    `item_embeddings` is the table the tied output head (`MaskedItemHead`) reads.

    Args:
        vocab_size: rows of the item table (padding 0, items 1..n, [MASK]).
        hidden_size: d.
        max_len: rows of the position table; inputs may be shorter, never longer.
        hidden_dropout: dropout rate on the output.
        use_position_embedding: add the position embedding (the paper's "w/o PE" ablation: False).
        dropout_before_norm: LN(Dropout(E + P)) as in SASRec instead of BERT's Dropout(LN(E + P)).
        positions_from_end: number the positions so that the last column is max_len - 1 (inputs
            padded on the left, as SASRec's: a narrower input, trimmed of leading padding, keeps
            every item's position); default: the first column is 0 (padding on the right).
        scaled_no_norm: Dropout(sqrt(d) E[item] + P[position]) with no LayerNorm, as the SASRec
            authors' code (`model.code_network`).
        item_attributes: the items' attributes (`FeatureEmbedding`'s `attributes`; None or empty:
            ids only); their values are set with `item_features.assign_values`.
        attributes_at_output: `output_table` is E + F (default: E).
        **kwargs: passed to `keras.layers.Layer`.
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        max_len: int,
        hidden_dropout: float = 0.0,
        use_position_embedding: bool = True,
        dropout_before_norm: bool = False,
        positions_from_end: bool = False,
        scaled_no_norm: bool = False,
        item_attributes: list[dict] | None = None,
        attributes_at_output: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_len = max_len
        self.hidden_dropout = hidden_dropout
        self.use_position_embedding = use_position_embedding
        self.dropout_before_norm = dropout_before_norm
        self.positions_from_end = positions_from_end
        self.scaled_no_norm = scaled_no_norm
        self.item_attributes = [dict(attribute) for attribute in item_attributes or []]
        if attributes_at_output and not self.item_attributes:
            raise ValueError("attributes_at_output needs item attributes")
        self.attributes_at_output = attributes_at_output

    def build(self, input_shape=None):
        self.item_embedding = keras.layers.Embedding(
            self.vocab_size,
            self.hidden_size,
            embeddings_initializer=kernel_initializer(),
            dtype=self.dtype_policy,
            name="item_embedding",
        )
        self.item_embedding.build()
        if self.use_position_embedding:
            self.position_embedding = keras.layers.Embedding(
                self.max_len,
                self.hidden_size,
                embeddings_initializer=kernel_initializer(),
                dtype=self.dtype_policy,
                name="position_embedding",
            )
            self.position_embedding.build()
        if not self.scaled_no_norm:
            self.layer_norm = keras.layers.LayerNormalization(
                epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name="layer_norm"
            )
            self.layer_norm.build((None, None, self.hidden_size))
        self.dropout = Dropout(
            self.hidden_dropout, dtype=self.dtype_policy, name="dropout"
        )
        self.item_features = None
        if self.item_attributes:
            self.item_features = FeatureEmbedding(self.item_attributes, rows=self.vocab_size,
                                                  hidden_size=self.hidden_size, dtype=self.dtype_policy,
                                                  name="item_features")
            self.item_features.build()
        self.built = True

    @property
    def item_embeddings(self) -> keras.Variable:
        """The item table variable, [vocab_size, hidden_size], shared with the output head."""
        return self.item_embedding.embeddings

    def output_table(self):
        """The table the tied head scores against, [vocab_size, hidden_size]: the item table variable
        itself, or with `attributes_at_output` E + F of every id."""
        if not self.attributes_at_output:
            return self.item_embeddings
        return ops.cast(self.item_embeddings, self.item_features.compute_dtype) + self.item_features.all_rows()

    def call(self, inputs, padding_mask=None, training=None, added=None):
        """Embeds a batch of item id sequences.

        Position indices come from the inputs' own shape, so the position table stays part of
        the trained graph also inside a functional model.

        Args:
            inputs: int [batch, seq_len] item ids, seq_len <= max_len.
            padding_mask: unused (padded positions are embedded like BERT does; attention
                ignores them); accepted for a uniform signature.
            training: enables dropout.
            added: [batch, 1 or seq_len, hidden_size] added to the item representation before the
                position embedding and the normalisation (the user's attributes); None: nothing.

        Returns:
            [batch, seq_len, hidden_size].
        """
        embeddings = self.item_embedding(inputs)  # [batch, seq_len, hidden]
        if self.item_features is not None:
            embeddings = embeddings + self.item_features(inputs)
        if added is not None:
            embeddings = embeddings + ops.cast(added, embeddings.dtype)
        if self.scaled_no_norm:
            embeddings = embeddings * (self.hidden_size ** 0.5)
        if self.use_position_embedding:
            seq_len = ops.shape(inputs)[1]
            positions = ops.arange(seq_len)  # [seq_len]
            if self.positions_from_end:
                positions = positions + (self.max_len - seq_len)
            embeddings = embeddings + ops.expand_dims(self.position_embedding(positions), 0)
        if self.scaled_no_norm:
            return self.dropout(embeddings, training=training)
        if self.dropout_before_norm:
            return self.layer_norm(self.dropout(embeddings, training=training))
        return self.dropout(self.layer_norm(embeddings), training=training)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            max_len=self.max_len,
            hidden_dropout=self.hidden_dropout,
            use_position_embedding=self.use_position_embedding,
            dropout_before_norm=self.dropout_before_norm,
            positions_from_end=self.positions_from_end,
            scaled_no_norm=self.scaled_no_norm,
        )
        if self.item_attributes:  # without attributes the config names none: saved models without them load as they are
            config.update(item_attributes=self.item_attributes, attributes_at_output=self.attributes_at_output)
        return config
