"""Every registered Task through the real trainer (the other half of the cases): `tests.tasks.harness`."""

from __future__ import annotations

import pytest

from tests.tasks.harness import CASES, run_resume_test, run_task_test

HALF = CASES[1::2]


@pytest.mark.parametrize("case", HALF, ids=[name for name, _, _ in HALF])
def test_task_learns_and_serves_from_a_resumable_stream(case, planted, planted_pop_recall, tmp_path):
    run_task_test(case, planted, planted_pop_recall, str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("case", HALF, ids=[name for name, _, _ in HALF])
def test_task_resumes_exactly(case, planted, tmp_path, monkeypatch):
    run_resume_test(case, planted, str(tmp_path), monkeypatch)
