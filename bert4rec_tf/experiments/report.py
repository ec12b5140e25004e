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
import shlex

from bert4rec_tf.constants import POP_MARGIN, PROTOCOL_LABELS, SELECTION_METRIC, metric_label
from bert4rec_tf.experiments.plans import SWEEPS, Run
from bert4rec_tf.experiments.published import (PAPER_SWEEP_SHAPES, PUBLISHED, PUBLISHED_FULL, TABLE2, TABLE2_METRICS,
                                                TABLE2_ORDERINGS, TABLE2_SETTINGS, TABLE2_SOURCE, paper_best_value)
from bert4rec_tf.files import PACKAGE_PARENT, write_text_atomic

# The metrics the report lists per protocol (its columns).
PROTOCOL_METRICS = {"pop": ("HR@1", "HR@5", "HR@10", "NDCG@5", "NDCG@10", "MRR"),
                    "uniform": ("HR@10", "NDCG@10", "MRR"),
                    "full": ("Recall@10", "Recall@20", "NDCG@10", "NDCG@20", "MRR")}
COLUMNS = (["run", "dataset", "setting", "model", "value", "steps", "seconds", "samples_per_second", "commit",
            "date", "above_pop", "sampled_softmax", "evaluated_users", "tested_users"]
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
                "tested_users": record.get("evaluated_users") or tested_users(record["dataset"])}
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


_ORDER_METRICS = ("HR@10", "Recall@10", "NDCG@10")


def _trains_sampled_softmax(settings: list[str]) -> bool:
    """Whether train.py settings ask for the sampled softmax (`--loss sampled_softmax`, or as
    `--config model.loss=...` / `--extra`): a loss that is not the paper's, flagged in the report."""
    text = " ".join(settings)
    return "sampled_softmax" in text


def tested_users(dataset: str) -> int | None:
    """The users a run of `dataset` is tested on (every user once, with the last item): the data set's
    published user count, None when it has none."""
    from bert4rec_tf.data.registry import DATASETS

    spec = DATASETS.get(dataset)
    return spec.paper_counts[0] if spec is not None and spec.paper_counts else None


def noise_margin(first: float, second: float, users: int | None) -> float:
    """Two standard errors of the difference of two test metrics, each a mean over `users` users of
    a per-user value in [0, 1] with mean m (HR@10 and Recall@10 are 0 or 1, variance m(1 - m); NDCG@10's
    variance is at most that). The two runs are treated as independent samples: the same users make
    the real error smaller, so a gap beyond this margin is a real order. 0 when `users` is unknown."""
    if not users:
        return 0.0
    return 2.0 * math.sqrt((first * (1 - first) + second * (1 - second)) / users)


def _fewest_tested(*rows: dict) -> int | None:
    """The fewest users any of `rows` was tested on (None when none says): the margin of their
    difference is taken over the smaller sample."""
    counts = [row["tested_users"] for row in rows if row.get("tested_users")]
    return min(counts) if counts else None


def orderings(rows: list[dict]) -> list[dict]:
    """Pairs of runs of one data set that a paper ranks against each other (both published under the
    same protocol, metric and source), with whether our runs keep the published order.

    Ablation runs pair with the default only (the paper's question is each change against it); other
    runs pair with every other. Only HR@10, Recall@10 and NDCG@10 are compared. `holds` is None when
    either side ties: the published numbers are equal, or ours differ by less than `noise_margin` (two
    standard errors over the users both runs were tested on, `_fewest_tested`), e.g. 0.6856 against
    0.6866 on ML-1m's 6,040 users. Table 2's numbers pair through `table2_orderings` instead.
    """
    groups: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        if row["published"] is None or row["ours"] is None or row["published_metric"] not in _ORDER_METRICS:
            continue
        if row["source"] == TABLE2_SOURCE:  # its orders are the paper's own claims: `table2_orderings`
            continue
        key = (row["dataset"], row["published_protocol"], row["published_metric"], row["source"])
        groups.setdefault(key, {})[row["setting"]] = row
    pairs = []
    for (dataset, protocol, metric, source), by_setting in groups.items():
        settings = list(by_setting)
        if "ablation-default" in by_setting:
            candidates = [("ablation-default", other) for other in settings if other != "ablation-default"]
        else:
            candidates = [(a, b) for i, a in enumerate(settings) for b in settings[i + 1:]]
        for a, b in candidates:
            first, second = by_setting[a], by_setting[b]
            published = first["published"] - second["published"]
            ours = first["ours"] - second["ours"]
            margin = noise_margin(first["ours"], second["ours"], _fewest_tested(first, second))
            holds = None if published == 0 or abs(ours) <= margin else (published > 0) == (ours > 0)
            pairs.append({"dataset": dataset, "first": a, "second": b, "protocol": protocol, "metric": metric,
                          "source": source, "published": (first["published"], second["published"]),
                          "ours": (first["ours"], second["ours"]), "margin": margin, "holds": holds})
    return pairs


def _verdict(gap: float, margin: float) -> str:
    return "holds" if gap > margin else "reversed" if gap < -margin else "tie"


def table2_orderings(rows: list[dict]) -> list[dict]:
    """The BERT4Rec paper's orderings of Table 2 (`TABLE2_ORDERINGS`) on each data set and metric
    (pop-100 HR@10 and NDCG@10), in the paper's numbers and in ours.

    An ordering "A above B" is judged on its weakest link: the lowest of A against the highest of B,
    in the paper's numbers (all its methods) and, separately, in ours (the methods with a finished
    run; `missing` names the others), so the two links may be different methods. It holds when that
    gap is above two standard errors (`noise_margin` over the users both runs were tested on; the
    paper's over the data set's test users), is reversed when below minus that, and is a tie
    otherwise. Example: on Beauty the paper has GRU4Rec+ 0.2654 and SASRec 0.2653 HR@10, so "SASRec
    above GRU4Rec+ and Caser" is a tie in the paper's own numbers.
    """
    methods = {setting: method for method, setting in TABLE2_SETTINGS.items()}
    ours: dict[tuple[str, str, str], float] = {}  # (dataset, method, metric) -> ours
    tested: dict[tuple[str, str], int | None] = {}  # (dataset, method) -> the users its test averages
    for row in rows:
        if row["source"] == TABLE2_SOURCE and row["ours"] is not None and row["setting"] in methods:
            ours[(row["dataset"], methods[row["setting"]], row["published_metric"])] = row["ours"]
            tested[(row["dataset"], methods[row["setting"]])] = _fewest_tested(row)
    results = []
    for dataset in dict.fromkeys(key[0] for key in ours):
        users = tested_users(dataset)
        for claim, above, below in TABLE2_ORDERINGS:
            for metric in ("HR@10", "NDCG@10"):
                column = TABLE2_METRICS.index(metric)
                sides = {"paper": {method: TABLE2[dataset][method][column] for method in above + below},
                         "ours": {method: ours[(dataset, method, metric)] for method in above + below
                                  if (dataset, method, metric) in ours}}
                upper = [method for method in above if method in sides["ours"]]
                lower = [method for method in below if method in sides["ours"]]
                if not upper or not lower:
                    continue
                entry = {"dataset": dataset, "ordering": claim, "metric": metric,
                         "missing": [method for method in above + below if method not in sides["ours"]]}
                for side, values in sides.items():
                    weakest = min((m for m in above if m in values), key=values.get)
                    strongest = max((m for m in below if m in values), key=values.get)
                    low, high = values[weakest], values[strongest]
                    counts = [tested.get((dataset, method)) for method in (weakest, strongest)] if side == "ours" else []
                    margin = noise_margin(low, high, min([c for c in counts if c] or [users]))
                    entry[side] = {"above": weakest, "below": strongest, "values": (low, high), "margin": margin,
                                   "verdict": _verdict(low - high, margin)}
                results.append(entry)
    return results


# The metrics a run is set beside the run it departs from (`Run.against`), with their labels.
DEPARTURE_METRICS = (("pop/HR@10", "pop-100 HR@10"), ("pop/NDCG@10", "pop-100 NDCG@10"),
                     ("uniform/HR@10", "uniform-100 HR@10"), ("full/Recall@10", "full Recall@10"),
                     ("full/NDCG@10", "full NDCG@10"))


def departures(rows: list[dict], runs: list[Run]) -> list[dict]:
    """Each finished run that departs from another finished run of its data set (`Run.against`) beside
    it: per metric of `DEPARTURE_METRICS` (ours, theirs, the relative difference and whether ours is
    "higher", "lower" or a "tie" within two standard errors over the test users), and both runs' steps."""
    by_run = {row["run"]: row for row in rows}
    found = []
    for run in runs:
        if run.against is None:
            continue
        mine, theirs = by_run.get(run.name), by_run.get(f"{run.dataset}-{run.against}")
        if mine is None or theirs is None:
            continue
        users = _fewest_tested(mine, theirs)
        metrics = {}
        for key, _ in DEPARTURE_METRICS:
            ours, base = mine.get(key), theirs.get(key)
            if ours is None or base is None:
                continue
            verdict = {"holds": "higher", "reversed": "lower", "tie": "tie"}[
                _verdict(ours - base, noise_margin(ours, base, users))]
            metrics[key] = {"ours": ours, "theirs": base, "relative": (ours - base) / base if base else None,
                            "verdict": verdict}
        found.append({"dataset": run.dataset, "run": run.setting, "against": run.against,
                      "steps": (mine["steps"], theirs["steps"]), "metrics": metrics})
    return found


def sweep_summary(rows: list[dict], experiment: str, dataset: str) -> list[str]:
    """A sweep's shape on `dataset` in words, beside the paper's: our best value by the test
    `SELECTION_METRIC`, the values within two standard errors of it (`noise_margin`), and whether the
    paper's best value is among them. Empty with fewer than two finished values."""
    key = "/".join(SELECTION_METRIC)
    points = {}
    for row in rows:
        if row["dataset"] == dataset and row["value"] is not None and row.get(key) is not None:
            points[row["value"]] = row[key]
    if len(points) < 2:
        return []
    label = SWEEPS[experiment].split()[-1]  # rho, N, d
    best = max(points, key=points.get)
    users = tested_users(dataset)
    level = sorted(value for value, ndcg in points.items()
                   if value != best and points[best] - ndcg < noise_margin(points[best], ndcg, users))
    text = f"Our best {label} by test {metric_label(SELECTION_METRIC)}: {best:g} ({points[best]:.4f})"
    text += (f"; within two standard errors of it: {', '.join(f'{v:g}' for v in level)}." if level
             else "; every other value is more than two standard errors below it." if users
             else ".")
    paper = paper_best_value(dataset, experiment)
    if paper is not None:
        if paper not in points:
            text += f" The paper's best, {paper:g}, has no finished run here."
        elif paper == best or paper in level:
            text += f" The paper's best, {paper:g}, is {'ours too' if paper == best else 'among them'}: its shape holds."
        else:
            text += (f" The paper's best, {paper:g}, is below ours ({points[paper]:.4f}, beyond two standard errors): "
                     "its shape does not hold at this budget.")
    if experiment in PAPER_SWEEP_SHAPES:
        text += f" The paper's figure: {PAPER_SWEEP_SHAPES[experiment]}."
    return [text]


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


def _speed_cell(measurements: list[dict] | None) -> str:
    from bert4rec_tf.experiments.calibration import FIGURES, speed_range

    spans = [speed_range(measurements, figure) for figure in FIGURES]
    if not all(spans):
        return "not measured"
    return ", ".join(f"{low:g}" if low == high else f"{low:g}-{high:g}" for low, high in spans)


def machine_notes(records: list[dict]) -> list[str]:
    """What the report says about its runs' machines (`bert4rec_tf.experiments.calibration`): the
    trained runs whose cores were more than 10% slower than the fastest run's on either figure, whose
    resumes ran on cores that differ by more, and which have no measurement. Empty when all were
    measured alike."""
    from bert4rec_tf.experiments.calibration import (
        FIGURES,
        TOLERANCE,
        describe,
        fastest,
        slower_than,
        speed_range,
    )

    trained = [record for record in records if record.get("model") != "pop"]
    # Per trained run, the (lowest, highest) of each figure over its starts (None: not measured).
    spans = {record["run"]: {figure: speed_range(record.get("speed"), figure) for figure in FIGURES}
             for record in trained}
    measured = [record for record in trained if all(spans[record["run"]].values())]
    reference = fastest([record["speed"] for record in measured])
    notes = []
    slower = [(record["run"], slower_than(record["speed"], reference)) for record in measured]
    slower = [(run, found) for run, found in slower if found]
    if slower:
        listed = "; ".join(f"{run} ({describe(found)})" for run, found in slower)
        notes.append(f"**Not equal compute:** these runs' cores were more than {TOLERANCE:.0%} slower than the "
                     f"fastest run's (its {reference['float32_gflops']:g} GFLOP/s, {reference['stream_gbs']:g} GB/s), "
                     f"so their budget bought less training: {listed}.")
    resumed = [record["run"] for record in measured
               if any(low < (1 - TOLERANCE) * high for low, high in spans[record["run"]].values())]
    if resumed:
        notes.append(f"Resumed on cores more than {TOLERANCE:.0%} apart in speed: {', '.join(resumed)}.")
    unmeasured = [record["run"] for record in trained if not all(spans[record["run"]].values())]
    if unmeasured and measured:
        notes.append(f"No speed measurement (recorded before records held one), so equal compute is not shown "
                     f"for: {', '.join(unmeasured)}.")
    elif unmeasured:
        notes.append("No run has a speed measurement (recorded before records held one), so equal compute "
                     "across machines is not shown.")
    return [f"{note}\n" for note in notes]


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}"


# reproduce.py's flags that take a value (`--flag value` or `--flag=value`); the others are switches.
_VALUE_FLAGS = ("--datasets", "--budget", "--train_steps", "--recipe", "--out", "--seed", "--eval_every",
                "--data_dir", "--source_file", "--extra", "--only", "--jobs", "--deadline", "--results_dir")
# Flags a report leaves out of the commands it lists: where the data cache was and when a command had
# to stop change no result.
_LOCAL_ONLY = ("--data_dir", "--deadline")


def _in_checkout(path: str, roots: list[str]) -> str | None:
    """`path` relative to the checkout it lies in (an absolute path under one of `roots`, or a relative
    path that does not leave the checkout), else None."""
    if os.path.isabs(path):
        for root in roots:
            relative = os.path.relpath(path, root)
            if relative != ".." and not relative.startswith(".." + os.sep):
                return relative.replace(os.sep, "/")
        return None
    relative = posixpath.normpath(path.replace(os.sep, "/"))
    return None if relative == ".." or relative.startswith("../") else relative


def portable_command(command: str, experiment: str, roots: tuple[str, ...] = ()) -> str:
    """A record's reproduce.py command as a report lists it: from the checkout's root, with no path of
    the machine that ran it and no clock time. Paths inside the checkout (the one of this package, one
    of `roots`, or the one an absolute `--results_dir .../docs/results` names) become relative to it;
    outside it, a `--source_file` is named by its file name, `--out` becomes `reports/<experiment>` and
    `--results_dir` `docs/results`; `--data_dir` and `--deadline` are left out."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    roots = [*roots, PACKAGE_PARENT]
    for index, word in enumerate(words):
        value = word.split("=", 1)[1] if word.startswith("--results_dir=") else (
            words[index + 1] if word == "--results_dir" and index + 1 < len(words) else None)
        if value and os.path.isabs(value) and posixpath.normpath(value).endswith("/docs/results"):
            roots.insert(0, posixpath.dirname(posixpath.dirname(posixpath.normpath(value))))
    kept, index = [], 0
    while index < len(words):
        word = words[index]
        flag, equals, value = word.partition("=")
        if not word.startswith("--") or flag not in _VALUE_FLAGS:
            kept.append(word)
            index += 1
            continue
        if not equals:
            value = words[index + 1] if index + 1 < len(words) else ""
            index += 1
        index += 1
        if flag in _LOCAL_ONLY:
            continue
        if flag == "--source_file":
            dataset, separator, path = value.rpartition("=")
            inside = _in_checkout(path, roots)
            value = f"{dataset}{separator}{inside if inside is not None else posixpath.basename(path)}"
        elif flag in ("--out", "--results_dir"):
            inside = _in_checkout(value, roots)
            value = inside if inside is not None else (f"reports/{experiment}" if flag == "--out" else "docs/results")
        kept += [flag, value]
    return shlex.join(kept)


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
        cells.setdefault(row["setting"], {})[row["published_metric"]] = (
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
                 figures: list[str], notes: str | None = None) -> list[dict]:
    """Writes `<folder>/<name>.csv` (every column) and `<name>.md` from the `records` of the finished
    `runs`; returns the rows.

    The report opens with its answer, per data set: a sweep's shape, the runs beside the published
    numbers and where the papers' orders of two runs hold, then every run's metrics; then the
    figures, the discussion (`notes`, quoted from `<experiment>/notes.md` when given) and, last,
    where each run comes from (commit, date, machine, cores, settings and the commands, as
    `portable_command` writes them)."""
    rows = report_rows(records)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(os.path.join(folder, f"{name}.csv"), buffer.getvalue())

    finished = {record["run"] for record in records}
    lines = [f"# Reproduction report: {experiment}", "",
             f"{len(finished)} of {len(runs)} runs finished. Test metrics of {weights_tested(records)}, "
             "beside the published numbers where a paper has them; then the figures, the discussion and, last, "
             "where each run comes from (its commit, machine, cores, date, settings and command). Written by "
             "`bert4rec-reproduce` from the records of the finished runs.", ""]
    missing = [run.name for run in runs if run.name not in finished]
    if missing:
        lines += [f"Not finished yet: {', '.join(missing)}. Re-run the command to continue.", ""]
    for dataset in dict.fromkeys(run.dataset for run in runs):
        lines += [f"## {dataset}", ""]
        summary = sweep_summary(rows, experiment, dataset) if experiment in SWEEPS else []
        if summary:
            lines += [*summary, ""]
        compared = [row for row in rows if row["dataset"] == dataset and row["published"] is not None]
        if compared:
            lines += ["Beside the published numbers, one table per source, under the protocol that paper used; each "
                      "cell is ours / published (our relative difference):", ""]
            for source in dict.fromkeys(row["source"] for row in compared):
                lines += _published_table([row for row in compared if row["source"] == source])
        pairs = [pair for pair in orderings(rows) if pair["dataset"] == dataset]
        if pairs:
            users = tested_users(dataset)
            noise = (f"; a tie when ours differ by less than two standard errors over the {users:,} test users "
                     "(the last column)") if users else ""
            lines += [f"Where the published order of two runs holds (each pair as one paper ranked it{noise}):", "",
                      "| runs | protocol | metric | published | ours | order | 2 SE |", "|---|---|---|---|---|---|---|"]
            for pair in pairs:
                protocol = PROTOCOL_LABELS[pair["protocol"]]
                order = {True: "holds", False: "reversed", None: "tie"}[pair["holds"]]
                lines.append(f"| {pair['first']} vs {pair['second']} | {protocol} | {pair['metric']} | "
                             f"{pair['published'][0]:.4f} vs {pair['published'][1]:.4f} | "
                             f"{pair['ours'][0]:.4f} vs {pair['ours'][1]:.4f} | {order} | "
                             f"{pair['margin']:.4f} |")
            lines.append("")
        departed = [entry for entry in departures(rows, runs) if entry["dataset"] == dataset]
        if departed:
            lines += ["Each run beside the run it departs from (ours vs theirs, the relative difference, and whether "
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
            lines.append("")
        claims = [entry for entry in table2_orderings(rows) if entry["dataset"] == dataset]
        if claims:
            lines += ["The paper's orderings of Table 2 (pop-100), each judged on its weakest link: the lowest "
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
            lines.append("")
        lines += ["Every run in the three protocols (minutes are training and validation time, samples/s the "
                  "training instances over it):", "",
                  "| run | steps | minutes | samples/s | pop-100 HR@10 / NDCG@10 / MRR "
                  "| uniform-100 HR@10 / NDCG@10 / MRR | full Recall@10 / NDCG@10 / MRR |",
                  "|---|---|---|---|---|---|---|"]
        seen = set()
        for row in rows:
            if row["dataset"] != dataset or row["run"] in seen:
                continue
            seen.add(row["run"])
            triple = {p: " / ".join(_cell(row[f"{p}/{m}"]) for m in metrics)
                      for p, metrics in (("pop", ("HR@10", "NDCG@10", "MRR")), ("uniform", ("HR@10", "NDCG@10", "MRR")),
                                         ("full", ("Recall@10", "NDCG@10", "MRR")))}
            speed = "" if row["samples_per_second"] is None else f"{row['samples_per_second']:.1f}"
            flag = " (not above POP)" if row["above_pop"] is False else ""
            flag += " (sampled softmax: not the paper's loss)" if row["sampled_softmax"] else ""
            flag += f" (tested on {row['evaluated_users']} users)" if row["evaluated_users"] else ""
            lines.append(f"| {row['setting']}{flag} | {row['steps']} | {_minutes(row['seconds'])} | {speed} | "
                         f"{triple['pop']} | {triple['uniform']} | {triple['full']} |")
        if any(row["dataset"] == dataset and row["above_pop"] is False for row in rows):
            lines += ["", f"Not above POP: the run's best validation {metric_label(SELECTION_METRIC)} was not above "
                      f"{POP_MARGIN:g} times POP's on the same users: it learned little beyond popularity (too short "
                      "a run, or a collapse)."]
        lines.append("")
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
        lines += ["## Where each run comes from", "", *machine_notes(records),
                  "| run | commit | date | machine | float32 GFLOP/s, stream GB/s | train.py settings |",
                  "|---|---|---|---|---|---|"]
        for record in records:
            origin = f" (the record of {record['same_as']})" if record.get("same_as") else ""
            lines.append(f"| {record['run']}{origin} | {record.get('commit', '')} | {record.get('date', '')} | "
                         f"{record.get('machine', '')} | {_speed_cell(record.get('speed'))} | "
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
    write_text_atomic(os.path.join(folder, f"{name}.md"), "\n".join(lines))
    return rows
