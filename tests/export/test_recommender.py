"""Recommender (behind bert4rec-recommend and the API): the served top items, batches of histories of
different lengths, unknown ids and bad arguments."""

from __future__ import annotations

import glob
import json
import os
import shutil

import pytest

from bert4rec_tf.data.id_files import write_ids
from bert4rec_tf.export.recommender import Recommender
from tests.export.conftest import ITEMS


@pytest.fixture(scope="module")
def recommender(tiny_run):
    _, run_dir = tiny_run
    return Recommender(os.path.join(run_dir, "export"))


def test_top_items_are_unseen_catalogue_items_best_first(recommender):
    [top] = recommender.recommend([["i1", "i2", "i3"]], k=7)
    ids = [item for item, _ in top]
    assert len(ids) == len(set(ids)) == 7 and set(ids) <= set(ITEMS) - {"i1", "i2", "i3"}
    scores = [score for _, score in top]
    assert scores == sorted(scores, reverse=True)
    assert recommender.recommend([["i1", "i2", "i3"]], k=3)[0] == top[:3]


def test_a_batch_answers_each_history_as_alone(recommender):
    histories = [["i4"], ["i5", "i6", "i7", "i8"], ["i9", "nope"]]
    batch = recommender.recommend(histories)
    for history, answer in zip(histories, batch, strict=True):
        [alone] = recommender.recommend([history])
        assert [item for item, _ in answer] == [item for item, _ in alone]
        assert [score for _, score in answer] == pytest.approx([score for _, score in alone], abs=1e-5)
    assert recommender.recommend([]) == []


def test_unknown_ids_are_listed_once_and_a_history_without_known_ids_is_refused(recommender):
    assert recommender.unknown_ids(["i1", "nope", "zzz", "nope"], "history 0") == ["nope", "zzz"]
    assert recommender.unknown_ids(["i1"], "history 0") == []
    vocab = os.path.join(recommender.export_dir, "vocab.txt")
    with pytest.raises(ValueError, match=f"^no id of --history is in {vocab}: 'nope', 'zzz'$"):
        recommender.unknown_ids(["nope", "zzz"], "--history")
    with pytest.raises(ValueError, match="^history 3 holds no ids$"):
        recommender.unknown_ids([], "history 3")


@pytest.mark.parametrize("histories, k, message", [
    ([["i1"]], 0, "k must be a whole number between 1 and 10"),
    ([["i1"]], 11, "k must be a whole number between 1 and 10"),
    ([["i1"]], 2.5, r"k must be a whole number between 1 and 10 \(the export serves the top 10\), got 2.5"),
    ([["i1"]], "3", "k must be a whole number between 1 and 10"),
    ([["i1"]], True, "k must be a whole number between 1 and 10"),
    (["i1 i2"], 10, "for one history pass \\[history\\]"),
    ("i1 i2", 10, "for one history pass \\[history\\]"),
])
def test_bad_arguments_are_value_errors(recommender, histories, k, message):
    with pytest.raises(ValueError, match=message):
        recommender.recommend(histories, k)


def test_a_folder_without_a_saved_model_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"^{tmp_path} holds no SavedModel; train the run to its end first$"):
        Recommender(str(tmp_path))


def test_a_damaged_saved_model_is_named_damaged(tiny_run, tmp_path):
    _, run_dir = tiny_run
    copy = str(tmp_path / "export")
    shutil.copytree(os.path.join(run_dir, "export"), copy)
    for path in glob.glob(os.path.join(copy, "variables", "variables.data-*")):
        with open(path, "rb+") as handle:  # truncated, as by a full disk or an interrupted copy
            handle.truncate(os.path.getsize(path) // 3)
    with pytest.raises(ValueError, match=f"^{copy}: the SavedModel is damaged") as damaged:
        Recommender(copy).recommend([["i1"]])
    assert "\n" not in str(damaged.value) and str(damaged.value).endswith(
        "the same train command in its run folder exports it again from the run's checkpoint")


@pytest.mark.parametrize("user_attributes, reads", [
    ([{"name": "age", "kind": "categorical", "size": 3}],
     "reads the attributes of each history's user (its data's user feature file)"),
    ([], "learned a vector per training user"),
    (None, "reads each history's user (a vector it learned per training user, or the user's attributes)"),
])
def test_an_export_that_reads_users_asks_for_a_user_saying_what_it_reads_of_them(tmp_path, user_attributes, reads):
    export = tmp_path / "export"
    export.mkdir()
    (export / "saved_model.pb").write_bytes(b"")  # `check_users` loads no SavedModel
    (export / "vocab.txt").write_text("i1\t1\n", encoding="utf-8")
    write_ids(str(export / "users.txt"), ["u1", "u2"])
    if user_attributes is not None:  # its run's configuration, beside the export; None: an export copied alone
        (tmp_path / "config.json").write_text(json.dumps({"model": {"user_attributes": user_attributes}}))
    with pytest.raises(ValueError) as error:
        Recommender(str(export)).check_users(None, 1, "--user")
    assert str(error.value) == (f"this export's model {reads}: give --user, a user of its data (one raw user id per "
                                f"history, as in {export / 'users.txt'})")
