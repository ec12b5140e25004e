"""The one history -> model input code: `last_items` and each model's `history_inputs`."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.conftest import family_config
from bert4rec_tf.models import BERT4Rec, SASRec
from bert4rec_tf.models.history import last_items

HISTORY = np.array([[0, 3, 0, 4, 5, 6], [0, 0, 0, 0, 0, 0], [7, 0, 0, 0, 0, 1]])


def test_last_items_packs_the_newest_known_items_to_either_side():
    items, lengths = last_items(HISTORY, 3)
    assert np.asarray(items).tolist() == [[4, 5, 6], [0, 0, 0], [7, 1, 0]]
    assert np.asarray(lengths).tolist() == [3, 0, 2]
    items, lengths = last_items(HISTORY, 4, pad_left=True)
    assert np.asarray(items).tolist() == [[3, 4, 5, 6], [0, 0, 0, 0], [0, 0, 7, 1]]
    assert np.asarray(lengths).tolist() == [4, 0, 2]


def test_last_items_in_a_graph_with_unknown_shapes():
    packed = tf.function(lambda h: last_items(h, 2)[0], input_signature=[tf.TensorSpec([None, None], tf.int64)])
    assert packed(tf.constant(HISTORY, tf.int64)).numpy().tolist() == [[5, 6], [0, 0], [7, 1]]


def test_bert4rec_appends_mask_after_the_last_max_len_minus_one_items():
    model = BERT4Rec(family_config(vocab_size=10, max_len=4, hidden_size=8, num_heads=2, intermediate_size=8,
                                 num_layers=1))
    features = model.history_inputs(HISTORY)
    assert np.asarray(features["input_ids"]).tolist() == [[4, 5, 6, 9], [9, 0, 0, 0], [7, 1, 9, 0]]
    assert np.asarray(features["input_mask"]).tolist() == [[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]]


def test_sasrec_reads_the_last_max_len_items_padded_on_the_left():
    model = SASRec(family_config(name="sasrec", vocab_size=10, max_len=4, hidden_size=8, num_heads=1,
                               intermediate_size=8, num_layers=1, loss="bce"))
    features = model.history_inputs(HISTORY)
    assert np.asarray(features["input_ids"]).tolist() == [[3, 4, 5, 6], [0, 0, 0, 0], [0, 0, 7, 1]]
