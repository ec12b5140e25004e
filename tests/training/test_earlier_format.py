"""A run folder and a `model.keras` of the configuration format before each family had its own sections
(`tests/fixtures/earlier_format`: BPR-MF on docs/examples/interactions.csv, 20 steps, written by
commit 1f8e9e8 with its one flat schema) evaluate and resume with today's code: the fields BPR-MF does
not have are left out as they are read, and the run's data are found by the key they had then."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bert4rec_tf import api
from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.data.prepare import earlier_keys
from bert4rec_tf.training.run_folder import RunFolder
from bert4rec_tf.training.trainer import evaluate_run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "earlier_format"
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "interactions.csv"
KEY = "ae3f6f740901"


@pytest.fixture
def earlier_run(tmp_path) -> tuple[Path, Path]:
    """The fixture's run and data folders in `tmp_path`, its records naming the data where they are now
    (as on the machine that wrote them)."""
    shutil.copytree(FIXTURE, tmp_path, dirs_exist_ok=True)
    run, data = tmp_path / "run", tmp_path / "data"
    for name in ("run.json", "results.json"):
        record = json.loads((run / name).read_text())
        where = record if name == "run.json" else record["data"]
        where["data_directory"] = str(data / "custom" / KEY)
        (run / name).write_text(json.dumps(record))
    return run, data


def test_the_records_are_of_the_earlier_format(earlier_run):
    run, _ = earlier_run
    recorded = json.loads((run / "config.json").read_text())
    assert recorded["model"]["name"] == "bpr_mf" and "conv_filters" in recorded["model"]  # the flat schema
    assert recorded["data"]["max_len"] == 50  # a window BPR-MF never read
    assert KEY in earlier_keys(recorded["data"], json.loads((run / "run.json").read_text())["source"])
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
    trained = api.train("custom", str(run), model="bpr_mf", source_file=str(EXAMPLE), data_dir=str(data),
                        recipe="paper", overrides={"train_steps": 40, "hidden_size": 4, "num_negatives": 3},
                        eval_every=10, verbose=0)
    state = json.loads((run / "checkpoints" / "state.json").read_text())
    assert state["step"] == 40 and trained.steps == 40 and trained.config.model.hidden_size == 4
    recorded = json.loads((run / "config.json").read_text())
    assert "max_len" not in recorded["data"] and "conv_filters" not in recorded["model"]
    assert json.loads((run / "run.json").read_text())["data_key"] != KEY  # bound to the data by today's key
