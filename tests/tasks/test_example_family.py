"""The example family of docs/architecture.md (`tests.tasks.example_bigram`), registered by the test
and run through the same harness as the package's own Tasks."""

from __future__ import annotations

import pytest

from bert4rec_tf.tasks import TASKS, register_task
from tests.tasks.example_bigram import BigramTask
from tests.tasks.harness import run_resume_test, run_task_test


@pytest.fixture
def registered():
    register_task(BigramTask())
    yield
    del TASKS[BigramTask.name]


CASE = ("bigram", "bigram", [])


def test_a_family_in_one_file_learns_and_serves(registered, planted, planted_pop_recall, tmp_path):
    run_task_test(CASE, planted, planted_pop_recall, str(tmp_path))


@pytest.mark.slow
def test_a_family_in_one_file_resumes_exactly(registered, planted, tmp_path, monkeypatch):
    run_resume_test(CASE, planted, str(tmp_path), monkeypatch)
