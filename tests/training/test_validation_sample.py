"""`train.valid_users`: validation during training on a fixed sample of the users tested, with its
two standard errors beside the curve, and the test on every user."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bert4rec_tf.evaluation.evaluator import evaluation_users, validation_users
from bert4rec_tf.training.callbacks import two_standard_errors
from tests.conftest import event_scalars, planted_order_sequences, write_pairs


def test_the_validation_sample_is_a_fixed_subset_of_the_users_tested():
    everyone = validation_users(1000, 0, 0)
    assert everyone is None
    sample = validation_users(1000, 0, 100)
    assert len(sample) == 100 and len(set(sample)) == 100 and list(sample) == sorted(sample)
    np.testing.assert_array_equal(sample, validation_users(1000, 0, 100))  # the same in every run
    tested = evaluation_users(1000, 300)
    within = validation_users(1000, 300, 50)
    assert len(within) == 50 and set(within) <= set(tested)
    np.testing.assert_array_equal(validation_users(1000, 300, 0), tested)  # 0: the users tested
    assert validation_users(1000, 300, 300) is not None and len(validation_users(1000, 300, 300)) == 300
    assert validation_users(100, 0, 100) is None  # a sample of every user is every user


def test_two_standard_errors_of_a_hit_rate():
    assert two_standard_errors(0.5, 100) == pytest.approx(0.1)  # 2 * sqrt(0.25 / 100)
    assert two_standard_errors(0.0, 100) == 0.0
    assert math.isnan(two_standard_errors(0.3, 0))


def test_a_run_validates_on_its_sample_and_tests_every_user(tmp_path):
    from bert4rec_tf import api

    source = write_pairs(str(tmp_path / "planted.txt"), planted_order_sequences(num_users=200, num_items=40))
    run = api.train("beauty", str(tmp_path / "run"), model="bpr_mf", source_file=source,
                    data_dir=str(tmp_path / "data"), eval_every=10, verbose=0,
                    overrides={"train_steps": 20, "batch_size": 16, "num_negatives": 20, "valid_users": 50})
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert "evaluated_users" not in results  # the test takes every user
    curve = json.loads((tmp_path / "run" / "validation.json").read_text())
    assert [point["step"] for point in curve] == [10, 20]
    for point in curve:
        assert point["valid_users"] == 50 and 0 < point["validation_seconds"] < point["seconds"]
        assert 0 < point["training_seconds"] < point["seconds"]
        assert point["pop/NDCG@10_2se"] == pytest.approx(two_standard_errors(point["pop/NDCG@10"], 50))
    # The first interval's time in steps and its validation are within the run's time so far (to the
    # 0.1 s `seconds` is rounded to), which also holds the start-up.
    assert curve[0]["training_seconds"] + curve[0]["validation_seconds"] <= curve[0]["seconds"] + 0.05
    # The checkpoint is chosen on the sample.
    best = next(point for point in curve if point["step"] == results["best_step"])
    assert best["pop/NDCG@10"] == max(point["pop/NDCG@10"] for point in curve)
    scalars = event_scalars(next(str(path) for path in (tmp_path / "run" / "validation").iterdir()))
    assert set(scalars["pop/NDCG@10_2se"]) == {10, 20}
    assert run.metrics["pop"]["NDCG@10"] == results["test"]["pop"]["NDCG@10"]
    # The same run validated on every user: the same training, other validation numbers, no sample.
    api.train("beauty", str(tmp_path / "everyone"), model="bpr_mf", source_file=source,
              data_dir=str(tmp_path / "data"), eval_every=10, verbose=0,
              overrides={"train_steps": 20, "batch_size": 16, "num_negatives": 20})
    full = json.loads((tmp_path / "everyone" / "validation.json").read_text())
    assert [point["loss"] for point in full] == [point["loss"] for point in curve]
    assert all(point["validation_seconds"] > 0 for point in full)
    assert "valid_users" not in full[0] and full[0]["pop/NDCG@10"] != curve[0]["pop/NDCG@10"]
