"""Models assembled from `bert4rec_tf.layers`, and their losses (their families: `bert4rec_tf.tasks`)."""

from bert4rec_tf.models.base import SequentialRecommender
from bert4rec_tf.models.bert4rec import BERT4Rec, real_slot_indices
from bert4rec_tf.models.bert4rec_match import BERT4RecMatch
from bert4rec_tf.models.losses import masked_lm_loss, matching_losses, next_item_bce_loss, next_item_ce_loss
from bert4rec_tf.models.pop import POP
from bert4rec_tf.models.sasrec import SASRec

__all__ = ["BERT4Rec", "BERT4RecMatch", "POP", "SASRec", "SequentialRecommender",
           "masked_lm_loss", "matching_losses", "next_item_bce_loss", "next_item_ce_loss", "real_slot_indices"]
