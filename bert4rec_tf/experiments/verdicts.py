"""Where the papers' orders and sweep shapes hold in our runs, judged against two standard errors.

Each function reads the report's rows (`bert4rec_tf.experiments.report.report_rows`): `orderings`
pairs runs one paper ranks against each other, `table2_orderings` judges the BERT4Rec paper's claims
about its Table 2, `departures` sets a run beside the run it departs from, and `sweep_summary` says
a sweep's shape in words. A gap counts only beyond `noise_margin`.
"""

from __future__ import annotations

import math

from bert4rec_tf.constants import SELECTION_METRIC, metric_label
from bert4rec_tf.experiments.plans import SWEEPS, Run
from bert4rec_tf.experiments.published import (PAPER_SWEEP_SHAPES, TABLE2, TABLE2_METRICS, TABLE2_ORDERINGS,
                                                TABLE2_SETTINGS, TABLE2_SOURCE, TUNED_SUFFIX, paper_best_value)

_ORDER_METRICS = ("HR@10", "Recall@10", "NDCG@10")


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


def fewest_tested(*rows: dict) -> int | None:
    """The fewest users any of `rows` was tested on (None when none says): the margin of their
    difference is taken over the smaller sample."""
    counts = [row["tested_users"] for row in rows if row.get("tested_users")]
    return min(counts) if counts else None


def orderings(rows: list[dict]) -> list[dict]:
    """Pairs of runs of one data set that a paper ranks against each other (both published under the
    same protocol, metric and source), with whether our runs keep the published order.

    Ablation runs pair with the default only (the paper's question is each change against it); other
    runs pair with every other, a tuned row (`TUNED_SUFFIX`) with the tuned rows only. Only HR@10,
    Recall@10 and NDCG@10 are compared. `holds` is None when either side ties: the published numbers
    are equal, or ours differ by less than `noise_margin` (two standard errors over the users both
    runs were tested on, `fewest_tested`), e.g. 0.6856 against 0.6866 on ML-1m's 6,040 users. Table 2's
    numbers pair through `table2_orderings` instead.
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
            # A tuned row pairs with tuned rows only: it carries its untuned row's published number, so the
            # paper orders neither it against that row nor it against the other untuned rows.
            candidates = [(a, b) for i, a in enumerate(settings) for b in settings[i + 1:]
                          if a.endswith(TUNED_SUFFIX) == b.endswith(TUNED_SUFFIX)]
        for a, b in candidates:
            first, second = by_setting[a], by_setting[b]
            published = first["published"] - second["published"]
            ours = first["ours"] - second["ours"]
            margin = noise_margin(first["ours"], second["ours"], fewest_tested(first, second))
            holds = None if published == 0 or abs(ours) <= margin else (published > 0) == (ours > 0)
            pairs.append({"dataset": dataset, "first": a, "second": b, "protocol": protocol, "metric": metric,
                          "source": source, "published": (first["published"], second["published"]),
                          "ours": (first["ours"], second["ours"]), "margin": margin, "holds": holds})
    return pairs


def gap_verdict(gap: float, margin: float) -> str:
    return "holds" if gap > margin else "reversed" if gap < -margin else "tie"


def table2_orderings(rows: list[dict], suffix: str = "") -> list[dict]:
    """The BERT4Rec paper's orderings of Table 2 (`TABLE2_ORDERINGS`) on each data set and metric
    (pop-100 HR@10 and NDCG@10), in the paper's numbers and in ours.

    An ordering "A above B" is judged on its weakest link: the lowest of A against the highest of B,
    in the paper's numbers (all its methods) and, separately, in ours (the methods with a finished
    run; `missing` names the others), so the two links may be different methods. It holds when that
    gap is above two standard errors (`noise_margin` over the users both runs were tested on; the
    paper's over the data set's test users), is reversed when below minus that, and is a tie
    otherwise. Example: on Beauty the paper has GRU4Rec+ 0.2654 and SASRec 0.2653 HR@10, so "SASRec
    above GRU4Rec+ and Caser" is a tie in the paper's own numbers. With `suffix` ("-tuned"), ours are
    the runs of the settings `<setting><suffix>` (the tuned rows), POP's its own row.
    """
    methods = {setting + (suffix if method != "POP" else ""): method for method, setting in TABLE2_SETTINGS.items()}
    ours: dict[tuple[str, str, str], float] = {}  # (dataset, method, metric) -> ours
    tested: dict[tuple[str, str], int | None] = {}  # (dataset, method) -> the users its test averages
    for row in rows:
        if row["source"] == TABLE2_SOURCE and row["ours"] is not None and row["setting"] in methods:
            ours[(row["dataset"], methods[row["setting"]], row["published_metric"])] = row["ours"]
            tested[(row["dataset"], methods[row["setting"]])] = fewest_tested(row)
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
                                   "verdict": gap_verdict(low - high, margin)}
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
        users = fewest_tested(mine, theirs)
        metrics = {}
        for key, _ in DEPARTURE_METRICS:
            ours, base = mine.get(key), theirs.get(key)
            if ours is None or base is None:
                continue
            verdict = {"holds": "higher", "reversed": "lower", "tie": "tie"}[
                gap_verdict(ours - base, noise_margin(ours, base, users))]
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
