"""The report: where a paper's order of two runs holds, the test set's noise, a sweep's shape, the
machines' notes and the notes' links (bert4rec_tf/experiments/report.py)."""

from __future__ import annotations

import pytest

from bert4rec_tf.experiments.plans import plan
from bert4rec_tf.experiments.report import orderings, report_rows, write_report
from tests.report.fake_records import fake_record, fake_speed


def test_orderings_say_where_the_published_order_of_two_runs_holds(tmp_path):
    records = [fake_record("ml-1m", "bert4rec", {"pop": {"HR@10": 0.60, "NDCG@10": 0.40},
                                             "full": {"Recall@10": 0.20, "NDCG@10": 0.10}}),
               fake_record("ml-1m", "sasrec-bce", {"pop": {"HR@10": 0.65, "NDCG@10": 0.36}}),
               fake_record("ml-1m", "sasrec-ce", {"full": {"Recall@10": 0.25, "NDCG@10": 0.10}}),
               fake_record("ml-1m", "pop", {"uniform": {"HR@10": 0.43}})]
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
    notes = "SASRec leads.\n\n## ML-1m\n\nSee [ablation](../ablation.md).\n"
    write_report(str(tmp_path), "table2", "table2", plan("table2", ["ml-1m"]), records, [], notes=notes)
    report = (tmp_path / "table2.md").read_text(encoding="utf-8")
    # The answer first (the published numbers, the orders, every run), then the discussion, then provenance.
    order = ["Beside the published numbers", "Where the published order of two runs holds", "Every run in the three",
             "## Discussion", "> SASRec leads.", "## Where each run comes from"]
    assert [report.index(text) for text in order] == sorted(report.index(text) for text in order)
    # The notes are quoted: a Markdown quote whose headings sit under the report's Discussion and whose
    # links hold from the report.
    assert "Quoted from [table2/notes.md](table2/notes.md)" in report
    assert "> ### ML-1m\n>\n> See [ablation](ablation.md)." in report


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
    from bert4rec_tf.experiments.report import noise_margin, tested_users

    assert tested_users("ml-1m") == 6040 and tested_users("beauty") == 40226 and tested_users("custom") is None
    assert noise_margin(0.6856, 0.6866, 6040) == pytest.approx(0.01689, abs=1e-5)
    assert noise_margin(0.5, 0.5, 40226) == pytest.approx(2 * (0.5 / 40226) ** 0.5)
    assert noise_margin(0.5, 0.4, None) == 0.0
    tied = [fake_record("ml-1m", "bert4rec", {"pop": {"HR@10": 0.6866}}), fake_record("ml-1m", "sasrec-bce", {"pop": {"HR@10": 0.6856}})]
    assert [p["holds"] for p in orderings(report_rows(tied))] == [None]
    apart = [fake_record("beauty", "bert4rec", {"pop": {"HR@10": 0.2908}}), fake_record("beauty", "sasrec-bce", {"pop": {"HR@10": 0.2808}})]
    assert [p["holds"] for p in orderings(report_rows(apart))] == [True]  # 0.0100 > 0.0063


def test_links_in_the_notes_hold_from_the_report_that_quotes_them():
    from bert4rec_tf.experiments.report import rebase_links
    text = ("See [runs](../../experiments.md#best-runs), [ablation](../ablation.md), [here](figure.png), "
            "[web](https://example.org/a.md) and [above](#table).")
    assert rebase_links(text, "table2") == (
        "See [runs](../experiments.md#best-runs), [ablation](ablation.md), [here](table2/figure.png), "
        "[web](https://example.org/a.md) and [above](#table).")


def test_a_report_flags_runs_trained_on_slower_cores(tmp_path):
    """The 2026-11-25 sessions' machines: 204 against 142 GFLOP/s, both "AMD EPYC, 2 cores"."""
    from bert4rec_tf.experiments.report import machine_notes

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
    from bert4rec_tf.experiments.report import sweep_summary

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
    from bert4rec_tf.experiments.report import portable_command

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
