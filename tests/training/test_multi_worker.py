"""Two workers on loopback (MultiWorkerMirroredStrategy, TF_CONFIG) train as one worker does, resume
exactly, and log the norm of the all-reduced gradient."""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO, event_scalars, toy_sequences, write_pairs
from tests.training.test_bad_runs import TINY

STEPS = 6
# Each replica draws the dropout masks of its half of the batch, one worker those of the whole batch:
# without dropout, two workers and one compute the same step.
NO_DROPOUT = ["--config", "hidden_dropout=0", "--config", "attention_dropout=0"]


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for handle in sockets:
        handle.bind(("localhost", 0))
    ports = [handle.getsockname()[1] for handle in sockets]
    for handle in sockets:
        handle.close()
    return ports


def command(source, data_dir, model_dir, steps, *extra):
    return [sys.executable, os.path.join(REPO, "run_scripts", "train.py"), "--dataset", "beauty",
            "--source_file", str(source), "--data_dir", str(data_dir), "--model_dir", str(model_dir),
            "--recipe", "paper", *TINY,
            "--train_steps", str(steps), "--eval_every", "1", *NO_DROPOUT, *extra]


def run_workers(source, data_dir, model_dir, steps, scratch):
    """Runs two workers of one multi-worker job; returns their completed processes."""
    ports = free_ports(2)
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    processes = []
    for index in range(2):
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
               "TMPDIR": str(scratch)}
        processes.append(subprocess.Popen(command(source, data_dir, model_dir, steps, "--strategy", "multi_worker"),
                                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=600)
        results.append((process.returncode, stderr))
    for code, stderr in results:
        assert code == 0, stderr[-3000:]
    return results


def curve(model_dir) -> dict[str, dict[int, float]]:
    """The TensorBoard training scalars {name: {step: value}} of a run."""
    values: dict[str, dict[int, float]] = {}
    for path in sorted(glob.glob(os.path.join(str(model_dir), "train", "events.*"))):
        for tag, points in event_scalars(path).items():
            values.setdefault(tag, {}).update(points)
    return values


@pytest.mark.slow
def test_two_workers_on_loopback_match_one_worker_and_resume(tmp_path):
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    data_dir, scratch = tmp_path / "data", tmp_path / "scratch"
    scratch.mkdir()
    single = subprocess.run(command(source, data_dir, tmp_path / "one", STEPS), capture_output=True, text=True,
                            timeout=600)
    assert single.returncode == 0, single.stderr[-3000:]
    run_workers(source, data_dir, tmp_path / "two", STEPS, scratch)
    one, two = curve(tmp_path / "one"), curve(tmp_path / "two")
    assert sorted(two["loss"]) == list(range(1, STEPS + 1))
    # Each replica weighs its loss by its share of the batch's masked slots and the gradients are
    # summed (IndexedSlices made dense first), so two workers compute one worker's step up to rounding.
    for name in ("loss", "grad_norm", "learning_rate"):
        np.testing.assert_allclose([two[name][s] for s in sorted(one[name])],
                                   [one[name][s] for s in sorted(one[name])], rtol=1e-5, err_msg=name)
    # Half the steps, then resumed to the end: the same curve as the uninterrupted two-worker run.
    run_workers(source, data_dir, tmp_path / "resumed", STEPS // 2, scratch)
    run_workers(source, data_dir, tmp_path / "resumed", STEPS, scratch)
    resumed = curve(tmp_path / "resumed")
    for name in ("loss", "grad_norm"):
        np.testing.assert_allclose([resumed[name][s] for s in range(1, STEPS + 1)],
                                   [two[name][s] for s in range(1, STEPS + 1)], rtol=1e-5, err_msg=name)
    with open(tmp_path / "resumed" / "results.json", encoding="utf-8") as handle:
        assert json.load(handle)["steps"] == STEPS
    assert os.listdir(scratch) == []  # the non-chief worker's private folders are gone
