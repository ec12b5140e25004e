"""Models assembled from `bert4rec_tf.layers`, and their losses."""

from bert4rec_tf.models.bert4rec import BERT4Rec, real_slot_indices
from bert4rec_tf.models.losses import masked_lm_loss

__all__ = ["BERT4Rec", "masked_lm_loss", "real_slot_indices"]
