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
import math
import os
import posixpath
import re

from bert4rec_tf.constants import POP_MARGIN, PROTOCOL_LABELS, SELECTION_METRIC, metric_label
from bert4rec_tf.experiments.plans import SLICED, SWEEPS, Run
from bert4rec_tf.experiments.provenance import machine_notes, portable_command, speed_cell
from bert4rec_tf.experiments.published import PUBLISHED, PUBLISHED_FULL, TUNED_SUFFIX
from bert4rec_tf.experiments.verdicts import (DEPARTURE_METRICS, departures, orderings, sweep_summary,
                                              table2_orderings, tested_users)
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


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


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


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}"


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


def _published_table(rows: list[dict]) -> list[str]:
    """The markdown table of `rows` of one source (which names its protocol): a line per run, a
    column per metric."""
    metrics = list(dict.fromkeys(row["published_metric"] for row in rows))
    cells: dict[str, dict[str, str]] = {}
    for row in rows:
        difference = "" if row["relative_difference"] is None else f" ({row['relative_difference']:+.1%})"
        name = f"{row['setting']} (earlier configuration)" if row["earlier_configuration"] else row["setting"]
        cells.setdefault(name, {})[row["published_metric"]] = (
            f"{_cell(row['ours'])} / {row['published']:.4f}{difference}")
    lines = [f"{rows[0]['source']}:", "", f"| run | {' | '.join(metrics)} |",
             f"|---|{'---|' * len(metrics)}"]
    lines += [f"| {setting} | {' | '.join(by_metric.get(metric, '') for metric in metrics)} |"
              for setting, by_metric in cells.items()]
    return lines + [""]


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
            lines += _slices_table([record for record in records if record["dataset"] == dataset])
    lines += _tuning_table(records)
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
            lines += _published_table([row for row in compared if row["source"] == source])
    lines += _orderings_table([pair for pair in orderings(rows) if pair["dataset"] == dataset], dataset)
    lines += _departures_table([entry for entry in departures(rows, runs) if entry["dataset"] == dataset])
    lines += _table2_table([entry for entry in table2_orderings(rows) if entry["dataset"] == dataset])
    if any(run.tuned for run in runs):
        lines += _table2_table([entry for entry in table2_orderings(rows, TUNED_SUFFIX) if entry["dataset"] == dataset],
                               "tuned")
    return lines + _runs_table([row for row in rows if row["dataset"] == dataset])


# The slices' metrics in the report: (protocol, metric) and how each is shown.
# Below this many users a slice's normal-approximation error bar means nothing (at m = 0 it is 0).
_SLICE_MIN_USERS = 30
_SLICE_METRICS = (("pop", "HR@10", "pop-100 HR@10"), ("pop", "NDCG@10", "pop-100 NDCG@10"),
                  ("full", "Recall@10", "full Recall@10"))


def _slices_table(records: list[dict]) -> list[str]:
    """Each run's test metrics on its targets grouped by their training occurrences (`test_slices`),
    each with two standard errors over the slice's users (records without slices are left out)."""
    from bert4rec_tf.evaluation.slices import slice_labels

    sliced = [record for record in records if record.get("test_slices")]
    if not sliced:
        return []
    lines = ["The test by how often each user's test item occurs in training (the run's own training "
             "sequences): each slice's users, and its metrics with two standard errors over them (for a mean m "
             "of per-user values in [0, 1], 2 sqrt(m (1 - m) / users), at most NDCG@10's; none for a slice of fewer "
             f"than {_SLICE_MIN_USERS} users, too few for it):", "",
             "| run | training occurrences | users | " + " | ".join(label for *_, label in _SLICE_METRICS) + " |",
             "|---|---|---|" + "---|" * len(_SLICE_METRICS)]
    for record in sliced:
        for label in slice_labels():
            found = record["test_slices"].get(label, {})
            users = found.get("users", 0)
            cells = []
            for protocol, metric, _ in _SLICE_METRICS:
                value = found.get(protocol, {}).get(metric)
                if not users or value is None:
                    cells.append("")
                    continue
                cells.append(f"{value:.4f} (too few users)" if users < _SLICE_MIN_USERS else
                             f"{value:.4f} ± {2 * math.sqrt(value * (1 - value) / users):.4f}")
            lines.append(f"| {record['run']} | {label} | {users:,} | " + " | ".join(cells) + " |")
    return lines + [""]


def _tuning_table(records: list[dict]) -> list[str]:
    """What each tuned run's study spent and chose (bert4rec-tune's summary, kept in the run's record)."""
    tuned = [record for record in records if record.get("tuning")]
    if not tuned:
        return []
    lines = ["## Tuning", "",
             "Each tuned run's study (bert4rec-tune): its budget of trials' time (one core each), the wall time "
             "from its first trial's start to its last one's end, its trials by how they ended (pruned: stopped "
             "on its validation curve), the validation pop-100 NDCG@10 at the trial budget of the recipe's own "
             "settings (the first trial; a study made before that had none) and of the chosen trial, and "
             "the settings chosen; only validation decided, the test was read once, by the run above. A trial "
             "trains the first trial budget of a run whose learning rate decays to 0 at the schedule's end (a "
             "study older than the schedule setting decayed at the trial budget). Judged past the rungs: how many "
             "seconds after the pruner's rung each judgement of a trial came (trials validate at the rungs; a study "
             "of older code did not, judged a trial at its first validation past a rung, for a trial of slow steps "
             "minutes later, and kept no record of it). In warm-up: whether the pruner could stop a trial whose "
             "learning rate was still warming up (judged), or spared it there (spared: the older rule, under which "
             "a setting of slow steps could not be stopped at an early rung):", "",
             "| run | budget | trial budget | schedule | trial time | wall time | trials | judged past the rungs | "
             "in warm-up | the recipe's trial | best validation | chosen settings |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for record in tuned:
        study = record["tuning"]
        best = study.get("best", {})
        study = {"schedule_budget": study.get("trial_budget"), **study}
        minutes = {key: f"{study[key] / 60:.0f} min" if isinstance(study.get(key), (int, float)) else "?"
                   for key in ("budget", "trial_budget", "schedule_budget", "spent_seconds", "wall_seconds")}
        trials = ", ".join(f"{count} {state}" for state, count in study.get("trials", {}).items())
        chosen = ", ".join(f"{key} {_setting_text(value)}" for key, value in sorted(best.get("settings", {}).items()))
        value = f"{best['value']:.4f}" if "value" in best else ""
        lines.append(f"| {record['run']} | {minutes['budget']} | {minutes['trial_budget']} | "
                     f"{minutes['schedule_budget']} | {minutes['spent_seconds']} | {minutes['wall_seconds']} | {trials} | "
                     f"{_rungs_text(study.get('at_rungs'))} | {'judged' if study.get('stop_in_warmup') else 'spared'} | "
                     f"{_start_text(study.get('start'))} | {value} | {chosen} |")
    return lines + [""]


def _rungs_text(at_rungs: dict | None) -> str:
    """How far past its rungs a study's trials were judged (not recorded: a study of older code)."""
    if not at_rungs or not at_rungs.get("judged"):
        return "not recorded"
    return f"{at_rungs['median']:.0f} s median, {at_rungs['max']:.0f} s at most"


def _start_text(start: dict | None) -> str:
    """How the study's trial of the recipe's settings ended."""
    if not start:
        return "none"
    if start.get("value") is None:
        return f"trial {start['number']}, {start['state']}"
    return f"{start['value']:.4f} (trial {start['number']}{', pruned' if start['state'] == 'pruned' else ''})"


def _setting_text(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _orderings_table(pairs: list[dict], dataset: str) -> list[str]:
    if not pairs:
        return []
    users = tested_users(dataset)
    noise = (f"; a tie when ours differ by less than two standard errors over the {users:,} test users "
             "(the last column)") if users else ""
    lines = [f"Where the published order of two runs holds (each pair as one paper ranked it{noise}):", "",
             "| runs | protocol | metric | published | ours | order | 2 SE |", "|---|---|---|---|---|---|---|"]
    for pair in pairs:
        protocol = PROTOCOL_LABELS[pair["protocol"]]
        order = {True: "holds", False: "reversed", None: "tie"}[pair["holds"]]
        lines.append(f"| {pair['first']} vs {pair['second']} | {protocol} | {pair['metric']} | "
                     f"{pair['published'][0]:.4f} vs {pair['published'][1]:.4f} | "
                     f"{pair['ours'][0]:.4f} vs {pair['ours'][1]:.4f} | {order} | "
                     f"{pair['margin']:.4f} |")
    return lines + [""]


def _departures_table(departed: list[dict]) -> list[str]:
    if not departed:
        return []
    lines = ["Each run beside the run it departs from (ours vs theirs, the relative difference, and whether "
             "ours is higher, lower or a tie within two standard errors over the test users); the same "
             "training time each:", "",
             f"| run | against | steps | {' | '.join(label for _, label in DEPARTURE_METRICS)} |",
             f"|---|---|---|{'---|' * len(DEPARTURE_METRICS)}"]
    for entry in departed:
        cells = []
        for key, _ in DEPARTURE_METRICS:
            metric = entry["metrics"].get(key)
            relative = "" if metric is None or metric["relative"] is None else f"{metric['relative']:+.1%}, "
            cells.append("" if metric is None else
                         f"{metric['ours']:.4f} vs {metric['theirs']:.4f} ({relative}{metric['verdict']})")
        lines.append(f"| {entry['run']} | {entry['against']} | {entry['steps'][0]} vs {entry['steps'][1]} | "
                     f"{' | '.join(cells)} |")
    return lines + [""]


def _table2_table(claims: list[dict], rows: str = "") -> list[str]:
    if not claims:
        return []
    which = (f"On the {rows} rows (each method's `-{rows}` run; POP's own): t" if rows else "T")
    lines = [f"{which}he paper's orderings of Table 2 (pop-100), each judged on its weakest link: the lowest "
             "method it puts above against the highest it puts below, in the paper's numbers and in ours "
             "(each side's own weakest link); a tie when the gap is within two standard errors over the "
             "test users (the last column, for ours):", "",
             "| ordering | metric | the paper's weakest link | paper | our weakest link | ours | 2 SE |",
             "|---|---|---|---|---|---|---|"]
    for entry in claims:
        paper, mine = entry["paper"], entry["ours"]
        missing = f" (without {', '.join(entry['missing'])}: not run)" if entry["missing"] else ""
        lines.append(f"| {entry['ordering']}{missing} | {entry['metric']} | "
                     f"{paper['above']} {paper['values'][0]:.4f} vs {paper['below']} {paper['values'][1]:.4f} | "
                     f"{paper['verdict']} | {mine['above']} {mine['values'][0]:.4f} vs "
                     f"{mine['below']} {mine['values'][1]:.4f} | {mine['verdict']} | {mine['margin']:.4f} |")
    return lines + [""]


# The report's columns of every run: per protocol, its metrics.
_RUN_METRICS = (("pop", ("HR@10", "NDCG@10", "MRR")), ("uniform", ("HR@10", "NDCG@10", "MRR")),
                ("full", ("Recall@10", "NDCG@10", "MRR")))


def _runs_table(rows: list[dict]) -> list[str]:
    """Every run of one data set's `rows` in the three protocols, one line per run; with columns of the
    shares of each run spent validating and in training steps when any run timed them."""
    shares = [(key, label) for key, label in (("validation_share", "validating"), ("training_share", "in steps"))
              if any(row[key] is not None for row in rows)]
    said = {"validating": "validating the share of those minutes its validations took",
            "in steps": "in steps the share in training steps (with their input)"}
    lines = ["Every run in the three protocols (minutes are training and validation time, samples/s the "
             "training instances over it" + "".join(f", {said[label]}" for _, label in shares)
             + (", for the runs that timed them" if shares else "") + "):", "",
             "| run | steps | minutes | samples/s | " + "".join(f"{label} | " for _, label in shares)
             + "pop-100 HR@10 / NDCG@10 / MRR | uniform-100 HR@10 / NDCG@10 / MRR | full Recall@10 / NDCG@10 / MRR |",
             "|---|---|---|---|---|---|---|" + "---|" * len(shares)]
    seen = set()
    for row in rows:
        if row["run"] in seen:
            continue
        seen.add(row["run"])
        triple = {p: " / ".join(_cell(row[f"{p}/{m}"]) for m in metrics) for p, metrics in _RUN_METRICS}
        speed = "" if row["samples_per_second"] is None else f"{row['samples_per_second']:.1f}"
        flag = " (not above POP)" if row["above_pop"] is False else ""
        flag += " (sampled softmax: not the paper's loss)" if row["sampled_softmax"] else ""
        flag += f" (tested on {row['evaluated_users']} users)" if row["evaluated_users"] else ""
        flag += f" (earlier configuration: {row['earlier_configuration']})" if row["earlier_configuration"] else ""
        share = "".join(" |" if row[key] is None else f" {row[key]:.0%} |" for key, _ in shares)
        lines.append(f"| {row['setting']}{flag} | {row['steps']} | {_minutes(row['seconds'])} | {speed} |{share} "
                     f"{triple['pop']} | {triple['uniform']} | {triple['full']} |")
    if any(row["above_pop"] is False for row in rows):
        lines += ["", f"Not above POP: the run's best validation {metric_label(SELECTION_METRIC)} was not above "
                  f"{POP_MARGIN:g} times POP's on the same users: it learned little beyond popularity (too short "
                  "a run, or a collapse)."]
    return lines + [""]


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
