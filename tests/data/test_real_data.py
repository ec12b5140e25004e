"""The paper's counts on the real files in ../shared/datasets (skipped, with the reason, when absent)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bert4rec_tf.data.prepare import prepare
from bert4rec_tf.data.tfds_builders import load_user_sequences
from bert4rec_tf.tasks import preset
from tests.conftest import REPO, real_file

# Reading a whole real data set takes minutes on a slow machine: all of these are slow checks.
pytestmark = [pytest.mark.realdata, pytest.mark.slow]


@pytest.mark.parametrize("dataset, relative, users, items, actions, min_length", [
    ("beauty", "beauty/beauty.txt.gz", 40_226, 54_542, 353_962, 5),
    ("ml-1m", "ml-1m/ml-1m.txt.gz", 6_040, 3_416, 999_611, 18),
    ("ml-1m", "ml-1m/ml-1m_interactions_orig_ids.txt.gz", 6_040, 3_416, 999_611, 18),
    ("beauty-5core", "beauty-5core-s3rec/Beauty.txt.gz", 22_363, 12_101, 198_502, 5),
], ids=["beauty", "ml-1m", "ml-1m-original-ids", "beauty-5core"])
def test_paper_counts(tmp_path, dataset, relative, users, items, actions, min_length):
    sequences, _ = load_user_sequences(dataset, str(tmp_path), real_file(relative))
    stats = sequences.stats()
    assert (stats["users"], stats["items"], stats["actions"], stats["min_length"]) == (
        users, items, actions, min_length)
    assert stats["avg_length"] == pytest.approx(actions / users)


def test_stats_command_prints_the_beauty_counts(tmp_path):
    source = real_file("beauty/beauty.txt.gz")
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "run_scripts", "prepare_data.py"), "--dataset", "beauty",
         "--source_file", source, "--data_dir", str(tmp_path), "--stats"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert ("beauty: users 40,226 | items 54,542 | actions 353,962 | avg length 8.80 | min length 5"
            in result.stdout)


def test_ml1m_paper_preset_preparation(tmp_path):
    prepared = prepare(preset("ml-1m").data, str(tmp_path), real_file("ml-1m/ml-1m.txt.gz"), progress=False)
    meta = prepared.metadata
    assert meta["vocab_size"] == 3_418 and meta["mask_id"] == 3_417
    assert meta["num_instances"] == meta["num_windows"] * 11
    assert len(meta["shards"]) == 4
