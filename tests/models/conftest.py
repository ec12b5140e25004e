"""Fixtures of the planted-order learning check (`tests.models.planted`), one data set per test file.

`tests.models.planted` (and with it TensorFlow) is imported inside the fixtures: pytest loads this file
in the main process when a run names a file of this folder, and only the test workers need TensorFlow.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[str, str]:
    from tests.models.planted import planted_source

    return planted_source(str(tmp_path_factory.mktemp("planted")))


@pytest.fixture(scope="module")
def planted_pop_recall(planted) -> float:
    from tests.models.planted import full_recall

    return full_recall("pop", planted)
