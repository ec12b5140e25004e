"""The self-attention block of the SASRec authors' code, which differs from the paper's description.

The SASRec paper writes its blocks with LayerNorm, dropout and residual connections around each
sub-layer; its published code (TensorFlow 1, `model.py` and `modules.py`) computes, per block:

    q = LN_a(x)
    x = q + Attention(queries = q, keys = values = x)       no output projection
    f = LN_f(x)
    x = (f + Dropout(W2 Dropout(ReLU(W1 f + b1)) + b2)) * mask

with dropout on the attention probabilities, LayerNorm epsilon 1e-8, and a last LayerNorm after the
blocks (`SASRec` adds it). `TransformerBlock` is the package's post-LN block, SPEC.md's reading of
the paper; this block is what `model.code_network` swaps in to measure the difference.
"""

import keras
from keras import ops

from bert4rec_tf.layers.dropout import Dropout
from bert4rec_tf.layers.multi_head_attention import MultiHeadAttention
from bert4rec_tf.layers.position_wise_feed_forward import PositionWiseFeedForward

# The code's `normalize` divides by sqrt(variance + 1e-8).
CODE_LAYER_NORM_EPSILON = 1e-8


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class KeyedAttention(MultiHeadAttention):
    """`MultiHeadAttention` with queries and keys from different inputs and no output projection:
    the context of the heads, concatenated, is the output (as the SASRec code's attention)."""

    def __init__(self, **kwargs):
        kwargs["output_projection"] = False
        super().__init__(**kwargs)

    def call(self, queries, keys, padding_mask=None, training=None):
        """The context [batch, seq_len, hidden] and the probabilities [batch, heads, seq_len, seq_len]
        of `queries` attending to `keys` (the values are projections of `keys` too)."""
        return self._attend(self.query_dense(queries), self.key_dense(keys), self.value_dense(keys),
                            padding_mask, training)


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class CodeSASRecBlock(keras.layers.Layer):
    """One block of the SASRec authors' code (the module docstring gives its equations).

    Args:
        hidden_size: d.
        num_heads: h.
        intermediate_size: the FFN's inner width (d in the code).
        hidden_dropout: dropout after each of the FFN's two projections.
        attention_dropout: dropout on the attention probabilities.
        **kwargs: passed to `keras.layers.Layer`.
    """

    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int, hidden_dropout: float = 0.0,
                 attention_dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout

    def build(self, input_shape):
        def layer_norm(name):
            layer = keras.layers.LayerNormalization(epsilon=CODE_LAYER_NORM_EPSILON, dtype=self.dtype_policy,
                                                    name=name)
            layer.build(input_shape)
            return layer

        self.attention_layer_norm = layer_norm("attention_layer_norm")
        self.self_attention = KeyedAttention(num_heads=self.num_heads, hidden_size=self.hidden_size,
                                             attention_dropout=self.attention_dropout, causal=True,
                                             dtype=self.dtype_policy, name="self_attention")
        self.self_attention.build(input_shape)
        self.feed_forward_layer_norm = layer_norm("feed_forward_layer_norm")
        self.feed_forward = PositionWiseFeedForward(intermediate_size=self.intermediate_size,
                                                    hidden_size=self.hidden_size, activation="relu",
                                                    dtype=self.dtype_policy, name="feed_forward")
        self.feed_forward.build(input_shape)
        self.inner_dropout = Dropout(self.hidden_dropout, dtype=self.dtype_policy, name="inner_dropout")
        self.output_dropout = Dropout(self.hidden_dropout, dtype=self.dtype_policy, name="output_dropout")
        self.built = True

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores: bool = False):
        """[batch, seq_len, hidden] -> the same, zero at the padding (and the attention probabilities).

        Args:
            inputs: [batch, seq_len, hidden_size].
            padding_mask: [batch, seq_len], 1 at real items, 0 at padding.
            training: enables dropout.
            return_attention_scores: also return the probabilities [batch, heads, seq_len, seq_len].
        """
        queries = self.attention_layer_norm(inputs)
        context, probs = self.self_attention(queries, inputs, padding_mask=padding_mask, training=training)
        normed = self.feed_forward_layer_norm(queries + context)
        ffn = self.feed_forward
        inner = self.inner_dropout(ops.relu(ffn.intermediate_dense(normed)), training=training)
        outputs = normed + self.output_dropout(ffn.output_dense(inner), training=training)
        if padding_mask is not None:
            outputs = outputs * ops.cast(ops.expand_dims(padding_mask, -1), outputs.dtype)
        if return_attention_scores:
            return outputs, probs
        return outputs

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, num_heads=self.num_heads,
                      intermediate_size=self.intermediate_size, hidden_dropout=self.hidden_dropout,
                      attention_dropout=self.attention_dropout)
        return config
