"""A run's record, and the record of another experiment that a run of the same settings is
(bert4rec_tf/experiments/records.py)."""

from __future__ import annotations

import json
import os

from bert4rec_tf.experiments.plans import derived_flags, plan
from bert4rec_tf.experiments.report import write_report
from tests.report.fake_records import fake_record


def test_a_run_with_the_settings_of_another_experiments_record_is_that_record(tmp_path):
    from bert4rec_tf.experiments.records import RECORD_VERSION, read_record, record_path
    settings = ["--dataset", "ml-1m", "--model", "bert4rec", "--recipe", "cpu-1h"]
    table2 = next(run for run in plan("table2", ["ml-1m"]) if run.setting == "bert4rec")
    default = next(run for run in plan("ablation", ["ml-1m"]) if run.setting == "ablation-default")
    record = {**fake_record("ml-1m", "bert4rec", {"pop": {"HR@10": 0.69}}), "version": RECORD_VERSION,
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
    # A record of the same settings under another name in an experiment that sorts first (features)
    # does not take the place of the run's own name in Table 2 (the tuned table's untuned row).
    os.makedirs(tmp_path / "features")
    (tmp_path / "features" / "ml-1m-bert4rec-ids.json").write_text(
        json.dumps({**record, "experiment": "features", "run": "ml-1m-bert4rec-ids"}), encoding="utf-8")
    untuned = next(run for run in plan("table2_tuned", ["ml-1m"]) if run.setting == "bert4rec")
    assert read_record(str(tmp_path), "table2_tuned", untuned, settings)["same_as"] == "table2/ml-1m-bert4rec"
    write_report(str(tmp_path), "ablation", "ablation", plan("ablation", ["ml-1m"]), [shared], [])
    report = (tmp_path / "ablation.md").read_text(encoding="utf-8")
    assert "| ml-1m-ablation-default (the record of table2/ml-1m-bert4rec) | abc1234 |" in report


def test_sweep_runs_at_the_recipes_own_value_are_one_run(tmp_path):
    """Settings written differently but resolving to the same configuration share one record: at
    cpu-30m, N 100 on ML-1m (20 slots) and d 64 (FFN 256) are both the recipe's own BERT4Rec."""
    from bert4rec_tf.experiments.plans import resolved_settings
    from bert4rec_tf.experiments.records import RECORD_VERSION, read_record
    base = ["--dataset", "ml-1m", "--model", "bert4rec", "--seed", "12345", "--eval_every", "500", "--recipe", "cpu-30m"]
    runs = {run.setting: run for name in ("max_len", "hidden_size", "mask_proportion")
            for run in plan(name, ["ml-1m"])}
    settings = {setting: base + list(run.flags) for setting, run in runs.items()}
    assert resolved_settings(settings["max-len-100"]) == resolved_settings(settings["hidden-size-64"])
    assert resolved_settings(settings["max-len-100"]) == resolved_settings(base)
    # A setting that changes the configuration, a flag outside it, or another seed: not the same run.
    assert resolved_settings(settings["hidden-size-32"]) != resolved_settings(base)
    for setting in ("mask-proportion-0.2", "mask-proportion-0.3"):  # the slots of the recipe's N 100: 20 at rho 0.2
        settings[setting] += derived_flags(runs[setting], settings[setting])
    assert resolved_settings(settings["mask-proportion-0.2"]) == resolved_settings(base)
    assert resolved_settings([*base, "--eval_every", "1000"]) is None  # a flag given twice
    assert resolved_settings(base[:-2] + ["--recipe", "cpu-1h"]) != resolved_settings(base)
    assert resolved_settings([*base[:4], "--seed", "1", *base[6:]]) != resolved_settings(base)
    assert resolved_settings([*base, "--unknown", "1"]) is None
    assert resolved_settings([*base, "--config", "no_such_key=1"]) is None
    # The record of max_len's N 100 answers hidden_size's d 64, named as its origin; d 32 trains.
    record = {**fake_record("ml-1m", "max-len-100", {"pop": {"HR@10": 0.66}}), "version": RECORD_VERSION,
              "experiment": "max_len", "settings": settings["max-len-100"], "value": 100}
    os.makedirs(tmp_path / "max_len")
    (tmp_path / "max_len" / "ml-1m-max-len-100.json").write_text(json.dumps(record), encoding="utf-8")
    shared = read_record(str(tmp_path), "hidden_size", runs["hidden-size-64"], settings["hidden-size-64"])
    assert shared["same_as"] == "max_len/ml-1m-max-len-100" and shared["value"] == 64
    assert shared["setting"] == "hidden-size-64" and shared["test"] == record["test"]
    assert read_record(str(tmp_path), "hidden_size", runs["hidden-size-32"], settings["hidden-size-32"]) is None
    assert read_record(str(tmp_path), "mask_proportion", runs["mask-proportion-0.2"],
                       settings["mask-proportion-0.2"])["same_as"] == "max_len/ml-1m-max-len-100"
    assert read_record(str(tmp_path), "mask_proportion", runs["mask-proportion-0.3"],
                       settings["mask-proportion-0.3"]) is None



def test_a_record_of_a_configuration_its_settings_no_longer_give_does_not_count(tmp_path):
    """A recipe changed after the record was made (NCF's Beauty L2, 0 then 0.01): the record's settings
    are the same flags, but they train another model now; the record neither counts for its own run nor
    answers another experiment's."""
    from bert4rec_tf.experiments.plans import resolved_settings
    from bert4rec_tf.config import config_differences
    from bert4rec_tf.experiments.records import RECORD_VERSION, read_record, stale_fields
    settings = ["--dataset", "beauty", "--model", "ncf", "--seed", "12345", "--eval_every", "500", "--recipe", "cpu-1h"]
    run = next(run for run in plan("table2", ["beauty"]) if run.setting == "ncf")
    config = resolved_settings(settings)["config"]
    record = {**fake_record("beauty", "ncf", {"pop": {"HR@10": 0.18}}), "version": RECORD_VERSION,
              "experiment": "table2", "settings": settings, "config": config}
    os.makedirs(tmp_path / "table2")
    path = tmp_path / "table2" / "beauty-ncf.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    assert stale_fields(record, settings) == []
    assert read_record(str(tmp_path), "table2", run, settings)["run"] == "beauty-ncf"
    # What the run decided itself (the data's sizes, the steps a budget afforded) is not a difference.
    run_made = {**config, "model": {**config["model"], "vocab_size": 54544, "num_users": 40226},
                "train": {**config["train"], "train_steps": 22620}}
    assert stale_fields({**record, "config": run_made}, settings) == []
    old = {**config, "model": {**config["model"], "l2": 0.0}}
    path.write_text(json.dumps({**record, "config": old}), encoding="utf-8")
    assert stale_fields({**record, "config": old}, settings) == ["model.l2"]
    assert read_record(str(tmp_path), "table2", run, settings) is None
    assert read_record(str(tmp_path), "other", run, settings) is None  # nor as another experiment's record
    # A field the record lacks came to the package later: the record stands for its default, which is
    # a difference only when the settings now give another value; a record without a configuration
    # (made before records stored it) is compared by its settings alone.
    del old["model"]["l2"]
    assert config["model"]["l2"] != 0.0 and config_differences(old, config) == ["model.l2"]
    old["train"] = {key: value for key, value in config["train"].items() if key != "valid_users"}
    assert config["train"]["valid_users"] == 10_000  # the cpu-* recipes validate 10,000 Beauty users
    assert config_differences(old, config) == ["model.l2", "train.valid_users"]
    assert config_differences(old, {**config, "train": {**config["train"], "valid_users": 0}}) == ["model.l2"]
    assert stale_fields({key: value for key, value in record.items() if key != "config"}, settings) == []


def test_a_record_of_other_flags_is_described_by_the_flags_that_differ(tmp_path):
    from bert4rec_tf.experiments.plans import Run
    from bert4rec_tf.experiments.records import RECORD_VERSION, record_path, settings_changes
    run = Run("beauty", "sasrec-bce", "sasrec")
    path = record_path(str(tmp_path), "table2", run)
    os.makedirs(os.path.dirname(path))

    def changes(theirs: list[str], mine: list[str]) -> list[str]:
        with open(path, "w", encoding="utf-8") as file:
            json.dump({"version": RECORD_VERSION, "settings": theirs}, file)
        return settings_changes(str(tmp_path), "table2", run, mine)

    base = ["--dataset", "beauty", "--model", "sasrec", "--loss", "bce"]
    assert changes(base, base) == []
    assert changes(base, [*base, "--config", "code_network=true"]) == ["now also --config code_network=true"]
    assert changes([*base, "--debug"], [*base[:-1], "ce"]) == ["--loss ce (was bce)", "no longer --debug"]
    assert changes([*base, "--config", "a=1", "--config", "b=2"], [*base, "--config", "a=1", "--config", "b=3"]) == [
        "now also --config b=3", "no longer --config b=2"]  # a flag given twice is not paired by name
    assert settings_changes(str(tmp_path), "table2", Run("beauty", "pop", "pop"), base) == []  # no record


def test_a_record_counts_for_flags_that_resolve_alike_and_other_flags_are_named_not_unfinished(tmp_path):
    """A command whose flags resolve to its records' (`--time_budget 1h` beside the recipe cpu-1h's own
    hour) reports them; one whose flags differ (another budget) does not count them, and says why:
    they are recorded with other flags, not unfinished."""
    import argparse
    from bert4rec_tf.experiments.records import RECORD_VERSION, record_path
    from bert4rec_tf.experiments.results import write_reports
    from bert4rec_tf.files import write_json_atomic
    runs = [run for run in plan("table2", ["beauty"]) if run.setting in ("pop", "ncf", "fpmc")]
    theirs = ["--dataset", "beauty", "--model", "MODEL", "--recipe", "cpu-1h"]
    for run in runs[1:]:  # ncf and fpmc recorded; pop not
        settings = [run.model if item == "MODEL" else item for item in theirs]
        record = {**fake_record("beauty", run.setting, {"pop": {"HR@10": 0.18}}), "version": RECORD_VERSION,
                  "experiment": "table2", "settings": settings}
        path = record_path(str(tmp_path / "results"), "table2", run)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json_atomic(path, record)
    args = argparse.Namespace(experiment="table2", out=str(tmp_path / "out"), results_dir=str(tmp_path / "results"),
                              no_figures=True)
    os.makedirs(args.out)

    def report(*flags: str) -> str:
        write_reports(args, runs, {run.name: ["--dataset", "beauty", "--model", run.model, "--recipe", "cpu-1h", *flags]
                                   for run in runs}, "bert4rec-reproduce table2")
        text = (tmp_path / "results" / "table2.md").read_text(encoding="utf-8")
        assert text == (tmp_path / "out" / "report.md").read_text(encoding="utf-8").replace("](", "](table2/")
        return text

    alike = report("--time_budget", "1h")
    assert "2 of 3 runs finished" in alike and "Not finished yet: beauty-pop." in alike
    assert "Recorded with other flags" not in alike
    other = report("--time_budget", "30m")
    assert "0 of 3 runs finished" in other and "Not finished yet: beauty-pop. Re-run" in other
    assert ("Recorded with other flags than this command's, so not in this report (the command in each record "
            "reports it; this one trains them again): beauty-ncf, beauty-fpmc (now also --time_budget 30m).") in other


def test_a_record_of_an_earlier_configuration_is_reported_marked_until_its_run_trains_again(tmp_path):
    """Beauty's records made when every user was validated, before the recipes' `valid_users` 10,000:
    the report keeps them, each marked with the fields that differ, and the run that trains again
    replaces its record."""
    import argparse
    from bert4rec_tf.experiments.plans import resolved_settings
    from bert4rec_tf.experiments.records import RECORD_VERSION, record_path
    from bert4rec_tf.experiments.results import collect_records
    from bert4rec_tf.files import write_json_atomic
    settings = ["--dataset", "beauty", "--model", "ncf", "--seed", "12345", "--eval_every", "500", "--recipe", "cpu-1h"]
    run = next(run for run in plan("table2", ["beauty"]) if run.setting == "ncf")
    config = resolved_settings(settings)["config"]
    earlier = {**config, "train": {key: value for key, value in config["train"].items() if key != "valid_users"}}
    record = {**fake_record("beauty", "ncf", {"pop": {"HR@10": 0.18}}), "version": RECORD_VERSION,
              "experiment": "table2", "settings": settings, "config": earlier, "commit": "abc1234"}
    path = record_path(str(tmp_path / "results"), "table2", run)
    os.makedirs(os.path.dirname(path))
    write_json_atomic(path, record)
    args = argparse.Namespace(experiment="table2", out=str(tmp_path / "out"), results_dir=str(tmp_path / "results"),
                              no_figures=True)
    [kept] = collect_records(args, [run], {run.name: settings}, "bert4rec-reproduce table2")
    assert kept["earlier_configuration"] == ["train.valid_users"] and kept["test"] == record["test"]
    rows = write_report(str(tmp_path), "table2", "table2", [run], [kept], [])
    assert rows[0]["earlier_configuration"] == "train.valid_users"
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert "1 of the finished runs were made under an earlier configuration" in report
    assert "| ncf (earlier configuration: train.valid_users) |" in report
    assert "| ncf (earlier configuration) |" in report  # beside the published numbers
    assert "earlier_configuration" in (tmp_path / "table2.csv").read_text(encoding="utf-8").splitlines()[0]
    # The run trained again with these settings: its record replaces the earlier one, unmarked.
    model_dir = tmp_path / "out" / "runs" / run.name
    os.makedirs(model_dir)
    write_json_atomic(str(model_dir / "results.json"), {"test": {"pop": {"HR@10": 0.21}}, "steps": 7})
    write_json_atomic(str(model_dir / "config.json"), config)
    write_json_atomic(str(model_dir / "reproduce.json"), {"settings": settings, "commit": "def5678", "machine": "test",
                                                          "date": "2026-12-02", "command": "bert4rec-reproduce table2"})
    [new] = collect_records(args, [run], {run.name: settings}, "bert4rec-reproduce table2")
    assert "earlier_configuration" not in new and new["test"]["pop"]["HR@10"] == 0.21 and new["commit"] == "def5678"
    with open(path, encoding="utf-8") as file:
        assert json.load(file)["test"]["pop"]["HR@10"] == 0.21
    # Another experiment's run of the same settings (the ablation's default is Table 2's BERT4Rec):
    # that record, marked the same way, while it is of an earlier configuration.
    settings = ["--dataset", "beauty", "--model", "bert4rec", "--recipe", "cpu-1h"]
    table2 = next(run for run in plan("table2", ["beauty"]) if run.setting == "bert4rec")
    config = resolved_settings(settings)["config"]
    earlier = {**config, "train": {key: value for key, value in config["train"].items() if key != "valid_users"}}
    write_json_atomic(record_path(str(tmp_path / "results"), "table2", table2),
                      {**fake_record("beauty", "bert4rec", {"pop": {"HR@10": 0.3}}), "version": RECORD_VERSION,
                       "run": table2.name, "experiment": "table2", "settings": settings, "config": earlier})
    default = next(run for run in plan("ablation", ["beauty"]) if run.setting == "ablation-default")
    args.experiment = "ablation"
    [shared] = collect_records(args, [default], {default.name: settings}, "bert4rec-reproduce ablation")
    assert shared["same_as"] == "table2/beauty-bert4rec" and shared["earlier_configuration"] == ["train.valid_users"]


def test_a_finished_run_beside_a_record_of_the_same_settings_is_named_not_reported(tmp_path, capsys):
    """Two trainings of the same settings: the stored record stays the reported one, and the command
    says which run folder it leaves out and how to report it instead; the run that made the record is
    not named."""
    import argparse
    from bert4rec_tf.experiments.plans import resolved_settings
    from bert4rec_tf.experiments.records import RECORD_VERSION, record_path
    from bert4rec_tf.experiments.results import collect_records
    from bert4rec_tf.files import write_json_atomic
    settings = ["--dataset", "ml-1m", "--model", "bpr_mf", "--seed", "12345", "--eval_every", "500", "--recipe", "cpu-1h"]
    run = next(run for run in plan("table2", ["ml-1m"]) if run.setting == "bpr-mf")
    config = resolved_settings(settings)["config"]
    record = {**fake_record("ml-1m", "bpr-mf", {"pop": {"HR@10": 0.37}}), "version": RECORD_VERSION, "steps": 10,
              "experiment": "table2", "settings": settings, "config": config, "commit": "abc1234", "date": "2026-11-30"}
    os.makedirs(tmp_path / "results" / "table2")
    write_json_atomic(record_path(str(tmp_path / "results"), "table2", run), record)
    model_dir = tmp_path / "out" / "runs" / run.name
    os.makedirs(model_dir)
    write_json_atomic(str(model_dir / "config.json"), config)
    args = argparse.Namespace(experiment="table2", out=str(tmp_path / "out"), results_dir=str(tmp_path / "results"),
                              no_figures=True)
    # The run of the record; a run of other settings (not this run's result, whatever its metrics); a
    # second training of these settings.
    for test, trained, named in (({"pop": {"HR@10": 0.37}}, settings, False),
                                 ({"pop": {"HR@10": 0.40}}, [*settings, "--patience", "3"], False),
                                 ({"pop": {"HR@10": 0.40}}, settings, True)):
        write_json_atomic(str(model_dir / "results.json"), {"test": test, "steps": 10})
        write_json_atomic(str(model_dir / "reproduce.json"), {"settings": trained, "commit": "def5678",
                                                              "date": "2026-12-02", "machine": "test"})
        [kept] = collect_records(args, [run], {run.name: settings}, "bert4rec-reproduce table2")
        assert kept["test"] == record["test"]
        said = capsys.readouterr().out
        assert ("stays the reported one; remove that record to report this run instead" in said) == named
        assert ("commit abc1234, 2026-11-30" in said) == named
    collect_records(args, [run], {run.name: settings}, "bert4rec-reproduce table2")
    assert "stays the reported one" not in capsys.readouterr().out  # named once per command


def test_a_tuned_row_whose_study_chose_the_recipe_is_its_untuned_row_trained_in_the_same_experiment(tmp_path):
    """Beauty GRU4Rec: Table 2's record is of an earlier configuration (it validated every user), the
    tuned table trained the untuned row again, and the study chose the recipe's settings: the tuned
    row is that training (it trained the same settings again for an hour), and so is Table 2's row."""
    from bert4rec_tf.experiments.plans import resolved_settings
    from bert4rec_tf.experiments.records import RECORD_VERSION, read_record, shared_record
    settings = ["--dataset", "beauty", "--model", "gru4rec", "--seed", "12345", "--eval_every", "500",
                "--recipe", "cpu-1h"]
    chosen = [*settings, "--config", "learning_rate=0.003"]  # the recipe's rate, as best.flags repeats it
    config = resolved_settings(settings)["config"]
    assert resolved_settings(chosen) == resolved_settings(settings)
    earlier = {**config, "train": {**config["train"], "valid_users": 0}}
    record = {**fake_record("beauty", "gru4rec", {"pop": {"HR@10": 0.31}}), "version": RECORD_VERSION,
              "experiment": "table2", "settings": settings, "config": earlier}
    for folder in ("table2", "table2_tuned"):
        os.makedirs(tmp_path / folder)
    (tmp_path / "table2" / "beauty-gru4rec.json").write_text(json.dumps(record), encoding="utf-8")
    untuned, tuned = [run for run in plan("table2_tuned", ["beauty"]) if run.setting.startswith("gru4rec")][:2]
    assert tuned.setting == "gru4rec-tuned"
    # Only the earlier configuration's record: nothing counts, and the report shows that one, marked.
    assert read_record(str(tmp_path), "table2_tuned", tuned, chosen) is None
    marked = shared_record(str(tmp_path), "table2_tuned", tuned, chosen, earlier=True)
    assert marked["same_as"] == "table2/beauty-gru4rec" and marked["earlier_configuration"] == ["train.valid_users"]
    # The untuned row trained again in the tuned table: the tuned row is it, Table 2's row too, and it
    # is preferred to the earlier record where that one would be shown.
    again = {**record, "experiment": "table2_tuned", "config": config, "test": {"pop": {"HR@10": 0.33}}}
    (tmp_path / "table2_tuned" / "beauty-gru4rec.json").write_text(json.dumps(again), encoding="utf-8")
    assert read_record(str(tmp_path), "table2_tuned", untuned, settings)["test"] == again["test"]
    shared = read_record(str(tmp_path), "table2_tuned", tuned, chosen)
    assert shared["same_as"] == "table2_tuned/beauty-gru4rec" and shared["run"] == "beauty-gru4rec-tuned"
    table2 = next(run for run in plan("table2", ["beauty"]) if run.setting == "gru4rec")
    assert read_record(str(tmp_path), "table2", table2, settings)["same_as"] == "table2_tuned/beauty-gru4rec"
    assert "earlier_configuration" not in shared_record(str(tmp_path), "table2_tuned", tuned, chosen, earlier=True)
