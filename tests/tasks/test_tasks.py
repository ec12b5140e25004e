"""Every registered Task through the real trainer (half of the cases; the others in
test_tasks_other_half.py, so that the two test workers share them): `tests.tasks.harness`."""

from __future__ import annotations

import pytest

from tests.tasks.harness import CASES, run_resume_test, run_task_test

HALF = CASES[0::2]


def test_every_registered_task_is_a_case():
    from bert4rec_tf.tasks import TASKS, task_of_preset

    assert {task_of_preset(preset).name for _, preset, _ in CASES} == set(TASKS)


@pytest.mark.parametrize("case", HALF, ids=[name for name, _, _ in HALF])
def test_task_learns_and_serves_from_a_resumable_stream(case, planted, planted_pop_recall, tmp_path):
    run_task_test(case, planted, planted_pop_recall, str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("case", HALF, ids=[name for name, _, _ in HALF])
def test_task_resumes_exactly(case, planted, tmp_path, monkeypatch):
    run_resume_test(case, planted, str(tmp_path), monkeypatch)
