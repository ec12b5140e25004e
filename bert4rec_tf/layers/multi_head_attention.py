"""Multi-head scaled dot-product self-attention, as in BERT's attention_layer."""

import math

import keras
import tensorflow as tf
from keras import ops

from bert4rec_tf.constants import ATTENTION_MASK_VALUE
from bert4rec_tf.layers.attention_mask import attention_mask
from bert4rec_tf.layers.dropout import Dropout
from bert4rec_tf.layers.initializers import bias_initializer, kernel_initializer


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class MultiHeadAttention(keras.layers.Layer):
    """Self-attention with `num_heads` heads of size hidden_size / num_heads.

    Query, key and value are Dense projections with bias; columns
    [i * head_size, (i + 1) * head_size) of each projection belong to head i. Scores are scaled by
    1 / sqrt(head_size); masked keys get ATTENTION_MASK_VALUE added before the softmax (computed in
    float32); dropout acts on the attention probabilities; a Dense layer projects the concatenated
    heads back to hidden_size (unless `output_projection` is False).

    Args:
        num_heads: h.
        hidden_size: d, the input and output width; must be divisible by `num_heads`.
        attention_dropout: dropout rate on the attention probabilities.
        causal: attend only to keys at or before the query position (SASRec).
        output_projection: project the concatenated heads with a Dense layer (the SASRec authors'
            code has none: `bert4rec_tf.layers.code_sasrec_block`).
        **kwargs: passed to `keras.layers.Layer` (name, dtype, ...).
    """

    def __init__(
        self,
        num_heads: int,
        hidden_size: int,
        attention_dropout: float = 0.0,
        causal: bool = False,
        output_projection: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.attention_dropout = attention_dropout
        self.causal = causal
        self.output_projection = output_projection
        self.head_size = hidden_size // num_heads

    def build(self, input_shape):
        def dense(name: str) -> keras.layers.Dense:
            return keras.layers.Dense(
                self.hidden_size,
                kernel_initializer=kernel_initializer(),
                bias_initializer=bias_initializer(),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query_dense = dense("query")
        self.key_dense = dense("key")
        self.value_dense = dense("value")
        if self.output_projection:
            self.output_dense = dense("output")
        self.probs_dropout = Dropout(
            self.attention_dropout, dtype=self.dtype_policy, name="attention_probs_dropout"
        )
        for layer in (self.query_dense, self.key_dense, self.value_dense):
            layer.build(input_shape)
        if self.output_projection:
            self.output_dense.build((*input_shape[:-1], self.hidden_size))
        self.built = True

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores: bool = False):
        """Attends from every position of `inputs` to the unmasked positions.

        Args:
            inputs: [batch, seq_len, hidden_size].
            padding_mask: [batch, seq_len], 1 at real items, 0 at padding; None: nothing padded.
            training: enables dropout.
            return_attention_scores: also return the attention probabilities (before dropout).

        Returns:
            [batch, seq_len, hidden_size], and with `return_attention_scores` also the
            probabilities [batch, num_heads, seq_len, seq_len] (queries x keys).
        """
        context, probs = self._attend(self.query_dense(inputs), self.key_dense(inputs), self.value_dense(inputs),
                                      padding_mask, training)
        outputs = self.output_dense(context)
        if return_attention_scores:
            return outputs, probs
        return outputs

    def call_packed(self, packed, index, count, shape, padding_mask, training=None):
        """`call` for the real positions only (`TransformerBlock.call_packed`): the projections run on
        the real rows, the attention on the window, padded with zero keys and values (masked).

        Args:
            packed: [rows, hidden_size] the packed states: the real positions' first.
            index: int64 [rows, 2] (row, position) of each packed row.
            count: the number of real positions (the first rows of `packed`).
            shape: int64 [3] the window's shape [batch, seq_len, hidden_size].
            padding_mask: [batch, seq_len], 1 at real items, 0 at padding.
            training: enables dropout.

        Returns:
            [rows, hidden_size] (each row the context at its `index`), and the probabilities
            [batch, num_heads, seq_len, seq_len].
        """
        projected = ops.concatenate([self.query_dense(packed), self.key_dense(packed), self.value_dense(packed)],
                                    axis=-1)  # [rows, 3 * hidden]
        window_shape = tf.concat([shape[:2], [3 * self.hidden_size]], axis=0)
        window = tf.scatter_nd(index[:count], projected[:count], window_shape)  # zeros at the padding
        query, key, value = ops.split(window, 3, axis=-1)  # [batch, seq_len, hidden] each
        context, probs = self._attend(query, key, value, padding_mask, training)
        return self.output_dense(tf.gather_nd(context, index)), probs

    def _attend(self, query, key, value, padding_mask, training):
        """The heads' attention of the projected [batch, seq_len, hidden] queries, keys and values:
        the context [batch, seq_len, hidden] and the probabilities [batch, heads, seq_len, seq_len]."""
        batch_and_length = ops.shape(query)[:2]
        seq_len = batch_and_length[1]

        def split_heads(x):  # [batch, seq_len, hidden] -> [batch, heads, seq_len, head_size]
            x = ops.reshape(x, (-1, seq_len, self.num_heads, self.head_size))
            return ops.transpose(x, (0, 2, 1, 3))

        query = split_heads(query * (1.0 / math.sqrt(self.head_size)))
        key, value = split_heads(key), split_heads(value)
        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))  # [batch, heads, seq, seq]
        scores = ops.cast(scores, "float32")
        if padding_mask is None and self.causal:
            padding_mask = ops.ones(batch_and_length, dtype="int32")
        if padding_mask is not None:
            allowed = ops.expand_dims(attention_mask(padding_mask, self.causal), 1)
            scores = scores + (1.0 - ops.cast(allowed, "float32")) * ATTENTION_MASK_VALUE
        probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        context = ops.matmul(self.probs_dropout(probs, training=training), value)
        context = ops.transpose(context, (0, 2, 1, 3))  # [batch, seq_len, heads, head_size]
        return ops.reshape(context, (-1, seq_len, self.hidden_size)), probs

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            hidden_size=self.hidden_size,
            attention_dropout=self.attention_dropout,
            causal=self.causal,
            output_projection=self.output_projection,
        )
        return config
