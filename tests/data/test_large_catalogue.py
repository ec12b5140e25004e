"""The large-catalogue check's synthetic data: every item present, a user's items distinct and in time
order, the planted "next follows the previous" pattern and a popularity tail, readable as custom data."""

import numpy as np
import pandas as pd
import pytest

from bert4rec_tf.scripts import large_catalogue


def test_synthetic_interactions_cover_the_catalogue_and_plant_the_pattern(tmp_path):
    path = str(tmp_path / "interactions.csv")
    rows = large_catalogue.write_interactions(path, users=1_000, items=5_000, count=50_000, seed=3)
    frame = pd.read_csv(path)
    assert rows == len(frame) and list(frame.columns) == ["user", "item", "timestamp"]
    assert 0.75 * 50_000 <= rows <= 50_000  # repeats dropped (more on a small catalogue), unreached items added
    assert sorted(frame["item"].unique()) == list(range(1, 5_001)) and frame["user"].nunique() == 1_000
    per_user = frame.groupby("user")["item"]
    assert (per_user.nunique() == per_user.size()).all() and per_user.size().max() <= large_catalogue.LONGEST
    assert (frame.groupby("user")["timestamp"].diff().dropna() > 0).all()
    same_user = frame["user"].to_numpy()[1:] == frame["user"].to_numpy()[:-1]
    step = np.diff(frame["item"].to_numpy())[same_user]
    assert 0.45 < np.mean((step >= 1) & (step <= large_catalogue.STRIDE)) < 0.7  # planted at 0.6
    counts = np.bincount(frame["item"], minlength=5_001)[1:]
    assert counts[:30].mean() > 5 * counts[-1_000:].mean()  # the popular ids come first
    again = large_catalogue.interactions(1_000, 5_000, 50_000, 3)
    np.testing.assert_array_equal(again[1], frame["item"].to_numpy())  # the seed fixes the data


def test_too_small_a_request_is_refused():
    with pytest.raises(ValueError, match="need at least 11 items"):
        large_catalogue.interactions(10, 5, 1_000, 1)


@pytest.mark.parametrize("setting, words", [("max_len", "key=value"), ("no_such_key=1", "no_such_key"),
                                             ("max_len=ten", "max_len")])
def test_a_bad_setting_is_one_line_before_any_data_is_written(tmp_path, capsys, setting, words):
    assert large_catalogue.main(["--work_dir", str(tmp_path), "--users", "300", "--items", "2000",
                                 "--interactions", "12000", "--config", setting]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and "\n" not in error and words in error
    assert not (tmp_path / "interactions.csv").exists()


def test_too_small_a_catalogue_is_one_line(tmp_path, capsys):
    assert large_catalogue.main(["--work_dir", str(tmp_path), "--items", "5"]) == 1
    assert capsys.readouterr().err.strip().startswith("error: need at least 11 items")


@pytest.mark.slow
def test_every_stage_runs_and_reports_its_time_and_memory(tmp_path):
    """The whole script on a tiny catalogue: each stage in its own process, the report's wall times,
    peak memory and test metrics, and the training settings it asked for."""
    import json

    code = large_catalogue.main(["--work_dir", str(tmp_path), "--users", "300", "--items", "2000",
                                 "--interactions", "12000", "--minutes", "0.2", "--eval_users", "100",
                                 "--sparse_updates"])
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert set(report["stages"]) == {"prepare", "train", "evaluate", "serve"}
    for stage in report["stages"].values():
        assert stage["exit"] == 0 and stage["seconds"] > 0 and 0 < stage["peak_gb"] < 8
    assert "train.sparse_updates=true" in report["train_settings"]
    assert 0 <= report["test"]["full"]["Recall@10"] <= 1
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["evaluated_users"] == 100
    assert "model.negative_alpha=1.0" in report["train_settings"]
    # Another run on the same data: its own folder, logs and report; the data is not written again.
    written = (tmp_path / "interactions.csv").stat().st_mtime_ns
    assert large_catalogue.main(["--work_dir", str(tmp_path), "--users", "300", "--items", "2000",
                                 "--interactions", "12000", "--minutes", "0.1", "--eval_users", "100",
                                 "--negative_alpha", "0", "--run_name", "uniform", "--model", "sasrec",
                                 "--config", "max_len=12"]) == 0
    again = json.loads((tmp_path / "uniform-report.json").read_text(encoding="utf-8"))
    assert "model.negative_alpha=0.0" in again["train_settings"]
    assert report["model"] == "bert4rec" and again["model"] == "sasrec"
    config = json.loads((tmp_path / "uniform" / "config.json").read_text(encoding="utf-8"))
    assert config["model"]["name"] == "sasrec"
    # --config reaches both stages: the data was prepared, and the model built, at that length.
    assert config["data"]["max_len"] == config["model"]["max_len"] == 12 and again["config"] == ["max_len=12"]
    assert report["config"] == []
    for log in ("train.log", "uniform-train.log"):  # the prepare stage made what training reads
        assert "reusing prepared data" in (tmp_path / log).read_text(encoding="utf-8")
    assert "train.sparse_updates=true" not in again["train_settings"]
    assert (tmp_path / "uniform" / "results.json").is_file() and (tmp_path / "uniform-train.log").is_file()
    assert (tmp_path / "interactions.csv").stat().st_mtime_ns == written
