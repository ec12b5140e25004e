"""The report: where a paper's order of two runs holds, the test set's noise, a sweep's shape, the
machines' notes and the notes' links (bert4rec_tf/experiments/report.py)."""

from __future__ import annotations

import pytest

from bert4rec_tf.experiments.plans import plan
from bert4rec_tf.experiments.report import report_rows, weights_tested, write_report
from bert4rec_tf.experiments.verdicts import orderings
from tests.report.fake_records import fake_record, fake_speed


def test_orderings_say_where_the_published_order_of_two_runs_holds(tmp_path):
    records = [fake_record("ml-1m", "bert4rec", {"pop": {"HR@10": 0.60, "NDCG@10": 0.40},
                                             "full": {"Recall@10": 0.20, "NDCG@10": 0.10}}),
               fake_record("ml-1m", "sasrec-bce", {"pop": {"HR@10": 0.65, "NDCG@10": 0.36}}),
               fake_record("ml-1m", "sasrec-ce", {"full": {"Recall@10": 0.25, "NDCG@10": 0.10}}),
               fake_record("ml-1m", "pop", {"uniform": {"HR@10": 0.43}})]
    pairs = {(p["first"], p["second"], p["protocol"], p["metric"]): p for p in orderings(report_rows(records))}
    # Later work, full ranking: SASRec-ce 0.3152 > BERT4Rec 0.1518; an equal NDCG@10 of ours is a tie.
    assert pairs[("bert4rec", "sasrec-ce", "full", "Recall@10")]["holds"] is True
    assert pairs[("bert4rec", "sasrec-ce", "full", "NDCG@10")]["holds"] is None
    # Table 2's pairs are the paper's orderings (`table2_orderings`), not pairs; MRR and HR@5 are not compared.
    assert len(pairs) == 2
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), records, [])
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert "| bert4rec vs sasrec-ce | full ranking | NDCG@10 | 0.0806 vs 0.1821 | 0.1000 vs 0.1000 | tie |" in report
    # BERT4Rec 0.6970 > Caser 0.6692, the best other in the paper (HR@10); ours 0.60 < SASRec 0.65 by more than 0.0176.
    assert ("| BERT4Rec first (without POP, BPR-MF, NCF, FPMC, GRU4Rec, GRU4Rec+, Caser: not run) | HR@10 | "
            "BERT4Rec 0.6970 vs Caser 0.6692 | holds | BERT4Rec 0.6000 vs SASRec 0.6500 | reversed | 0.0176 |") in report
    assert "two standard errors over the 6,040 test users" in report
    assert "## Discussion" not in report
    notes = "SASRec leads.\n\n## ML-1m\n\nSee [ablation](../ablation.md).\n"
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), records, [], notes=notes)
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    # The answer first (the published numbers, the orders, every run), then the discussion, then provenance.
    order = ["Beside the published numbers", "Where the published order of two runs holds", "The paper's orderings",
             "Every run in the three", "## Discussion", "> SASRec leads.", "## Where each run comes from"]
    assert [report.index(text) for text in order] == sorted(report.index(text) for text in order)
    # The notes are quoted: a Markdown quote whose headings sit under the report's Discussion and whose
    # links hold from the report.
    assert "Quoted from [table2/notes.md](table2/notes.md)" in report
    assert "> ### ML-1m\n>\n> See [ablation](ablation.md)." in report


def test_table2_orderings_judge_the_weakest_link_in_the_papers_numbers_and_ours():
    from bert4rec_tf.experiments.verdicts import table2_orderings

    def run(setting, hr, ndcg):
        return fake_record("beauty", setting, {"pop": {"HR@10": hr, "NDCG@10": ndcg}})

    records = [run("pop", 0.06, 0.03), run("bpr-mf", 0.19, 0.10), run("ncf", 0.20, 0.11), run("fpmc", 0.21, 0.12),
               run("gru4rec", 0.25, 0.10), run("gru4rec-plus", 0.26, 0.14), run("caser", 0.17, 0.07),
               run("sasrec-bce", 0.22, 0.13), run("bert4rec", 0.29, 0.17)]
    claims = {(c["ordering"], c["metric"]): c for c in table2_orderings(report_rows(records))}
    assert len(claims) == 6 and all(not c["missing"] for c in claims.values())
    sequential = claims[("sequential above non-sequential", "HR@10")]
    # The paper: the weakest sequential, GRU4Rec 0.2343, above the strongest non-sequential, NCF 0.2142.
    assert (sequential["paper"]["above"], sequential["paper"]["below"]) == ("GRU4Rec", "NCF")
    assert sequential["paper"]["values"] == (0.2343, 0.2142) and sequential["paper"]["verdict"] == "holds"
    # Ours: Caser 0.17 below NCF 0.20 by more than two standard errors over 40,226 users.
    assert sequential["ours"]["above"] == "Caser" and sequential["ours"]["verdict"] == "reversed"
    # The paper's own NDCG@10 on Beauty has GRU4Rec 0.1074 below NCF 0.1124: reversed in the paper.
    assert claims[("sequential above non-sequential", "NDCG@10")]["paper"]["verdict"] == "reversed"
    # GRU4Rec+ 0.2654 and SASRec 0.2653 in the paper: a tie; ours SASRec 0.22 against 0.26: reversed.
    sasrec = claims[("SASRec above GRU4Rec+ and Caser", "HR@10")]
    assert sasrec["paper"]["verdict"] == "tie" and sasrec["ours"]["verdict"] == "reversed"
    assert sasrec["ours"]["below"] == "GRU4Rec+"
    first = claims[("BERT4Rec first", "HR@10")]
    assert first["ours"]["verdict"] == "holds" and first["ours"]["below"] == "GRU4Rec+"
    # 0.29 - 0.26 against two standard errors of the two proportions over the 40,226 users.
    assert first["ours"]["margin"] == pytest.approx(2 * ((0.29 * 0.71 + 0.26 * 0.74) / 40226) ** 0.5)
    # A tie within the margin: the gap 0.001 is below it.
    close = [run("bert4rec", 0.261, 0.17), run("gru4rec-plus", 0.26, 0.14)]
    assert [c["ours"]["verdict"] for c in table2_orderings(report_rows(close)) if c["metric"] == "HR@10"] == ["tie"]


def test_ablation_orderings_pair_each_change_with_the_default():
    records = [fake_record("ml-1m", f"ablation-{name}", {"pop": {"NDCG@10": value}})
               for name, value in (("default", 0.45), ("no-pe", 0.30), ("layers-4", 0.42), ("layers-3", 0.44))]
    pairs = orderings(report_rows(records))
    assert [(p["first"], p["second"], p["holds"]) for p in pairs] == [
        ("ablation-default", "ablation-no-pe", True),  # published 0.4759 > 0.2155
        ("ablation-default", "ablation-layers-4", False),  # published 0.4759 < 0.4898
        ("ablation-default", "ablation-layers-3", None)]  # 0.01 apart: within two standard errors (0.0181)


def test_an_order_within_the_test_sets_noise_is_a_tie():
    """0.6856 against 0.6866 on ML-1m's 6,040 test users (the 2026-11-25 SASRec-bce and BERT4Rec) is
    no order: two standard errors of the difference are 0.0168. On Beauty's 40,226 users 0.01 is one."""
    from bert4rec_tf.experiments.verdicts import noise_margin, table2_orderings, tested_users

    assert tested_users("ml-1m") == 6040 and tested_users("beauty") == 40226 and tested_users("custom") is None
    assert noise_margin(0.6856, 0.6866, 6040) == pytest.approx(0.01689, abs=1e-5)
    assert noise_margin(0.5, 0.5, 40226) == pytest.approx(2 * (0.5 / 40226) ** 0.5)
    assert noise_margin(0.5, 0.4, None) == 0.0
    tied = [fake_record("ml-1m", "bert4rec", {"pop": {"HR@10": 0.6866}}), fake_record("ml-1m", "sasrec-bce", {"pop": {"HR@10": 0.6856}})]
    assert [c["ours"]["verdict"] for c in table2_orderings(report_rows(tied))] == ["tie"]
    apart = [fake_record("beauty", "bert4rec", {"pop": {"HR@10": 0.2908}}), fake_record("beauty", "sasrec-bce", {"pop": {"HR@10": 0.2808}})]
    assert [c["ours"]["verdict"] for c in table2_orderings(report_rows(apart))] == ["holds"]  # 0.0100 > 0.0063


def test_a_run_tested_on_a_sample_of_users_widens_the_margin_to_its_sample():
    """The same 0.0100 gap on Beauty is a tie when one side was tested on 1,000 users (two standard
    errors of the difference over 1,000 users: 0.0400), in the orderings and beside a departure."""
    from bert4rec_tf.experiments.verdicts import departures, table2_orderings

    sampled = [fake_record("beauty", "bert4rec", {"pop": {"HR@10": 0.2908}}),
               {**fake_record("beauty", "sasrec-bce", {"pop": {"HR@10": 0.2808}}), "evaluated_users": 1000,
                "users": 40226}]
    rows = report_rows(sampled)
    assert {row["setting"]: row["tested_users"] for row in rows} == {"bert4rec": 40226, "sasrec-bce": 1000}
    claims = table2_orderings(rows)
    assert [c["ours"]["verdict"] for c in claims] == ["tie"]
    assert claims[0]["ours"]["margin"] == pytest.approx(2 * ((0.2908 * 0.7092 + 0.2808 * 0.7192) / 1000) ** 0.5)
    sampled_plan = plan("sampled_softmax", ["beauty"])
    records = [fake_record("beauty", "bert4rec", {"pop": {"HR@10": 0.2908}}),
               {**fake_record("beauty", "bert4rec-sampled", {"pop": {"HR@10": 0.2808}}), "evaluated_users": 1000,
                "users": 40226}]
    pairs = departures(report_rows(records), sampled_plan)
    assert pairs[0]["metrics"]["pop/HR@10"]["verdict"] == "tie"
    records[1] = fake_record("beauty", "bert4rec-sampled", {"pop": {"HR@10": 0.2808}})  # every user: a real gap
    assert departures(report_rows(records), sampled_plan)[0]["metrics"]["pop/HR@10"]["verdict"] == "lower"


def test_links_in_the_notes_hold_from_the_report_that_quotes_them():
    from bert4rec_tf.experiments.report import rebase_links
    text = ("See [runs](../../experiments.md#best-runs), [ablation](../ablation.md), [here](figure.png), "
            "[web](https://example.org/a.md) and [above](#table).")
    assert rebase_links(text, "table2") == (
        "See [runs](../experiments.md#best-runs), [ablation](ablation.md), [here](table2/figure.png), "
        "[web](https://example.org/a.md) and [above](#table).")


def test_a_report_flags_runs_trained_on_slower_cores(tmp_path):
    """The 2026-11-25 sessions' machines: 204 against 142 GFLOP/s, both "AMD EPYC, 2 cores"."""
    from bert4rec_tf.experiments.provenance import machine_notes

    fast, slow = fake_speed(204.0, 10.0), fake_speed(142.0, 9.5)
    records = [{**fake_record("ml-1m", "bert4rec", {}), "speed": [fast]},
               {**fake_record("ml-1m", "sasrec-bce", {}), "speed": [slow]},
               {**fake_record("ml-1m", "sasrec-ce", {}), "speed": [fake_speed(190.0, 8.0)]},  # within 10% / stream -20%
               {**fake_record("ml-1m", "bert4rec-1mask", {}), "speed": [fast, slow]},  # resumed on the slow one
               fake_record("ml-1m", "bert4rec-match", {}),  # recorded before records held a speed
               fake_record("ml-1m", "pop", {})]  # POP trains nothing: not compared
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


def _sweep_row(dataset, value, ndcg):
    return {"dataset": dataset, "value": value, "pop/NDCG@10": ndcg}


def test_a_sweep_says_its_best_value_and_whether_the_papers_is_level_with_it():
    """ML-1m (6,040 test users): 2 SE between 0.47 and 0.46 is about 0.0181, so 0.46 is level with
    0.47 and 0.43 is not; the paper's best rho on ML-1m is 0.2, its best N by NDCG@10 200."""
    from bert4rec_tf.experiments.published import paper_best_value
    from bert4rec_tf.experiments.verdicts import sweep_summary

    rows = [_sweep_row("ml-1m", 0.1, 0.43), _sweep_row("ml-1m", 0.2, 0.46), _sweep_row("ml-1m", 0.3, 0.47),
            _sweep_row("beauty", 0.6, 0.18)]
    [text] = sweep_summary(rows, "mask_proportion", "ml-1m")
    assert text.startswith("Our best rho by test pop-100 NDCG@10: 0.3 (0.4700); within two standard errors of it: "
                           "0.2. The paper's best, 0.2, is among them: its shape holds. The paper's figure: ")
    rows[1]["pop/NDCG@10"] = 0.40
    assert ("every other value is more than two standard errors below it. The paper's best, 0.2, is below ours "
            "(0.4000, beyond two standard errors): its shape does not hold") in sweep_summary(
                rows, "mask_proportion", "ml-1m")[0]
    assert sweep_summary(rows, "mask_proportion", "beauty") == []  # one value: no shape yet
    assert paper_best_value("ml-1m", "max_len") == 200 and paper_best_value("beauty", "max_len") == 20
    assert paper_best_value("beauty", "mask_proportion") == 0.6 and paper_best_value("ml-1m", "hidden_size") is None
    [text] = sweep_summary([_sweep_row("ml-1m", 100, 0.47), _sweep_row("ml-1m", 400, 0.46)], "max_len", "ml-1m")
    assert text.endswith("The paper's best, 200, has no finished run here.")
    [text] = sweep_summary([_sweep_row("beauty", 16, 0.15), _sweep_row("beauty", 64, 0.18)], "hidden_size", "beauty")
    assert "The paper's best" not in text and text.endswith("a large d overfits on sparse data.")



def test_a_report_lists_its_commands_without_local_paths_or_clock_times(tmp_path):
    """The commands as the records hold them name folders of the machine that ran them and the clock
    time it had to stop at; the report writes them from the checkout's root without either."""
    from bert4rec_tf.experiments.provenance import portable_command

    recorded = ("bert4rec-reproduce table2 --datasets beauty --recipe cpu-1h --out /home/x/repo/reports/table2 "
                "--results_dir /home/x/repo/docs/results --source_file beauty=../data/beauty.txt.gz "
                "--only bert4rec-match --deadline 13:32 --no_figures")
    assert portable_command(recorded, "table2") == (
        "bert4rec-reproduce table2 --datasets beauty --recipe cpu-1h --out reports/table2 --results_dir docs/results "
        "--source_file beauty=beauty.txt.gz --only bert4rec-match --no_figures")
    elsewhere = ("bert4rec-reproduce ablation --datasets ml-1m --out=/scratch/r20/ablation "
                 "--data_dir /scratch/r20/data --source_file ml-1m=docs/examples/interactions.csv "
                 "--results_dir docs/results --extra '--learning_rate 0.001' --deadline=2h")
    assert portable_command(elsewhere, "ablation") == (
        "bert4rec-reproduce ablation --datasets ml-1m --out reports/ablation "
        "--source_file ml-1m=docs/examples/interactions.csv --results_dir docs/results --extra '--learning_rate 0.001'")
    records = [{**fake_record("ml-1m", "bert4rec", {}), "command": recorded},
               {**fake_record("ml-1m", "pop", {}), "command": recorded.replace("/home/x/repo/", "")}]
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), records, [])
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    provenance = report[report.index("## Where each run comes from"):]
    assert provenance.count("bert4rec-reproduce table2") == 1  # the same command once
    assert "/home/" not in report and "13:32" not in report and "--deadline" not in provenance.split("```bash")[1]


def test_a_run_of_the_sampled_softmax_is_flagged_as_not_the_papers_loss(tmp_path):
    records = [fake_record("beauty", "bert4rec", {"pop": {"HR@10": 0.29}}),
               {**fake_record("beauty", "sasrec-ce", {"pop": {"HR@10": 0.27}}),
                "settings": ["--seed", "1", "--loss", "sampled_softmax"]}]
    rows = report_rows(records)
    assert {row["setting"]: row["sampled_softmax"] for row in rows} == {"bert4rec": False, "sasrec-ce": True}
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["beauty"]), records, [])
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert "| sasrec-ce (sampled softmax: not the paper's loss) |" in report
    assert "| bert4rec (sampled" not in report


def test_a_run_tested_on_a_sample_of_users_says_so(tmp_path):
    records = [fake_record("beauty", "bert4rec", {"pop": {"HR@10": 0.29}}),
               {**fake_record("beauty", "ncf", {"pop": {"HR@10": 0.21}}), "evaluated_users": 10000, "users": 40226}]
    rows = report_rows(records)
    assert {row["setting"]: row["evaluated_users"] for row in rows} == {"bert4rec": None, "ncf": "10000 of 40226"}
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["beauty"]), records, [])
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert "| ncf (tested on 10000 of 40226 users) |" in report
    assert "| bert4rec (tested" not in report


def test_a_run_that_departs_from_another_is_set_beside_it(tmp_path):
    from bert4rec_tf.experiments.verdicts import departures

    exact = {"pop": {"HR@10": 0.2908, "NDCG@10": 0.1722}, "full": {"Recall@10": 0.0354, "NDCG@10": 0.0191}}
    records = [fake_record("beauty", "bert4rec", exact),
               {**fake_record("beauty", "bert4rec-sampled", {"pop": {"HR@10": 0.2600, "NDCG@10": 0.1700},
                                                             "full": {"Recall@10": 0.0400, "NDCG@10": 0.0191}}),
                "settings": ["--seed", "1", "--loss", "sampled_softmax"], "steps": 20},
               fake_record("beauty", "sasrec-ce", {"pop": {"HR@10": 0.2663}})]
    runs = plan("sampled_softmax", ["beauty"])
    found = {entry["run"]: entry for entry in departures(report_rows(records), runs)}
    # Only the pairs whose both runs finished: bert4rec-sampled-sparse and sasrec-ce-sampled have no record.
    assert list(found) == ["bert4rec-sampled"]
    entry = found["bert4rec-sampled"]
    assert entry["against"] == "bert4rec" and entry["steps"] == (20, 10)
    # 2 SE over Beauty's 40,226 users: sqrt((0.26*0.74 + 0.2908*0.7092) / 40226) * 2 = 0.0063.
    assert entry["metrics"]["pop/HR@10"]["verdict"] == "lower"
    assert entry["metrics"]["pop/HR@10"]["relative"] == pytest.approx(0.26 / 0.2908 - 1)
    assert entry["metrics"]["pop/NDCG@10"]["verdict"] == "tie"  # 0.0022 apart
    assert entry["metrics"]["full/Recall@10"]["verdict"] == "higher"
    assert entry["metrics"]["full/NDCG@10"]["verdict"] == "tie"
    assert "uniform/HR@10" not in entry["metrics"]  # not measured in either
    write_report(str(tmp_path), "sampled_softmax", "sampled_softmax", runs, records, [])
    report = (tmp_path / "sampled_softmax.md").read_text(encoding="utf-8")
    assert ("| bert4rec-sampled | bert4rec | 20 vs 10 | 0.2600 vs 0.2908 (-10.6%, lower) | "
            "0.1700 vs 0.1722 (-1.3%, tie) |  | 0.0400 vs 0.0354 (+13.0%, higher) | 0.0191 vs 0.0191 (+0.0%, tie) |"
            ) in report
    assert "| bert4rec-sampled (sampled softmax: not the paper's loss) |" in report


def test_the_report_says_which_weights_were_tested_when_runs_trained_without_validation():
    test = {"pop": {"HR@10": 0.5}}
    valid, original = fake_record("beauty", "pop", test), fake_record("beauty", "caser", test)
    original["config"] = {"data": {"split": "original"}}
    assert weights_tested([valid]) == "each run's best validation checkpoint"
    assert weights_tested([original]).startswith("each run's last weights (every run trained with `split=original`")
    assert weights_tested([valid, original]) == ("each run's best validation checkpoint, the last weights for "
                                                 "beauty-caser (trained with `split=original`, no validation)")


def test_the_share_of_a_run_spent_validating_is_the_sum_of_its_validations_times(tmp_path):
    from bert4rec_tf.experiments.report import time_share

    def validation_share(record):
        return time_share(record, "validation_seconds")

    timed = {**fake_record("ml-1m", "bpr-mf", {"pop": {"HR@10": 0.3}}), "seconds": 100.0,
             "curve": [{"step": 500, "validation_seconds": 3.0}, {"step": 1000, "validation_seconds": 5.0}]}
    assert validation_share(timed) == pytest.approx(0.08)
    untimed = {**timed, "curve": [{"step": 500, "validation_seconds": 3.0}, {"step": 1000}]}
    assert validation_share(untimed) is None and validation_share({**timed, "curve": []}) is None
    ncf = {**untimed, "run": "ml-1m-ncf", "setting": "ncf", "model": "ncf"}
    rows = write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), [timed, ncf], [])
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert "| bpr-mf | 10 | 2 | 12.8 | 8% |" in report and "| ncf | 10 | 2 | 12.8 | | 0.3000 / " in report
    assert rows[0]["validation_share"] == pytest.approx(0.08)
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), [ncf], [])  # no run timed them
    assert "| ncf | 10 | 2 | 12.8 | 0.3000 / " in (tmp_path / "table2.md").read_text(encoding="utf-8")


def test_the_share_of_a_run_in_training_steps_is_shown_beside_its_validations(tmp_path):
    from bert4rec_tf.experiments.report import time_share
    timed = {**fake_record("ml-1m", "bpr-mf", {"pop": {"HR@10": 0.3}}), "seconds": 100.0,
             "curve": [{"step": 500, "validation_seconds": 3.0, "training_seconds": 40.0},
                       {"step": 1000, "validation_seconds": 5.0, "training_seconds": 45.0}]}
    assert time_share(timed, "training_seconds") == pytest.approx(0.85)
    earlier = {**timed, "run": "ml-1m-ncf", "setting": "ncf", "model": "ncf",
               "curve": [{"step": 500, "validation_seconds": 3.0}, {"step": 1000, "validation_seconds": 5.0}]}
    rows = write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), [timed, earlier], [])
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    assert "| run | steps | minutes | samples/s | validating | in steps | pop-100" in report
    assert "| bpr-mf | 10 | 2 | 12.8 | 8% | 85% | 0.3000 / " in report
    assert "| ncf | 10 | 2 | 12.8 | 8% | | 0.3000 / " in report
    assert rows[0]["training_share"] == pytest.approx(0.85) and rows[-1]["training_share"] is None
