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

A model that learns a vector per training user (`reads_users`: BPR-MF, NCF, FPMC, Caser) serves the
users it was trained on, by their raw user id: each signature then takes ``user: string [batch]``
before `history` (the user's items, which are excluded from the recommendations and, for FPMC and
Caser, the recent items the model reads). A user id outside training is refused with an
InvalidArgumentError naming it; `users.txt` beside the SavedModel lists the users it knows, one raw id
a line (escaped as `vocab.txt`'s). BERT4Rec and SASRec trained with user attributes read users too
(their attributes, docs/features.md) and serve the same way. The other models (POP, BERT4Rec,
SASRec, GRU4Rec) take a history only, of any user.

Both signatures reject, with an InvalidArgumentError naming the input, a `history` or `candidates` that
is not a matrix and candidates whose batch differs from the history's. Excluding the history costs
O(batch * (L + num_items)) memory: its ids are scattered into one [batch, num_items] count. A batch
is served in parts of at most `MAX_BATCH_SCORES // vocab_size` rows (`in_parts`), so one call's
memory stays bounded whatever the batch.

`vocab.txt` beside the SavedModel has one line per item, ``raw id<TAB>model id``, the raw id escaped
as in `bert4rec_tf.data.id_files` (backslash, tab, line feed and carriage return), so any Unicode id
round-trips; `read_vocabulary` reads it.
"""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

from bert4rec_tf.constants import MAX_BATCH_SCORES, PAD_ID, mask_id, vocab_size
from bert4rec_tf.data.id_files import escape_id, read_ids, unescape_id, write_ids

TOP_K = 10
VOCAB_FILE = "vocab.txt"
USERS_FILE = "users.txt"


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


def in_parts(function, inputs, user, outputs: dict, rows_per_part: int) -> dict:
    """`function(inputs, user)` computed on `rows_per_part` rows at a time, the parts concatenated:
    the serving signatures' memory stays bounded whatever the batch (a batch of 16 rows at a million
    items) while a small batch is one part.

    Args:
        function: maps a part of `inputs` (and of `user`, when not None) to a dict of tensors whose
            first dimension is the part's rows.
        inputs: a tensor [batch, ...] or a tuple of them (same batch).
        user: string [batch] or None.
        outputs: {name: (dtype, shape after the batch dimension)} of `function`'s results.
        rows_per_part: rows per call.

    Returns:
        {name: [batch, ...]}.
    """
    step = tf.constant(rows_per_part, tf.int32)
    rows = tf.shape(tf.nest.flatten(inputs)[0])[0]
    arrays = {name: tf.TensorArray(dtype, size=0, dynamic_size=True, infer_shape=False,
                                   element_shape=tf.TensorShape([None] + list(tail)))
              for name, (dtype, tail) in outputs.items()}

    def body(index, arrays):
        part = lambda tensor: tensor[index * step:(index + 1) * step]  # noqa: E731
        arguments = (tf.nest.map_structure(part, inputs),) + (() if user is None else (part(user),))
        results = function(*arguments)
        return index + 1, {name: array.write(index, results[name]) for name, array in arrays.items()}

    _, arrays = tf.while_loop(lambda index, _: index * step < rows, body, [tf.constant(0), arrays])
    return {name: array.concat() for name, array in arrays.items()}


def _user_lookup(user_ids: np.ndarray):
    """A function from raw user ids string [batch] to model user ids int64 [batch] (user_ids[u - 1] is
    u), failing with an InvalidArgumentError that names the ids not among `user_ids`."""
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer([str(user) for user in user_ids],
                                            tf.range(1, len(user_ids) + 1, dtype=tf.int64)), default_value=0)

    def lookup(user):
        rank = tf.reduce_sum(tf.cast(tf.shape(user) >= 0, tf.int32))
        user = _checked(user, tf.equal(rank, 1), "user must be a string vector [batch]")
        ids = table.lookup(user)
        check = tf.debugging.Assert(tf.reduce_all(ids > 0), [
            "unknown user id(s); this model serves only the users it was trained on:", tf.boolean_mask(user, ids == 0)])
        with tf.control_dependencies([check]):
            return tf.identity(ids)

    return table, lookup


def export_saved_model(model: keras.Model, item_ids: np.ndarray, directory: str,
                       user_ids: np.ndarray | None = None, max_batch_scores: int = MAX_BATCH_SCORES) -> str:
    """Writes the serving SavedModel and its vocabulary file into `directory`.

    Args:
        model: a trained `bert4rec_tf.models.SequentialRecommender` (`score_next` and
            `user_representation` of model-id histories, and of `users` when it `reads_users`).
        item_ids: raw item ids, [num_items]; model id i is item_ids[i - 1].
        directory: the export folder (replaced when it exists).
        user_ids: raw user ids, [num_users]; model user id u is user_ids[u - 1]. Needed when the
            model `reads_users` (then written to `users.txt`), ignored otherwise.

    Returns:
        `directory`.

    Raises:
        ValueError: when the model reads users and `user_ids` is missing or does not match its
            `num_users`.
    """
    reads_users = model.reads_users
    if reads_users and (user_ids is None or len(user_ids) != model.model_config.num_users):
        raise ValueError(f"the model serves {model.model_config.num_users} users by id: pass their raw ids, "
                         f"got {'none' if user_ids is None else len(user_ids)}")
    num_items = len(item_ids)
    raw = [str(item) for item in item_ids]
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(raw, tf.range(1, num_items + 1, dtype=tf.int64)), default_value=PAD_ID)
    names = tf.constant(raw)  # [num_items], indexed by model id - 1
    token = mask_id(num_items)
    k = min(TOP_K, num_items)
    rows_per_part = max(1, max_batch_scores // vocab_size(num_items))

    def _same_rows(user, history):
        """`user` string [batch] (None: no user), checked to have one id per `history` row."""
        if user is None:
            return None
        return _checked(user, tf.shape(user)[0] == tf.shape(history)[0], "user must have one id per history row")

    def user_arguments(history, user):
        """The keyword arguments of the model's scoring for `user` string [batch] (None: no user)."""
        if user is None:
            return {}
        return {"users": lookup_user(_same_rows(user, history))}

    def scores_for(history, user=None):
        ids = table.lookup(history)  # [batch, L]
        scores = model.score_next(ids, training=False, **user_arguments(history, user))
        return ids, tf.cast(scores, tf.float32)  # [batch, vocab]

    def user_embedding(history, user=None):
        history = _matrix(history, "history", "length")
        ids = table.lookup(history)  # [batch, L]
        vector = model.user_representation(ids, training=False, **user_arguments(history, user))
        return {"embedding": tf.cast(vector, tf.float32)}  # [batch, d]

    def serve(history, user=None):
        history = _matrix(history, "history", "length")
        user = _same_rows(user, history)

        def serve_rows(history, user=None):
            ids, scores = scores_for(history, user)
            unseen = unseen_items(ids, num_items)  # [rows, num_items]
            top = tf.math.top_k(tf.where(unseen, scores[:, 1:token], -np.inf), k=k)  # [rows, k]
            count = tf.minimum(tf.reduce_sum(tf.cast(unseen, tf.int32), axis=1), k)  # [rows]
            real = tf.range(k)[None, :] < count[:, None]  # [rows, k]
            padding = [[0, 0], [0, TOP_K - k]]
            return {"item_ids": tf.pad(tf.where(real, tf.gather(names, top.indices), ""), padding),  # [rows, 10]
                    "scores": tf.pad(tf.where(real, top.values, -np.inf), padding, constant_values=-np.inf),
                    "num_items": count}

        return in_parts(serve_rows, history, user, {"item_ids": (tf.string, [TOP_K]), "scores": (tf.float32, [TOP_K]),
                                                    "num_items": (tf.int32, [])}, rows_per_part)

    def score_candidates(history, candidates, user=None):
        history = _matrix(history, "history", "length")
        candidates = _matrix(candidates, "candidates", "num_candidates")
        candidates = _checked(candidates, tf.shape(candidates)[0] == tf.shape(history)[0],
                              "candidates must have one row per history row")
        user = _same_rows(user, history)

        def score_rows(rows, user=None):
            history, candidates = rows
            _, scores = scores_for(history, user)
            candidate_ids = table.lookup(candidates)  # [rows, C]
            picked = tf.gather(scores, candidate_ids, batch_dims=1)
            return {"scores": tf.where(candidate_ids > 0, picked, -np.inf)}

        return in_parts(score_rows, (history, candidates), user, {"scores": (tf.float32, [None])}, rows_per_part)

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.track(table)
    history_spec = tf.TensorSpec([None, None], tf.string, name="history")
    candidates_spec = tf.TensorSpec([None, None], tf.string, name="candidates")
    if reads_users:
        users_table, lookup_user = _user_lookup(user_ids)
        archive.track(users_table)
        user_spec = tf.TensorSpec([None], tf.string, name="user")
        archive.add_endpoint("serving_default", lambda user, history: serve(history, user),
                             input_signature=[user_spec, history_spec])
        archive.add_endpoint("score_candidates", lambda user, history, candidates: score_candidates(
            history, candidates, user), input_signature=[user_spec, history_spec, candidates_spec])
        archive.add_endpoint("user_embedding", lambda user, history: user_embedding(history, user),
                             input_signature=[user_spec, history_spec])
    else:
        archive.add_endpoint("serving_default", serve, input_signature=[history_spec])
        archive.add_endpoint("score_candidates", score_candidates, input_signature=[history_spec, candidates_spec])
        archive.add_endpoint("user_embedding", user_embedding, input_signature=[history_spec])
    archive.write_out(directory, verbose=False)
    if reads_users:
        write_ids(os.path.join(directory, USERS_FILE), [str(user) for user in user_ids])
    with open(os.path.join(directory, VOCAB_FILE), "w", encoding="utf-8", newline="\n") as handle:
        for model_id, item in enumerate(raw, start=1):
            handle.write(f"{escape_id(item)}\t{model_id}\n")
    return directory


def read_users(directory: str) -> set[str] | None:
    """The raw user ids an export serves (its `users.txt`), or None for a model that serves any history."""
    path = os.path.join(directory, USERS_FILE)
    return set(read_ids(path)) if os.path.isfile(path) else None


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
