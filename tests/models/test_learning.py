"""Every registered model learns (masked-item models here, next-item models in test_learning_next_item.py):
on a tiny planted-order data set, a few hundred steps beat POP clearly (`tests.models.planted`)."""

from __future__ import annotations

import pytest

from bert4rec_tf.models import MODELS
from tests.models.planted import CASES, MARGIN, MASKED_CASES, full_recall


def test_every_trainable_model_is_covered():
    assert {model for model, _ in CASES.values()} == set(MODELS) - {"pop"}


@pytest.mark.parametrize("case", MASKED_CASES)
def test_model_beats_pop_on_planted_order(case, planted, planted_pop_recall):
    recall, pop = full_recall(case, planted), planted_pop_recall
    assert recall >= pop + MARGIN, f"{case}: full Recall@10 {recall:.3f}, POP {pop:.3f}"
