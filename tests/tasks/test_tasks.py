"""Every registered Task through the real trainer (half of the cases; the others in
test_tasks_other_half.py, so that the two test workers share them): `tests.tasks.harness`."""

from __future__ import annotations

from tests.tasks.harness import CASES, task_tests

test_task_learns_and_serves_from_a_resumable_stream, test_task_resumes_exactly = task_tests(CASES[0::2])


def test_every_registered_task_is_a_case():
    from bert4rec_tf.tasks import TASKS, task_of_preset

    assert {task_of_preset(preset).name for _, preset, _ in CASES} == set(TASKS)
