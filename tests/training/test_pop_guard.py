"""A trained model that ends at POP's level is named, not passed off as a result: train.py warns and
results.json says so, and reproduce.py's report marks the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bert4rec_tf.experiments.plans import plan
from bert4rec_tf.experiments.report import report_rows, write_report
from bert4rec_tf.training.trainer import pop_warning
from tests.conftest import REPO, planted_order_sequences, write_pairs

POP = {"pop": {"HR@10": 0.30, "NDCG@10": 0.20}, "full": {"Recall@10": 0.1}}


def test_the_warning_asks_for_a_tenth_above_pops_selection_metric():
    assert pop_warning({"step": 500, "pop/NDCG@10": 0.2201}, POP) is None
    warning = pop_warning({"step": 1500, "pop/NDCG@10": 0.2200}, POP)  # exactly 1.1 times: not above
    assert warning.startswith("warning: the best validation pop-100 NDCG@10, 0.2200 at step 1,500, is not 1.1 "
                              "times POP's 0.2000") and "\n" not in warning
    assert pop_warning({"step": 10, "pop/NDCG@10": 0.15, "pop/HR@10": 0.9}, POP) is not None  # NDCG@10 decides
    assert pop_warning(None, POP) is None  # no validation curve: nothing to compare


def test_the_warning_names_the_negatives_actually_sampled():
    # A catalogue too small for 100 negatives per user is prepared with fewer (--config num_negatives).
    warning = pop_warning({"step": 20, "pop/NDCG@10": 0.15}, POP, num_negatives=1)
    assert warning.startswith("warning: the best validation pop-1 NDCG@10, 0.1500 at step 20")


def test_a_model_that_does_not_train_is_reported_at_pops_level(tmp_path):
    """A rate of 1e-9 leaves the initial weights: below POP on a data set whose popularity is skewed."""
    source = write_pairs(str(tmp_path / "planted.txt"), planted_order_sequences(num_users=200, num_items=60))
    model_dir = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "run_scripts", "train.py"), "--dataset", "beauty", "--source_file", source,
         "--data_dir", str(tmp_path / "data"), "--model_dir", str(model_dir), "--recipe", "paper",
         "--config", "max_len=10", "--config", "model.hidden_size=8", "--config", "model.num_heads=2",
         "--config", "model.intermediate_size=16", "--config", "model.num_layers=1", "--config", "num_negatives=20",
         "--batch_size", "4", "--learning_rate", "1e-9", "--train_steps", "10", "--eval_every", "10"],
        capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: the best validation")]
    assert len(warnings) == 1 and "is not 1.1 times POP's" in warnings[0]
    results = json.loads((model_dir / "results.json").read_text(encoding="utf-8"))
    assert results["above_pop"] is False
    pop_ndcg = results["pop_validation"]["pop"]["NDCG@10"]
    best = json.loads((model_dir / "validation.json").read_text(encoding="utf-8"))[-1]["pop/NDCG@10"]
    assert f"{best:.4f}" in warnings[0] and f"{pop_ndcg:.4f}" in warnings[0] and best <= 1.1 * pop_ndcg


def test_a_record_keeps_the_pop_check_of_its_run(tmp_path):
    from bert4rec_tf.experiments.records import make_record
    run = plan("ablation", ["ml-1m"])[0]
    results = {"test": {"pop": {"HR@10": 0.5}}, "steps": 10, "above_pop": False, "pop_validation": POP}
    (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")
    record = make_record(str(tmp_path), run, "ablation", [], {})
    assert record["above_pop"] is False and record["pop_validation"] == POP
    (tmp_path / "results.json").write_text(json.dumps({**results, "above_pop": None}), encoding="utf-8")
    assert make_record(str(tmp_path), run, "ablation", [], {})["above_pop"] is None  # never validated


def test_the_report_marks_a_run_not_above_pop(tmp_path):
    runs = plan("ablation", ["ml-1m"])[:2]
    records = [{"run": run.name, "dataset": "ml-1m", "setting": run.setting, "model": run.model, "value": None,
                "steps": 10, "seconds": 60.0, "instances": 640, "test": {"pop": {"HR@10": 0.5}}, "settings": [],
                "above_pop": above} for run, above in zip(runs, (True, False))]
    assert [row["above_pop"] for row in report_rows(records)][-1] is False
    write_report(str(tmp_path), "ablation", "ablation", runs, records, [])
    report = (tmp_path / "ablation.md").read_text(encoding="utf-8")
    assert "| ablation-no-pe (not above POP) |" in report and "| ablation-default |" in report
    assert "Not above POP: the run's best validation" in report
    assert "above_pop" in (tmp_path / "ablation.csv").read_text(encoding="utf-8").splitlines()[0]
