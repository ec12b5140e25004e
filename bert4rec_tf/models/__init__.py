"""Models assembled from `bert4rec_tf.layers`."""

from bert4rec_tf.models.bert4rec import BERT4Rec, real_slot_indices

__all__ = ["BERT4Rec", "real_slot_indices"]
