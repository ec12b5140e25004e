"""The papers' published numbers, each checked against ../shared/SPEC.md
(bert4rec_tf/experiments/published.py)."""

from __future__ import annotations

import os

import pytest

from bert4rec_tf.experiments.published import PUBLISHED, PUBLISHED_FULL
from tests.conftest import REPO

SPEC = os.path.join(os.path.dirname(REPO), "shared", "SPEC.md")


def test_every_published_number_quoted_is_in_the_spec():
    if not os.path.isfile(SPEC):
        pytest.skip(f"{SPEC} is absent")
    with open(SPEC, encoding="utf-8") as handle:
        spec = handle.read()
    for (dataset, setting), (protocol, values, source) in [*PUBLISHED.items(), *PUBLISHED_FULL.items()]:
        for metric, value in values.items():
            assert f"{value:.4f}" in spec, (dataset, setting, metric, value)
    assert PUBLISHED[("ml-1m", "bert4rec")][1]["HR@10"] == 0.6970
    assert PUBLISHED[("ml-1m", "bert4rec-match")][0] == "uniform"  # the matching paper's protocol
    assert PUBLISHED[("beauty", "ablation-no-ln")][1] == {"NDCG@10": 0.1642}
    assert PUBLISHED_FULL[("ml-1m", "sasrec-ce")][1] == {"Recall@10": 0.3152, "NDCG@10": 0.1821}

