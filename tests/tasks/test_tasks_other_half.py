"""Every registered Task through the real trainer (the other half of the cases): `tests.tasks.harness`."""

from __future__ import annotations

import pytest

from tests.tasks.harness import CASES, run_task_test


@pytest.mark.parametrize("case", CASES[1::2], ids=[name for name, _, _ in CASES[1::2]])
def test_task_learns_resumes_exactly_and_serves(case, planted, planted_pop_recall, tmp_path, monkeypatch):
    run_task_test(case, planted, planted_pop_recall, str(tmp_path), monkeypatch)
