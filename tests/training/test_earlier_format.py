"""A run folder and a `model.keras` of the configuration format before each family had its own sections
evaluate and resume with today's code: the fields BPR-MF does not have are left out as they are read,
and the run's data are found by the key they had then.

The earlier format's records are committed as text (`tests/fixtures/earlier_format`: the config.json
and the model.keras configuration of a BPR-MF run on docs/examples/interactions.csv, 20 steps, written
by commit 1f8e9e8 with its one flat schema); the test trains the same run with today's code and puts
those records, and the data key they name, in its place. Weights files and prepared data are rebuilt,
never committed.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from bert4rec_tf import api
from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.data.prepare import earlier_keys
from bert4rec_tf.training.run_folder import RunFolder
from bert4rec_tf.training.trainer import evaluate_run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "earlier_format"
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "interactions.csv"
EARLIER_KEY = "ae3f6f740901"  # the run.json data_key the earlier run recorded
SETTINGS = {"hidden_size": 4, "num_negatives": 3}


def train(run: Path, data: Path, steps: int) -> api.Run:
    return api.train("custom", str(run), model="bpr_mf", source_file=str(EXAMPLE), data_dir=str(data),
                     recipe="paper", overrides={**SETTINGS, "train_steps": steps}, eval_every=10, verbose=0)


def with_model_config(path: Path, config: dict) -> None:
    """Rewrites the `model.keras` at `path` with `config` as its configuration, its weights kept."""
    temporary = path.with_suffix(".rewritten")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(temporary, "w") as target:
        for item in source.infolist():
            target.writestr(item, json.dumps(config) if item.filename == "config.json" else source.read(item))
    os.replace(temporary, path)


@pytest.fixture
def earlier_run(tmp_path) -> tuple[Path, Path]:
    """Today's 20-step run, recorded as the earlier format recorded it: its config.json, its model's
    configuration and its data key (the prepared folder renamed to that key)."""
    run, data = tmp_path / "run", tmp_path / "data"
    train(run, data, 20)
    earlier = json.loads((FIXTURE / "config.json").read_text())
    record = json.loads((run / "run.json").read_text())
    assert EARLIER_KEY in earlier_keys(earlier["data"], record["source"])  # the same source and settings
    folder = Path(record["data_directory"]).parent / EARLIER_KEY
    shutil.move(record["data_directory"], folder)
    identity = {**record, "data_key": EARLIER_KEY, "data_directory": str(folder)}
    results = json.loads((run / "results.json").read_text())
    assert results["config"]["model"]["vocab_size"] == earlier["model"]["vocab_size"]
    (run / "results.json").write_text(json.dumps({**results, "config": earlier, "data": identity}))
    (run / "run.json").write_text(json.dumps(identity))
    (run / "config.json").write_text(json.dumps(earlier))
    with_model_config(run / "model.keras", json.loads((FIXTURE / "model_config.json").read_text()))
    return run, data


def test_the_records_are_of_the_earlier_format(earlier_run):
    run, _ = earlier_run
    recorded = json.loads((run / "config.json").read_text())
    assert recorded["model"]["name"] == "bpr_mf" and "conv_filters" in recorded["model"]  # the flat schema
    assert recorded["data"]["max_len"] == 50  # a window BPR-MF never read
    with zipfile.ZipFile(run / "model.keras") as saved:
        assert "conv_filters" in json.loads(saved.read("config.json"))["config"]["config"]
    config = ExperimentConfig.from_dict(recorded)
    assert "max_len" not in config.data.keys() and config.model.hidden_size == 4
    assert RunFolder(str(run)).config().to_dict() == config.to_dict()


def test_an_earlier_model_keras_evaluates_to_its_recorded_test_metrics(earlier_run):
    run, _ = earlier_run
    results, _, _ = evaluate_run(str(run))
    recorded = json.loads((run / "results.json").read_text())["test"]
    assert results == recorded


def test_an_earlier_run_folder_resumes_and_is_recorded_in_todays_format(earlier_run):
    run, data = earlier_run
    trained = train(run, data, 40)
    state = json.loads((run / "checkpoints" / "state.json").read_text())
    assert state["step"] == 40 and trained.steps == 40 and trained.config.model.hidden_size == 4
    recorded = json.loads((run / "config.json").read_text())
    assert "max_len" not in recorded["data"] and "conv_filters" not in recorded["model"]
    assert json.loads((run / "run.json").read_text())["data_key"] != EARLIER_KEY  # bound by today's key
