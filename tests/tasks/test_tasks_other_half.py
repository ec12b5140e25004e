"""Every registered Task through the real trainer (the other half of the cases): `tests.tasks.harness`."""

from __future__ import annotations

from tests.tasks.harness import CASES, task_tests

test_task_learns_and_serves_from_a_resumable_stream, test_task_resumes_exactly = task_tests(CASES[1::2])
