"""The preprocessing rules on hand-made tables: time order, ties, filters, id order."""

from __future__ import annotations

from decimal import Decimal

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
        "interactions_read": 17, "duplicate_rows": 0, "items_read": 6, "items_dropped_rare": 1,
        "interactions_dropped_rare_items": 1, "users_read": 3, "users_dropped_short": 1,
        "interactions_dropped_short_users": 4, "user_ids_not_positive_integers": 0,
        "item_ids_not_positive_integers": 5,
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


@pytest.mark.parametrize("raw, expected, others", [
    (["30", "4", "100"], ["4", "30", "100"], 0),                          # all integers: numeric order
    (["30", "x", "4", "100"], ["4", "30", "100", "x"], 1),                # a stray id keeps the others' order
    (["3", "2", "0", "1"], ["1", "2", "3", "0"], 1),                      # 0 is not a positive integer
    (["-3", "2", "1", "+4"], ["1", "2", "-3", "+4"], 2),
    (["1.5", "2", "1"], ["1", "2", "1.5"], 1),
    (["007", "7", "10", "8"], ["007", "7", "8", "10"], 0),               # one number spelled twice
    (["123456789012345678901234567890", "99", "1"], ["1", "99", "123456789012345678901234567890"], 0),
    (["\u00b2", "\u0663", "1"], ["1", "\u00b2", "\u0663"], 2),            # non-ASCII digits are not integers
    (["b", "a", "c"], ["b", "a", "c"], 3),                                # names: first appearance
])
def test_id_order_policy(raw, expected, others):
    rows = [("u", item, t) for t, item in enumerate(raw)]
    sequences, report = preprocess(table(rows), 1)
    assert list(sequences.item_ids) == expected
    assert report["item_ids_not_positive_integers"] == others
    assert [sequences.item_ids[i - 1] for i in sequences.sequence(0)] == raw   # time order kept


def test_user_ids_follow_the_same_policy():
    rows = [(user, "a", 1) for user in ("12", "bob", "3", "0")]
    sequences, report = preprocess(table(rows), 1)
    assert list(sequences.user_ids) == ["3", "12", "bob", "0"]
    assert report["user_ids_not_positive_integers"] == 2


@pytest.mark.parametrize("with_time, duplicates", [(True, 2), (False, 3)])
def test_duplicate_rows_are_kept_and_counted(with_time, duplicates):
    rows = [("u", "a", 1), ("u", "a", 1), ("u", "b", 2), ("u", "a", 3), ("v", "a", 1), ("u", "b", 2)]
    sequences, report = preprocess(table(rows, with_time), 1)
    assert report["duplicate_rows"] == duplicates     # without timestamps, (u, a) thrice and (u, b) twice
    assert sequences.stats()["actions"] == 6


def test_items_are_ordered_by_the_exact_timestamp():
    stamps = [Decimal("1.7"), Decimal("1.2"), 2, Decimal("1.00000000000000000002"), Decimal("1.00000000000000000001")]
    items = np.asarray([f"i{n}" for n in range(len(stamps))], dtype=object)
    interactions = Interactions(users=np.full(len(stamps), "u", dtype=object), items=items,
                                timestamps=np.asarray(stamps, dtype=object), path="toy", format="custom")
    sequences, _ = preprocess(interactions, 1)
    assert [sequences.item_ids[i - 1] for i in sequences.sequence(0)] == ["i4", "i3", "i1", "i0", "i2"]
