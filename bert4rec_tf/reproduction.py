"""The papers' experiments as plans of ordinary training runs, and their report beside the published numbers.

An experiment (`EXPERIMENTS`) is a list of `Run`s: a data set, a model (`--model`) and flags for
`run_scripts/train.py`. Each run is an ordinary model directory `<out>/runs/<name>`, so evaluate.py
and TensorBoard read it, and re-running train.py in it resumes it. `report_rows` reads the finished
runs; `write_report` writes `report.csv` and `report.md` with the published number each run is
compared with (the protocol that paper used: pop-100 for BERT4Rec, uniform-100 for the matching
paper) and the relative difference. The figures are in `bert4rec_tf.report_figures` (matplotlib,
the `report` extra).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import os

from bert4rec_tf.config import PRESETS, preset
from bert4rec_tf.files import read_json, write_text_atomic

# Published numbers (../shared/SPEC.md). Keys: (dataset, setting) -> (protocol, {metric: value}, source).
_BERT4REC = "BERT4Rec paper, Table 2 (pop-100)"
_ABLATION = "BERT4Rec paper, Table 5 (pop-100, d 64)"
_LENGTH = "BERT4Rec paper, Table 4 (pop-100)"
_MATCH = "Zhang & Li, Table 3 (uniform-100)"
_MATCH_ABLATION = "Zhang & Li, ablation (uniform-100, MRR)"
PUBLISHED: dict[tuple[str, str], tuple[str, dict[str, float], str]] = {
    ("ml-1m", "pop"): ("uniform", {"NDCG@10": 0.2455, "HR@10": 0.4458, "MRR": 0.2070}, _MATCH),
    ("ml-1m", "sasrec-bce"): ("pop", {"HR@10": 0.6629, "NDCG@10": 0.4368}, _BERT4REC),
    ("ml-1m", "bert4rec"): ("pop", {"HR@1": 0.2863, "HR@5": 0.5876, "HR@10": 0.6970, "NDCG@5": 0.4454,
                                    "NDCG@10": 0.4818, "MRR": 0.4254}, _BERT4REC),
    ("ml-1m", "bert4rec-1mask"): ("pop", {"HR@10": 0.6869, "NDCG@10": 0.4696, "MRR": 0.4127},
                                  "BERT4Rec paper, Table 3 (pop-100, d 256)"),
    ("ml-1m", "bert4rec-match"): ("uniform", {"NDCG@10": 0.5669, "HR@10": 0.7896, "MRR": 0.4973}, _MATCH),
    ("beauty", "sasrec-bce"): ("pop", {"HR@10": 0.2653, "NDCG@10": 0.1633}, _BERT4REC),
    ("beauty", "bert4rec"): ("pop", {"HR@1": 0.0953, "HR@5": 0.2207, "HR@10": 0.3025, "NDCG@5": 0.1599,
                                     "NDCG@10": 0.1862, "MRR": 0.1701}, _BERT4REC),
    ("beauty", "bert4rec-1mask"): ("pop", {"HR@10": 0.2940, "NDCG@10": 0.1769, "MRR": 0.1618},
                                   "BERT4Rec paper, Table 3 (pop-100, d 256)"),
}
_TABLE5 = {  # NDCG@10, Beauty / ML-1m
    "default": (0.1832, 0.4759), "no-pe": (0.1741, 0.2155), "no-ffn": (0.1803, 0.4544),
    "no-ln": (0.1642, 0.4334), "no-residual": (0.1619, 0.4643), "no-dropout": (0.1658, 0.4553),
    "layers-1": (0.1782, 0.4412), "layers-3": (0.1859, 0.4864), "layers-4": (0.1834, 0.4898),
    "heads-1": (0.1853, 0.4568), "heads-4": (0.1830, 0.4770), "heads-8": (0.1823, 0.4743),
}
for _name, (_beauty, _ml1m) in _TABLE5.items():
    PUBLISHED[("beauty", f"ablation-{_name}")] = ("pop", {"NDCG@10": _beauty}, _ABLATION)
    PUBLISHED[("ml-1m", f"ablation-{_name}")] = ("pop", {"NDCG@10": _ml1m}, _ABLATION)
PUBLISHED[("ml-1m", "ablation-only-mask")] = ("uniform", {"MRR": 0.4517}, _MATCH_ABLATION)
PUBLISHED[("ml-1m", "ablation-only-matching")] = ("uniform", {"MRR": 0.2284}, _MATCH_ABLATION)
_TABLE4 = {
    "beauty": {10: (0.3006, 0.1826), 20: (0.3061, 0.1875), 30: (0.3057, 0.1837), 40: (0.3054, 0.1833),
               50: (0.3047, 0.1832)},
    "ml-1m": {10: (0.6788, 0.4631), 50: (0.6854, 0.4743), 100: (0.6947, 0.4758), 200: (0.6955, 0.4759),
              400: (0.6898, 0.4715)},
}
for _dataset, _lengths in _TABLE4.items():
    for _n, (_hr, _ndcg) in _lengths.items():
        PUBLISHED[(_dataset, f"max-len-{_n}")] = ("pop", {"HR@10": _hr, "NDCG@10": _ndcg}, _LENGTH)
# The paper's training speed on a GTX 1080 Ti (samples/s), Table 4.
PAPER_SAMPLES_PER_SECOND = {("beauty", 10): 5504, ("beauty", 20): 3256, ("beauty", 30): 2284, ("beauty", 40): 1776,
                            ("beauty", 50): 1441, ("ml-1m", 10): 14255, ("ml-1m", 50): 8890, ("ml-1m", 100): 5711,
                            ("ml-1m", 200): 2918, ("ml-1m", 400): 1213}

PROTOCOL_METRICS = {"pop": ("HR@1", "HR@5", "HR@10", "NDCG@5", "NDCG@10", "MRR"),
                    "uniform": ("HR@10", "NDCG@10", "MRR"),
                    "full": ("Recall@10", "Recall@20", "NDCG@10", "NDCG@20", "MRR")}


@dataclasses.dataclass(frozen=True)
class Run:
    """One training run of an experiment.

    `setting` names it within the data set (the key of `PUBLISHED`); `flags` are train.py flags
    beside --dataset, --model and the budget; `value` is the swept value (sweeps only).
    """

    dataset: str
    setting: str
    model: str
    flags: tuple[str, ...] = ()
    value: float | None = None

    @property
    def name(self) -> str:
        return f"{self.dataset}-{self.setting}"


def _config(*pairs: str) -> tuple[str, ...]:
    return tuple(item for pair in pairs for item in ("--config", pair))


def _table2(dataset: str) -> list[Run]:
    return [Run(dataset, "pop", "pop"),
            Run(dataset, "sasrec-bce", "sasrec", ("--loss", "bce")),
            Run(dataset, "sasrec-ce", "sasrec", ("--loss", "ce")),
            Run(dataset, "bert4rec-1mask", "bert4rec_1mask"),
            Run(dataset, "bert4rec", "bert4rec"),
            Run(dataset, "bert4rec-match", "bert4rec_match")]


def _ablation(dataset: str) -> list[Run]:
    runs = [Run(dataset, "ablation-default", "bert4rec"),
            Run(dataset, "ablation-no-pe", "bert4rec", _config("use_position_embedding=false")),
            Run(dataset, "ablation-no-ffn", "bert4rec", _config("use_ffn=false")),
            Run(dataset, "ablation-no-ln", "bert4rec", _config("use_layer_norm=false")),
            Run(dataset, "ablation-no-residual", "bert4rec", _config("use_residual=false")),
            Run(dataset, "ablation-no-dropout", "bert4rec", _config("hidden_dropout=0", "attention_dropout=0"))]
    runs += [Run(dataset, f"ablation-layers-{n}", "bert4rec", _config(f"num_layers={n}"), n) for n in (1, 3, 4)]
    runs += [Run(dataset, f"ablation-heads-{h}", "bert4rec", _config(f"num_heads={h}"), h) for h in (1, 4, 8)]
    # The matching paper's ablation: its BERT4Rec (d 32) with only the mask task, and only the matching task.
    runs += [Run(dataset, "ablation-only-mask", "bert4rec",
                 ("--hidden_size", "32") + _config("intermediate_size=128", "mask_runs=true")),
             Run(dataset, "ablation-only-matching", "bert4rec_match", _config("match_only_prob=1.0"))]
    return runs


def _mask_prob(dataset: str) -> list[Run]:
    runs = []
    for rho in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        runs.append(Run(dataset, f"mask-prob-{rho:.1f}", "bert4rec",
                        _config(f"masked_lm_prob={rho}", f"max_predictions_per_seq={_slots(dataset, rho)}"), rho))
    return runs


def _slots(dataset: str, rho: float, max_len: int | None = None) -> int:
    return max(1, math.ceil(rho * (max_len or preset(dataset).data.max_len)))


def _max_len(dataset: str) -> list[Run]:
    lengths = sorted(_TABLE4[dataset]) if dataset in _TABLE4 else [10, 20, 50, 100, 200]
    rho = preset(dataset).data.masked_lm_prob
    return [Run(dataset, f"max-len-{n}", "bert4rec",
                ("--max_len", str(n)) + _config(f"max_predictions_per_seq={_slots(dataset, rho, n)}"), n)
            for n in lengths]


def _hidden_size(dataset: str) -> list[Run]:
    return [Run(dataset, f"hidden-size-{d}", "bert4rec",
                ("--hidden_size", str(d)) + _config(f"intermediate_size={4 * d}"), d)
            for d in (16, 32, 64, 128, 256)]


EXPERIMENTS = {"table2": _table2, "ablation": _ablation, "mask_prob": _mask_prob, "max_len": _max_len,
               "hidden_size": _hidden_size}
SWEEPS = {"mask_prob": "mask proportion rho", "max_len": "maximum length N", "hidden_size": "hidden size d"}


def plan(experiment: str, datasets: list[str]) -> list[Run]:
    """The runs of `experiment` on `datasets`, in the order they are trained.

    Raises:
        ValueError: for an unknown experiment or data set.
    """
    if experiment not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {experiment!r}; known: {', '.join(EXPERIMENTS)}")
    unknown = [d for d in datasets if d not in PRESETS]
    if unknown:
        raise ValueError(f"unknown dataset(s) {', '.join(unknown)}; known: {', '.join(sorted(PRESETS))}")
    return [run for dataset in datasets for run in EXPERIMENTS[experiment](dataset)]


def run_status(model_dir: str) -> str:
    """"finished" (results.json written), "started" (a checkpoint to resume from) or "new"."""
    if os.path.isfile(os.path.join(model_dir, "results.json")):
        return "finished"
    if os.path.isfile(os.path.join(model_dir, "checkpoints", "state.json")):
        return "started"
    return "new"


COLUMNS = (["run", "dataset", "setting", "model", "value", "steps", "seconds", "samples_per_second"]
           + [f"{protocol}/{metric}" for protocol, metrics in PROTOCOL_METRICS.items() for metric in metrics]
           + ["published_protocol", "published_metric", "published", "ours", "relative_difference", "source"])


def report_rows(out: str, runs: list[Run]) -> list[dict]:
    """One row per published metric of each finished run (one row when nothing is published).

    `relative_difference` is (ours - published) / published for the metric under the protocol the
    paper used. `seconds` is the run's training and validation time; `samples_per_second` the
    training instances over that time.
    """
    rows = []
    for run in runs:
        model_dir = os.path.join(out, "runs", run.name)
        if run_status(model_dir) != "finished":
            continue
        results = read_json(os.path.join(model_dir, "results.json"), "run results")
        state_path = os.path.join(model_dir, "checkpoints", "state.json")
        state = read_json(state_path, "resume state") if os.path.isfile(state_path) else {}
        seconds = state.get("seconds") or 0.0
        base = {"run": run.name, "dataset": run.dataset, "setting": run.setting, "model": run.model,
                "value": run.value, "steps": results.get("steps", 0), "seconds": round(seconds, 1),
                "samples_per_second": round(state.get("instances", 0) / seconds, 1) if seconds else None}
        for protocol, metrics in PROTOCOL_METRICS.items():
            for metric in metrics:
                base[f"{protocol}/{metric}"] = results["test"].get(protocol, {}).get(metric)
        published = PUBLISHED.get((run.dataset, run.setting))
        if published is None:
            rows.append({**base, "published_protocol": None, "published_metric": None, "published": None,
                         "ours": None, "relative_difference": None, "source": None})
            continue
        protocol, values, source = published
        for metric, value in values.items():
            ours = results["test"].get(protocol, {}).get(metric)
            rows.append({**base, "published_protocol": protocol, "published_metric": metric, "published": value,
                         "ours": ours, "relative_difference": None if ours is None else (ours - value) / value,
                         "source": source})
    return rows


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def write_report(out: str, experiment: str, runs: list[Run], command: str, figures: list[str]) -> list[dict]:
    """Writes `report.csv` (every column) and `report.md` (the tables and the figures) in `out`."""
    rows = report_rows(out, runs)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(os.path.join(out, "report.csv"), buffer.getvalue())

    finished = {row["run"] for row in rows}
    lines = [f"# Reproduction report: {experiment}", "", f"Command: `{command}`", "",
             f"{len(finished)} of {len(runs)} runs finished. Test metrics of each run's best validation "
             "checkpoint; `seconds` is training and validation time, `samples/s` training instances over it.", ""]
    for dataset in dict.fromkeys(run.dataset for run in runs):
        lines += [f"## {dataset}", "",
                  "| run | steps | seconds | samples/s | pop-100 HR@10 / NDCG@10 / MRR "
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
            lines.append(f"| {row['setting']} | {row['steps']} | {row['seconds']:.0f} | {speed} | "
                         f"{triple['pop']} | {triple['uniform']} | {triple['full']} |")
        compared = [row for row in rows if row["dataset"] == dataset and row["published"] is not None]
        if compared:
            lines += ["", "Beside the published numbers (the protocol each paper used):", "",
                      "| run | protocol | metric | published | ours | relative difference | source |",
                      "|---|---|---|---|---|---|---|"]
            for row in compared:
                difference = "" if row["relative_difference"] is None else f"{row['relative_difference']:+.1%}"
                lines.append(f"| {row['setting']} | {row['published_protocol']}-100 | {row['published_metric']} | "
                             f"{row['published']:.4f} | {_cell(row['ours'])} | {difference} | {row['source']} |")
        lines.append("")
    missing = [run.name for run in runs if run.name not in finished]
    if missing:
        lines += [f"Not finished yet: {', '.join(missing)}. Re-run the command to continue.", ""]
    for figure in figures:
        lines += [f"![{os.path.basename(figure)}]({os.path.relpath(figure, out)})", ""]
    write_text_atomic(os.path.join(out, "report.md"), "\n".join(lines))
    return rows
