"""A TensorFlow SavedModel that serves recommendations from raw item ids.

Signatures (loadable with plain `tf.saved_model.load`, no bert4rec_tf needed):
- ``serving_default(history: string [batch, None]) -> item_ids: string [batch, 10], scores: float32
  [batch, 10], num_items: int32 [batch]``: the items the user has not interacted with, best first.
  "" is padding anywhere in `history`; unknown ids are ignored; the model reads its own number of
  the last known items (BERT4Rec: max_len - 1, then [MASK]). The first `num_items` slots of a row are real unseen items;
  only when fewer than 10 items of the catalogue are unseen, the remaining slots hold item id "" and
  score -inf (never an item of the history, padding or [MASK]).
- ``score_candidates(history: string [batch, None], candidates: string [batch, C]) -> scores: float32
  [batch, C]``: the model's score of each candidate; an unknown candidate scores -inf.
- ``user_embedding(history: string [batch, None]) -> embedding: float32 [batch, d]``: the user vector
  the model scores with (`user_representation`: BERT4Rec's transformed state at [MASK], SASRec's
  last output, the matching model's [UID] output, POP's constant [1]).

The history becomes the model's input by the model's own `history_inputs`, the same code the
evaluator runs.

Both signatures reject, with an InvalidArgumentError naming the input, a `history` or `candidates` that
is not a matrix and candidates whose batch differs from the history's. Excluding the history costs
O(batch * (L + num_items)) memory: its ids are scattered into one [batch, num_items] count.

`vocab.txt` beside the SavedModel has one line per item, ``raw id<TAB>model id``, the raw id escaped
as in `bert4rec_tf.data.id_files` (backslash, tab, line feed and carriage return), so any Unicode id
round-trips; `read_vocabulary` reads it.
"""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from bert4rec_tf.constants import PAD_ID, mask_id
from bert4rec_tf.data.id_files import escape_id, unescape_id

TOP_K = 10
VOCAB_FILE = "vocab.txt"


def _row_indices(ids: tf.Tensor) -> tf.Tensor:
    """int64 [batch, L]: the row number of each element of `ids` [batch, L]."""
    shape = tf.shape(ids, out_type=tf.int64)
    return tf.broadcast_to(tf.range(shape[0])[:, None], shape)


def unseen_items(ids: tf.Tensor, num_items: int) -> tf.Tensor:
    """Which items each row's history does not hold, without a [batch, L, num_items] one-hot.

    Args:
        ids: int64 [batch, L] model ids, 0 for padding and unknown ids.
        num_items: the number of real items, model ids 1..num_items.

    Returns:
        bool [batch, num_items]; column j is model id j + 1.
    """
    batch = tf.shape(ids, out_type=tf.int64)[0]
    indices = tf.stack([_row_indices(ids), ids], axis=-1)  # [batch, L, 2]
    counts = tf.scatter_nd(indices, tf.ones_like(ids, tf.int32), tf.stack([batch, num_items + 1]))  # [batch, 1 + items]
    return counts[:, 1:] == 0


def _checked(tensor: tf.Tensor, condition: tf.Tensor, message: str) -> tf.Tensor:
    """`tensor` once `condition` holds at run time, else an InvalidArgumentError with `message` and its shape."""
    check = tf.debugging.Assert(condition, [message, "got shape", tf.shape(tensor)])
    with tf.control_dependencies([check]):
        return tf.identity(tensor)


def _matrix(tensor: tf.Tensor, name: str, columns: str) -> tf.Tensor:
    """`tensor`, checked at run time to be a matrix [batch, `columns`].

    The signatures declare [None, None], but a signature call does not enforce it, and TF folds
    `tf.rank` of that static shape into the constant 2; counting the entries of the run-time shape
    is not folded.
    """
    rank = tf.reduce_sum(tf.cast(tf.shape(tensor) >= 0, tf.int32))
    return _checked(tensor, tf.equal(rank, 2), f"{name} must be a string matrix [batch, {columns}]")


def export_saved_model(model: keras.Model, item_ids: np.ndarray, directory: str) -> str:
    """Writes the serving SavedModel and its vocabulary file into `directory`.

    Args:
        model: a trained `bert4rec_tf.models.SequentialRecommender` (`score_next` and
            `user_representation` of model-id histories).
        item_ids: raw item ids, [num_items]; model id i is item_ids[i - 1].
        directory: the export folder (replaced when it exists).

    Returns:
        `directory`.
    """
    num_items = len(item_ids)
    raw = [str(item) for item in item_ids]
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(raw, tf.range(1, num_items + 1, dtype=tf.int64)), default_value=PAD_ID)
    names = tf.constant(raw)  # [num_items], indexed by model id - 1
    token = mask_id(num_items)
    k = min(TOP_K, num_items)

    def scores_for(history):
        ids = table.lookup(history)  # [batch, L]
        return ids, tf.cast(model.score_next(ids, training=False), tf.float32)  # [batch, vocab]

    def user_embedding(history):
        ids = table.lookup(_matrix(history, "history", "length"))  # [batch, L]
        return {"embedding": tf.cast(model.user_representation(ids, training=False), tf.float32)}  # [batch, d]

    def serve(history):
        ids, scores = scores_for(_matrix(history, "history", "length"))
        unseen = unseen_items(ids, num_items)  # [batch, num_items]
        top = tf.math.top_k(tf.where(unseen, scores[:, 1:token], -np.inf), k=k)  # [batch, k]
        count = tf.minimum(tf.reduce_sum(tf.cast(unseen, tf.int32), axis=1), k)  # [batch]
        real = tf.range(k)[None, :] < count[:, None]  # [batch, k]
        padding = [[0, 0], [0, TOP_K - k]]
        return {"item_ids": tf.pad(tf.where(real, tf.gather(names, top.indices), ""), padding),  # [batch, 10]
                "scores": tf.pad(tf.where(real, top.values, -np.inf), padding, constant_values=-np.inf),
                "num_items": count}

    def score_candidates(history, candidates):
        history = _matrix(history, "history", "length")
        candidates = _matrix(candidates, "candidates", "num_candidates")
        candidates = _checked(candidates, tf.shape(candidates)[0] == tf.shape(history)[0],
                              "candidates must have one row per history row")
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
    archive.add_endpoint("user_embedding", user_embedding, input_signature=[history_spec])
    archive.write_out(directory, verbose=False)
    with open(os.path.join(directory, VOCAB_FILE), "w", encoding="utf-8", newline="\n") as handle:
        for model_id, item in enumerate(raw, start=1):
            handle.write(f"{escape_id(item)}\t{model_id}\n")
    return directory


def read_vocabulary(directory: str) -> dict[str, int]:
    """Raw item id -> model id, from the `vocab.txt` that `export_saved_model` wrote into `directory`.

    Raises:
        FileNotFoundError: when `directory` holds no vocab.txt.
        ValueError: for a malformed line or escape, naming the file and line.
    """
    path = os.path.join(directory, VOCAB_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    vocabulary = {}
    with open(path, encoding="utf-8", newline="\n") as handle:
        for number, line in enumerate(handle, start=1):
            raw, tab, model_id = line.removesuffix("\n").rpartition("\t")
            if not tab or not model_id.isdigit():
                raise ValueError(f"{path}, line {number}: expected 'raw id<TAB>model id', got {line!r}")
            vocabulary[unescape_id(raw, path, number)] = int(model_id)
    return vocabulary
