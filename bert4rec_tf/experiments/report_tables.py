"""The report's tables in Markdown: the published comparisons, the papers' orderings and departures,
Table 2's claims, every run's metrics, the test by slices, and the tuned runs' studies. Each takes the
report's rows or the runs' records (`bert4rec_tf.experiments.report`) and returns its lines."""

from __future__ import annotations

import math

from bert4rec_tf.constants import POP_MARGIN, PROTOCOL_LABELS, SELECTION_METRIC, metric_label
from bert4rec_tf.experiments.verdicts import DEPARTURE_METRICS, tested_users


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}"


def published_table(rows: list[dict]) -> list[str]:
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


# The slices' metrics in the report: (protocol, metric) and how each is shown.
# Below this many users a slice's normal-approximation error bar means nothing (at m = 0 it is 0).
_SLICE_MIN_USERS = 30
_SLICE_METRICS = (("pop", "HR@10", "pop-100 HR@10"), ("pop", "NDCG@10", "pop-100 NDCG@10"),
                  ("full", "Recall@10", "full Recall@10"))


def slices_table(records: list[dict]) -> list[str]:
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


def tuning_table(records: list[dict]) -> list[str]:
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


def orderings_table(pairs: list[dict], dataset: str) -> list[str]:
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


def departures_table(departed: list[dict]) -> list[str]:
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


def table2_table(claims: list[dict], rows: str = "") -> list[str]:
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


def runs_table(rows: list[dict]) -> list[str]:
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
