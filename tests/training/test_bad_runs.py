"""Bad input and faults in the main job: each ends in one line naming the culprit, exit status 1, and
leaves no artifact that looks complete; a finished run's results stay untouched."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

from bert4rec_tf import cli
from bert4rec_tf.files import write_json_atomic
from tests.conftest import REPO, toy_sequences, write_pairs

# Every test here runs the train command in a new process (TensorFlow's import is most of it): slow checks.
pytestmark = pytest.mark.slow

TINY = ["--config", "max_len=10", "--config", "dupe_factor=2", "--config", "model.hidden_size=8",
        "--config", "model.num_heads=2", "--config", "model.intermediate_size=16", "--config", "model.num_layers=1",
        "--batch_size", "4", "--learning_rate", "1e-3"]


def train(source, data_dir, model_dir, *extra, steps=10, eval_every=5):
    args = [sys.executable, os.path.join(REPO, "run_scripts", "train.py"), "--dataset", "beauty",
            "--source_file", source, "--data_dir", data_dir, "--model_dir", model_dir, "--recipe", "paper", *TINY,
            "--train_steps", str(steps), "--eval_every", str(eval_every), *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def one_error_line(result) -> str:
    """The single `error:` line of a failed command (exit status 1)."""
    assert result.returncode == 1, (result.returncode, result.stderr[-3000:])
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return errors[0]


def latest_weights(model_dir: str) -> str:
    """The weight file of the run's committed checkpoint."""
    state = strict_json(os.path.join(model_dir, "checkpoints", "state.json"))
    return os.path.join(model_dir, "checkpoints", state["latest_weights"])


def digests(directory: str) -> dict[str, str]:
    """SHA-256 of every file under `directory`, by relative path."""
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "**"), recursive=True)):
        if os.path.isfile(path):
            with open(path, "rb") as handle:
                out[os.path.relpath(path, directory)] = hashlib.sha256(handle.read()).hexdigest()
    return out


def strict_json(path: str):
    """Parses `path` as strict JSON (no NaN or Infinity)."""
    def refuse(constant):
        raise AssertionError(f"{path} holds {constant}, which is not JSON")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle, parse_constant=refuse)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The toy file, and one with the same users and items in another order."""
    root = tmp_path_factory.mktemp("src")
    sequences = toy_sequences()
    shuffled = {user: items[::-1] for user, items in sequences.items()}
    return write_pairs(str(root / "toy.txt"), sequences), write_pairs(str(root / "reversed.txt"), shuffled)


@pytest.fixture(scope="module")
def good_run(sources, tmp_path_factory):
    """A finished 10-step run: (data_dir, model_dir)."""
    root = tmp_path_factory.mktemp("runs")
    data_dir, model_dir = str(root / "data"), str(root / "good")
    result = train(sources[0], data_dir, model_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    return data_dir, model_dir


@pytest.mark.parametrize("override, needle", [
    (["train_steps=0"], "--train_steps must be at least 1, got 0"),
    (["train_steps=-5"], "--train_steps must be at least 1, got -5"),
    (["batch_size=0"], "--batch_size must be at least 1, got 0"),
    (["learning_rate=nan"], "--learning_rate must be a positive finite number, got nan"),
    (["learning_rate=-1e-3"], "--learning_rate must be a positive finite number"),
    (["max_len=5"], "--max_len 5 is too short for the beauty preset's window step"),
    (["max_len=1"], "--max_len must be at least 2"),
    (["model.num_heads=3"], "--config num_heads must be at least 1 and a divisor of hidden_size 64"),
    (["hidden_dropout=1.0"], "--config hidden_dropout must be in [0, 1)"),
    (["masked_lm_prob=0"], "--config masked_lm_prob must be in (0, 1]"),
    (["split=other"], "--config split must be 'valid' or 'original'"),
    (["clip_norm=inf"], "--config clip_norm must be a positive finite number"),
])
def test_out_of_range_settings_are_refused_naming_the_flag(override, needle):
    with pytest.raises(ValueError) as caught:
        cli.experiment_config("beauty", override)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("extra, needle", [
    (["--train_steps", "0"], "--train_steps must be at least 1, got 0"),
    (["--batch_size", "0"], "--batch_size must be at least 1, got 0"),
    (["--max_len", "5"], "--max_len 5 is too short"),
    (["--eval_every", "0"], "--eval_every must be at least 1, got 0"),
])
def test_bad_flags_fail_before_any_work(sources, tmp_path, extra, needle):
    model_dir = str(tmp_path / "run")
    line = one_error_line(train(sources[0], str(tmp_path / "data"), model_dir, *extra))
    assert needle in line
    assert not os.path.exists(model_dir) and not os.path.exists(tmp_path / "data")


def test_model_dir_that_is_a_file(sources, tmp_path):
    path = tmp_path / "a_file"
    path.write_text("x")
    line = one_error_line(train(sources[0], str(tmp_path / "data"), str(path)))
    assert f"--model_dir {path} is a file, not a folder" in line


def test_divergence_stops_naming_the_step_and_keeps_no_nan_model(sources, good_run, tmp_path):
    data_dir, _ = good_run
    model_dir = str(tmp_path / "diverged")
    line = one_error_line(train(sources[0], data_dir, model_dir, "--learning_rate", "1e9", steps=20))
    assert "training diverged at step" in line and "nan" in line
    assert not os.path.exists(os.path.join(model_dir, "results.json"))
    assert not os.path.exists(os.path.join(model_dir, "model.keras"))
    assert not os.path.exists(os.path.join(model_dir, "export"))
    for path in glob.glob(os.path.join(model_dir, "checkpoints", "*.weights.h5")):
        with h5py.File(path) as weights:
            arrays = []
            weights.visititems(lambda name, node: arrays.append(node[()]) if isinstance(node, h5py.Dataset) else None)
        assert all(np.isfinite(array).all() for array in arrays if array.dtype.kind == "f"), path
    for path in glob.glob(os.path.join(model_dir, "**", "*.json"), recursive=True):
        strict_json(path)


def test_the_test_is_also_reported_by_the_training_frequency_of_its_targets(good_run):
    _, model_dir = good_run
    results = strict_json(os.path.join(model_dir, "results.json"))
    slices = {label: value for label, value in results["test_slices"].items() if label != "by"}
    assert set(slices) == {"<5", "5-20", ">20"}
    users = sum(value["users"] for value in slices.values())
    assert users == results.get("evaluated_users", users) and users > 0
    for protocol, metrics in results["test"].items():
        for metric, overall in metrics.items():  # the slices' weighted mean is the whole test's
            parts = [value["users"] * value[protocol][metric] for value in slices.values() if value["users"]]
            assert sum(parts) / users == pytest.approx(overall, abs=1e-9), (protocol, metric)


def test_every_json_file_of_a_run_is_strict_json(good_run):
    _, model_dir = good_run
    paths = glob.glob(os.path.join(model_dir, "**", "*.json"), recursive=True)
    assert {"config.json", "run.json", "results.json", "validation.json"} <= {os.path.basename(p) for p in paths}
    for path in paths:
        strict_json(path)


@pytest.mark.parametrize("name, needle", [
    ("checkpoints/state.json", "the resume state is damaged, not valid JSON"),
    ("config.json", "the run configuration is damaged, not valid JSON"),
    ("latest_weights", "the checkpoint is damaged"),
])
def test_damaged_run_files_are_named_and_results_kept(sources, good_run, tmp_path, name, needle):
    data_dir, model_dir = good_run
    copy = str(tmp_path / "copy")
    shutil.copytree(model_dir, copy)
    path = os.path.join(copy, name) if "." in name else latest_weights(copy)
    state = strict_json(os.path.join(copy, "checkpoints", "state.json"))
    # A damaged latest checkpoint with an intact best one of its step resumes (the next test): both damaged here.
    damaged = [path] + ([os.path.join(copy, "checkpoints", state["best_weights"])]
                        if name == "latest_weights" and state["best_step"] == state["step"] else [])
    for file in damaged:
        with open(file, "rb+") as handle:
            handle.truncate(os.path.getsize(file) // 2)
    before = digests(copy)
    line = one_error_line(train(sources[0], data_dir, copy, steps=20))
    assert path in line and needle in line
    assert digests(copy) == before


def test_a_damaged_latest_checkpoint_resumes_from_the_best_one_of_its_step(sources, good_run, tmp_path):
    data_dir, model_dir = good_run
    copies = {kind: str(tmp_path / kind) for kind in ("intact", "damaged")}
    for copy in copies.values():
        shutil.copytree(model_dir, copy)
        state_path = os.path.join(copy, "checkpoints", "state.json")
        state = strict_json(state_path)
        if state["best_step"] != state["step"]:  # make the best checkpoint the latest one's twin
            best = f"best-{state['step']:09d}.weights.h5"
            shutil.copyfile(latest_weights(copy), os.path.join(copy, "checkpoints", best))
            write_json_atomic(state_path, {**state, "best_step": state["step"], "best_weights": best})
    latest = latest_weights(copies["damaged"])
    with open(latest, "rb+") as handle:
        handle.truncate(os.path.getsize(latest) // 2)
    resumed = {kind: train(sources[0], data_dir, copy, steps=20) for kind, copy in copies.items()}
    assert all(result.returncode == 0 for result in resumed.values()), resumed["damaged"].stderr[-3000:]
    assert f"note: {latest} is damaged; resuming from " in resumed["damaged"].stderr
    results = [strict_json(os.path.join(copy, "results.json"))["test"] for copy in copies.values()]
    assert results[0] == results[1]


@pytest.mark.parametrize("source, steps, extra, needle", [
    (1, 20, (), "was trained on another source file"),
    (0, 20, ("--encoding", "latin-1"), "holds a run with another configuration (data.encoding differ)"),
    (0, 5, (), "has trained 10 steps already, more than --train_steps 5"),
])
def test_other_data_or_fewer_steps_are_refused_and_the_run_kept(sources, good_run, tmp_path, source, steps, extra,
                                                                 needle):
    data_dir, model_dir = good_run
    copy = str(tmp_path / "copy")
    shutil.copytree(model_dir, copy)
    before = digests(copy)
    line = one_error_line(train(sources[source], data_dir, copy, *extra, steps=steps))
    assert f"{copy} " in line and needle in line
    assert digests(copy) == before


def test_a_run_recorded_before_a_field_existed_resumes(sources, good_run, tmp_path):
    data_dir, model_dir = good_run
    copy = str(tmp_path / "copy")
    shutil.copytree(model_dir, copy)
    recorded = strict_json(os.path.join(copy, "config.json"))
    del recorded["data"]["encoding"], recorded["train"]["recipe"]  # as written before they existed
    write_json_atomic(os.path.join(copy, "config.json"), recorded)
    result = train(sources[0], data_dir, copy, steps=15)
    assert result.returncode == 0, result.stderr[-3000:]
    assert strict_json(os.path.join(copy, "checkpoints", "state.json"))["step"] == 15


def test_a_failed_start_does_not_bind_the_folder(sources, tmp_path):
    data_dir, model_dir = str(tmp_path / "data"), str(tmp_path / "run")
    one_error_line(train(sources[0], data_dir, model_dir, "--config", "num_negatives=1000"))
    assert not os.path.exists(os.path.join(model_dir, "config.json"))
    result = train(sources[0], data_dir, model_dir, steps=5)
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_stream_position_does_not_depend_on_eval_every(sources, good_run, tmp_path):
    data_dir, model_dir = good_run
    other = str(tmp_path / "every3")
    result = train(sources[0], data_dir, other, eval_every=3)  # intervals 3, 3, 3, 1
    assert result.returncode == 0, result.stderr[-3000:]
    states = [strict_json(os.path.join(d, "checkpoints", "state.json")) for d in (model_dir, other)]
    assert [s["step"] for s in states] == [10, 10] and [s["instances"] for s in states] == [40, 40]
    assert [entry["step"] for entry in states[1]["curve"]] == [3, 6, 9, 10]
    weights = []
    for directory in (model_dir, other):
        with h5py.File(latest_weights(directory)) as handle:
            arrays = {}
            handle.visititems(lambda name, node: arrays.update({name: node[()]})
                              if isinstance(node, h5py.Dataset) else None)
            weights.append(arrays)
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        np.testing.assert_array_equal(weights[0][name], weights[1][name], err_msg=name)
