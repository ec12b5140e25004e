"""The example family of docs/architecture.md (`tests/plugins/bigram`), added from outside the package
as an installed distribution would be: its module and its dist-info (with the entry points its
pyproject.toml declares) on the path, found through the entry-point group `bert4rec_tf.tasks`. It
runs through the same harness as the package's own Tasks, and `bert4rec-train --model bigram` trains
it in a fresh process."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bert4rec_tf.config import FAMILIES
from bert4rec_tf.tasks import TASKS, load_plugins
from tests.tasks.harness import run_resume_test, run_task_test

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "bigram"
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "interactions.csv"
CASE = ("bigram", "bigram", [])


def installed_plugin(root: Path, entry_points: dict | None = None) -> Path:
    """A folder from which Python finds the plugin as pip installs it: its module, and a dist-info
    with the entry points of its pyproject.toml (or `entry_points`: {group: {name: target}})."""
    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    entry_points = entry_points or project["entry-points"]
    shutil.copy(PLUGIN / "bert4rec_tf_bigram.py", root)
    info = root / f"bert4rec_tf_bigram-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in entry_points.items()))
    return root


@pytest.fixture
def registered(tmp_path, monkeypatch):
    (tmp_path / "site").mkdir()
    monkeypatch.syspath_prepend(str(installed_plugin(tmp_path / "site")))
    importlib.invalidate_caches()
    assert load_plugins() == ["bigram"]
    yield
    del TASKS["bigram"], FAMILIES["bigram"]
    sys.modules.pop("bert4rec_tf_bigram", None)


def test_a_plugin_family_learns_and_serves(registered, planted, planted_pop_recall, tmp_path):
    run_task_test(CASE, planted, planted_pop_recall, str(tmp_path))


def test_a_plugin_family_trains_from_the_command_line(tmp_path):
    (tmp_path / "site").mkdir()
    site = installed_plugin(tmp_path / "site")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    environment.pop("TF_CPP_MIN_LOG_LEVEL", None)
    command = [sys.executable, "-m", "bert4rec_tf.scripts.train", "--dataset", "custom", "--source_file",
               str(EXAMPLE), "--data_dir", str(tmp_path / "data"), "--model", "bigram", "--recipe", "paper",
               "--train_steps", "40", "--eval_every", "40", "--config", "num_negatives=3"]
    done = subprocess.run(command + ["--model_dir", str(tmp_path / "run")], capture_output=True, text=True,
                          env=environment, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    # The plugin imports TensorFlow while the registry loads it, before the flags are parsed: its native
    # INFO lines are hidden all the same.
    assert "cpu_feature_guard" not in done.stderr and "oneDNN custom operations" not in done.stderr, done.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["config"]["model"] == {"name": "bigram", "vocab_size": results["config"]["model"]["vocab_size"],
                                          "num_users": results["config"]["model"]["num_users"], "loss": "ce",
                                          "hidden_size": 64}
    # Its schema is its declaration: a key it does not have is refused, naming the keys it has.
    refused = subprocess.run(command + ["--model_dir", str(tmp_path / "other"), "--config", "l2=0.1"],
                             capture_output=True, text=True, env=environment, timeout=600)
    assert refused.returncode != 0
    assert "bigram has no setting 'l2'" in refused.stderr and "model.hidden_size" in refused.stderr


def test_a_broken_plugin_is_left_out_with_a_warning(tmp_path, monkeypatch):
    site = installed_plugin(tmp_path, {"bert4rec_tf.tasks": {"broken": "no_such_module:Task"}})
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    with pytest.warns(UserWarning, match="plugin 'broken' .* was not loaded: No module named 'no_such_module'"):
        assert load_plugins() == []
    assert "broken" not in TASKS and "bert4rec" in TASKS


@pytest.mark.slow
def test_a_plugin_family_resumes_exactly(registered, planted, tmp_path, monkeypatch):
    run_resume_test(CASE, planted, str(tmp_path), monkeypatch)
