"""The main job on tiny data: outputs, resume after SIGKILL, bad input."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import REPO, event_scalars, event_values, toy_sequences, write_pairs

# Each check starts or reads the train command's run (a new process importing TensorFlow): slow checks.
pytestmark = pytest.mark.slow

TINY = ["--config", "max_len=10", "--config", "dupe_factor=2", "--config", "model.hidden_size=8",
        "--config", "model.num_heads=2", "--config", "model.intermediate_size=16", "--config", "model.num_layers=1",
        "--batch_size", "4", "--learning_rate", "1e-3", "--eval_every", "5"]


def command(toy_file, data_dir, model_dir, steps=30, model="bert4rec"):
    # The static instances' duplication (`--config dupe_factor=2`) is a setting of the Cloze models only.
    tiny = TINY if model == "bert4rec" else [word for pair in zip(TINY[::2], TINY[1::2])
                                             if pair[1] != "dupe_factor=2" for word in pair]
    return [sys.executable, os.path.join(REPO, "run_scripts", "train.py"), "--dataset", "beauty",
            "--source_file", toy_file, "--data_dir", data_dir, "--model_dir", model_dir,
            "--train_steps", str(steps), "--model", model, "--recipe", "paper", *tiny]


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return write_pairs(str(tmp_path_factory.mktemp("src") / "toy.txt"), toy_sequences())


@pytest.fixture(scope="module")
def finished_run(toy_file, tmp_path_factory):
    """An uninterrupted run: (data_dir, model_dir, stdout)."""
    root = tmp_path_factory.mktemp("runs")
    data_dir, model_dir = str(root / "data"), str(root / "whole")
    whole = subprocess.run(command(toy_file, data_dir, model_dir), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    return data_dir, model_dir, whole.stdout


@pytest.fixture(scope="module")
def finished_sasrec_run(toy_file, tmp_path_factory):
    """An uninterrupted SASRec run: (data_dir, model_dir, stdout)."""
    root = tmp_path_factory.mktemp("sasrec")
    data_dir, model_dir = str(root / "data"), str(root / "whole")
    whole = subprocess.run(command(toy_file, data_dir, model_dir, model="sasrec"), capture_output=True, text=True,
                           timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    return data_dir, model_dir, whole.stdout


# Three train commands per model (the whole run, the killed one, the resumed one).
@pytest.mark.parametrize("model", ["bert4rec", "sasrec"])
def test_resume_after_sigkill_gives_the_uninterrupted_metrics(toy_file, request, tmp_path, model):
    data_dir, whole_dir, _ = request.getfixturevalue("finished_run" if model == "bert4rec" else "finished_sasrec_run")
    model_dir = str(tmp_path / "cut")
    state = os.path.join(model_dir, "checkpoints", "state.json")
    process = subprocess.Popen(command(toy_file, data_dir, model_dir, model=model), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 1800  # a machine ten times slower took over 300 s to reach step 10
    while time.time() < deadline and process.poll() is None:
        if os.path.isfile(state):
            with open(state) as handle:
                if json.load(handle)["step"] >= 10:
                    break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    with open(state) as handle:
        stopped_at = json.load(handle)["step"]
    assert 10 <= stopped_at < 30 and not os.path.isfile(os.path.join(model_dir, "results.json"))
    resumed = subprocess.run(command(toy_file, data_dir, model_dir, model=model), capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    results = [json.load(open(os.path.join(d, "results.json"))) for d in (whole_dir, model_dir)]
    assert results[0]["test"] == results[1]["test"]
    assert results[0]["best_step"] == results[1]["best_step"]
    # The same curve, apart from the wall-clock times (the run's so far, each validation's and interval's).
    curves = [[{k: v for k, v in point.items() if k not in ("seconds", "validation_seconds", "training_seconds")}
               for point in json.load(open(os.path.join(d, "validation.json")))] for d in (whole_dir, model_dir)]
    assert curves[0] == curves[1] and len(curves[0]) == 6
    for name in ("config.json", "model.keras", "validation.json"):
        assert os.path.isfile(os.path.join(model_dir, name))
    assert os.path.isdir(os.path.join(model_dir, "train")) and os.path.isdir(os.path.join(model_dir, "validation"))


@pytest.mark.parametrize("args, needle", [
    (["--dataset", "nope"], "unknown dataset 'nope'"),
    (["--dataset", "beauty", "--source_file", "/nonexistent/file.txt"], "/nonexistent/file.txt: no such file"),
    (["--dataset", "beauty", "--config", "model.layers=3"], "unknown configuration key 'model.layers'"),
])
def test_bad_input_is_a_one_line_error(tmp_path, args, needle):
    result = subprocess.run([sys.executable, os.path.join(REPO, "run_scripts", "train.py"), *args,
                             "--model_dir", str(tmp_path / "m"), "--data_dir", str(tmp_path / "d")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and needle in errors[0], result.stderr[-2000:]


def test_evaluate_and_recommend_commands_read_the_finished_run(finished_run):
    _, model_dir, stdout = finished_run
    assert "test metrics (best validation checkpoint, step " in stdout
    result = subprocess.run([sys.executable, os.path.join(REPO, "run_scripts", "evaluate.py"), "--model_dir",
                             model_dir], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(os.path.join(model_dir, "results.json")) as handle:
        trained = json.load(handle)
    with open(os.path.join(model_dir, "evaluation.json")) as handle:
        evaluated = json.load(handle)
    for protocol in ("pop", "uniform", "full"):
        for name, value in trained["test"][protocol].items():
            assert evaluated["test"][protocol][name] == pytest.approx(value, abs=1e-6)
    # The slices by the targets' training occurrences, as the training run's test gave them, printed in order.
    for label, found in trained["test_slices"].items():
        if label == "by":
            continue
        assert evaluated["test_slices"][label]["users"] == found["users"]
        for protocol in ("pop", "uniform", "full"):
            for name, value in found[protocol].items():  # None: NaN, a slice without users
                assert evaluated["test_slices"][label][protocol][name] == (
                    None if value is None else pytest.approx(value, abs=1e-6))
    labels = re.findall(r"targets with (\S+) training occurrences \(([\d,]+) users\)", result.stdout)
    assert [label for label, _ in labels] == ["<5", "5-20", ">20"]
    assert [int(count.replace(",", "")) for _, count in labels] == [
        trained["test_slices"][label]["users"] for label, _ in labels]
    history = " ".join(toy_sequences()["1"][:5])
    result = subprocess.run([sys.executable, os.path.join(REPO, "run_scripts", "recommend.py"), "--model_dir",
                             model_dir, "--history", history], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if re.match(r"^\s*\d+\. ", line)]
    assert len(lines) == 10 and lines[0].strip().startswith("1.")
    assert not {line.split()[1] for line in lines} & set(history.split())


def event_files(directory: str) -> list[str]:
    """The TensorBoard event files directly in `directory`."""
    return sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*")))


def folder_scalars(directory: str) -> dict[str, dict[int, float]]:
    """The scalars {tag: {step: value}} of every event file in `directory`."""
    values: dict[str, dict[int, float]] = {}
    for path in event_files(directory):
        for tag, points in event_scalars(path).items():
            values.setdefault(tag, {}).update(points)
    return values


def folder_values(directory: str) -> dict[str, list]:
    """Every summary value of the event files in `directory`: {tag: [Summary.Value, ...]}."""
    values: dict[str, list] = {}
    for path in event_files(directory):
        for _, value in event_values(path):
            values.setdefault(value.tag, []).append(value)
    return values


def test_tensorboard_logs_training_validation_and_attention(finished_run):
    _, model_dir, stdout = finished_run
    train = folder_scalars(os.path.join(model_dir, "train"))
    assert {"loss", "grad_norm", "learning_rate"} <= set(train), train
    validation = folder_scalars(os.path.join(model_dir, "validation"))
    assert {"pop/HR@10", "pop/NDCG@10", "full/Recall@20", "full/MRR"} <= set(validation), validation
    assert "grad_norm" in stdout and "learning_rate" in stdout
    # The validation loss at every validation, as in the curve and the printed table.
    with open(os.path.join(model_dir, "validation.json")) as handle:
        curve = json.load(handle)
    assert sorted(validation["loss"]) == [point["step"] for point in curve] == [5, 10, 15, 20, 25, 30]
    for point in curve:
        assert validation["loss"][point["step"]] == pytest.approx(point["validation_loss"])
        assert f"validation at step {point['step']} (loss {point['validation_loss']:.4f}):" in stdout
    # The heat maps are the labelled figure (4.6 x 4 inches at 100 dpi), one per layer and head.
    images = folder_values(os.path.join(model_dir, "validation"))
    assert {"attention/layer_1/head_1", "attention/layer_1/head_2"} <= set(images), set(images)
    for value in images["attention/layer_1/head_1"]:
        width, height = (int(size) for size in tf.make_ndarray(value.tensor)[:2])
        assert (width, height) == (460, 400)


def test_tensorboard_holds_the_config_and_an_hparams_session_with_the_results(finished_run):
    from tensorboard.plugins.hparams import metadata

    _, model_dir, _ = finished_run
    with open(os.path.join(model_dir, "config.json")) as handle:
        config = json.load(handle)
    with open(os.path.join(model_dir, "results.json")) as handle:
        finished = json.load(handle)
    with open(os.path.join(model_dir, "validation.json")) as handle:
        best = next(point for point in json.load(handle) if point["step"] == finished["best_step"])
    text = folder_values(model_dir)["config"]
    assert len(text) == 1
    shown = tf.make_ndarray(text[0].tensor).item().decode()
    assert json.loads(shown.removeprefix("```json").removesuffix("```")) == config
    values = folder_values(os.path.join(model_dir, "results"))
    start = metadata.parse_session_start_info_plugin_data(
        values[metadata.SESSION_START_INFO_TAG][0].metadata.plugin_data.content)
    assert start.group_name == "whole"   # the run folder's name
    hparams = {name: getattr(value, value.WhichOneof("kind")) for name, value in start.hparams.items()}
    flat = {f"{section}.{name}": value for section, fields in config.items() for name, value in fields.items()}
    flat["loss_note"] = finished.get("loss_note", "")  # what a loss that is not the paper's departs by
    assert hparams == pytest.approx(flat)
    results = folder_scalars(os.path.join(model_dir, "results"))
    expected = {f"test/{protocol}/{name}": value for protocol, metrics in finished["test"].items()
                for name, value in metrics.items()}
    expected.update({f"validation_best/{name}": value for name, value in best.items() if "/" in name})
    expected["validation_best/loss"] = best["validation_loss"]
    assert set(results) == set(expected) and len(expected) == 17 + 11 + 1
    for tag, value in expected.items():
        assert results[tag] == {30: pytest.approx(value)}, tag


def test_mirrored_strategy_on_two_cpu_devices_follows_the_single_device_loss(toy_file, tmp_path):
    curves = []
    for strategy in ("default", "mirrored"):
        model_dir = str(tmp_path / strategy)
        args = command(toy_file, str(tmp_path / "data"), model_dir, steps=20) + [
            "--strategy", strategy, "--logical_cpus", "2", "--config", "hidden_dropout=0",
            "--config", "attention_dropout=0", "--learning_rate", "3e-2", "--config", "warmup_steps=2"]
        result = subprocess.run(args, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        if strategy == "mirrored":
            assert "device:CPU:0', '/job:localhost/replica:0/task:0/device:CPU:1'" in result.stderr
        with open(os.path.join(model_dir, "validation.json")) as handle:
            curves.append([entry["loss"] for entry in json.load(handle)])
    single, mirrored = np.array(curves[0]), np.array(curves[1])
    assert len(single) == len(mirrored) == 4
    assert single[-1] < single[0] - 0.15         # the curves move, so agreeing is not trivial
    print("single-device loss", single, "mirrored loss", mirrored)
    np.testing.assert_allclose(mirrored, single, rtol=0.05)  # replicas average per-half slot means
