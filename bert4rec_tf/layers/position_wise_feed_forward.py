"""The Transformer's position-wise feed-forward network."""

import keras
from keras import ops

from bert4rec_tf.layers import fused
from bert4rec_tf.layers.initializers import bias_initializer, kernel_initializer


@keras.saving.register_keras_serializable(package="bert4rec_tf")
class PositionWiseFeedForward(keras.layers.Layer):
    """Dense(intermediate_size, activation) -> Dense(hidden_size), the same at every position.

    Dropout and the residual connection belong to `TransformerBlock`, not to this layer.

    Args:
        intermediate_size: inner width (4d in BERT, 256 for d = 64 in BERT4Rec).
        hidden_size: d, the output width.
        activation: "gelu" (exact erf GELU, BERT4Rec) or "relu" (SASRec).
        **kwargs: passed to `keras.layers.Layer`.
    """

    def __init__(self, intermediate_size: int, hidden_size: int, activation: str = "gelu", **kwargs):
        super().__init__(**kwargs)
        if activation not in ("gelu", "relu"):
            raise ValueError(f"activation must be 'gelu' or 'relu', got {activation!r}")
        self.intermediate_size = intermediate_size
        self.hidden_size = hidden_size
        self.activation = activation

    def build(self, input_shape):
        self.intermediate_dense = keras.layers.Dense(
            self.intermediate_size,
            kernel_initializer=kernel_initializer(),
            bias_initializer=bias_initializer(),
            dtype=self.dtype_policy,
            name="intermediate",
        )
        self.output_dense = keras.layers.Dense(
            self.hidden_size,
            kernel_initializer=kernel_initializer(),
            bias_initializer=bias_initializer(),
            dtype=self.dtype_policy,
            name="output",
        )
        self.intermediate_dense.build(input_shape)
        self.output_dense.build((*input_shape[:-1], self.intermediate_size))
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        """Applies the two projections.

        Args:
            inputs: [batch, seq_len, hidden].
            padding_mask: unused (the network is position-wise); accepted for a uniform signature.
            training: in training the GELU runs as one fused pass forward and backward
                (`bert4rec_tf.layers.fused.gelu`); the values are the same.

        Returns:
            [batch, seq_len, hidden_size].
        """
        hidden = self.intermediate_dense(inputs)  # [batch, seq_len, intermediate]
        if self.activation == "relu":
            hidden = ops.relu(hidden)
        else:
            hidden = fused.gelu(hidden) if training else ops.gelu(hidden, approximate=False)
        return self.output_dense(hidden)  # [batch, seq_len, hidden]

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(intermediate_size=self.intermediate_size, hidden_size=self.hidden_size,
                      activation=self.activation)
        return config
