"""Fixtures of the planted-order learning check (`tests.models.planted`), one data set per test file."""

from __future__ import annotations

import pytest

from tests.models.planted import full_recall, planted_source


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[str, str]:
    return planted_source(str(tmp_path_factory.mktemp("planted")))


@pytest.fixture(scope="module")
def planted_pop_recall(planted) -> float:
    return full_recall("pop", planted)
