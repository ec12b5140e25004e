"""Fixtures of the Task harness (`tests.tasks.harness`), one planted data set per test file.

The harness (and with it TensorFlow) is imported inside the fixtures: pytest loads this file in the
main process when a run names a file of this folder, and only the test workers need TensorFlow.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[str, str]:
    from tests.tasks.harness import planted_source

    return planted_source(str(tmp_path_factory.mktemp("planted")))


@pytest.fixture(scope="module")
def planted_pop_recall(planted, tmp_path_factory) -> float:
    """POP's test full-ranking Recall@10 on the planted data, through the trainer."""
    from bert4rec_tf.tasks import REFERENCE_TASK
    from tests.tasks.harness import train_case

    return train_case(REFERENCE_TASK, [], planted, str(tmp_path_factory.mktemp("pop")))["full"]["Recall@10"]
