"""The serving SavedModel: history encoding, both signatures, agreement with the Keras model, loaded
in a fresh process that cannot import bert4rec_tf."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.config import ModelConfig
from bert4rec_tf.export.saved_model import encode_history, export_saved_model
from bert4rec_tf.models import BERT4Rec

ITEMS = np.array([f"i{k}" for k in range(1, 31)])
MAX_LEN = 6


def test_encode_history_left_aligns_keeps_the_last_items_and_appends_mask():
    ids = tf.constant([[0, 3, 0, 4, 5, 6], [0, 0, 0, 0, 0, 0], [7, 0, 0, 0, 0, 1]], tf.int64)
    input_ids, input_mask = encode_history(ids, 4, 9)
    assert input_ids.numpy().tolist() == [[4, 5, 6, 9], [9, 0, 0, 0], [7, 1, 9, 0]]
    assert input_mask.numpy().tolist() == [[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model = BERT4Rec(ModelConfig(vocab_size=32, max_len=MAX_LEN, hidden_size=8, num_heads=2, intermediate_size=16,
                                 num_layers=1))
    model.build()
    directory = export_saved_model(model, ITEMS, MAX_LEN, str(tmp_path_factory.mktemp("run") / "export"))
    return model, directory


LOADER = r"""
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "bert4rec_tf":
            raise ImportError("bert4rec_tf must not be needed")
sys.meta_path.insert(0, Block())
import tensorflow as tf
loaded = tf.saved_model.load(sys.argv[1])
top = loaded.signatures["serving_default"](history=tf.constant([["i1", "", "i2", "nope"], ["", "", "", ""]]))
scored = loaded.signatures["score_candidates"](history=tf.constant([["i1", "", "i2", "nope"], ["", "", "", ""]]),
                                               candidates=tf.constant([["i3", "zzz", "i1"], ["i4", "i5", "i6"]]))
print(json.dumps({"signatures": sorted(loaded.signatures.keys()),
                  "item_ids": [[x.decode() for x in row] for row in top["item_ids"].numpy()],
                  "top_scores": top["scores"].numpy().tolist(), "scores": scored["scores"].numpy().tolist(),
                  "shapes": [top["item_ids"].shape.as_list(), top["scores"].shape.as_list(),
                             scored["scores"].shape.as_list()]}))
"""


def test_fresh_process_without_the_package_answers_both_signatures(exported):
    model, directory = exported
    result = subprocess.run([sys.executable, "-c", LOADER, directory], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["signatures"] == ["score_candidates", "serving_default"]
    assert out["shapes"] == [[2, 10], [2, 10], [2, 3]]
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


def test_vocabulary_file_maps_raw_ids_to_model_ids(exported):
    _, directory = exported
    with open(os.path.join(directory, "vocab.txt")) as handle:
        rows = [line.rstrip("\n").split("\t") for line in handle]
    assert rows[0] == ["i1", "1"] and rows[-1] == ["i30", "30"] and len(rows) == 30
