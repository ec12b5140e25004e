"""The bert4rec-reproduce command: its plan, skip and resume, its errors, the cores it refuses and the
report it writes (bert4rec_tf/experiments/reproduce.py)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from bert4rec_tf.experiments.plans import plan
from bert4rec_tf.experiments.report import COLUMNS
from tests.conftest import REPO, toy_sequences, write_pairs
from tests.report.fake_records import fake_record, fake_speed
from tests.training.test_bad_runs import TINY

SCRIPT = os.path.join(REPO, "run_scripts", "reproduce.py")
TABLE2_BEAUTY_RUNS = len(plan("table2", ["beauty"]))  # what "2 of N runs finished" counts
# --extra gives its settings to every run, so only settings all its runs read: POP reads no Transformer
# size, SASRec no static-instance setting (dupe_factor); either refuses what it does not read.
SHARED = ["--config", "max_len=10", "--batch_size", "4", "--learning_rate", "1e-3"]
TRANSFORMERS = [word for pair in zip(TINY[::2], TINY[1::2]) if pair[1] != "dupe_factor=2" for word in pair]


def reproduce(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=900)


def test_table2_plan_has_the_papers_methods_and_our_variants_with_their_flags(tmp_path):
    result = reproduce("table2", "--datasets", "ml-1m", "--budget", "5m", "--out", str(tmp_path), "--dry_run")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if re.match(r"\s+\d+\.", line)]
    assert [line.split()[1] for line in lines] == [
        "ml-1m-pop", "ml-1m-bpr-mf", "ml-1m-ncf", "ml-1m-fpmc", "ml-1m-gru4rec", "ml-1m-gru4rec-plus", "ml-1m-caser",
        "ml-1m-sasrec-bce", "ml-1m-sasrec-ce", "ml-1m-bert4rec-1mask", "ml-1m-bert4rec", "ml-1m-bert4rec-match"]
    assert "--model sasrec" in lines[8] and "--loss ce" in lines[8] and "--time_budget 5m" in lines[8]
    assert "--model gru4rec_plus" in lines[5]
    assert all("[new]" in line for line in lines)
    assert not os.listdir(tmp_path)  # a dry run writes nothing


@pytest.mark.slow
def test_runs_skip_when_finished_resume_when_started_and_report(tmp_path):
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    out = tmp_path / "out"
    args = ["table2", "--datasets", "beauty", "--only", "pop,bert4rec", "--train_steps", "4", "--eval_every", "2",
            "--out", str(out), "--data_dir", str(tmp_path / "data"), "--source_file", f"beauty={source}",
            "--extra", " ".join(SHARED), "--results_dir", str(tmp_path / "results"),
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
    ours = float(hr10["ours"])
    cell = f"{ours:.4f} / 0.3025 ({(ours - 0.3025) / 0.3025:+.1%})"  # ours / published (difference), HR@10's column
    assert f"2 of {TABLE2_BEAUTY_RUNS} runs finished" in report and "| HR@1 | HR@5 | HR@10 |" in report
    assert next(line for line in report.splitlines() if line.startswith("| bert4rec | ")).split(" | ")[3] == cell
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
    assert record["config"]["model"]["name"] == "bert4rec" and record["config"]["train"]["train_steps"] == 4
    # The cores' speed was measured before BERT4Rec trained (not before POP, which trains nothing),
    # once per start: the run was started twice.
    assert [sorted(speed) for speed in record["speed"]] == [["cores", "float32_gflops", "stream_gbs", "time"]] * 2
    pop = json.loads((results / "table2" / "beauty-pop.json").read_text(encoding="utf-8"))
    assert pop["speed"] == []
    published = (results / "table2.md").read_text(encoding="utf-8")
    assert f"2 of {TABLE2_BEAUTY_RUNS} runs finished" in published and "](table2/validation_curves_beauty.png)" in published
    assert (results / "table2" / "validation_curves_beauty.png").stat().st_size > 10_000
    shutil.rmtree(out)
    (results / "table2" / "notes.md").write_text("BERT4Rec trained 4 steps here.\n", encoding="utf-8")
    third = reproduce(*args)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "run 2/2: beauty-bert4rec recorded in" in third.stdout
    assert not os.path.exists(out / "runs" / "beauty-bert4rec")
    published = (results / "table2.md").read_text(encoding="utf-8")
    assert f"2 of {TABLE2_BEAUTY_RUNS} runs finished" in published
    assert "## Discussion" in published and "BERT4Rec trained 4 steps here." in published
    # Other settings are another experiment: the record does not count for them.
    other = reproduce(*[a if a != "4" else "6" for a in args], "--dry_run")
    assert "[new: its record was made with other flags (--train_steps 6 (was 4))]" in other.stdout
    assert "[recorded]" not in other.stdout


@pytest.mark.slow
def test_two_jobs_train_at_once_on_a_core_each(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    out = tmp_path / "out"
    result = reproduce("table2", "--datasets", "beauty", "--only", "sasrec-ce,bert4rec", "--train_steps", "4",
                       "--eval_every", "2", "--out", str(out), "--data_dir", str(tmp_path / "data"),
                       "--source_file", f"beauty={source}", "--extra", " ".join(TRANSFORMERS), "--jobs", "2",
                       "--no_figures", "--allow_slower_cores")
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-2000:]
    started = [line for line in result.stdout.splitlines() if line.startswith("run ")]
    assert len(started) == 2 and {line.split(" on core ")[1].split(",")[0] for line in started} == {"0", "1"}
    for name in ("beauty-sasrec-ce", "beauty-bert4rec"):
        assert os.path.isfile(out / "runs" / name / "results.json")
    assert f"2 of {TABLE2_BEAUTY_RUNS} runs finished" in (out / "report.md").read_text(encoding="utf-8")
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


def test_a_record_or_run_folder_of_a_configuration_since_changed_trains_again_or_is_refused(tmp_path):
    from bert4rec_tf.experiments.plans import resolved_settings
    from bert4rec_tf.experiments.records import RECORD_VERSION
    out, results = tmp_path / "out", tmp_path / "results"
    args = ["table2", "--datasets", "beauty", "--only", "ncf", "--recipe", "cpu-1h", "--out", str(out),
            "--results_dir", str(results), "--dry_run"]
    settings = ["--dataset", "beauty", "--model", "ncf", "--seed", "12345", "--eval_every", "500", "--recipe", "cpu-1h"]
    config = resolved_settings(settings)["config"]
    (results / "table2").mkdir(parents=True)
    record = {**fake_record("beauty", "ncf", {"pop": {"HR@10": 0.18}}), "version": RECORD_VERSION,
              "experiment": "table2", "settings": settings, "config": config}
    (results / "table2" / "beauty-ncf.json").write_text(json.dumps(record), encoding="utf-8")
    assert "beauty-ncf" in (now := reproduce(*args)).stdout and "[recorded]" in now.stdout, now.stderr[-2000:]
    old = {**config, "model": {**config["model"], "l2": 0.0}}  # as the recipe was before it set 0.01
    (results / "table2" / "beauty-ncf.json").write_text(json.dumps({**record, "config": old}), encoding="utf-8")
    stale = reproduce(*args)
    assert "[new: its record is of another configuration (model.l2)]" in stale.stdout, stale.stdout[-2000:]
    # A run folder that trained the former configuration is not this command's run.
    folder = out / "runs" / "beauty-ncf"
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"steps": 1, "test": {"pop": {"HR@10": 0.2}}}), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps(old), encoding="utf-8")
    assert "[other settings]" in reproduce(*args).stdout


def test_the_plan_names_the_flags_by_which_a_record_of_other_settings_differs(tmp_path):
    from bert4rec_tf.experiments.records import RECORD_VERSION
    results = tmp_path / "results"
    args = ["table2", "--datasets", "beauty", "--only", "ncf", "--recipe", "cpu-1h", "--out", str(tmp_path / "out"),
            "--results_dir", str(results), "--dry_run"]
    settings = ["--dataset", "beauty", "--model", "ncf", "--seed", "12345", "--eval_every", "500"]  # no --recipe
    (results / "table2").mkdir(parents=True)
    record = {**fake_record("beauty", "ncf", {"pop": {"HR@10": 0.18}}), "version": RECORD_VERSION,
              "experiment": "table2", "settings": [*settings, "--config", "l2=0.5"]}
    (results / "table2" / "beauty-ncf.json").write_text(json.dumps(record), encoding="utf-8")
    plan = reproduce(*args)
    assert ("[new: its record was made with other flags (now also --recipe cpu-1h; no longer --config l2=0.5)]"
            in plan.stdout), plan.stdout[-2000:] + plan.stderr[-2000:]


@pytest.mark.parametrize("args, message", [
    (["--budget", "2x"], "error: --budget '2x' is not a duration"),
    (["--only", "pop,bert5rec"], "error: --only: no run bert5rec in table2"),
    (["--source_file", "beauty"], "error: --source_file takes DATASET=PATH"),
    (["--datasets", "ml-2m"], "error: unknown dataset(s) ml-2m"),
    (["--jobs", "64"], "error: --jobs 64 needs at least 64 cores"),
    (["--deadline", "25:00"], "error: --deadline '25:00' is not a time of day HH:MM"),
    (["--deadline", "soon"], "error: --deadline 'soon' is not a duration"),
    (["--datasets", "custom", "--only", "pop"],
     "error: run custom-pop: data set 'custom' has no download: give --source_file custom=PATH"),
    (["--only", "pop", "--extra", "--bogus 1"],
     "error: run ml-1m-pop: train.py refuses its flags: Unknown command line flag 'bogus'"),
    (["--only", "pop", "--extra", "--patience x"], "error: run ml-1m-pop: train.py refuses its flags: flag --patience=x"),
    (["--only", "pop", "--extra", "--config 'item_features=a b.csv"],
     "error: --extra \"--config 'item_features=a b.csv\" is not a command line (no closing quotation)"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, args, message):
    result = reproduce("table2", "--out", str(tmp_path / "out"), "--dry_run", *args)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 1 and len(errors) == 1 and errors[0].startswith(message), result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not os.path.exists(tmp_path / "out")


def test_the_former_name_of_the_rho_sweep_is_one_line_naming_the_new_one(tmp_path):
    result = reproduce("mask_prob", "--datasets", "ml-1m", "--out", str(tmp_path / "out"))
    assert result.returncode == 1 and result.stdout == "", result.stderr[-2000:]
    assert result.stderr.startswith("error: experiment 'mask_prob' is now 'mask_proportion'")
    assert result.stderr.count("\n") == 1 and not os.path.exists(tmp_path / "out")


def test_a_report_lists_its_data_sets_in_one_order_whichever_command_wrote_it():
    from bert4rec_tf.experiments.results import report_datasets

    assert report_datasets(["beauty"], ["ml-1m", "beauty", "ml-1m"]) == ["ml-1m", "beauty"]
    assert report_datasets(["ml-1m", "beauty"], []) == ["ml-1m", "beauty"]
    assert report_datasets(["beauty", "ml-1m"], ["custom"]) == ["ml-1m", "beauty", "custom"]


def test_the_no_residual_command_trains_at_the_capped_rate_whatever_else_extra_says(tmp_path):
    args = ["ablation", "--datasets", "ml-1m", "--recipe", "cpu-1h", "--out", str(tmp_path / "out"), "--dry_run"]
    result = reproduce(*args, "--only", "ablation-no-residual")
    assert result.returncode == 0 and "--config use_residual=false --learning_rate 0.001" in result.stdout
    # An --extra flag that resolved_settings cannot read is passed on to train.py, not an error here.
    result = reproduce(*args, "--only", "ablation-default", "--extra=--debug")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "--recipe cpu-1h --debug" in result.stdout


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
    assert "0 of 12 runs finished" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")


def test_a_run_on_cores_at_less_than_half_its_experiments_fastest_is_not_started():
    """The Xeon of the third 2026-11-25 session (stream 0.9 against the EPYC's 5.94 GB/s) is refused;
    the slower EPYC (142 against 204 GFLOP/s, -30%) starts, and its report flags it; runs without a
    measurement give no reference."""
    from bert4rec_tf.experiments.results import slower_cores

    speeds = [[fake_speed(204.0, 6.0)], [fake_speed(150.0, 5.9), fake_speed(190.0, 5.0)], [], [{"cores": 1}]]
    why = slower_cores(fake_speed(142.0, 0.9), speeds)
    assert why.startswith("its cores measure 142 GFLOP/s and 0.9 GB/s (stream -85% against the fastest cores")
    assert "of the runs it is compared with: 204 GFLOP/s, 6 GB/s)" in why
    assert "(float32 -56%, stream -50%" in slower_cores(fake_speed(90.0, 2.99), speeds)
    assert slower_cores(fake_speed(142.0, 5.9), speeds) is None
    assert slower_cores(fake_speed(103.0, 3.1), speeds) is None
    assert slower_cores(fake_speed(10.0, 0.1), [[], [{"cores": 1}]]) is None


def _run_reproduce_in_process(tmp_path, monkeypatch, measured, *flags, experiment="table2", only="bert4rec"):
    """reproduce.py's main for one run on Beauty (table2's BERT4Rec), with the cores measured as
    `measured` and a train command that does nothing; in --results_dir a record of table2's SASRec
    (ce) whose cores measured 204 GFLOP/s and 6 GB/s, in --out a started POP run (never compared)."""
    from bert4rec_tf.experiments import reproduce as script
    from bert4rec_tf.experiments import scheduler

    results, out = tmp_path / "results", tmp_path / "out"
    (results / "table2").mkdir(parents=True)
    record = {**fake_record("beauty", "sasrec-ce", {}), "model": "sasrec", "speed": [fake_speed(204.0, 6.0)]}
    (results / "table2" / "beauty-sasrec-ce.json").write_text(json.dumps(record), encoding="utf-8")
    (out / "runs" / "beauty-pop").mkdir(parents=True)
    (out / "runs" / "beauty-pop" / "reproduce.json").write_text(json.dumps({"speed": [fake_speed(999.0, 99.0)]}))
    monkeypatch.setattr(scheduler, "machine_speed", lambda pin=None: measured)
    monkeypatch.setattr(script.scheduler, "TRAIN", [sys.executable, "-c", "pass", "--"])  # a train command that does nothing
    code = script.main([experiment, "--datasets", "beauty", "--only", only, "--budget", "1m", "--out", str(out),
                        "--results_dir", str(results), "--no_figures", *flags])
    return code, out / "runs" / f"beauty-{only}"


def test_reproduce_refuses_slower_cores_unless_told_and_notes_the_speed_it_trained_at(tmp_path, monkeypatch, capsys):
    code, model_dir = _run_reproduce_in_process(tmp_path, monkeypatch, fake_speed(142.0, 0.9))
    error = capsys.readouterr().err
    assert code == 1
    assert ("error: run beauty-bert4rec not started: its cores measure 142 GFLOP/s and 0.9 GB/s (stream -85% "
            "against the fastest cores of the runs it is compared with: 204 GFLOP/s, 6 GB/s)") in error
    assert "Not started: beauty-bert4rec; train them on cores like those, or give --allow_slower_cores" in error
    assert not model_dir.exists()  # nothing noted: the run never started

    shutil.rmtree(tmp_path / "results"), shutil.rmtree(tmp_path / "out")
    code, model_dir = _run_reproduce_in_process(tmp_path, monkeypatch, fake_speed(142.0, 0.9), "--allow_slower_cores")
    assert code == 0, capsys.readouterr().err
    provenance = json.loads((model_dir / "reproduce.json").read_text(encoding="utf-8"))
    assert [speed["stream_gbs"] for speed in provenance["speed"]] == [0.9]

    shutil.rmtree(tmp_path / "results"), shutil.rmtree(tmp_path / "out")
    code, model_dir = _run_reproduce_in_process(tmp_path, monkeypatch, fake_speed(142.0, 5.9))
    assert code == 0 and (model_dir / "reproduce.json").is_file()


def test_a_sweep_without_a_measured_run_is_compared_with_every_experiments_records(tmp_path, monkeypatch, capsys):
    code, model_dir = _run_reproduce_in_process(tmp_path, monkeypatch, fake_speed(142.0, 0.9),
                                                experiment="mask_proportion", only="mask-proportion-0.2")
    assert code == 1 and "error: run beauty-mask-proportion-0.2 not started" in capsys.readouterr().err
    assert not model_dir.exists()



def test_a_resumed_run_counts_the_time_it_trained_before(tmp_path, monkeypatch, capsys):
    """A run folder 50 minutes into its hour has about 10 minutes and the overhead left: it starts 20
    minutes before the deadline where a new hour's run does not, and the time left counts only that."""
    from bert4rec_tf.experiments import reproduce as script
    from bert4rec_tf.experiments import scheduler

    monkeypatch.setattr(scheduler, "machine_speed", lambda pin=None: None)
    monkeypatch.setattr(script.scheduler, "TRAIN", [sys.executable, "-c", "print('trained')", "--"])
    out = tmp_path / "out"
    checkpoints = out / "runs" / "beauty-bpr-mf" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "state.json").write_text(json.dumps({"step": 900, "seconds": 3000.0}), encoding="utf-8")
    code = script.main(["table2", "--datasets", "beauty", "--only", "bpr-mf,ncf", "--budget", "1h", "--out", str(out),
                        "--no_figures", "--deadline", "20m"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "run 1/2: beauty-bpr-mf (started), about 1h10m left for 2 runs\n" in printed  # 10 minutes, then an hour
    assert "run 2/2: beauty-ncf not started: it would end after the deadline" in printed
    assert scheduler.trained_seconds(str(out / "runs" / "beauty-ncf")) == 0.0  # a new folder


def test_a_failed_run_is_named_with_its_cause_and_no_other_run_starts(tmp_path, monkeypatch, capsys):
    from bert4rec_tf.experiments import reproduce as script
    from bert4rec_tf.experiments import scheduler

    monkeypatch.setattr(scheduler, "machine_speed", lambda pin=None: None)
    failing = "import sys; print('training...'); print('error: /data/mine.csv, line 3: empty item id'); sys.exit(1)"
    monkeypatch.setattr(script.scheduler, "TRAIN", [sys.executable, "-c", failing, "--"])
    out = tmp_path / "out"
    code = script.main(["table2", "--datasets", "beauty", "--only", "bpr-mf,pop", "--budget", "1m", "--out", str(out),
                        "--no_figures"])
    printed = capsys.readouterr()
    assert code == 1
    assert "error: run beauty-pop failed: /data/mine.csv, line 3: empty item id\n" in printed.err
    assert f"its output: {out}/beauty-pop.log; once the cause is mended, the same command resumes it" in printed.err
    assert "beauty-bpr-mf" not in printed.out + printed.err  # not started after the failure


def test_a_run_folder_in_use_is_not_started_and_its_holder_is_named(tmp_path, monkeypatch, capsys):
    from bert4rec_tf.experiments import reproduce as script
    from bert4rec_tf.experiments import scheduler
    from bert4rec_tf.training.run_folder import RunFolder

    monkeypatch.setattr(scheduler, "machine_speed", lambda pin=None: None)
    monkeypatch.setattr(script.scheduler, "TRAIN", [sys.executable, "-c", "pass", "--"])  # a train command that does nothing
    out = tmp_path / "out"
    folder = RunFolder(str(out / "runs" / "beauty-pop"))
    with folder.lock():
        code = script.main(["table2", "--datasets", "beauty", "--only", "pop", "--budget", "1m", "--out", str(out),
                            "--no_figures"])
    assert code == 1
    assert (f"error: run beauty-pop not started: {out}/runs/beauty-pop is in use by process {os.getpid()} on "
            in capsys.readouterr().err)
    assert folder.holder() is None


_SLEEPER = "[sys.executable, '-c', 'import os, time; print(os.getpid(), flush=True); time.sleep(120)']"


@pytest.mark.parametrize("parent", [
    # a run's training (the scheduler's child)
    "import functools, os, subprocess, sys, time\n"
    "from bert4rec_tf.experiments.scheduler import child_setup\n"
    f"child = subprocess.Popen({_SLEEPER}, preexec_fn=functools.partial(child_setup, os.getpid(), None))\n"
    "time.sleep(120)\n",
    # a tuned run's study
    "import sys\n"
    "from bert4rec_tf.experiments.tuned import run_study\n"
    f"run_study({_SLEEPER})\n",
], ids=["train", "study"])
def test_a_child_ends_when_the_reproduce_process_is_killed(tmp_path, parent):
    import signal
    import time

    process = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True, cwd=REPO)
    child = int(process.stdout.readline())
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        try:  # reap it if it became our zombie
            os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child of the killed process ran on")
