"""Every registered model learns (next-item models here, masked-item models in test_learning.py): on a
tiny planted-order data set, a few hundred steps beat POP clearly (`tests.models.planted`)."""

from __future__ import annotations

import pytest

from tests.models.planted import MARGIN, NEXT_ITEM_CASES, full_recall


@pytest.mark.parametrize("case", NEXT_ITEM_CASES)
def test_model_beats_pop_on_planted_order(case, planted, planted_pop_recall):
    recall, pop = full_recall(case, planted), planted_pop_recall
    assert recall >= pop + MARGIN, f"{case}: full Recall@10 {recall:.3f}, POP {pop:.3f}"
