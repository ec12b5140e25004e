"""The same command on a finished run (its steps done, stopped early, or nothing to train) trains
nothing and changes no file; a damaged output is tested and exported again; more steps or more
patience train on."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile

import pytest

from bert4rec_tf import api
from tests.conftest import REPO

EXAMPLE = os.path.join(REPO, "docs", "examples", "interactions.csv")
TOY = {"train_steps": 200, "batch_size": 8, "num_negatives": 3, "model.hidden_size": 8, "model.num_heads": 2,
       "model.intermediate_size": 16, "model.num_layers": 1}


def folder_bytes(directory: str) -> dict[str, str]:
    """{path in `directory`: SHA-256} of every file under it."""
    digests = {}
    for folder, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                digests[os.path.relpath(path, directory)] = hashlib.sha256(handle.read()).hexdigest()
    return digests


def steps_of(model_dir: str) -> int:
    with open(os.path.join(model_dir, "checkpoints", "state.json")) as handle:
        return json.load(handle)["step"]


def train(model_dir: str, data_dir: str, **arguments) -> api.Run:
    options = {"model": "bert4rec", "recipe": "paper", "overrides": TOY, "eval_every": 10, **arguments}
    return api.train("custom", model_dir, source_file=EXAMPLE, data_dir=data_dir, verbose=0, **options)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("data"))


def test_an_early_stopped_run_stays_stopped_and_more_patience_trains_it_on(tmp_path, data_dir, capsys):
    model_dir = str(tmp_path / "run")
    first = train(model_dir, data_dir, patience=1)
    stopped_at = first.steps
    assert stopped_at < 200 and steps_of(model_dir) == stopped_at
    before = folder_bytes(model_dir)
    capsys.readouterr()
    again = train(model_dir, data_dir, patience=1)
    assert f"holds a finished run: it stopped early at step {stopped_at}" in capsys.readouterr().out
    assert folder_bytes(model_dir) == before
    assert again.metrics == first.metrics and again.steps == stopped_at
    longer = train(model_dir, data_dir, patience=1000, overrides={**TOY, "train_steps": stopped_at + 10})
    assert longer.steps == stopped_at + 10


def test_a_finished_run_changes_no_file_and_a_damaged_output_is_exported_again(tmp_path, data_dir, capsys):
    model_dir, overrides = str(tmp_path / "run"), {**TOY, "train_steps": 20}
    first = train(model_dir, data_dir, overrides=overrides)
    intact = folder_bytes(model_dir)
    capsys.readouterr()
    again = train(model_dir, data_dir, overrides=overrides)
    assert "holds a finished run: it has trained its 20 steps" in capsys.readouterr().out
    assert folder_bytes(model_dir) == intact and again.metrics == first.metrics
    with open(os.path.join(model_dir, "model.keras"), "r+b") as handle:
        handle.truncate(100)
    repaired = train(model_dir, data_dir, overrides=overrides)
    assert "holds a finished run" not in capsys.readouterr().out
    assert repaired.metrics == first.metrics and repaired.steps == 20
    assert zipfile.ZipFile(os.path.join(model_dir, "model.keras")).testzip() is None
    after = folder_bytes(model_dir)
    checkpoints = {name: digest for name, digest in intact.items() if name.startswith("checkpoints")}
    assert {name: digest for name, digest in after.items() if name.startswith("checkpoints")} == checkpoints
    train(model_dir, data_dir, overrides=overrides)
    assert "holds a finished run" in capsys.readouterr().out and folder_bytes(model_dir) == after


def test_a_run_whose_time_budget_is_spent_changes_no_file(tmp_path, data_dir, capsys):
    model_dir, overrides = str(tmp_path / "run"), {**TOY, "train_steps": 10**6, "time_budget": 4}
    first = train(model_dir, data_dir, overrides=overrides)
    before = folder_bytes(model_dir)
    capsys.readouterr()
    again = train(model_dir, data_dir, overrides=overrides)
    assert f"holds a finished run: its 4 s time budget is spent, at step {first.steps}" in capsys.readouterr().out
    assert folder_bytes(model_dir) == before and again.metrics == first.metrics


def test_a_run_of_a_model_that_trains_nothing_changes_no_file(tmp_path, data_dir, capsys):
    model_dir = str(tmp_path / "run")
    first = train(model_dir, data_dir, model="pop", overrides={"num_negatives": 3})
    before = folder_bytes(model_dir)
    capsys.readouterr()
    again = train(model_dir, data_dir, model="pop", overrides={"num_negatives": 3})
    assert "holds a finished run: its model trains nothing" in capsys.readouterr().out
    assert folder_bytes(model_dir) == before and again.metrics == first.metrics
    train(model_dir, data_dir, model="pop", overrides={"num_negatives": 2})  # another configuration: not finished
    assert "holds a finished run" not in capsys.readouterr().out
    assert json.load(open(os.path.join(model_dir, "results.json")))["config"]["data"]["num_negatives"] == 2
