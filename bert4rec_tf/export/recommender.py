"""Recommendations from a run's serving SavedModel: raw item ids (and, for a model that reads users,
the raw user id) in, the best unseen items out. A model reads users when it learned a vector per
training user (BPR-MF, NCF, FPMC, Caser) or was trained with user attributes (BERT4Rec, SASRec with
`data.user_features`, which then reads the user's attributes): either way it serves the users of its
data.

`bert4rec-recommend` and `bert4rec_tf.api.Run.recommend` both go through `Recommender`, which calls
the SavedModel's `serving_default` signature (see `bert4rec_tf.export.saved_model`).
"""

from __future__ import annotations

import json
import numbers
import os
from typing import Sequence

import tensorflow as tf

from bert4rec_tf.export.saved_model import TOP_K, USERS_FILE, VOCAB_FILE, read_users, read_vocabulary


def check_histories(histories: Sequence[Sequence[str]]) -> None:
    """Raises a ValueError when `histories`, or one of them, is a string rather than a list of raw ids
    (as when one history is passed without the list around it)."""
    if isinstance(histories, str) or any(isinstance(history, str) for history in histories):
        raise ValueError("histories is a list of histories, each a list of raw item ids: for one history "
                         "pass [history]")


def load_serving(export_dir: str):
    """The `serving_default` signature of the SavedModel in `export_dir`.

    Raises:
        ValueError: naming the folder when the SavedModel is damaged (a truncated or altered file).
    """
    try:
        return tf.saved_model.load(export_dir).signatures["serving_default"]
    except (IndexError, KeyError, ValueError, OSError, tf.errors.OpError) as error:
        detail = " ".join(str(error).split())[:200] or type(error).__name__
        raise ValueError(f"{export_dir}: the SavedModel is damaged ({detail}); the same train command in its run "
                         "folder exports it again from the run's checkpoint") from None


def _how_users_are_read(export_dir: str) -> str:
    """What the model of `export_dir` reads of a user, from its run's config.json beside the export
    folder (the export itself does not say); both ways when there is none."""
    path = os.path.join(os.path.dirname(os.path.normpath(export_dir)), "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            attributes = json.load(handle)["model"].get("user_attributes")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "reads each history's user (a vector it learned per training user, or the user's attributes)"
    return ("reads the attributes of each history's user (its data's user feature file)" if attributes
            else "learned a vector per training user")


class Recommender:
    """The serving SavedModel of an export folder, with its vocabulary.

    The SavedModel is loaded at the first `recommend`, so a bad history is reported at once.
    `users` is None for a model that serves any history; else the raw user ids of its data, the only
    users it serves (a vector learned per user, or their attributes).

    Args:
        export_dir: a folder written by `export_saved_model` (a run's `export/`).

    Raises:
        FileNotFoundError: when the folder holds no SavedModel or no vocab.txt.

    Example:
        >>> recommender = Recommender("runs/example/export")
        >>> recommender.recommend([["sku-104", "sku-221"], ["sku-330"]], k=3)  # two histories
        [[('sku-618', 0.083), ('sku-330', 0.059), ('sku-952', 0.055)], [('sku-618', 0.101), ...]]
    """

    def __init__(self, export_dir: str):
        if not os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
            raise FileNotFoundError(f"{export_dir} holds no SavedModel; train the run to its end first")
        self.export_dir = export_dir
        self.vocabulary = read_vocabulary(export_dir)
        self.users = read_users(export_dir)
        self._serve = None

    def check_users(self, users: Sequence[str] | None, count: int, source: str = "users") -> None:
        """Checks that `users` suits the export: one known raw user id per history for a model that
        reads users, None otherwise.

        Args:
            users: the raw user ids given, or None.
            count: the number of histories.
            source: how the caller names the users in messages ("users", "--user").

        Raises:
            ValueError: one line saying what is missing, extra or unknown.
        """
        if self.users is None:
            if users is not None:
                raise ValueError(f"{source}: this export's model reads histories only and serves any user; "
                                 f"leave {source} out")
            return
        if users is None or isinstance(users, str) and count != 1:
            listed = os.path.join(self.export_dir, USERS_FILE)
            raise ValueError(f"this export's model {_how_users_are_read(self.export_dir)}: give {source}, a user of "
                             f"its data (one raw user id per history, as in {listed})")
        users = [users] if isinstance(users, str) else list(users)
        if len(users) != count:
            raise ValueError(f"{source}: {len(users)} user ids for {count} histories")
        unknown = [user for user in dict.fromkeys(users) if user not in self.users]
        if unknown:
            raise ValueError(f"unknown user {', '.join(map(repr, unknown[:5]))}: the model serves only the "
                             f"{len(self.users)} users it was trained on "
                             f"(listed in {os.path.join(self.export_dir, USERS_FILE)})")

    def unknown_ids(self, history: Sequence[str], source: str) -> list[str]:
        """The distinct ids of `history` missing from the vocabulary, in order of first appearance.

        The SavedModel ignores them; a history without any known id is refused rather than answered
        as if it were empty, unless the model serves users by id (then the user's vector carries the
        recommendation and an empty history is allowed).

        Args:
            history: raw item ids, oldest first.
            source: what the history is, for the error message ("--history", "history 2").

        Raises:
            ValueError: when `history` is empty or none of its ids is known.
        """
        if not history:
            if self.users is not None:
                return []
            raise ValueError(f"{source} holds no ids")
        unknown = [item for item in dict.fromkeys(history) if item not in self.vocabulary]
        if len(unknown) == len(set(history)) and self.users is None:
            named = ", ".join(repr(item) for item in unknown)
            raise ValueError(f"no id of {source} is in {os.path.join(self.export_dir, VOCAB_FILE)}: {named}")
        return unknown

    def recommend(self, histories: Sequence[Sequence[str]], k: int = TOP_K,
                  users: Sequence[str] | None = None) -> list[list[tuple[str, float]]]:
        """The best `k` items each history has not seen, with their scores, best first.

        Args:
            histories: [batch] lists of raw item ids, oldest first; unknown ids are ignored. All are
                scored in one call, whose memory grows with batch x (longest history + catalogue).
            k: how many items per history, 1 to `TOP_K` (what `serving_default` returns).
            users: for a model that serves users by id (`self.users` not None), the raw user id of
                each history; None otherwise.

        Returns:
            [batch] lists of (raw item id, score) pairs; a list is shorter than `k` only when fewer
            items of the catalogue are unseen.

        Raises:
            ValueError: for a `k` that is not a whole number from 1 to `TOP_K`, histories given as strings (`check_histories`), or
                users missing, extra or unknown (`check_users`).
        """
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= TOP_K:
            raise ValueError(f"k must be a whole number between 1 and {TOP_K} (the export serves the top {TOP_K}), "
                             f"got {k!r}")
        check_histories(histories)
        self.check_users(users, len(histories))
        if not histories:
            return []
        if self._serve is None:
            self._serve = load_serving(self.export_dir)
        width = max(1, max(len(history) for history in histories))
        padded = [list(history) + [""] * (width - len(history)) for history in histories]  # "" pads
        inputs = {"history": tf.constant(padded, dtype=tf.string, shape=[len(padded), width])}
        if self.users is not None:
            inputs["user"] = tf.constant([users] if isinstance(users, str) else list(users), dtype=tf.string)
        out = self._serve(**inputs)
        return [[(item.decode("utf-8"), float(score)) for item, score in zip(items[:min(count, k)], scores)]
                for items, scores, count in zip(out["item_ids"].numpy(), out["scores"].numpy(),
                                                out["num_items"].numpy())]
