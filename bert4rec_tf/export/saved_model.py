"""A TensorFlow SavedModel that serves recommendations from raw item ids.

Signatures (loadable with plain `tf.saved_model.load`, no bert4rec_tf needed):
- ``serving_default(history: string [batch, None]) -> item_ids: string [batch, 10], scores: float32 [batch, 10]``:
  the top 10 items the user has not interacted with, best first. "" is padding anywhere; unknown ids
  are ignored; only the last max_len - 1 known items are read, [MASK] is appended after them.
- ``score_candidates(history: string [batch, None], candidates: string [batch, C]) -> scores: float32
  [batch, C]``: the model's score of each candidate; an unknown candidate scores -inf.
"""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from bert4rec_tf.constants import PAD_ID, mask_id

TOP_K = 10
VOCAB_FILE = "vocab.txt"


def encode_history(ids: tf.Tensor, max_len: int, mask_token: int) -> tuple[tf.Tensor, tf.Tensor]:
    """Left-aligns the known ids of each row, keeps the last max_len - 1 and appends [MASK].

    Args:
        ids: int64 [batch, L] model ids, 0 for padding and unknown ids, anywhere.
        max_len: the model's sequence length.
        mask_token: the [MASK] id.

    Returns:
        input_ids and input_mask, int64 [batch, max_len], right-padded.
    """
    known = ids > 0
    from_end = tf.cumsum(tf.cast(known, tf.int64), axis=1, reverse=True)  # 1 at the last known id
    keep = known & (from_end <= max_len - 1)
    length = tf.reduce_sum(tf.cast(keep, tf.int64), axis=1)  # [batch]
    rows = tf.broadcast_to(tf.range(tf.shape(ids, out_type=tf.int64)[0])[:, None], tf.shape(ids, out_type=tf.int64))
    position = length[:, None] - from_end  # [batch, L] target position of kept ids
    indices = tf.stack([tf.boolean_mask(rows, keep), tf.boolean_mask(position, keep)], axis=1)
    batch = tf.shape(ids, out_type=tf.int64)[0]
    input_ids = tf.scatter_nd(indices, tf.boolean_mask(ids, keep), tf.stack([batch, max_len]))
    mask_at = tf.stack([tf.range(batch), length], axis=1)
    input_ids = tf.tensor_scatter_nd_update(input_ids, mask_at, tf.fill([batch], tf.cast(mask_token, tf.int64)))
    input_mask = tf.cast(tf.range(max_len, dtype=tf.int64)[None, :] <= length[:, None], tf.int64)
    return input_ids, input_mask


def export_saved_model(model: keras.Model, item_ids: np.ndarray, max_len: int, directory: str) -> str:
    """Writes the serving SavedModel and its vocabulary file into `directory`.

    Args:
        model: a trained model with `score_last`.
        item_ids: raw item ids, [num_items]; model id i is item_ids[i - 1].
        max_len: the model's sequence length.
        directory: the export folder (replaced when it exists).

    Returns:
        `directory`.
    """
    num_items = len(item_ids)
    raw = tf.constant([str(i) for i in item_ids])
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(raw, tf.range(1, num_items + 1, dtype=tf.int64)), default_value=PAD_ID)
    names = tf.constant(["", *[str(i) for i in item_ids], ""])  # indexed by model id
    token = mask_id(num_items)

    def scores_for(history):
        ids = table.lookup(history)  # [batch, L]
        input_ids, input_mask = encode_history(ids, max_len, token)
        scores = tf.cast(model.score_last({"input_ids": input_ids, "input_mask": input_mask}, training=False),
                         tf.float32)  # [batch, vocab]
        return ids, scores

    def serve(history):
        ids, scores = scores_for(history)
        vocab = tf.shape(scores)[1]
        excluded = tf.reduce_max(tf.one_hot(ids, vocab, on_value=1.0, off_value=0.0), axis=1) > 0  # history
        excluded |= tf.range(vocab)[None, :] == PAD_ID
        excluded |= tf.range(vocab)[None, :] >= token
        top = tf.math.top_k(tf.where(excluded, -np.inf, scores), k=TOP_K)
        return {"item_ids": tf.gather(names, top.indices), "scores": top.values}

    def score_candidates(history, candidates):
        _, scores = scores_for(history)
        candidate_ids = table.lookup(candidates)  # [batch, C]
        picked = tf.gather(scores, candidate_ids, batch_dims=1)
        return {"scores": tf.where(candidate_ids > 0, picked, -np.inf)}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(table)
    history_spec = tf.TensorSpec([None, None], tf.string, name="history")
    archive.add_endpoint("serving_default", serve, input_signature=[history_spec])
    archive.add_endpoint("score_candidates", score_candidates,
                         input_signature=[history_spec, tf.TensorSpec([None, None], tf.string, name="candidates")])
    archive.write_out(directory, verbose=False)
    with open(os.path.join(directory, VOCAB_FILE), "w", encoding="utf-8") as handle:
        for model_id, item in enumerate(item_ids, start=1):
            handle.write(f"{item}\t{model_id}\n")
    return directory
