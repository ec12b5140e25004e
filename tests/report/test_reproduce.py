"""reproduce.py: the plans, skip and resume, the report's columns and published numbers, the figures."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from bert4rec_tf.experiments.reproduction import (COLUMNS, PUBLISHED, PUBLISHED_FULL, derived_flags, orderings, plan,
                                                  report_rows, run_settings, write_report)
from tests.conftest import REPO, toy_sequences, write_pairs
from tests.training.test_bad_runs import TINY

SCRIPT = os.path.join(REPO, "run_scripts", "reproduce.py")
SPEC = os.path.join(os.path.dirname(REPO), "shared", "SPEC.md")


def reproduce(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=900)


def test_table2_plan_has_the_six_models_and_their_flags(tmp_path):
    result = reproduce("table2", "--datasets", "ml-1m", "--budget", "5m", "--out", str(tmp_path), "--dry_run")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if re.match(r"\s+\d+\.", line)]
    assert [line.split()[1] for line in lines] == [
        "ml-1m-pop", "ml-1m-sasrec-bce", "ml-1m-sasrec-ce", "ml-1m-bert4rec-1mask", "ml-1m-bert4rec",
        "ml-1m-bert4rec-match"]
    assert "--model sasrec" in lines[2] and "--loss ce" in lines[2] and "--time_budget 5m" in lines[2]
    assert all("[new]" in line for line in lines)
    assert not os.listdir(tmp_path)  # a dry run writes nothing


def test_ablation_and_sweep_plans():
    ablation = {run.setting: run for run in plan("ablation", ["ml-1m"])}
    assert len(ablation) == 14
    assert ablation["ablation-no-pe"].flags == ("--config", "use_position_embedding=false")
    assert ablation["ablation-no-dropout"].flags == ("--config", "hidden_dropout=0", "--config", "attention_dropout=0")
    assert ablation["ablation-heads-8"].flags == ("--config", "num_heads=8")
    assert ablation["ablation-only-matching"].model == "bert4rec_match"
    rho = plan("mask_prob", ["beauty"])
    assert [run.value for run in rho] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert rho[0].flags == ("--config", "masked_lm_prob=0.1") and rho[0].mask_prob == 0.1  # slots: derived_flags
    assert [run.value for run in plan("max_len", ["ml-1m"])] == [10, 50, 100, 200, 400]
    assert plan("max_len", ["ml-1m"])[-1].flags == ("--max_len", "400", "--config", "max_predictions_per_seq=80")
    assert [run.value for run in plan("hidden_size", ["beauty"])] == [16, 32, 64, 128, 256]
    with pytest.raises(ValueError, match="unknown experiment 'table9'"):
        plan("table9", ["ml-1m"])


def test_every_published_number_quoted_is_in_the_spec():
    if not os.path.isfile(SPEC):
        pytest.skip(f"{SPEC} is absent")
    with open(SPEC, encoding="utf-8") as handle:
        spec = handle.read()
    for (dataset, setting), (protocol, values, source) in [*PUBLISHED.items(), *PUBLISHED_FULL.items()]:
        for metric, value in values.items():
            assert f"{value:.4f}" in spec, (dataset, setting, metric, value)
    assert PUBLISHED[("ml-1m", "bert4rec")][1]["HR@10"] == 0.6970
    assert PUBLISHED[("ml-1m", "bert4rec-match")][0] == "uniform"  # the matching paper's protocol
    assert PUBLISHED[("beauty", "ablation-no-ln")][1] == {"NDCG@10": 0.1642}
    assert PUBLISHED_FULL[("ml-1m", "sasrec-ce")][1] == {"Recall@10": 0.3152, "NDCG@10": 0.1821}


def test_run_settings_leave_out_local_paths_only():
    flags = ["--dataset", "ml-1m", "--model_dir", "/a/runs/x", "--seed", "1", "--data_dir", "/d",
             "--source_file", "/s.txt", "--time_budget", "1h", "--config", "model_dir_note=1"]
    assert run_settings(flags) == ["--dataset", "ml-1m", "--seed", "1", "--time_budget", "1h",
                                   "--config", "model_dir_note=1"]


@pytest.mark.slow
def test_runs_skip_when_finished_resume_when_started_and_report(tmp_path):
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    out = tmp_path / "out"
    args = ["table2", "--datasets", "beauty", "--only", "pop,bert4rec", "--train_steps", "4", "--eval_every", "2",
            "--out", str(out), "--data_dir", str(tmp_path / "data"), "--source_file", f"beauty={source}",
            "--extra", " ".join(TINY), "--results_dir", str(tmp_path / "results"),
            "--allow_slower_cores"]  # two measurements of a noisy machine need not agree; the guard: below
    first = reproduce(*args)
    assert first.returncode == 0, first.stderr[-3000:] + first.stdout[-2000:]
    assert "run 1/2: beauty-pop (new)" in first.stdout and "run 2/2: beauty-bert4rec (new)" in first.stdout
    # An interrupted run: its checkpoint is there, its results are not.
    os.remove(out / "runs" / "beauty-bert4rec" / "results.json")
    shutil.rmtree(out / "runs" / "beauty-bert4rec" / "export")
    os.remove(tmp_path / "results" / "table2" / "beauty-bert4rec.json")
    second = reproduce(*args)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "run 1/2: beauty-pop finished earlier, skipped" in second.stdout
    assert "run 2/2: beauty-bert4rec (started)" in second.stdout
    assert os.path.isfile(out / "runs" / "beauty-bert4rec" / "results.json")

    with open(out / "report.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == COLUMNS
    bert4rec = [row for row in rows if row["setting"] == "bert4rec"]
    assert [row["published_metric"] for row in bert4rec] == ["HR@1", "HR@5", "HR@10", "NDCG@5", "NDCG@10", "MRR",
                                                             "Recall@10", "NDCG@10"]
    assert [row["published_protocol"] for row in bert4rec][-2:] == ["full", "full"]
    hr10 = next(row for row in bert4rec if row["published_metric"] == "HR@10")
    assert float(hr10["published"]) == 0.3025 and hr10["published_protocol"] == "pop"
    assert float(hr10["relative_difference"]) == pytest.approx((float(hr10["ours"]) - 0.3025) / 0.3025)
    assert float(hr10["ours"]) == float(hr10["pop/HR@10"]) and int(hr10["steps"]) == 4
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "2 of 6 runs finished" in report and "| bert4rec | pop-100 | HR@10 | 0.3025 |" in report
    for figure in ("validation_curves_beauty.png", "validation_steps_beauty.png", "attention.png"):
        path = out / figure
        assert path.stat().st_size > 10_000, figure
        assert f"]({figure})" in report

    # The records: the report under --results_dir, and a rerun without the run folders skips the runs.
    results = tmp_path / "results"
    record = json.loads((results / "table2" / "beauty-bert4rec.json").read_text(encoding="utf-8"))
    assert record["steps"] == 4 and record["test"]["pop"]["HR@10"] == pytest.approx(float(hr10["ours"]))
    assert "--model_dir" not in record["settings"] and "--train_steps" in record["settings"]
    assert record["curve"] and record["commit"] and record["machine"] and record["data"]["source"]
    # The cores' speed was measured before BERT4Rec trained (not before POP, which trains nothing),
    # once per start: the run was started twice.
    assert [sorted(speed) for speed in record["speed"]] == [["cores", "float32_gflops", "stream_gbs", "time"]] * 2
    pop = json.loads((results / "table2" / "beauty-pop.json").read_text(encoding="utf-8"))
    assert pop["speed"] == []
    published = (results / "table2.md").read_text(encoding="utf-8")
    assert "2 of 6 runs finished" in published and "](table2/validation_curves_beauty.png)" in published
    assert (results / "table2" / "validation_curves_beauty.png").stat().st_size > 10_000
    shutil.rmtree(out)
    (results / "table2" / "notes.md").write_text("BERT4Rec trained 4 steps here.\n", encoding="utf-8")
    third = reproduce(*args)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "run 2/2: beauty-bert4rec recorded in" in third.stdout
    assert not os.path.exists(out / "runs" / "beauty-bert4rec")
    published = (results / "table2.md").read_text(encoding="utf-8")
    assert "2 of 6 runs finished" in published
    assert "## Discussion" in published and "BERT4Rec trained 4 steps here." in published
    # Other settings are another experiment: the record does not count for them.
    other = reproduce(*[a if a != "4" else "6" for a in args], "--dry_run")
    assert "[new]" in other.stdout and "[recorded]" not in other.stdout


def test_core_groups_give_every_concurrent_run_the_same_cores():
    from bert4rec_tf.experiments.reproduce import core_groups

    assert core_groups(1, [0, 1]) == [[0, 1]]
    assert core_groups(2, [1, 0]) == [[0], [1]]
    assert core_groups(2, [0, 1, 2, 3, 4]) == [[0, 1], [2, 3]]  # the fifth core would make one run faster
    with pytest.raises(ValueError, match="--jobs 3 needs at least 3 cores"):
        core_groups(3, [0, 1])


def test_the_time_left_counts_the_budget_when_no_run_has_trained_yet():
    from bert4rec_tf.experiments.reproduce import time_left

    assert time_left([], 3600.0, runs=5, jobs=2) == 3 * 3600.0  # the recipe's hour, not POP's minute
    assert time_left([3900.0, 3700.0], 3600.0, runs=2, jobs=2) == 3800.0
    assert time_left([], 0.0, runs=3, jobs=1) is None


def test_the_time_left_counts_what_running_runs_have_left():
    """On 2026-11-25 the third of four one-hour runs started as the first ended, with the second 59
    minutes in, and the command said 2h02m for the three left: it is about one hour."""
    from bert4rec_tf.experiments.reproduce import time_left

    hour = 3660.0
    assert time_left([hour], 3600.0, runs=3, jobs=2, elapsed=(59 * 60.0,)) == pytest.approx(hour + 2 * 60.0)
    assert time_left([hour], 3600.0, runs=3, jobs=2) == 2 * hour  # as if none had started
    assert time_left([], 3600.0, runs=2, jobs=2, elapsed=(600.0, 1200.0)) == 3000.0
    assert time_left([], 3600.0, runs=1, jobs=1, elapsed=(5000.0,)) == 0.0  # overdue: ends any moment


@pytest.mark.slow
def test_two_jobs_train_at_once_on_a_core_each(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    out = tmp_path / "out"
    result = reproduce("table2", "--datasets", "beauty", "--only", "sasrec-ce,bert4rec", "--train_steps", "4",
                       "--eval_every", "2", "--out", str(out), "--data_dir", str(tmp_path / "data"),
                       "--source_file", f"beauty={source}", "--extra", " ".join(TINY), "--jobs", "2",
                       "--no_figures", "--allow_slower_cores")
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-2000:]
    started = [line for line in result.stdout.splitlines() if line.startswith("run ")]
    assert len(started) == 2 and {line.split(" on core ")[1].split(",")[0] for line in started} == {"0", "1"}
    for name in ("beauty-sasrec-ce", "beauty-bert4rec"):
        assert os.path.isfile(out / "runs" / name / "results.json")
    assert "2 of 6 runs finished" in (out / "report.md").read_text(encoding="utf-8")
    origin = json.loads((out / "runs" / "beauty-bert4rec" / "reproduce.json").read_text(encoding="utf-8"))
    assert origin["machine"].endswith(f"1 of {os.cpu_count()} cores")


def test_a_run_folder_trained_with_other_settings_is_refused_not_reported(tmp_path):
    out = tmp_path / "out"
    folder = out / "runs" / "beauty-pop"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"steps": 0, "test": {"pop": {"HR@10": 0.5}}}), encoding="utf-8")
    (folder / "reproduce.json").write_text(json.dumps(
        {"commit": "abc1234", "machine": "m", "date": "2026-11-24", "command": "c",
         "settings": ["--dataset", "beauty", "--model", "pop", "--time_budget", "5m"]}), encoding="utf-8")
    args = ["table2", "--datasets", "beauty", "--only", "pop", "--budget", "10m", "--out", str(out)]
    plan_ = reproduce(*args, "--dry_run")
    assert "beauty-pop" in plan_.stdout and "[other settings]" in plan_.stdout
    result = reproduce(*args, "--results_dir", str(tmp_path / "results"))
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 1 and len(errors) == 1 and "was trained with other settings" in errors[0]
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("args, message", [
    (["--budget", "2x"], "error: --budget '2x' is not a duration"),
    (["--only", "pop,bert5rec"], "error: --only: no run bert5rec in table2"),
    (["--source_file", "beauty"], "error: --source_file takes DATASET=PATH"),
    (["--datasets", "ml-2m"], "error: unknown dataset(s) ml-2m"),
    (["--jobs", "64"], "error: --jobs 64 needs at least 64 cores"),
    (["--deadline", "25:00"], "error: --deadline '25:00' is not a time of day HH:MM"),
    (["--deadline", "soon"], "error: --deadline 'soon' is not a duration"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, args, message):
    result = reproduce("table2", "--out", str(tmp_path / "out"), "--dry_run", *args)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 1 and len(errors) == 1 and errors[0].startswith(message), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not os.path.exists(tmp_path / "out")


def _record(dataset, setting, test):
    return {"run": f"{dataset}-{setting}", "dataset": dataset, "setting": setting, "model": setting, "value": None,
            "steps": 10, "seconds": 60.0, "instances": 1280, "test": test, "settings": ["--seed", "1"]}


def test_orderings_say_where_the_published_order_of_two_runs_holds(tmp_path):
    records = [_record("ml-1m", "bert4rec", {"pop": {"HR@10": 0.60, "NDCG@10": 0.40},
                                             "full": {"Recall@10": 0.20, "NDCG@10": 0.10}}),
               _record("ml-1m", "sasrec-bce", {"pop": {"HR@10": 0.65, "NDCG@10": 0.36}}),
               _record("ml-1m", "sasrec-ce", {"full": {"Recall@10": 0.25, "NDCG@10": 0.10}}),
               _record("ml-1m", "pop", {"uniform": {"HR@10": 0.43}})]
    pairs = {(p["first"], p["second"], p["protocol"], p["metric"]): p for p in orderings(report_rows(records))}
    # The BERT4Rec paper: bert4rec 0.6970 > sasrec-bce 0.6629 (HR@10), 0.4818 > 0.4368 (NDCG@10).
    assert pairs[("bert4rec", "sasrec-bce", "pop", "HR@10")]["holds"] is False
    assert pairs[("bert4rec", "sasrec-bce", "pop", "NDCG@10")]["holds"] is True
    assert pairs[("bert4rec", "sasrec-bce", "pop", "HR@10")]["published"] == (0.6970, 0.6629)
    # Later work, full ranking: SASRec-ce 0.3152 > BERT4Rec 0.1518; an equal NDCG@10 of ours is a tie.
    assert pairs[("bert4rec", "sasrec-ce", "full", "Recall@10")]["holds"] is True
    assert pairs[("bert4rec", "sasrec-ce", "full", "NDCG@10")]["holds"] is None
    # POP has no partner under its protocol and source; MRR and HR@5 are not compared.
    assert len(pairs) == 4 and not any("pop" in key[:2] for key in pairs)
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), records, [])
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert "| bert4rec vs sasrec-bce | pop-100 | HR@10 | 0.6970 vs 0.6629 | 0.6000 vs 0.6500 | reversed | 0.0176 |" in report
    assert "| bert4rec vs sasrec-ce | full ranking | NDCG@10 | 0.0806 vs 0.1821 | 0.1000 vs 0.1000 | tie |" in report
    assert "two standard errors over the 6,040 test users" in report
    assert "## Discussion" not in report
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), records, [], notes="SASRec leads.\n")
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert report.index("## Discussion") < report.index("SASRec leads.") < report.index("## Where each run comes from")


def test_ablation_orderings_pair_each_change_with_the_default():
    records = [_record("ml-1m", f"ablation-{name}", {"pop": {"NDCG@10": value}})
               for name, value in (("default", 0.45), ("no-pe", 0.30), ("layers-4", 0.42), ("layers-3", 0.44))]
    pairs = orderings(report_rows(records))
    assert [(p["first"], p["second"], p["holds"]) for p in pairs] == [
        ("ablation-default", "ablation-no-pe", True),  # published 0.4759 > 0.2155
        ("ablation-default", "ablation-layers-4", False),  # published 0.4759 < 0.4898
        ("ablation-default", "ablation-layers-3", None)]  # 0.01 apart: within two standard errors (0.0181)


def test_an_order_within_the_test_sets_noise_is_a_tie():
    """0.6856 against 0.6866 on ML-1m's 6,040 test users (the 2026-11-25 SASRec-bce and BERT4Rec) is
    no order: two standard errors of the difference are 0.0168. On Beauty's 40,226 users 0.01 is one."""
    from bert4rec_tf.experiments.reproduction import noise_margin, tested_users

    assert tested_users("ml-1m") == 6040 and tested_users("beauty") == 40226 and tested_users("custom") is None
    assert noise_margin(0.6856, 0.6866, 6040) == pytest.approx(0.01689, abs=1e-5)
    assert noise_margin(0.5, 0.5, 40226) == pytest.approx(2 * (0.5 / 40226) ** 0.5)
    assert noise_margin(0.5, 0.4, None) == 0.0
    tied = [_record("ml-1m", "bert4rec", {"pop": {"HR@10": 0.6866}}), _record("ml-1m", "sasrec-bce", {"pop": {"HR@10": 0.6856}})]
    assert [p["holds"] for p in orderings(report_rows(tied))] == [None]
    apart = [_record("beauty", "bert4rec", {"pop": {"HR@10": 0.2908}}), _record("beauty", "sasrec-bce", {"pop": {"HR@10": 0.2808}})]
    assert [p["holds"] for p in orderings(report_rows(apart))] == [True]  # 0.0100 > 0.0063


def test_a_report_lists_its_data_sets_in_one_order_whichever_command_wrote_it():
    from bert4rec_tf.experiments.reproduce import report_datasets

    assert report_datasets(["beauty"], ["ml-1m", "beauty", "ml-1m"]) == ["ml-1m", "beauty"]
    assert report_datasets(["ml-1m", "beauty"], []) == ["ml-1m", "beauty"]
    assert report_datasets(["beauty", "ml-1m"], ["custom"]) == ["ml-1m", "beauty", "custom"]


def test_pop_does_not_count_as_a_budget_in_the_time_left():
    from bert4rec_tf.experiments.reproduce import time_left, trained_runs

    runs = [run for run in plan("table2", ["beauty"]) if run.setting in ("pop", "sasrec-ce", "bert4rec")]
    assert len(runs) == 3 and trained_runs(runs) == 2
    # POP, SASRec and BERT4Rec on two cores with a one-hour budget: one hour, not two.
    assert time_left([], 3600.0, trained_runs(runs), 2) == 3600.0
    assert time_left([], 3600.0, trained_runs(runs[:1]), 2) == 0.0  # POP alone: nothing to wait for


def test_links_in_the_notes_hold_from_the_report_that_quotes_them():
    from bert4rec_tf.experiments.reproduction import rebase_links
    text = ("See [runs](../../experiments.md#best-runs), [ablation](../ablation.md), [here](figure.png), "
            "[web](https://example.org/a.md) and [above](#table).")
    assert rebase_links(text, "table2") == (
        "See [runs](../experiments.md#best-runs), [ablation](ablation.md), [here](table2/figure.png), "
        "[web](https://example.org/a.md) and [above](#table).")


def test_a_run_with_the_settings_of_another_experiments_record_is_that_record(tmp_path):
    from bert4rec_tf.experiments.reproduction import read_record, record_path, write_report, RECORD_VERSION
    settings = ["--dataset", "ml-1m", "--model", "bert4rec", "--recipe", "cpu-1h"]
    table2 = next(run for run in plan("table2", ["ml-1m"]) if run.setting == "bert4rec")
    default = next(run for run in plan("ablation", ["ml-1m"]) if run.setting == "ablation-default")
    record = {**_record("ml-1m", "bert4rec", {"pop": {"HR@10": 0.69}}), "version": RECORD_VERSION,
              "experiment": "table2", "settings": settings, "commit": "abc1234", "date": "2026-11-25",
              "machine": "test", "command": "bert4rec-reproduce table2"}
    os.makedirs(tmp_path / "table2")
    (tmp_path / "table2" / "ml-1m-bert4rec.json").write_text(json.dumps(record), encoding="utf-8")
    assert read_record(str(tmp_path), "table2", table2, settings)["run"] == "ml-1m-bert4rec"
    shared = read_record(str(tmp_path), "ablation", default, settings)
    assert shared["run"] == "ml-1m-ablation-default" and shared["experiment"] == "ablation"
    assert shared["same_as"] == "table2/ml-1m-bert4rec" and shared["test"] == record["test"]
    # Other settings (another recipe) or another data set's run are not the same training.
    assert read_record(str(tmp_path), "ablation", default, [*settings[:-1], "cpu-30m"]) is None
    beauty = next(run for run in plan("ablation", ["beauty"]) if run.setting == "ablation-default")
    assert read_record(str(tmp_path), "ablation", beauty, settings) is None
    # A stale record of other settings in the experiment's own folder does not hide the shared one.
    os.makedirs(tmp_path / "ablation")
    (tmp_path / "ablation" / "ml-1m-ablation-default.json").write_text(
        json.dumps({**record, "settings": ["--seed", "2"]}), encoding="utf-8")
    assert read_record(str(tmp_path), "ablation", default, settings)["same_as"] == "table2/ml-1m-bert4rec"
    assert not os.path.exists(record_path(str(tmp_path), "ablation", plan("ablation", ["ml-1m"])[1]))
    write_report(str(tmp_path), "ablation", "ablation", plan("ablation", ["ml-1m"]), [shared], [])
    report = (tmp_path / "ablation.md").read_text(encoding="utf-8")
    assert "| ml-1m-ablation-default (the record of table2/ml-1m-bert4rec) | abc1234 |" in report


def test_sweep_runs_at_the_recipes_own_value_are_one_run(tmp_path):
    """Settings written differently but resolving to the same configuration share one record: at
    cpu-30m, N 100 on ML-1m (20 slots) and d 64 (FFN 256) are both the recipe's own BERT4Rec."""
    from bert4rec_tf.experiments.reproduction import RECORD_VERSION, read_record, resolved_settings
    base = ["--dataset", "ml-1m", "--model", "bert4rec", "--seed", "12345", "--eval_every", "500", "--recipe", "cpu-30m"]
    runs = {run.setting: run for name in ("max_len", "hidden_size", "mask_prob") for run in plan(name, ["ml-1m"])}
    settings = {setting: base + list(run.flags) for setting, run in runs.items()}
    assert resolved_settings(settings["max-len-100"]) == resolved_settings(settings["hidden-size-64"])
    assert resolved_settings(settings["max-len-100"]) == resolved_settings(base)
    # A setting that changes the configuration, a flag outside it, or another seed: not the same run.
    assert resolved_settings(settings["hidden-size-32"]) != resolved_settings(base)
    for setting in ("mask-prob-0.2", "mask-prob-0.3"):  # the slots of the recipe's N 100: 20 at rho 0.2
        settings[setting] += derived_flags(runs[setting], settings[setting])
    assert resolved_settings(settings["mask-prob-0.2"]) == resolved_settings(base)
    assert resolved_settings([*base, "--eval_every", "1000"]) is None  # a flag given twice
    assert resolved_settings(base[:-2] + ["--recipe", "cpu-1h"]) != resolved_settings(base)
    assert resolved_settings([*base[:4], "--seed", "1", *base[6:]]) != resolved_settings(base)
    assert resolved_settings([*base, "--unknown", "1"]) is None
    assert resolved_settings([*base, "--config", "no_such_key=1"]) is None
    # The record of max_len's N 100 answers hidden_size's d 64, named as its origin; d 32 trains.
    record = {**_record("ml-1m", "max-len-100", {"pop": {"HR@10": 0.66}}), "version": RECORD_VERSION,
              "experiment": "max_len", "settings": settings["max-len-100"], "value": 100}
    os.makedirs(tmp_path / "max_len")
    (tmp_path / "max_len" / "ml-1m-max-len-100.json").write_text(json.dumps(record), encoding="utf-8")
    shared = read_record(str(tmp_path), "hidden_size", runs["hidden-size-64"], settings["hidden-size-64"])
    assert shared["same_as"] == "max_len/ml-1m-max-len-100" and shared["value"] == 64
    assert shared["setting"] == "hidden-size-64" and shared["test"] == record["test"]
    assert read_record(str(tmp_path), "hidden_size", runs["hidden-size-32"], settings["hidden-size-32"]) is None
    assert read_record(str(tmp_path), "mask_prob", runs["mask-prob-0.2"],
                       settings["mask-prob-0.2"])["same_as"] == "max_len/ml-1m-max-len-100"
    assert read_record(str(tmp_path), "mask_prob", runs["mask-prob-0.3"], settings["mask-prob-0.3"]) is None


def test_derived_flags_follow_the_resolved_length_and_learning_rate():
    """The mask sweep's slots are sized from the N the recipe and flags resolve to, and the no-residual
    run's rate is capped at 1e-3 only where the resolved rate is above it; --extra still overrides."""
    base = ["--dataset", "ml-1m", "--model", "bert4rec", "--seed", "12345", "--recipe"]
    rho = plan("mask_prob", ["ml-1m", "beauty"])
    assert derived_flags(_run(rho, "ml-1m", 0.2), [*base, "cpu-30m", "--config", "masked_lm_prob=0.2"]) == [
        "--config", "max_predictions_per_seq=20"]  # cpu-30m trains N 100 on ML-1m
    assert derived_flags(_run(rho, "ml-1m", 0.2), [*base, "paper"]) == ["--config", "max_predictions_per_seq=40"]
    assert derived_flags(_run(rho, "ml-1m", 0.3), [*base, "cpu-30m", "--max_len", "50"]) == [
        "--config", "max_predictions_per_seq=15"]
    beauty = [*base[:1], "beauty", *base[2:], "cpu-30m"]
    assert derived_flags(_run(rho, "beauty", 0.1), beauty) == ["--config", "max_predictions_per_seq=5"]
    residual = next(run for run in plan("ablation", ["ml-1m"]) if run.setting == "ablation-no-residual")
    assert derived_flags(residual, [*base, "cpu-1h"]) == ["--learning_rate", "0.001"]  # the recipe's 3e-3
    assert derived_flags(residual, [*base, "paper"]) == []  # 1e-4 is below the cap
    assert derived_flags(residual, [*base, "cpu-1h"], ["--learning_rate", "0.0005"]) == []  # --extra's rate
    # --extra flags that cannot be read (train.py checks them) are left out; the plan's own are kept.
    assert derived_flags(residual, [*base, "cpu-1h"], ["--debug"]) == ["--learning_rate", "0.001"]
    assert derived_flags(_run(rho, "ml-1m", 0.2), [*base, "cpu-30m"], ["--max_len", "50", "--debug"]) == [
        "--config", "max_predictions_per_seq=20"]
    widths = {run.value: run for run in plan("hidden_size", ["ml-1m"])}
    assert derived_flags(widths[256], [*base, "cpu-30m"]) == ["--learning_rate", "0.001"]
    assert derived_flags(widths[128], [*base, "cpu-30m"]) == []  # learns at the recipe's 3e-3
    assert derived_flags(widths[256], [*base, "paper"]) == []
    default = next(run for run in plan("ablation", ["ml-1m"]) if run.setting == "ablation-default")
    assert derived_flags(default, [*base, "cpu-1h"]) == []
    with pytest.raises(ValueError, match="run ml-1m-ablation-no-residual: cannot resolve"):
        derived_flags(residual, [*base, "cpu-1h", "--no_such_flag", "1"])


def _run(runs, dataset, rho):
    return next(run for run in runs if run.dataset == dataset and run.value == rho)


def test_the_no_residual_command_trains_at_the_capped_rate_whatever_else_extra_says(tmp_path):
    args = ["ablation", "--datasets", "ml-1m", "--recipe", "cpu-1h", "--out", str(tmp_path / "out"), "--dry_run"]
    result = reproduce(*args, "--only", "ablation-no-residual")
    assert result.returncode == 0 and "--config use_residual=false --learning_rate 0.001" in result.stdout
    # An --extra flag that resolved_settings cannot read is passed on to train.py, not an error here.
    result = reproduce(*args, "--only", "ablation-default", "--extra=--debug")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "--recipe cpu-1h --debug" in result.stdout


def test_deadline_is_a_clock_time_or_a_duration():
    import time

    from bert4rec_tf.experiments.reproduce import parse_deadline

    now = time.mktime((2026, 11, 25, 9, 30, 0, 0, 0, -1))
    assert parse_deadline("2h40m", now) == now + 9600
    assert parse_deadline("10:35", now) == now + 65 * 60  # later today
    assert parse_deadline("09:00", now) == now + 23.5 * 3600  # passed today: tomorrow
    assert parse_deadline("9:30", now) == now + 24 * 3600


def test_a_run_is_expected_to_take_its_budget_and_the_overhead_or_what_runs_took():
    from bert4rec_tf.experiments.reproduction import Run
    from bert4rec_tf.experiments.reproduce import POP_SECONDS, RUN_OVERHEAD, expected_seconds

    bert4rec, pop = Run("ml-1m", "bert4rec", "bert4rec"), Run("ml-1m", "pop", "pop")
    assert expected_seconds(bert4rec, 3600.0, []) == 3600.0 + RUN_OVERHEAD
    assert expected_seconds(bert4rec, 3600.0, [4200.0, 4400.0]) == 4300.0  # measured, longer
    assert expected_seconds(bert4rec, 3600.0, [3700.0]) == 3600.0 + RUN_OVERHEAD  # never below the budget's
    assert expected_seconds(bert4rec, 0.0, []) is None  # --train_steps, nothing measured: unknown
    assert expected_seconds(bert4rec, 0.0, [50.0]) == 50.0
    assert expected_seconds(pop, 3600.0, []) == POP_SECONDS


def test_no_run_starts_that_would_end_after_the_deadline(tmp_path):
    """An hour's run is not started 20 minutes before the deadline (it would be cut off and lost);
    the command says which runs wait and ends without error, and the dry run still lists them."""
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    args = ["table2", "--datasets", "beauty", "--only", "sasrec-ce,bert4rec", "--budget", "1h",
            "--out", str(tmp_path / "out"), "--source_file", f"beauty={source}", "--deadline", "20m"]
    result = reproduce(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "run 1/2: beauty-sasrec-ce not started: it would end after the deadline" in result.stdout
    assert "run 2/2: beauty-bert4rec not started" in result.stdout
    assert "2 runs not started before the deadline (beauty-sasrec-ce, beauty-bert4rec)" in result.stdout
    assert not os.path.exists(tmp_path / "out" / "runs")
    assert "0 of 6 runs finished" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")


def _speed(gflops, gbs):
    return {"float32_gflops": gflops, "stream_gbs": gbs, "cores": 1, "time": "2026-11-25T11:00:00"}


def test_a_report_flags_runs_trained_on_slower_cores(tmp_path):
    """The 2026-11-25 sessions' machines: 204 against 142 GFLOP/s, both "AMD EPYC, 2 cores"."""
    from bert4rec_tf.experiments.reproduction import machine_notes

    fast, slow = _speed(204.0, 10.0), _speed(142.0, 9.5)
    records = [{**_record("ml-1m", "bert4rec", {}), "speed": [fast]},
               {**_record("ml-1m", "sasrec-bce", {}), "speed": [slow]},
               {**_record("ml-1m", "sasrec-ce", {}), "speed": [_speed(190.0, 8.0)]},  # within 10% / stream -20%
               {**_record("ml-1m", "bert4rec-1mask", {}), "speed": [fast, slow]},  # resumed on the slow one
               _record("ml-1m", "bert4rec-match", {}),  # recorded before records held a speed
               _record("ml-1m", "pop", {})]  # POP trains nothing: not compared
    notes = "".join(machine_notes(records))
    assert "fastest run's (its 204 GFLOP/s, 10 GB/s)" in notes
    assert ("ml-1m-sasrec-bce (float32 -30%); ml-1m-sasrec-ce (stream -20%); ml-1m-bert4rec-1mask (float32 -30%)"
            in notes)
    assert "ml-1m-bert4rec (" not in notes
    assert "Resumed on cores more than 10% apart in speed: ml-1m-bert4rec-1mask." in notes
    assert "equal compute is not shown for: ml-1m-bert4rec-match." in notes and "ml-1m-pop" not in notes
    assert machine_notes(records[:1]) == []  # one measured run: nothing to say
    assert "No run has a speed measurement" in machine_notes(records[4:])[0]
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), records, [])
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert "**Not equal compute:**" in report
    assert "| ml-1m-bert4rec-1mask | " in report and " | 142-204, 9.5-10 | `--seed 1` |" in report
    assert " | not measured | `--seed 1` |" in report


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


def test_a_run_on_cores_at_less_than_half_its_experiments_fastest_is_not_started():
    """The Xeon of the third 2026-11-25 session (stream 0.9 against the EPYC's 5.94 GB/s) is refused;
    the slower EPYC (142 against 204 GFLOP/s, -30%) starts, and its report flags it; runs without a
    measurement give no reference."""
    from bert4rec_tf.experiments.reproduce import slower_cores

    speeds = [[_speed(204.0, 6.0)], [_speed(150.0, 5.9), _speed(190.0, 5.0)], [], [{"cores": 1}]]
    why = slower_cores(_speed(142.0, 0.9), speeds)
    assert why.startswith("its cores measure 142 GFLOP/s and 0.9 GB/s (stream -85% against the fastest cores")
    assert "of the runs it is compared with: 204 GFLOP/s, 6 GB/s)" in why
    assert "(float32 -56%, stream -50%" in slower_cores(_speed(90.0, 2.99), speeds)
    assert slower_cores(_speed(142.0, 5.9), speeds) is None
    assert slower_cores(_speed(103.0, 3.1), speeds) is None
    assert slower_cores(_speed(10.0, 0.1), [[], [{"cores": 1}]]) is None


def _run_reproduce_in_process(tmp_path, monkeypatch, measured, *flags, experiment="table2", only="bert4rec"):
    """reproduce.py's main for one run on Beauty (table2's BERT4Rec), with the cores measured as
    `measured` and a train command that does nothing; in --results_dir a record of table2's SASRec
    (ce) whose cores measured 204 GFLOP/s and 6 GB/s, in --out a started POP run (never compared)."""
    from bert4rec_tf.experiments import reproduce as script

    results, out = tmp_path / "results", tmp_path / "out"
    (results / "table2").mkdir(parents=True)
    record = {**_record("beauty", "sasrec-ce", {}), "model": "sasrec", "speed": [_speed(204.0, 6.0)]}
    (results / "table2" / "beauty-sasrec-ce.json").write_text(json.dumps(record), encoding="utf-8")
    (out / "runs" / "beauty-pop").mkdir(parents=True)
    (out / "runs" / "beauty-pop" / "reproduce.json").write_text(json.dumps({"speed": [_speed(999.0, 99.0)]}))
    monkeypatch.setattr(script, "machine_speed", lambda pin=None: measured)
    monkeypatch.setattr(script, "train_command", lambda run, args, sources: [sys.executable, "-c", "pass"])
    code = script.main([experiment, "--datasets", "beauty", "--only", only, "--budget", "1m", "--out", str(out),
                        "--results_dir", str(results), "--no_figures", *flags])
    return code, out / "runs" / f"beauty-{only}"


def test_reproduce_refuses_slower_cores_unless_told_and_notes_the_speed_it_trained_at(tmp_path, monkeypatch, capsys):
    code, model_dir = _run_reproduce_in_process(tmp_path, monkeypatch, _speed(142.0, 0.9))
    error = capsys.readouterr().err
    assert code == 1
    assert ("error: run beauty-bert4rec not started: its cores measure 142 GFLOP/s and 0.9 GB/s (stream -85% "
            "against the fastest cores of the runs it is compared with: 204 GFLOP/s, 6 GB/s)") in error
    assert "Not started: beauty-bert4rec; train them on cores like those, or give --allow_slower_cores" in error
    assert not model_dir.exists()  # nothing noted: the run never started

    shutil.rmtree(tmp_path / "results"), shutil.rmtree(tmp_path / "out")
    code, model_dir = _run_reproduce_in_process(tmp_path, monkeypatch, _speed(142.0, 0.9), "--allow_slower_cores")
    assert code == 0, capsys.readouterr().err
    provenance = json.loads((model_dir / "reproduce.json").read_text(encoding="utf-8"))
    assert [speed["stream_gbs"] for speed in provenance["speed"]] == [0.9]

    shutil.rmtree(tmp_path / "results"), shutil.rmtree(tmp_path / "out")
    code, model_dir = _run_reproduce_in_process(tmp_path, monkeypatch, _speed(142.0, 5.9))
    assert code == 0 and (model_dir / "reproduce.json").is_file()


def test_a_sweep_without_a_measured_run_is_compared_with_every_experiments_records(tmp_path, monkeypatch, capsys):
    code, model_dir = _run_reproduce_in_process(tmp_path, monkeypatch, _speed(142.0, 0.9), experiment="mask_prob",
                                                only="mask-prob-0.2")
    assert code == 1 and "error: run beauty-mask-prob-0.2 not started" in capsys.readouterr().err
    assert not model_dir.exists()


def _sweep_row(dataset, value, ndcg):
    return {"dataset": dataset, "value": value, "pop/NDCG@10": ndcg}


def test_a_sweep_says_its_best_value_and_whether_the_papers_is_level_with_it():
    """ML-1m (6,040 test users): 2 SE between 0.47 and 0.46 is about 0.0181, so 0.46 is level with
    0.47 and 0.43 is not; the paper's best rho on ML-1m is 0.2, its best N by NDCG@10 200."""
    from bert4rec_tf.experiments.reproduction import paper_best_value, sweep_summary

    rows = [_sweep_row("ml-1m", 0.1, 0.43), _sweep_row("ml-1m", 0.2, 0.46), _sweep_row("ml-1m", 0.3, 0.47),
            _sweep_row("beauty", 0.6, 0.18)]
    [text] = sweep_summary(rows, "mask_prob", "ml-1m")
    assert text.startswith("Our best rho by test pop-100 NDCG@10: 0.3 (0.4700); within two standard errors of it: "
                           "0.2. The paper's best, 0.2, is among them: its shape holds. The paper's figure: ")
    rows[1]["pop/NDCG@10"] = 0.40
    assert ("every other value is more than two standard errors below it. The paper's best, 0.2, is below ours "
            "(0.4000, beyond two standard errors): its shape does not hold") in sweep_summary(rows, "mask_prob", "ml-1m")[0]
    assert sweep_summary(rows, "mask_prob", "beauty") == []  # one value: no shape yet
    assert paper_best_value("ml-1m", "max_len") == 200 and paper_best_value("beauty", "max_len") == 20
    assert paper_best_value("beauty", "mask_prob") == 0.6 and paper_best_value("ml-1m", "hidden_size") is None
    [text] = sweep_summary([_sweep_row("ml-1m", 100, 0.47), _sweep_row("ml-1m", 400, 0.46)], "max_len", "ml-1m")
    assert text.endswith("The paper's best, 200, has no finished run here.")
    [text] = sweep_summary([_sweep_row("beauty", 16, 0.15), _sweep_row("beauty", 64, 0.18)], "hidden_size", "beauty")
    assert "The paper's best" not in text and text.endswith("a large d overfits on sparse data.")
