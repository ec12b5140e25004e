"""The preprocessing rules on hand-made tables: time order, ties, filters, id order."""

from __future__ import annotations

import numpy as np
import pytest

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.preprocess import preprocess
from bert4rec_tf.data.readers import Interactions


def table(rows, with_time=True):
    users, items, stamps = zip(*rows)
    return Interactions(users=np.asarray(users, dtype=object), items=np.asarray(items, dtype=object),
                        timestamps=np.asarray(stamps, dtype=np.int64) if with_time else None,
                        path="toy", format="custom")


def test_stable_time_order_keeps_ties_in_file_order():
    rows = [("u", "c", 5), ("u", "a", 1), ("u", "b", 5), ("u", "d", 3), ("u", "e", 5)]
    sequences, _ = preprocess(table(rows), min_user_interactions=1)
    raw = sequences.item_ids[sequences.sequence(0) - 1]
    assert list(raw) == ["a", "d", "c", "b", "e"]


def test_ids_numeric_order_when_all_integers_else_first_appearance():
    numeric, _ = preprocess(table([("2", "30", 1), ("2", "4", 2), ("10", "100", 1)]), 1)
    assert list(numeric.user_ids) == ["2", "10"]
    assert list(numeric.item_ids) == ["4", "30", "100"]
    assert list(numeric.sequence(0)) == [2, 1]
    named, _ = preprocess(table([("bob", "z", 1), ("bob", "y", 2), ("al", "x", 1)]), 1)
    assert list(named.user_ids) == ["bob", "al"]
    assert list(named.item_ids) == ["z", "y", "x"]


def test_item_filter_then_user_filter_and_the_report():
    rows = [("1", i, t) for t, i in enumerate("abcde")]          # user 1: 5 items
    rows += [("2", i, t) for t, i in enumerate("abcdx")]         # user 2 loses x -> 4 items
    rows += [("3", i, t) for t, i in enumerate("abcdeab")]       # repeats count
    sequences, report = preprocess(table(rows), min_user_interactions=5, min_item_interactions=2)
    assert list(sequences.user_ids) == ["1", "3"]
    assert list(sequences.item_ids) == list("abcde")
    assert report == {
        "interactions_read": 17, "items_read": 6, "items_dropped_rare": 1,
        "interactions_dropped_rare_items": 1, "users_read": 3, "users_dropped_short": 1,
        "interactions_dropped_short_users": 4,
    }
    stats = sequences.stats()
    assert (stats["users"], stats["items"], stats["actions"], stats["min_length"]) == (2, 5, 12, 5)
    assert stats["avg_length"] == 6.0


def test_file_order_is_time_order_without_timestamps():
    sequences, _ = preprocess(table([("1", "9", 0), ("1", "3", 0), ("1", "5", 0)], with_time=False), 1)
    assert list(sequences.item_ids[sequences.sequence(0) - 1]) == ["9", "3", "5"]


def test_nothing_left_is_an_error():
    with pytest.raises(DataError, match="no interactions left"):
        preprocess(table([("1", "a", 0)]), min_user_interactions=5)
