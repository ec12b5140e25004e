"""Every registered Task through the real trainer (half of the cases; the others in
test_tasks_other_half.py, so that the two test workers share them): `tests.tasks.harness`."""

from __future__ import annotations

import pytest

from tests.tasks.harness import CASES, run_task_test


def test_every_registered_task_is_a_case():
    from bert4rec_tf.tasks import TASKS, task_of_preset

    assert {task_of_preset(preset).name for _, preset, _ in CASES} == set(TASKS)


@pytest.mark.parametrize("case", CASES[0::2], ids=[name for name, _, _ in CASES[0::2]])
def test_task_learns_resumes_exactly_and_serves(case, planted, planted_pop_recall, tmp_path, monkeypatch):
    run_task_test(case, planted, planted_pop_recall, str(tmp_path), monkeypatch)
