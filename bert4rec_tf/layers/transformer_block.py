"""One post-LN Transformer encoder layer with the paper's ablation switches."""

import keras

from bert4rec_tf.constants import LAYER_NORM_EPSILON
from bert4rec_tf.layers.dropout import Dropout
from bert4rec_tf.layers.multi_head_attention import MultiHeadAttention
from bert4rec_tf.layers.position_wise_feed_forward import PositionWiseFeedForward


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class TransformerBlock(keras.layers.Layer):
    """x = LN(x + Dropout(MHA(x))); x = LN(x + Dropout(FFN(x))) (post-LN, as in BERT).

    Ablations: `use_ffn=False` drops the whole second sub-layer (FFN, its dropout and its
    LayerNorm); `use_layer_norm=False` drops both LayerNorms; `use_residual=False` drops both
    residual additions.

    Args:
        hidden_size: d.
        num_heads: h.
        intermediate_size: FFN inner width.
        hidden_dropout: dropout on the attention output and on the FFN output.
        attention_dropout: dropout on the attention probabilities.
        use_ffn: keep the feed-forward sub-layer.
        use_layer_norm: keep the LayerNorms.
        use_residual: keep the residual connections.
        causal: left-to-right attention (SASRec).
        activation: the FFN's activation, "gelu" (BERT4Rec) or "relu" (SASRec).
        **kwargs: passed to `keras.layers.Layer`.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        intermediate_size: int,
        hidden_dropout: float = 0.0,
        attention_dropout: float = 0.0,
        use_ffn: bool = True,
        use_layer_norm: bool = True,
        use_residual: bool = True,
        causal: bool = False,
        activation: str = "gelu",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_dropout = hidden_dropout
        self.attention_dropout = attention_dropout
        self.use_ffn = use_ffn
        self.use_layer_norm = use_layer_norm
        self.use_residual = use_residual
        self.causal = causal
        self.activation = activation

    def build(self, input_shape):
        self.self_attention = MultiHeadAttention(
            num_heads=self.num_heads,
            hidden_size=self.hidden_size,
            attention_dropout=self.attention_dropout,
            causal=self.causal,
            dtype=self.dtype_policy,
            name="self_attention",
        )
        self.self_attention.build(input_shape)
        self.attention_output_dropout = Dropout(
            self.hidden_dropout, dtype=self.dtype_policy, name="attention_output_dropout"
        )
        self.attention_layer_norm = self._layer_norm("attention_layer_norm", input_shape)
        if self.use_ffn:
            self.feed_forward = PositionWiseFeedForward(
                intermediate_size=self.intermediate_size,
                hidden_size=self.hidden_size,
                activation=self.activation,
                dtype=self.dtype_policy,
                name="feed_forward",
            )
            self.feed_forward.build(input_shape)
            self.feed_forward_dropout = Dropout(
                self.hidden_dropout, dtype=self.dtype_policy, name="feed_forward_dropout"
            )
            self.feed_forward_layer_norm = self._layer_norm("feed_forward_layer_norm", input_shape)
        self.built = True

    def _layer_norm(self, name: str, input_shape) -> keras.layers.LayerNormalization | None:
        if not self.use_layer_norm:
            return None
        layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype=self.dtype_policy, name=name
        )
        layer_norm.build(input_shape)
        return layer_norm

    def _add_and_norm(self, inputs, update, layer_norm):
        outputs = inputs + update if self.use_residual else update
        return layer_norm(outputs) if layer_norm is not None else outputs

    def call(self, inputs, padding_mask=None, training=None, return_attention_scores: bool = False):
        """Runs the attention and feed-forward sub-layers.

        Args:
            inputs: [batch, seq_len, hidden_size].
            padding_mask: [batch, seq_len], 1 at real items, 0 at padding.
            training: enables dropout.
            return_attention_scores: also return the attention probabilities.

        Returns:
            [batch, seq_len, hidden_size], and with `return_attention_scores` also
            [batch, num_heads, seq_len, seq_len].
        """
        attention, probs = self.self_attention(
            inputs, padding_mask=padding_mask, training=training, return_attention_scores=True
        )
        outputs = self._after_attention(inputs, attention, training)
        if return_attention_scores:
            return outputs, probs
        return outputs

    def call_packed(self, packed, index, count, shape, padding_mask, training=None):
        """`call` on the real positions only: the same outputs there, without the per-position work
        on padding.

        The attention itself runs on the window's shape (`MultiHeadAttention.call_packed`: the
        projections of the real rows are scattered into a zero window, the context gathered back).
        Everything that acts on each position alone (the projections, the dropouts, the residual
        additions, the LayerNorms and the feed-forward network) runs on the real rows. Padded keys
        are masked in the attention, so what the padding rows hold changes no real row.

        Args:
            packed: [rows, hidden_size] the real positions' states, in `index` order, then
                `rows - count` rows that no output reads.
            index: int64 [rows, 2] (row, position) of each packed row; the first `count` are the
                real positions.
            count: the number of real positions.
            shape: int64 [3] the window's shape [batch, seq_len, hidden_size].
            padding_mask: [batch, seq_len], 1 at real items, 0 at padding.
            training: enables dropout.

        Returns:
            [rows, hidden_size], and the attention probabilities [batch, num_heads, seq_len, seq_len].
        """
        attention, probs = self.self_attention.call_packed(packed, index, count, shape, padding_mask,
                                                           training=training)
        return self._after_attention(packed, attention, training), probs

    def _after_attention(self, inputs, attention, training):
        """The block's per-position work after the attention: dropout, residual and LayerNorm, then the
        feed-forward network's (any leading shape: the window, or the packed real rows)."""
        outputs = self._add_and_norm(inputs, self.attention_output_dropout(attention, training=training),
                                     self.attention_layer_norm)
        if self.use_ffn:
            outputs = self._add_and_norm(
                outputs,
                self.feed_forward_dropout(self.feed_forward(outputs, training=training), training=training),
                self.feed_forward_layer_norm,
            )
        return outputs

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            hidden_dropout=self.hidden_dropout,
            attention_dropout=self.attention_dropout,
            use_ffn=self.use_ffn,
            use_layer_norm=self.use_layer_norm,
            use_residual=self.use_residual,
            causal=self.causal,
            activation=self.activation,
        )
        return config
