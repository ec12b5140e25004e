"""Metrics by the training frequency of the test target, against counts and ranks made by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bert4rec_tf.data.split import training_sequences
from bert4rec_tf.evaluation.metrics import SAMPLED_METRICS
from bert4rec_tf.evaluation.slices import slice_labels, sliced_metrics, target_frequencies
from tests.data.test_pipeline import sequences_of
from tests.evaluation.test_metrics import FixedScores


def test_target_frequencies_count_the_splits_training_items_only():
    # Training items under "valid" (the last two held out): [1, 1], [1, 2], [3]; under "original": one more each.
    sequences = sequences_of([[1, 1, 2, 3], [1, 2, 2, 1], [3, 1, 2]], num_items=3)
    # counts under "valid": item 1 three times, 2 once, 3 once
    assert target_frequencies(sequences, training_sequences(sequences, "valid"), "test").tolist() == [1, 3, 1]  # targets 3, 1, 2
    assert target_frequencies(sequences, training_sequences(sequences, "valid"), "valid").tolist() == [1, 1, 3]  # targets 2, 2, 1
    assert target_frequencies(sequences, training_sequences(sequences, "original"), "test").tolist() == [1, 4, 3]
    with pytest.raises(ValueError, match="stage must be 'valid' or 'test'"):
        target_frequencies(sequences, [], "train")


def test_each_slice_averages_its_own_users():
    assert slice_labels() == ["<5", "5-20", ">20"] and slice_labels((2,)) == ["<2", ">1"]
    ranks = {"pop": np.array([0, 50, 3, 9])}
    found = sliced_metrics(ranks, np.array([2, 30, 5, 20]), {"pop": ("HR@10", "MRR")})
    assert found["<5"] == {"users": 1, "pop": {"HR@10": 1.0, "MRR": 1.0}}
    assert found["5-20"] == {"users": 2, "pop": {"HR@10": 1.0, "MRR": pytest.approx((1 / 4 + 1 / 10) / 2)}}
    assert found[">20"] == {"users": 1, "pop": {"HR@10": 0.0, "MRR": pytest.approx(1 / 51)}}
    empty = sliced_metrics(ranks, np.array([30, 30, 30, 30]), {"pop": ("HR@10",)})
    assert empty["<5"]["users"] == 0 and math.isnan(empty["<5"]["pop"]["HR@10"])


def test_the_evaluators_ranks_give_the_same_averages_and_their_slices():
    from bert4rec_tf.evaluation.evaluator import evaluate

    sequences = sequences_of([[1, 2, 3, 4], [4, 3, 6, 5], [1, 4, 2, 4]], num_items=6)
    model = FixedScores([9, 1, 2, 3, 4, 5, 6, 9])  # item i scores i
    candidates = {"pop_test": np.array([[5, 6], [1, 2], [1, 3]])}
    ranks = {}
    out = evaluate(model, sequences, "test", max_len=4, candidates=candidates, protocols=("pop",), ranks_out=ranks)
    # targets 4 (5, 6 above: rank 2), 5 (rank 0), 4 (1, 3 below: rank 0)
    assert ranks["pop"].tolist() == [2, 0, 0] and ranks["users"].tolist() == [0, 1, 2]
    assert out["pop"]["MRR"] == pytest.approx((1 / 3 + 1 + 1) / 3)
    frequencies = target_frequencies(sequences, training_sequences(sequences, "valid"), "test")
    assert frequencies.tolist() == [2, 0, 2]  # item 4 is in two training lists ([1, 2] has none), item 5 in none
    found = sliced_metrics({"pop": ranks["pop"]}, frequencies, {"pop": SAMPLED_METRICS}, edges=(1, 3))
    assert found["<1"]["users"] == 1 and found["<1"]["pop"]["HR@1"] == 1.0
    assert found["1-2"]["users"] == 2 and found["1-2"]["pop"]["HR@1"] == 0.5
