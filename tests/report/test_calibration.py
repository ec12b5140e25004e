"""The cores' speed, measured before each run (bert4rec_tf/experiments/calibration.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_the_calibration_measures_this_processs_cores():
    """Both figures are measured, positive and printed as one JSON line by `python -m`; pinned to one
    core the process reports one core."""
    pin = (lambda: os.sched_setaffinity(0, [0])) if hasattr(os, "sched_setaffinity") else None
    result = subprocess.run([sys.executable, "-m", "bert4rec_tf.experiments.calibration"], capture_output=True,
                            text=True, timeout=600, preexec_fn=pin, cwd=REPO)
    assert result.returncode == 0, result.stderr[-2000:]
    speed = json.loads(result.stdout.strip().splitlines()[-1])
    assert speed["float32_gflops"] > 0.5 and speed["stream_gbs"] > 0.05
    assert speed["cores"] == (1 if pin else os.cpu_count())

