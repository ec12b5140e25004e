"""The reproduction report: its rows, where the papers' orders and sweep shapes hold, and its markdown.

`report_rows` reads the records of the finished runs (`bert4rec_tf.experiments.records`);
`write_report` writes `report.csv` and `report.md` with the published number each run is compared
with (the protocol that paper used: pop-100 for BERT4Rec, uniform-100 for the matching paper) and
the relative difference. The figures are in `bert4rec_tf.experiments.figures` (matplotlib, the
`report` extra).
"""

from __future__ import annotations

import csv
import io
import os
import posixpath
import re

from bert4rec_tf.experiments.plans import SLICED, SWEEPS, Run
from bert4rec_tf.experiments.provenance import machine_notes, portable_command, speed_cell
from bert4rec_tf.experiments.published import PUBLISHED, PUBLISHED_FULL, TUNED_SUFFIX
from bert4rec_tf.experiments.report_tables import (departures_table, orderings_table, published_table,
                                                   runs_table, slices_table, table2_table, tuning_table)
from bert4rec_tf.experiments.verdicts import departures, orderings, sweep_summary, table2_orderings, tested_users
from bert4rec_tf.files import write_text_atomic

# The metrics the report lists per protocol (its columns).
PROTOCOL_METRICS = {"pop": ("HR@1", "HR@5", "HR@10", "NDCG@5", "NDCG@10", "MRR"),
                    "uniform": ("HR@10", "NDCG@10", "MRR"),
                    "full": ("Recall@10", "Recall@20", "NDCG@10", "NDCG@20", "MRR")}
COLUMNS = (["run", "dataset", "setting", "model", "value", "steps", "seconds", "samples_per_second", "commit",
            "date", "above_pop", "sampled_softmax", "evaluated_users", "tested_users", "earlier_configuration",
            "validation_share", "training_share"]
           + [f"{protocol}/{metric}" for protocol, metrics in PROTOCOL_METRICS.items() for metric in metrics]
           + ["published_protocol", "published_metric", "published", "ours", "relative_difference", "source"])


def report_rows(records: list[dict]) -> list[dict]:
    """One row per published metric of each record (one row when nothing is published).

    `relative_difference` is (ours - published) / published for the metric under the protocol the
    paper used. `seconds` is the run's training and validation time; `samples_per_second` the
    training instances over that time. `above_pop`: whether the best validation was clearly above
    POP's (`bert4rec_tf.training.trainer.pop_warning`); None for records made before it was measured.
    `evaluated_users`: "N of M" when the run was validated and tested on a sample of its users
    (`train.eval_users`), else None; `tested_users` the number of users its test metrics average
    (the sample's, else the data set's, `tested_users`), which the two-standard-error margins use.
    `earlier_configuration`: for a record made under a configuration its settings no longer give (a
    recipe changed since; `collect_records` keeps it until the run trains again), the fields that
    differ ("train.valid_users"), else None. `validation_share` and `training_share`: the shares of
    the run's time its validations and its training steps took (`time_share`), None for records made
    before they were timed.
    """
    rows = []
    for record in records:
        seconds = record["seconds"]
        base = {"run": record["run"], "dataset": record["dataset"], "setting": record["setting"],
                "model": record["model"], "value": record["value"], "steps": record["steps"],
                "seconds": round(seconds, 1),
                "samples_per_second": round(record["instances"] / seconds, 1) if seconds else None,
                "commit": record.get("commit"), "date": record.get("date"), "above_pop": record.get("above_pop"),
                "sampled_softmax": _trains_sampled_softmax(record["settings"]),
                "evaluated_users": (f"{record['evaluated_users']} of {record['users']}" if "evaluated_users" in record
                                    else None),
                "tested_users": record.get("evaluated_users") or tested_users(record["dataset"]),
                "earlier_configuration": "; ".join(record.get("earlier_configuration", [])) or None,
                "validation_share": time_share(record, "validation_seconds"),
                "training_share": time_share(record, "training_seconds")}
        for protocol, metrics in PROTOCOL_METRICS.items():
            for metric in metrics:
                base[f"{protocol}/{metric}"] = record["test"].get(protocol, {}).get(metric)
        published = [entry for entry in (PUBLISHED.get((record["dataset"], record["setting"])),
                                         PUBLISHED_FULL.get((record["dataset"], record["setting"]))) if entry]
        if not published:
            rows.append({**base, "published_protocol": None, "published_metric": None, "published": None,
                         "ours": None, "relative_difference": None, "source": None})
            continue
        for protocol, values, source in published:
            for metric, value in values.items():
                ours = record["test"].get(protocol, {}).get(metric)
                rows.append({**base, "published_protocol": protocol, "published_metric": metric, "published": value,
                             "ours": ours, "relative_difference": None if ours is None else (ours - value) / value,
                             "source": source})
    return rows


def time_share(record: dict, key: str) -> float | None:
    """The share of `record`'s training and validation time its curve's `key` seconds add up to
    ("validation_seconds": validating; "training_seconds": in training steps, with their input); None
    when a point lacks it (a record made before it was timed) or the run has no time or curve."""
    curve, seconds = record.get("curve") or [], record.get("seconds") or 0.0
    if not curve or not seconds or any(key not in point for point in curve):
        return None
    return sum(point[key] for point in curve) / seconds


def _trains_sampled_softmax(settings: list[str]) -> bool:
    """Whether train.py settings ask for the sampled softmax (`--loss sampled_softmax`, or as
    `--config model.loss=...` / `--extra`): a loss that is not the paper's, flagged in the report."""
    text = " ".join(settings)
    return "sampled_softmax" in text


def rebase_links(text: str, subfolder: str) -> str:
    """`text` written in `subfolder` with its relative links (`[a](../b.md#c)`) rewritten to hold from the
    folder above it, where the report that quotes it lives; absolute addresses and anchors are kept."""
    def rebase(match: re.Match) -> str:
        target = match.group(1)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return match.group(0)
        path, hash_, fragment = target.partition("#")
        moved = posixpath.normpath(posixpath.join(subfolder, path))
        return f"]({moved}{hash_}{fragment})"
    return re.sub(r"\]\(([^)\s]+)\)", rebase, text)


def quote_notes(notes: str, subfolder: str) -> list[str]:
    """The hand-written notes of `<subfolder>/notes.md` as the report quotes them: a Markdown quote, its
    links rewritten to hold from the report (`rebase_links`) and its headings one level down, under the
    report's "Discussion"."""
    lines, fenced = [], False
    for line in rebase_links(notes.strip(), subfolder).split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,5} ", line):
            line = "#" + line
        lines.append(f"> {line}".rstrip())
    return lines


def weights_tested(records: list[dict]) -> str:
    """Which weights the report's test metrics are of: the best validation checkpoint, or the last
    weights of runs trained on the original code's split (`split=original`, no validation set)."""
    without = sorted(record["run"] for record in records
                     if record.get("config", {}).get("data", {}).get("split") == "original")
    if not without:
        return "each run's best validation checkpoint"
    if len(without) == len(records):
        return "each run's last weights (every run trained with `split=original`, so no validation chose a checkpoint)"
    return (f"each run's best validation checkpoint, the last weights for {', '.join(without)} (trained with "
            "`split=original`, no validation)")


def write_report(folder: str, name: str, experiment: str, runs: list[Run], records: list[dict],
                 figures: list[str], notes: str | None = None,
                 other_flags: dict[str, list[str]] | None = None,
                 awaiting_study: list[str] | None = None) -> list[dict]:
    """Writes `<folder>/<name>.csv` (every column) and `<name>.md` from the `records` of the finished
    `runs`; returns the rows.

    The report opens with its answer, per data set: a sweep's shape, the runs beside the published
    numbers and where the papers' orders of two runs hold, then every run's metrics; then the
    figures, the discussion (`notes`, quoted from `<experiment>/notes.md` when given) and, last,
    where each run comes from (commit, date, machine, cores, settings and the commands, as
    `portable_command` writes them). `other_flags`: for a run not finished here whose record was
    made with other flags, how they differ (`settings_changes`): it is named as recorded with other
    flags, not as not finished. `awaiting_study`: tuned runs of the plan whose study has chosen no
    settings yet (so they are not among `runs`): counted in the plan's runs and named."""
    rows = report_rows(records)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(os.path.join(folder, f"{name}.csv"), buffer.getvalue())

    finished = {record["run"] for record in records}
    lines = [f"# Reproduction report: {experiment}", "",
             f"{len(finished)} of {len(runs) + len(awaiting_study or [])} runs finished. Test metrics of {weights_tested(records)}, "
             "beside the published numbers where a paper has them; then the figures, the discussion and, last, "
             "where each run comes from (its commit, machine, cores, date, settings and command). Written by "
             "`bert4rec-reproduce` from the records of the finished runs.", ""]
    other_flags = {name: changes for name, changes in (other_flags or {}).items() if changes and name not in finished}
    missing = [run.name for run in runs if run.name not in finished and run.name not in other_flags]
    if missing:
        lines += [f"Not finished yet: {', '.join(missing)}. Re-run the command to continue.", ""]
    if awaiting_study:
        lines += [f"Not tuned yet (their study has chosen no settings; the command with --tune_budget runs it, "
                  f"then trains them): {', '.join(awaiting_study)}.", ""]
    if other_flags:
        # Runs recorded by another command: grouped by how its flags differ (usually one difference).
        groups: dict[str, list[str]] = {}
        for run in runs:
            if run.name in other_flags:
                groups.setdefault("; ".join(other_flags[run.name]), []).append(run.name)
        lines += [f"Recorded with other flags than this command's, so not in this report (the command in each "
                  f"record reports it; this one trains them again): {', '.join(names)} ({changes})."
                  for changes, names in groups.items()] + [""]
    earlier = [record for record in records if record.get("earlier_configuration")]
    if earlier:
        fields = sorted({field for record in earlier for field in record["earlier_configuration"]})
        lines += [f"{len(earlier)} of the finished runs were made under an earlier configuration than their settings "
                  f"give now ({', '.join(fields)} differ; each run's fields are in the csv's `earlier_configuration`): "
                  "they are marked \"earlier configuration\" in the tables of metrics, enter the orderings, "
                  "comparisons and figures as they are, and count until they train again, which the same "
                  f"command does: {', '.join(record['run'] for record in earlier)}.", ""]
    for dataset in dict.fromkeys(run.dataset for run in runs):
        lines += _dataset_section(rows, runs, experiment, dataset)
        if experiment in SLICED:
            lines += slices_table([record for record in records if record["dataset"] == dataset])
    lines += tuning_table(records)
    if figures:
        lines += ["## Figures", ""]
        for figure in figures:
            lines += [f"![{os.path.basename(figure)}]({os.path.relpath(figure, folder)})", ""]
    if notes and notes.strip():
        lines += ["## Discussion", "",
                  f"Quoted from [{experiment}/notes.md]({experiment}/notes.md), written by hand beside the records "
                  "(not by the script); its figures are those of the tables above.", "",
                  *quote_notes(notes, experiment), ""]
    if records:
        lines += _origins_section(records, experiment)
    write_text_atomic(os.path.join(folder, f"{name}.md"), "\n".join(lines))
    return rows


def _dataset_section(rows: list[dict], runs: list[Run], experiment: str, dataset: str) -> list[str]:
    """The report's section of one data set: the sweep's shape, the published comparisons and orders,
    and every run's metrics."""
    lines = [f"## {dataset}", ""]
    summary = sweep_summary(rows, experiment, dataset) if experiment in SWEEPS else []
    if summary:
        lines += [*summary, ""]
    compared = [row for row in rows if row["dataset"] == dataset and row["published"] is not None]
    if compared:
        lines += ["Beside the published numbers, one table per source, under the protocol that paper used; each "
                  "cell is ours / published (our relative difference):", ""]
        for source in dict.fromkeys(row["source"] for row in compared):
            lines += published_table([row for row in compared if row["source"] == source])
    lines += orderings_table([pair for pair in orderings(rows) if pair["dataset"] == dataset], dataset)
    lines += departures_table([entry for entry in departures(rows, runs) if entry["dataset"] == dataset])
    lines += table2_table([entry for entry in table2_orderings(rows) if entry["dataset"] == dataset])
    if any(run.tuned for run in runs):
        lines += table2_table([entry for entry in table2_orderings(rows, TUNED_SUFFIX) if entry["dataset"] == dataset],
                               "tuned")
    return lines + runs_table([row for row in rows if row["dataset"] == dataset])


def _origins_section(records: list[dict], experiment: str) -> list[str]:
    """Where each run comes from: its commit, date, machine, speed and settings, then the commands."""
    lines = ["## Where each run comes from", "", *machine_notes(records),
             "| run | commit | date | machine | float32 GFLOP/s, stream GB/s | train.py settings |",
             "|---|---|---|---|---|---|"]
    for record in records:
        origin = f" (the record of {record['same_as']})" if record.get("same_as") else ""
        lines.append(f"| {record['run']}{origin} | {record.get('commit', '')} | {record.get('date', '')} | "
                     f"{record.get('machine', '')} | {speed_cell(record.get('speed'))} | "
                     f"`{' '.join(record['settings'])}` |")
    lines.append("")
    commands = list(dict.fromkeys(portable_command(record["command"], experiment)
                                  for record in records if record.get("command")))
    if commands:
        lines += ["The commands that trained the runs, from the checkout's root. A `--source_file` outside the "
                  "checkout is named by its file name (the records hold each file's checksum; without the flag "
                  "the data is downloaded), an `--out` outside it is written `reports/<experiment>`, and "
                  "`--data_dir` and `--deadline` are left out: where the data cache was and when a command had "
                  "to stop change no result.", "", "```bash", *commands, "```", ""]
    return lines
