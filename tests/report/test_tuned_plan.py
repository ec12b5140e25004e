"""The tuned Table 2 (`table2_tuned`): each trained row beside the same row with its study's chosen
settings, the study run first with --tune_budget, and the report's tuning table."""

from __future__ import annotations

import json
import sys

import pytest

from bert4rec_tf.experiments.plans import plan
from bert4rec_tf.experiments.published import PUBLISHED
from bert4rec_tf.experiments.report_tables import tuning_table
from bert4rec_tf.experiments.verdicts import table2_orderings
from tests.report.fake_records import fake_record

CHOSEN = """# bert4rec-tune beauty-sasrec-bce: trial 3 of 9, best validation pop/NDCG@10 0.2000 at a 10 minutes budget
--dataset=beauty
--model=sasrec
--recipe=cpu-1h
--loss=bce
--config=code_network=true
--config=hidden_size=32
--config=learning_rate=0.002
--seed=12345
"""
CHOICE = {"dataset": "beauty", "model": "sasrec", "loss": "bce", "recipe": "cpu-1h", "seed": 12345,
          "overrides": ["code_network=true"], "settings": [["hidden_size", 32], ["learning_rate", 0.002]]}
SUMMARY = {"best": {"number": 3, "value": 0.2, "settings": {"hidden_size": 32, "learning_rate": 0.002}},
           "budget": 3600.0, "trial_budget": 600.0, "spent_seconds": 3700.0, "wall_seconds": 3900.0,
           "trials": {"complete": 2, "pruned": 7}, "choice": CHOICE}


def test_every_trained_row_of_table2_is_beside_its_tuned_row_with_the_same_flags_and_published_number():
    pop, *runs = plan("table2_tuned", ["beauty"])
    table2 = plan("table2", ["beauty"])
    assert pop == table2[0] and pop.model == "pop" and not pop.tuned  # one row, Table 2's: nothing to tune
    untuned = {run.setting: run for run in table2[1:]}
    assert [run.setting for run in runs[0::2]] == list(untuned)
    for run, tuned in zip(runs[0::2], runs[1::2]):
        assert run == untuned[run.setting] and not run.tuned
        assert (tuned.setting, tuned.against, tuned.model, tuned.flags, tuned.tuned) == (
            f"{run.setting}-tuned", run.setting, run.model, run.flags, True)
        assert PUBLISHED.get(("beauty", tuned.setting)) == PUBLISHED.get(("beauty", run.setting))
    assert ("beauty", "bpr-mf-tuned") in PUBLISHED


def _main(tmp_path, monkeypatch, *flags, only="sasrec-bce-tuned"):
    from bert4rec_tf.experiments import reproduce as script
    from bert4rec_tf.experiments import scheduler

    monkeypatch.setattr(scheduler, "machine_speed", lambda pin=None: None)
    monkeypatch.setattr(script.scheduler, "TRAIN", [sys.executable, "-c", "pass", "--"])  # a train command that does nothing
    return script.main(["table2_tuned", "--datasets", "beauty", "--only", only, "--recipe", "cpu-1h", "--budget", "1m",
                        "--out", str(tmp_path / "out"), "--no_figures", *flags])


def _write_study(folder, summary=SUMMARY):
    """A study's result as bert4rec-tune writes it (the flag file for people, the summary the tuned run reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "best.flags").write_text(CHOSEN, encoding="utf-8")
    (folder / "best_config.json").write_text(json.dumps({"preset": "sasrec", "config": {}}), encoding="utf-8")
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


def _fake_study(tmp_path, monkeypatch) -> list:
    """The tuner replaced by one that writes CHOSEN as the study's result; the commands it was given."""
    from bert4rec_tf.experiments import tuned

    commands = []

    def tune(command):
        commands.append(command)
        _write_study(tmp_path / "out" / "studies" / "beauty-sasrec-bce")
        return 0

    monkeypatch.setattr(tuned, "run_study", tune)
    return commands


def test_a_tuned_run_trains_its_studys_choice_and_without_a_study_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    assert _main(tmp_path, monkeypatch) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(
        f"error: run beauty-sasrec-bce-tuned: its study {tmp_path}/out/studies/beauty-sasrec-bce has chosen nothing yet: "
        "give --tune_budget")
    assert not (tmp_path / "out" / "runs").exists()

    _write_study(tmp_path / "out" / "studies" / "beauty-sasrec-bce")
    assert _main(tmp_path, monkeypatch, "--dry_run") == 0
    line = [line for line in capsys.readouterr().out.splitlines() if "beauty-sasrec-bce-tuned" in line][0]
    assert line.endswith("--loss bce --config code_network=true --config code_network=true --config hidden_size=32 "
                         "--config learning_rate=0.002")
    assert _main(tmp_path, monkeypatch) == 0
    provenance = json.loads((tmp_path / "out" / "runs" / "beauty-sasrec-bce-tuned" / "reproduce.json").read_text())
    assert provenance["tuning"] == {"study": "beauty-sasrec-bce", **SUMMARY}
    assert "--config" in provenance["settings"] and "hidden_size=32" in provenance["settings"]


@pytest.mark.parametrize("key, wrong", [("model", "bert4rec"), ("recipe", "cpu-30m"), ("loss", "ce"), ("seed", 1)])
def test_a_study_of_other_settings_than_the_run_is_refused(tmp_path, monkeypatch, capsys, key, wrong):
    _write_study(tmp_path / "out" / "studies" / "beauty-sasrec-bce", summary={**SUMMARY, "choice": {**CHOICE, key: wrong}})
    assert _main(tmp_path, monkeypatch) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "its study" in error and f"was made with --{key} {wrong}, " in error


def test_a_study_summary_of_an_older_version_is_one_line(tmp_path, monkeypatch, capsys):
    _write_study(tmp_path / "out" / "studies" / "beauty-sasrec-bce",
                 summary={key: value for key, value in SUMMARY.items() if key != "choice"})
    assert _main(tmp_path, monkeypatch, "--dry_run") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "was written by an older version" in error and "bert4rec-tune" in error


def test_a_study_of_another_source_file_is_refused(tmp_path, monkeypatch, capsys):
    """A study records the source it tuned on (summary.json's "data"): a tuned row of another file
    refuses it in one line; the same file is taken."""
    from bert4rec_tf.data.prepare import source_identity

    ours, theirs = tmp_path / "ours.txt", tmp_path / "theirs.txt"
    ours.write_text("1 1\n", encoding="utf-8")
    theirs.write_text("1 2\n", encoding="utf-8")
    folder = tmp_path / "out" / "studies" / "beauty-sasrec-bce"
    _write_study(folder)
    summary = {**SUMMARY, "data": {"source": source_identity(str(theirs)), "data_key": "0123456789ab"}}
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    assert _main(tmp_path, monkeypatch, "--source_file", f"beauty={ours}", "--dry_run") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "its study" in error and "tuned on another source file" in error
    assert source_identity(str(theirs)) in error and source_identity(str(ours)) in error
    summary["data"]["source"] = source_identity(str(ours))
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    assert _main(tmp_path, monkeypatch, "--source_file", f"beauty={ours}", "--dry_run") == 0


def test_the_tune_budget_runs_the_missing_study_first_with_the_runs_loss_and_overrides(tmp_path, monkeypatch, capsys):
    commands = _fake_study(tmp_path, monkeypatch)
    assert _main(tmp_path, monkeypatch, "--tune_budget", "1h", "--trial_budget", "5m", "--seed", "12345") == 0
    assert len(commands) == 1
    assert commands[0][1:3] == ["-m", "bert4rec_tf.scripts.tune"]
    words = " ".join(commands[0][3:])
    for expected in ("--dataset beauty --model sasrec --recipe cpu-1h --budget 1h --trial_budget 5m --seed 12345",
                     f"--study_dir {tmp_path}/out/studies/beauty-sasrec-bce", "--loss bce --config code_network=true",
                     "--schedule_budget 1m"):  # the trials follow the test run's schedule
        assert expected in words
    assert (tmp_path / "out" / "runs" / "beauty-sasrec-bce-tuned" / "reproduce.json").is_file()
    # Given again, the study is there: nothing is tuned.
    assert _main(tmp_path, monkeypatch, "--tune_budget", "1h") == 0 and len(commands) == 1


def test_the_report_lists_each_studys_budget_trials_and_choice_and_orders_the_tuned_rows():
    lines = tuning_table([{"run": "beauty-sasrec-bce-tuned", "tuning": {"study": "beauty-sasrec-bce", **SUMMARY}},
                           {"run": "beauty-sasrec-bce"}])
    assert lines[-2] == ("| beauty-sasrec-bce-tuned | 60 min | 10 min | 10 min | 62 min | 65 min | 2 complete, "
                         "7 pruned | not recorded | spared | none | 0.2000 | hidden_size 32, learning_rate 0.002 |")
    assert len(lines) == 8  # the untuned run has no study; the study predates the schedule and the rungs' record
    later = tuning_table([{"run": "r", "tuning": {**SUMMARY, "schedule_budget": 3600.0,
                                                   "start": {"number": 0, "state": "complete", "value": 0.18},
                                                   "at_rungs": {"judged": 14, "median": 3.0, "max": 11},
                                                   "stop_in_warmup": True}}])
    assert later[-2].startswith("| r | 60 min | 10 min | 60 min | 62 min | 65 min | 2 complete, 7 pruned | "
                                "3 s median, 11 s at most | judged | 0.1800 (trial 0) | 0.2000 |")
    pruned = tuning_table([{"run": "r", "tuning": {**SUMMARY, "start": {"number": 0, "state": "pruned", "value": 0.1}}}])
    assert "| 0.1000 (trial 0, pruned) |" in pruned[-2]

    def row(setting, hr):
        return {"source": "BERT4Rec paper, Table 2 (pop-100)", "dataset": "beauty", "setting": setting,
                "published_metric": "HR@10", "ours": hr, "users": 40226, "evaluated_users": 40226}

    rows = [row("pop", 0.07), row("bpr-mf", 0.10), row("bpr-mf-tuned", 0.20), row("sasrec-bce", 0.30),
            row("sasrec-bce-tuned", 0.15), row("gru4rec", 0.25)]
    [untuned] = table2_orderings(rows)  # sequential above non-sequential: the weakest above, the strongest below
    [tuned] = table2_orderings(rows, "-tuned")
    assert untuned["ours"]["values"] == (0.25, 0.10) and untuned["ours"]["verdict"] == "holds"
    # Among the tuned rows: tuned SASRec against tuned BPR-MF (POP is its own row; GRU4Rec has no tuned row).
    assert (tuned["ours"]["above"], tuned["ours"]["below"], tuned["ours"]["values"]) == ("SASRec", "BPR-MF", (0.15, 0.20))
    assert tuned["ours"]["verdict"] == "reversed" and "GRU4Rec" in tuned["missing"]


def test_a_tuned_runs_record_is_reported_without_its_study(tmp_path, monkeypatch, capsys):
    """A tuned row recorded on another machine (its study folder not here) stays in the report, from
    its record's settings and study summary, when another row of the table is trained."""
    import dataclasses

    from bert4rec_tf.experiments import reproduce as script
    from bert4rec_tf.experiments.records import RECORD_VERSION

    results = tmp_path / "results"
    flags = ["--results_dir", str(results)]
    args = script.parse_args(["table2_tuned", "--datasets", "beauty", "--recipe", "cpu-1h", "--budget", "1m",
                              "--out", str(tmp_path / "out"), *flags])
    tuned = next(run for run in plan("table2_tuned", ["beauty"]) if run.setting == "sasrec-bce-tuned")
    settings = script.settings_of(dataclasses.replace(tuned, flags=tuned.flags + ("--config", "hidden_size=32")), args, {})
    record = {**fake_record("beauty", "sasrec-bce-tuned", {"pop": {"HR@10": 0.4, "NDCG@10": 0.3}}),
              "version": RECORD_VERSION, "experiment": "table2_tuned", "model": "sasrec", "settings": settings,
              "tuning": {"study": "beauty-sasrec-bce", **SUMMARY}, "commit": "abc1234", "date": "2026-12-04",
              "machine": "elsewhere", "command": "bert4rec-reproduce table2_tuned"}
    (results / "table2_tuned").mkdir(parents=True)
    (results / "table2_tuned" / "beauty-sasrec-bce-tuned.json").write_text(json.dumps(record), encoding="utf-8")
    assert script.recorded_choice(tuned, args, {}) == ["--config", "hidden_size=32"]
    assert _main(tmp_path, monkeypatch, *flags, only="bpr-mf") == 0
    report = (results / "table2_tuned.md").read_text(encoding="utf-8")
    assert "| beauty-sasrec-bce-tuned | 60 min | 10 min |" in report  # its study's row
    assert "| sasrec-bce-tuned |" in report
    # Asked for by name, it is not tuned again (on 2026-12-06 the dry run of ML-1m's BPR-MF row listed
    # its study, which ran on another machine, as "to tune first"): its record is the run.
    capsys.readouterr()
    assert _main(tmp_path, monkeypatch, *flags, "--dry_run", only="sasrec-bce-tuned") == 0
    printed = capsys.readouterr().out
    assert "to tune first" not in printed and "beauty-sasrec-bce-tuned" in printed and "[recorded]" in printed
    # As a real study writes it: best.flags repeats the run's own --config (code_network=true), so the
    # tuned run's settings hold it twice (on 2026-12-06 such a record was not recognised, and its row
    # would have been tuned again where the study's folder is not).
    twice = dataclasses.replace(tuned, flags=tuned.flags + ("--config", "code_network=true", "--config", "hidden_size=32"))
    assert script.settings_of(twice, args, {}).count("code_network=true") == 2
    (results / "table2_tuned" / "beauty-sasrec-bce-tuned.json").write_text(
        json.dumps({**record, "settings": script.settings_of(twice, args, {})}), encoding="utf-8")
    assert script.recorded_choice(tuned, args, {}) == ["--config", "code_network=true", "--config", "hidden_size=32"]
    # A record whose settings the run's flags and a choice cannot make is not taken for the run's.
    record["settings"] = settings + ["--eval_every", "7"]
    (results / "table2_tuned" / "beauty-sasrec-bce-tuned.json").write_text(json.dumps(record), encoding="utf-8")
    assert script.recorded_choice(tuned, args, {}) is None


def test_a_tuned_run_whose_study_chose_the_untuned_settings_is_that_record_with_its_study(tmp_path):
    """SASRec's study on ML-1m chose the recipe: the tuned row is Table 2's record (one training), and
    the report still lists its study."""
    import dataclasses

    from bert4rec_tf.experiments import reproduce as script
    from bert4rec_tf.experiments.records import RECORD_VERSION
    from bert4rec_tf.experiments.results import collect_records

    results = tmp_path / "results"
    args = script.parse_args(["table2_tuned", "--datasets", "beauty", "--recipe", "cpu-1h", "--budget", "1m",
                              "--out", str(tmp_path / "out"), "--results_dir", str(results)])
    untuned, tuned = [run for run in plan("table2_tuned", ["beauty"]) if run.setting.startswith("sasrec-bce")]
    record = {**fake_record("beauty", "sasrec-bce", {"pop": {"HR@10": 0.4}}), "version": RECORD_VERSION,
              "experiment": "table2", "model": "sasrec", "settings": script.settings_of(untuned, args, {})}
    (results / "table2").mkdir(parents=True)
    (results / "table2" / "beauty-sasrec-bce.json").write_text(json.dumps(record), encoding="utf-8")
    chosen = dataclasses.replace(tuned, flags=tuned.flags + ("--config", "hidden_size=50"))  # the recipe's d
    settings = {chosen.name: script.settings_of(chosen, args, {})}
    # A later experiment's record of the same settings ("features" sorts before "table2") does not
    # take the place of the untuned row's (on 2026-12-06 SASRec (ce)'s tuned row was the features run's).
    (results / "features").mkdir()
    (results / "features" / "beauty-sasrec-bce-ids.json").write_text(
        json.dumps({**record, "experiment": "features", "run": "beauty-sasrec-bce-ids"}), encoding="utf-8")
    [alone] = collect_records(args, [chosen], settings, "bert4rec-reproduce", lambda run: None)
    assert "tuning" not in alone and alone["same_as"] == "table2/beauty-sasrec-bce"
    assert not (results / "table2_tuned").exists()
    study = {"study": "beauty-sasrec-bce", **SUMMARY}
    [found] = collect_records(args, [chosen], settings, "bert4rec-reproduce", lambda run: study)
    assert found["same_as"] == "table2/beauty-sasrec-bce" and found["tuning"] == study
    # Kept as the tuned row's own record: without the study's folder (another machine) the row is
    # still reported with its study, and its choice is known (not tuned again).
    assert (results / "table2_tuned" / "beauty-sasrec-bce-tuned.json").is_file()
    [again] = collect_records(args, [chosen], settings, "bert4rec-reproduce", lambda run: None)
    assert again["tuning"] == study and again["same_as"] == "table2/beauty-sasrec-bce"
    # A study continued with a larger budget (same choice): the kept summary follows it.
    longer = {**study, "budget": 7200.0}
    [continued] = collect_records(args, [chosen], settings, "bert4rec-reproduce", lambda run: longer)
    [kept] = collect_records(args, [chosen], settings, "bert4rec-reproduce", lambda run: None)
    assert continued["tuning"] == longer and kept["tuning"] == longer
    assert script.recorded_choice(tuned, args, {}) == ["--config", "hidden_size=50"]
    # Table 2's record replaced by a new training of the same settings: the tuned row is that training,
    # and its kept copy follows (not the metrics of the record it was copied from).
    (results / "table2" / "beauty-sasrec-bce.json").write_text(
        json.dumps({**record, "test": {"pop": {"HR@10": 0.5}}, "commit": "abc1234"}), encoding="utf-8")
    [renewed] = collect_records(args, [chosen], settings, "bert4rec-reproduce", lambda run: None)
    assert renewed["test"] == {"pop": {"HR@10": 0.5}} and renewed["tuning"] == longer
    copy = json.loads((results / "table2_tuned" / "beauty-sasrec-bce-tuned.json").read_text(encoding="utf-8"))
    assert copy["test"] == {"pop": {"HR@10": 0.5}} and copy["commit"] == "abc1234" and copy["tuning"] == longer
    # Nothing changed: the copy is not written again.
    stamp = (results / "table2_tuned" / "beauty-sasrec-bce-tuned.json").stat().st_mtime_ns
    collect_records(args, [chosen], settings, "bert4rec-reproduce", lambda run: None)
    assert (results / "table2_tuned" / "beauty-sasrec-bce-tuned.json").stat().st_mtime_ns == stamp
    # A run without a study that shares a record holding one (a tuned row's own training) keeps no copy.
    (results / "table2_tuned" / "beauty-sasrec-bce-tuned.json").unlink()
    (results / "table2" / "beauty-sasrec-bce.json").write_text(json.dumps({**record, "tuning": study}), encoding="utf-8")
    [plain] = collect_records(args, [chosen], settings, "bert4rec-reproduce", lambda run: None)
    assert plain["same_as"] == "table2/beauty-sasrec-bce"
    assert list((results / "table2_tuned").glob("*.json")) == []


def test_a_tuned_row_is_ordered_against_tuned_rows_only():
    """Later work's full-ranking order of SASRec above BERT4Rec: the untuned pair and the tuned pair, not
    a row against its own tuned row (the same published number: "0.3152 vs 0.3152, tie") nor mixed pairs."""
    from bert4rec_tf.experiments.verdicts import orderings

    def row(setting, published, ours):
        return {"source": "later work", "dataset": "ml-1m", "setting": setting, "published_protocol": "full",
                "published_metric": "Recall@10", "published": published, "ours": ours, "tested_users": 6040}

    rows = [row("sasrec-ce", 0.3152, 0.30), row("sasrec-ce-tuned", 0.3152, 0.31), row("bert4rec", 0.1518, 0.27),
            row("bert4rec-tuned", 0.1518, 0.26)]
    pairs = {(pair["first"], pair["second"]) for pair in orderings(rows)}
    assert pairs == {("sasrec-ce", "bert4rec"), ("sasrec-ce-tuned", "bert4rec-tuned")}


def test_the_report_counts_and_names_the_tuned_runs_whose_study_has_chosen_nothing_yet(tmp_path, monkeypatch):
    """A tuned run without a study's choice has no settings to train, but it is part of the table: the
    report counts it among the plan's runs and names it (on 2026-12-07 Beauty's report said "43 of
    43 runs finished" with three tuned rows still waiting for their studies)."""
    results = tmp_path / "results"
    _write_study(tmp_path / "out" / "studies" / "beauty-sasrec-bce")
    assert _main(tmp_path, monkeypatch, "--results_dir", str(results), only="sasrec-bce-tuned") == 0
    waiting = [f"beauty-{run.setting}" for run in plan("table2_tuned", ["beauty"])
               if run.tuned and run.setting != "sasrec-bce-tuned"]
    assert len(waiting) == 10
    for report in (results / "table2_tuned.md", tmp_path / "out" / "report.md"):
        text = report.read_text(encoding="utf-8")
        assert "0 of 23 runs finished." in text  # POP, 11 untuned and 11 tuned rows: the train command is a stub
        line = next(line for line in text.splitlines() if line.startswith("Not tuned yet"))
        assert line.endswith(f"then trains them): {', '.join(waiting)}.")
        unfinished = next(line for line in text.splitlines() if line.startswith("Not finished yet"))
        assert "beauty-sasrec-bce-tuned" in unfinished and "beauty-bpr-mf-tuned" not in unfinished


def test_a_studys_choice_is_kept_beside_the_records_and_trained_where_the_study_is_not(tmp_path, monkeypatch, capsys):
    """With --results_dir a study's result (best_config.json, best.flags, summary.json) is copied to
    <results_dir>/table2_tuned/studies/<dataset>-<setting>: on a machine without the study's folder the
    tuned run trains that choice and nothing is tuned again."""
    results = tmp_path / "results"
    commands = _fake_study(tmp_path, monkeypatch)
    flags = ("--results_dir", str(results), "--tune_budget", "1h")
    assert _main(tmp_path, monkeypatch, *flags) == 0 and len(commands) == 1
    kept = results / "table2_tuned" / "studies" / "beauty-sasrec-bce"
    assert (kept / "best.flags").read_text(encoding="utf-8") == CHOSEN and (kept / "best_config.json").is_file()
    assert json.loads((kept / "summary.json").read_text(encoding="utf-8")) == SUMMARY

    elsewhere = tmp_path / "elsewhere"  # another --out: no study folder, no run folder
    assert _main(elsewhere, monkeypatch, *flags) == 0 and len(commands) == 1
    provenance = json.loads((elsewhere / "out" / "runs" / "beauty-sasrec-bce-tuned" / "reproduce.json").read_text())
    assert provenance["tuning"] == {"study": "beauty-sasrec-bce", **SUMMARY}
    assert "hidden_size=32" in provenance["settings"]
    # A study of its own, once it has chosen, comes first.
    other = {**CHOICE, "settings": [["hidden_size", 64], ["learning_rate", 0.002]]}
    _write_study(elsewhere / "out" / "studies" / "beauty-sasrec-bce", {**SUMMARY, "choice": other})
    capsys.readouterr()
    assert _main(elsewhere, monkeypatch, *flags, "--dry_run") == 0
    line = [line for line in capsys.readouterr().out.splitlines() if "beauty-sasrec-bce-tuned" in line][0]
    assert "hidden_size=64" in line and "hidden_size=32" not in line
