"""BERT4Rec's custom Keras layers, one public layer per module."""

from bert4rec_tf.layers.attention_mask import attention_mask
from bert4rec_tf.layers.dropout import Dropout
from bert4rec_tf.layers.item_embedding import ItemEmbedding
from bert4rec_tf.layers.masked_item_head import MaskedItemHead
from bert4rec_tf.layers.multi_head_attention import MultiHeadAttention
from bert4rec_tf.layers.position_wise_feed_forward import PositionWiseFeedForward
from bert4rec_tf.layers.transformer_block import TransformerBlock

__all__ = [
    "Dropout",
    "ItemEmbedding",
    "MaskedItemHead",
    "MultiHeadAttention",
    "PositionWiseFeedForward",
    "TransformerBlock",
    "attention_mask",
]
