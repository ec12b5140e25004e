"""Ids holding CR, LF, CRLF, tabs, quotes and commas round-trip from a custom CSV through preparation,
the export's vocab.txt, the SavedModel and bert4rec-recommend, and distinct ids stay distinct."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys

import pytest

from bert4rec_tf import api
from bert4rec_tf.data.id_files import escape_id, read_ids, unescape_id
from bert4rec_tf.export.recommender import Recommender
from bert4rec_tf.training.run_folder import RunFolder
from tests.conftest import REPO
from tests.data.test_readers import tricky_ids

USERS = 24
ITEMS_PER_USER = 8


@pytest.fixture(scope="module")
def tricky_run(tmp_path_factory):
    """(item ids, run folder) of a POP run on a CSV whose 63 item ids are all awkward, three of them
    differing only in their line break (x CR y, x LF y, x CRLF y)."""
    root = tmp_path_factory.mktemp("tricky")
    items = tricky_ids(60, seed=7) + ["x\ry", "x\ny", "x\r\ny"]
    source = os.path.join(root, "tricky.csv")
    with open(source, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)  # CRLF line ends: a lone CR inside an id is quoted
        writer.writerow(["user", "item", "timestamp"])
        for user in range(USERS):
            for position in range(ITEMS_PER_USER):
                writer.writerow([f"u\r{user}", items[(user * 5 + position * 7) % len(items)], position])
    run_dir = os.path.join(root, "run")
    api.train("custom", run_dir, model="pop", source_file=source, data_dir=os.path.join(root, "data"),
              recipe="paper", overrides={"num_negatives": 3}, eval_every=10, verbose=0)
    return items, run_dir


def test_every_id_is_prepared_and_exported_distinct(tricky_run):
    items, run_dir = tricky_run
    prepared = RunFolder(run_dir).data_record()["data_directory"]
    assert sorted(read_ids(os.path.join(prepared, "vocab.txt"))) == sorted(items)
    assert sorted(read_ids(os.path.join(prepared, "users.txt"))) == sorted(f"u\r{user}" for user in range(USERS))
    recommender = Recommender(api.Run.load(run_dir).export_dir)
    assert sorted(recommender.vocabulary) == sorted(items)
    assert len(set(recommender.vocabulary.values())) == len(items)


def test_the_saved_model_serves_histories_of_such_ids(tricky_run):
    items, run_dir = tricky_run
    run = api.Run.load(run_dir)
    history = ["x\ry", "x\r\ny", items[0]]
    assert Recommender(run.export_dir).unknown_ids(history, "history") == []
    top = run.recommend([history], k=10)[0]
    assert len(top) == 10 and {item for item, _ in top} <= set(items) - set(history)


@pytest.mark.slow  # a new process importing TensorFlow
def test_recommend_reads_them_escaped_and_prints_them_escaped(tricky_run, tmp_path):
    items, run_dir = tricky_run
    history = tmp_path / "history.txt"
    history.write_text("".join(escape_id(item) + "\n" for item in ["x\ry", "x\ny", items[1]]), encoding="utf-8")
    result = subprocess.run([sys.executable, os.path.join(REPO, "run_scripts", "recommend.py"), "--model_dir",
                             run_dir, "--history_file", str(history)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "unknown ids" not in result.stderr
    # "NN. <escaped id, right-aligned in 12 columns>  <score>"; only ASCII spaces pad (ids hold others)
    printed = [re.fullmatch(r" ?\d+\. +(.+?) +-?[0-9]+\.[0-9]{3}", line).group(1) for line in result.stdout.splitlines()]
    assert len(printed) == 10
    assert {unescape_id(item) for item in printed} <= set(items) - {"x\ry", "x\ny", items[1]}
