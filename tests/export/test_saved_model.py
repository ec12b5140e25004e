"""The serving SavedModel: history encoding and exclusion, both signatures, agreement with the Keras
model, loaded in a fresh process that cannot import bert4rec_tf; small, Beauty-sized and Unicode
catalogues."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.export.saved_model import export_saved_model, read_vocabulary, unseen_items
from tests.export.conftest import ITEMS, UNICODE_ITEMS, WITHOUT_PACKAGE, export_tiny


def test_unseen_items_drops_each_rows_history_and_ignores_padding():
    ids = tf.constant([[0, 2, 2, 4], [0, 0, 0, 0], [1, 2, 3, 4]], tf.int64)
    assert unseen_items(ids, 4).numpy().tolist() == [[True, False, True, False], [True] * 4, [False] * 4]


LOADER = WITHOUT_PACKAGE + r"""
loaded = tf.saved_model.load(sys.argv[1])
top = loaded.signatures["serving_default"](history=tf.constant([["i1", "", "i2", "nope"], ["", "", "", ""]]))
scored = loaded.signatures["score_candidates"](history=tf.constant([["i1", "", "i2", "nope"], ["", "", "", ""]]),
                                               candidates=tf.constant([["i3", "zzz", "i1"], ["i4", "i5", "i6"]]))
print(json.dumps({"signatures": sorted(loaded.signatures.keys()),
                  "item_ids": [[x.decode() for x in row] for row in top["item_ids"].numpy()],
                  "top_scores": top["scores"].numpy().tolist(), "scores": scored["scores"].numpy().tolist(),
                  "num_items": top["num_items"].numpy().tolist(),
                  "shapes": [top["item_ids"].shape.as_list(), top["scores"].shape.as_list(),
                             scored["scores"].shape.as_list()]}))
"""


@pytest.mark.slow
def test_fresh_process_without_the_package_answers_both_signatures(tiny_run):
    model, run_dir = tiny_run
    result = subprocess.run([sys.executable, "-c", LOADER, os.path.join(run_dir, "export")], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["signatures"] == ["score_candidates", "serving_default", "user_embedding"]
    assert out["shapes"] == [[2, 10], [2, 10], [2, 3]] and out["num_items"] == [10, 10]
    features = {"input_ids": np.array([[1, 2, 31, 0, 0, 0], [31, 0, 0, 0, 0, 0]]),
                "input_mask": np.array([[1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])}
    keras_scores = np.asarray(model.score_last(features))  # [2, 32]
    expected = [[keras_scores[0, 3], -np.inf, keras_scores[0, 1]], keras_scores[1, [4, 5, 6]].tolist()]
    np.testing.assert_allclose(np.array(out["scores"]), np.array(expected), rtol=1e-5, atol=1e-6)
    for row, history in enumerate(({1, 2}, set())):
        ranked = [int(name[1:]) for name in out["item_ids"][row]]
        assert not set(ranked) & history                     # the history is never recommended
        allowed = [i for i in range(1, 31) if i not in history]
        best = sorted(allowed, key=lambda i: -keras_scores[row, i])[:10]
        assert ranked == best
        np.testing.assert_allclose(out["top_scores"][row], keras_scores[row, best], rtol=1e-5, atol=1e-6)


def test_vocabulary_file_maps_raw_ids_to_model_ids(tiny_run):
    _, run_dir = tiny_run
    with open(os.path.join(run_dir, "export", "vocab.txt")) as handle:
        rows = [line.rstrip("\n").split("\t") for line in handle]
    assert rows[0] == ["i1", "1"] and rows[-1] == ["i30", "30"] and len(rows) == 30
    assert read_vocabulary(os.path.join(run_dir, "export")) == {item: k for k, item in enumerate(ITEMS, start=1)}


def test_fewer_than_ten_unseen_items_leave_marked_empty_slots(tiny_run):
    model, run_dir = tiny_run
    served = tf.saved_model.load(os.path.join(run_dir, "export"))
    out = served.signatures["serving_default"](history=tf.constant([ITEMS[:25], [""] * 25]))
    assert out["num_items"].numpy().tolist() == [5, 10]
    names = [[x.decode() for x in row] for row in out["item_ids"].numpy()]
    scores = out["scores"].numpy()
    features = {"input_ids": np.array([[21, 22, 23, 24, 25, 31]]), "input_mask": np.ones((1, 6))}
    keras_scores = np.asarray(model.score_last(features))[0]  # [32]; the whole history is excluded, not only
    best = sorted(range(26, 31), key=lambda i: -keras_scores[i])  # the last max_len - 1 items the model reads
    assert names[0] == [f"i{i}" for i in best] + [""] * 5
    np.testing.assert_allclose(scores[0, :5], keras_scores[best], rtol=1e-5, atol=1e-6)
    assert np.all(scores[0, 5:] == -np.inf) and np.all(np.isfinite(scores[1])) and "" not in names[1]


def test_any_unicode_id_round_trips_the_vocabulary_and_is_served(unicode_run):
    _, run_dir = unicode_run
    export = os.path.join(run_dir, "export")
    with open(os.path.join(export, "vocab.txt"), encoding="utf-8") as handle:
        assert len(handle.readlines()) == len(UNICODE_ITEMS)
    assert read_vocabulary(export) == {item: k for k, item in enumerate(UNICODE_ITEMS, start=1)}
    served = tf.saved_model.load(export)
    histories = tf.constant([[item] for item in UNICODE_ITEMS] + [[""]])  # one id a row, then an empty history
    out = served.signatures["serving_default"](history=histories)  # fewer than 10 items in all: k is 8
    assert out["num_items"].numpy().tolist() == [7] * len(UNICODE_ITEMS) + [8]
    for row, item in enumerate([*UNICODE_ITEMS, None]):
        names = [x.decode("utf-8") for x in out["item_ids"].numpy()[row]]
        count = out["num_items"].numpy()[row]
        assert sorted(names[:count]) == sorted(set(UNICODE_ITEMS) - {item}) and names[count:] == [""] * (10 - count)
        assert np.all(out["scores"].numpy()[row, count:] == -np.inf)
    scored = served.signatures["score_candidates"](history=histories[:-1], candidates=histories[:-1])["scores"]
    assert np.all(np.isfinite(scored.numpy()))  # every id is known as a candidate too


def _memory_kb(field: str) -> int:
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith(field + ":"))


@pytest.mark.slow
def test_beauty_sized_catalogue_serves_256_histories_of_200_in_bounded_memory(tmp_path):
    items = [str(k) for k in range(1, 54_543)]  # Beauty's 54,542 items
    export_tiny(str(tmp_path), items, max_len=200)
    serve = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    serve(history=tf.constant([["1"]]))  # traces and allocates the weights before measuring
    history = np.random.default_rng(0).integers(1, 54_543, (256, 200)).astype(str)
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # resets the peak resident set size
    except OSError as error:
        pytest.skip(f"cannot reset the peak memory through /proc/self/clear_refs: {error}")
    before = _memory_kb("VmRSS")
    out = serve(history=tf.constant(history))
    growth_mb = (_memory_kb("VmHWM") - before) / 1024
    print(f"peak memory growth of one call: {growth_mb:.0f} MB")
    assert growth_mb < 1024, growth_mb  # a [256, 200, 54,544] float32 one-hot alone would take 11 GB
    assert out["num_items"].numpy().tolist() == [10] * 256
    for row in range(0, 256, 51):
        assert not {x.decode() for x in out["item_ids"].numpy()[row]} & set(history[row])


@pytest.mark.parametrize("name", ["bert4rec", "bpr_mf"])
def test_a_batch_served_in_parts_of_rows_answers_as_in_one_part(tmp_path, name):
    from tests.conftest import family_config
    from bert4rec_tf.constants import vocab_size
    from bert4rec_tf.tasks import TASKS

    items = [f"i{k}" for k in range(1, 31)]  # vocabulary of 32
    users = [f"u{k}" for k in range(1, 8)]
    config = family_config(name=name, vocab_size=vocab_size(len(items)), max_len=6, hidden_size=8, num_heads=2,
                         intermediate_size=16, num_layers=1, loss=TASKS[name].losses[0], num_users=len(users))
    model = TASKS[name].build_model(config)
    model.fit_statistics([np.arange(1, 31) % 9 + 1])
    rng = np.random.default_rng(4)
    history = tf.constant(rng.choice(items + [""], (7, 5)))
    candidates = tf.constant(rng.choice(items, (7, 3)))
    by_user = {"user": tf.constant(users)} if getattr(model, "reads_users", False) else {}
    answers = []
    for budget, folder in ((10 ** 6, "whole"), (2 * 32 + 31, "parts")):  # parts of 2 rows: 2, 2, 2, 1
        export_saved_model(model, np.array(items), str(tmp_path / folder), np.array(users), max_batch_scores=budget)
        signatures = tf.saved_model.load(str(tmp_path / folder)).signatures
        served = signatures["serving_default"](history=history, **by_user)
        scored = signatures["score_candidates"](history=history, candidates=candidates, **by_user)
        empty = signatures["serving_default"](history=tf.zeros([0, 5], tf.string),
                                              **{key: value[:0] for key, value in by_user.items()})
        assert empty["item_ids"].shape == (0, 10) and empty["num_items"].shape == (0,)
        answers.append({key: value.numpy() for key, value in (served | {"candidate_scores": scored["scores"]}).items()})
    assert answers[0]["item_ids"].shape == (7, 10) and answers[0]["candidate_scores"].shape == (7, 3)
    for key, value in answers[0].items():
        if value.dtype.kind == "f":  # a matrix product of fewer rows may round differently
            np.testing.assert_allclose(value, answers[1][key], rtol=1e-6, atol=1e-7, err_msg=key)
        else:
            np.testing.assert_array_equal(value, answers[1][key], err_msg=key)
