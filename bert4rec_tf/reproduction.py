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
import posixpath
import re

from bert4rec_tf.config import PRESETS, preset
from bert4rec_tf.constants import POP_MARGIN, PROTOCOL_LABELS, SELECTION_METRIC, metric_label
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
# Full-ranking numbers of later work (SPEC.md; history excluded; Recall@10 is HR@10 with one target):
# the original BERT4Rec code at its 400k steps, and SASRec with full cross-entropy (on Beauty the low
# end of the range reported).
_FULL = "later work, full ranking (SPEC.md)"
PUBLISHED_FULL: dict[tuple[str, str], tuple[str, dict[str, float], str]] = {
    ("ml-1m", "bert4rec"): ("full", {"Recall@10": 0.1518, "NDCG@10": 0.0806}, _FULL),
    ("ml-1m", "sasrec-ce"): ("full", {"Recall@10": 0.3152, "NDCG@10": 0.1821}, _FULL),
    ("beauty", "bert4rec"): ("full", {"Recall@10": 0.0338, "NDCG@10": 0.0187}, _FULL),
    ("beauty", "sasrec-ce"): ("full", {"Recall@10": 0.0533, "NDCG@10": 0.0327}, _FULL),
}
_TABLE4 = {
    "beauty": {10: (0.3006, 0.1826), 20: (0.3061, 0.1875), 30: (0.3057, 0.1837), 40: (0.3054, 0.1833),
               50: (0.3047, 0.1832)},
    "ml-1m": {10: (0.6788, 0.4631), 50: (0.6854, 0.4743), 100: (0.6947, 0.4758), 200: (0.6955, 0.4759),
              400: (0.6898, 0.4715)},
}
for _dataset, _lengths in _TABLE4.items():
    for _n, (_hr, _ndcg) in _lengths.items():
        PUBLISHED[(_dataset, f"max-len-{_n}")] = ("pop", {"HR@10": _hr, "NDCG@10": _ndcg}, _LENGTH)
# The mask proportion rho that the BERT4Rec paper found best (Figure 4; a figure without a table).
PAPER_BEST_MASK_PROB = {"ml-1m": 0.2, "ml-20m": 0.2, "beauty": 0.6, "steam": 0.4}
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
    beside --dataset, --model and the budget; `value` is the swept value (sweeps only). Two settings
    depend on what the command's recipe and flags resolve to (`derived_flags`): `mask_prob` sizes the
    masked slots from the resolved maximum length N, and `max_learning_rate` caps the resolved rate.
    """

    dataset: str
    setting: str
    model: str
    flags: tuple[str, ...] = ()
    value: float | None = None
    mask_prob: float | None = None
    max_learning_rate: float | None = None

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


# The learning-rate cap of the runs that stay at one output (or the popularity ranking) at the CPU
# recipes' 3e-3 and learn at 1e-3: the ablation's no-residual row and the d sweep's 256. The
# paper's 1e-4 is below it, so `--recipe paper` trains them as the paper did.
_CAPPED_LEARNING_RATE = 1e-3


def _ablation(dataset: str) -> list[Run]:
    runs = [Run(dataset, "ablation-default", "bert4rec"),
            Run(dataset, "ablation-no-pe", "bert4rec", _config("use_position_embedding=false")),
            Run(dataset, "ablation-no-ffn", "bert4rec", _config("use_ffn=false")),
            Run(dataset, "ablation-no-ln", "bert4rec", _config("use_layer_norm=false")),
            # Without residual paths the network collapses to one output for every user at the CPU
            # recipes' 3e-3 (docs/results/ablation/notes.md).
            Run(dataset, "ablation-no-residual", "bert4rec", _config("use_residual=false"),
                max_learning_rate=_CAPPED_LEARNING_RATE),
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
        runs.append(Run(dataset, f"mask-prob-{rho:.1f}", "bert4rec", _config(f"masked_lm_prob={rho}"), rho,
                        mask_prob=rho))
    return runs


def _slots(rho: float, max_len: int) -> int:
    """Masked slots for a mask proportion `rho` of `max_len` positions (as the preset's 40 of 200)."""
    return max(1, math.ceil(round(rho * max_len, 6)))


def derived_flags(run: Run, settings: list[str], extra: list[str] = ()) -> list[str]:
    """The train.py flags of `run` that depend on what its other `settings` (`run_settings`: the
    recipe, the run's flags) and `extra` (--extra's flags; left out when `resolved_settings` cannot
    read them, e.g. --debug) resolve to: for `mask_prob`, the masked slots sized from the
    resolved maximum length (N 100 under cpu-30m on ML-1m: 20 slots at rho 0.2, not the preset N 200's
    40); for `max_learning_rate`, that rate when the resolved rate is above it (the recipe's 3e-3 on
    a CPU; the paper's 1e-4 stays). They go before --extra, which still overrides them.

    Raises:
        ValueError: when the settings cannot be resolved.
    """
    if run.mask_prob is None and run.max_learning_rate is None:
        return []
    resolved = resolved_settings([*settings, *extra]) or resolved_settings(settings)
    if resolved is None:
        raise ValueError(f"run {run.name}: cannot resolve its train.py settings {' '.join(settings)}")
    config, flags = resolved["config"], []
    if run.mask_prob is not None:
        flags += ["--config", f"max_predictions_per_seq={_slots(run.mask_prob, config['data']['max_len'])}"]
    if run.max_learning_rate is not None and config["train"]["learning_rate"] > run.max_learning_rate:
        flags += ["--learning_rate", f"{run.max_learning_rate:g}"]
    return flags


def _max_len(dataset: str) -> list[Run]:
    lengths = sorted(_TABLE4[dataset]) if dataset in _TABLE4 else [10, 20, 50, 100, 200]
    rho = preset(dataset).data.masked_lm_prob
    return [Run(dataset, f"max-len-{n}", "bert4rec",
                ("--max_len", str(n)) + _config(f"max_predictions_per_seq={_slots(rho, n)}"), n)
            for n in lengths]


def _hidden_size(dataset: str) -> list[Run]:
    # At d 256 the network stays at the popularity ranking at the CPU recipes' 3e-3 (loss flat at the
    # items' frequency entropy for 841 steps: docs/results/hidden_size/notes.md); d 128 and below learn.
    return [Run(dataset, f"hidden-size-{d}", "bert4rec",
                ("--hidden_size", str(d)) + _config(f"intermediate_size={4 * d}"), d,
                max_learning_rate=_CAPPED_LEARNING_RATE if d >= 256 else None)
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


# A finished run's record: what the report needs, small enough to commit (no data, no weights), so
# that an experiment's report grows across sessions and machines (`--results_dir docs/results`).
RECORD_VERSION = 1
# train.py flags whose values are local paths: not part of what a run's settings are.
_PATH_FLAGS = ("--model_dir", "--data_dir", "--source_file")


def run_settings(train_flags: list[str]) -> list[str]:
    """The train.py flags of a run without the local paths: two runs with equal settings on the same
    data are the same experiment (the data is bound by the record's `data`)."""
    settings, skip = [], False
    for flag in train_flags:
        if skip:
            skip = False
        elif flag in _PATH_FLAGS:
            skip = True
        else:
            settings.append(flag)
    return settings


def record_path(results_dir: str, experiment: str, run: Run) -> str:
    return os.path.join(results_dir, experiment, f"{run.name}.json")


def make_record(model_dir: str, run: Run, experiment: str, settings: list[str], provenance: dict) -> dict:
    """The record of the finished run in `model_dir` (see `RECORD_VERSION`). `provenance`: the
    commit, the machine, the reproduce.py command and the date (`provenance()`)."""
    results = read_json(os.path.join(model_dir, "results.json"), "run results")
    state_path = os.path.join(model_dir, "checkpoints", "state.json")
    state = read_json(state_path, "resume state") if os.path.isfile(state_path) else {}
    curve_path = os.path.join(model_dir, "validation.json")
    curve = read_json(curve_path, "validation curve") if os.path.isfile(curve_path) else []
    data_path = os.path.join(model_dir, "run.json")
    data = read_json(data_path, "run's data record") if os.path.isfile(data_path) else {}
    return {"version": RECORD_VERSION, "experiment": experiment, "run": run.name, "dataset": run.dataset,
            "setting": run.setting, "model": run.model, "value": run.value, "settings": settings,
            **provenance, "steps": results.get("steps", 0), "seconds": state.get("seconds") or 0.0,
            "instances": state.get("instances", 0), "test": results["test"], "curve": curve,
            "data": {key: data[key] for key in ("source", "data_key") if key in data},
            **{key: results[key] for key in ("above_pop", "pop_validation") if key in results}}


def read_record(results_dir: str, experiment: str, run: Run, settings: list[str]) -> dict | None:
    """The stored record of `run` if it was made with these `settings`, else another experiment's
    record of the same settings (`shared_record`), else None: a record of other settings does not count."""
    path = record_path(results_dir, experiment, run)
    if os.path.isfile(path):
        record = read_json(path, "run record")
        if record.get("version") == RECORD_VERSION and record.get("settings") == settings:
            return record
    return shared_record(results_dir, experiment, run, settings)


# train.py flags outside the configuration that still decide how a run trains or which checkpoint it keeps.
_RUN_FLAGS = ("--dataset", "--model", "--recipe", "--seed", "--eval_every", "--patience", "--strategy",
              "--logical_cpus")


def resolved_settings(settings: list[str]) -> dict | None:
    """What a run's train.py `settings` (`run_settings`) amount to: the configuration train.py builds
    from them (the preset, the recipe, then the overrides) and the flags outside it. Runs whose
    settings resolve alike train alike however their flags are written: in the sweeps, N 100 on ML-1m
    with its 20 slots and d 64 with its FFN of 256 are both the recipe's own BERT4Rec. None when the
    settings hold a flag this does not know or cannot be resolved (then only equal flags match)."""
    from bert4rec_tf import cli

    if len(settings) % 2:
        return None
    flags, overrides = {}, []
    for flag, value in zip(settings[0::2], settings[1::2]):
        if flag == "--config":
            overrides.append(value)
        elif flag[2:] in cli.OVERRIDE_FLAGS:
            overrides.append(f"{flag[2:]}={value}")
        elif flag == "--time_budget":
            try:
                overrides.append(f"time_budget={cli.parse_duration(value)}")
            except ValueError:
                return None
        elif flag in _RUN_FLAGS and flag not in flags:
            flags[flag] = value
        else:
            return None
    if "--dataset" not in flags:
        return None
    seed = flags.get("--seed")
    try:
        config = cli.experiment_config(flags["--dataset"], overrides, int(seed) if seed is not None else None,
                                       flags.get("--model", "bert4rec"), flags.get("--recipe"))
    except (ValueError, KeyError, TypeError):
        return None
    flags.pop("--seed", None)
    flags.pop("--recipe", None)  # both are in the configuration (data.seed, train.recipe)
    return {"config": config.to_dict(), "flags": flags}


def shared_record(results_dir: str, experiment: str, run: Run, settings: list[str]) -> dict | None:
    """A record of another experiment whose train.py settings resolve to these `settings`
    (`resolved_settings`; the ablation's default is Table 2's BERT4Rec at the same recipe, and the
    sweeps' runs at the recipe's own value are one run), as `run`'s record with `same_as` naming its
    origin: one training, not two of the same command. None when no other experiment has one."""
    if not os.path.isdir(results_dir):
        return None
    mine = resolved_settings(settings)
    for other in sorted(os.listdir(results_dir)):
        folder = os.path.join(results_dir, other)
        if other == experiment or not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.startswith(f"{run.dataset}-") or not name.endswith(".json"):
                continue
            record = read_json(os.path.join(folder, name), "run record")
            if record.get("version") != RECORD_VERSION or record.get("dataset") != run.dataset or record.get("same_as"):
                continue
            theirs = record.get("settings")
            if theirs == settings or (mine is not None and resolved_settings(theirs or []) == mine):
                return {**record, "experiment": experiment, "run": run.name, "setting": run.setting,
                        "value": run.value, "same_as": f"{other}/{record['run']}"}
    return None


def provenance(command: str, root: str, cores: int | None = None) -> dict:
    """The commit of the checkout at `root` (with "+changes" when it has uncommitted changes to
    tracked files), the machine (with the `cores` the run may use, default this process's), the
    command and today's date, for a run's record."""
    import datetime
    import platform
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short=7", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += "+changes"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"commit": commit, "machine": f"{cpu}, {cores} of {os.cpu_count()} cores", "command": command,
            "date": datetime.date.today().isoformat()}


COLUMNS = (["run", "dataset", "setting", "model", "value", "steps", "seconds", "samples_per_second", "commit",
            "date", "above_pop"]
           + [f"{protocol}/{metric}" for protocol, metrics in PROTOCOL_METRICS.items() for metric in metrics]
           + ["published_protocol", "published_metric", "published", "ours", "relative_difference", "source"])


def report_rows(records: list[dict]) -> list[dict]:
    """One row per published metric of each record (one row when nothing is published).

    `relative_difference` is (ours - published) / published for the metric under the protocol the
    paper used. `seconds` is the run's training and validation time; `samples_per_second` the
    training instances over that time. `above_pop`: whether the best validation was clearly above
    POP's (`bert4rec_tf.training.trainer.pop_warning`); None for records made before it was measured.
    """
    rows = []
    for record in records:
        seconds = record["seconds"]
        base = {"run": record["run"], "dataset": record["dataset"], "setting": record["setting"],
                "model": record["model"], "value": record["value"], "steps": record["steps"],
                "seconds": round(seconds, 1),
                "samples_per_second": round(record["instances"] / seconds, 1) if seconds else None,
                "commit": record.get("commit"), "date": record.get("date"), "above_pop": record.get("above_pop")}
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


def orderings(rows: list[dict]) -> list[dict]:
    """Pairs of runs of one data set that a paper ranks against each other (both published under the
    same protocol, metric and source), with whether our runs keep the published order.

    Ablation runs pair with the default only (the paper's question is each change against it); other
    runs pair with every other. Only HR@10, Recall@10 and NDCG@10 are compared. `holds` is None when
    either side ties: the published numbers are equal, or ours differ by less than `noise_margin` (two
    standard errors over the data set's test users, `tested_users`), e.g. 0.6856 against 0.6866 on
    ML-1m's 6,040 users.
    """
    groups: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        if row["published"] is None or row["ours"] is None or row["published_metric"] not in _ORDER_METRICS:
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
            margin = noise_margin(first["ours"], second["ours"], tested_users(dataset))
            holds = None if published == 0 or abs(ours) <= margin else (published > 0) == (ours > 0)
            pairs.append({"dataset": dataset, "first": a, "second": b, "protocol": protocol, "metric": metric,
                          "source": source, "published": (first["published"], second["published"]),
                          "ours": (first["ours"], second["ours"]), "margin": margin, "holds": holds})
    return pairs


# What the BERT4Rec paper says of the sweeps it shows only as figures (SPEC.md).
PAPER_SWEEP_SHAPES = {"mask_prob": "performance falls for rho above 0.6 on every data set, and rho 0.2 beats 0.1",
                      "hidden_size": "quality converges as d grows, and a large d overfits on sparse data"}


def paper_sweep_points(dataset: str, experiment: str) -> dict[int, dict[str, float]]:
    """The paper's pop-100 numbers per swept value on `dataset`: Table 4's per N for max_len; {} for
    the sweeps it shows only as figures."""
    if experiment != "max_len":
        return {}
    return {int(setting[len("max-len-"):]): metrics for (name, setting), (_, metrics, _) in PUBLISHED.items()
            if name == dataset and setting.startswith("max-len-")}


def paper_best_value(dataset: str, experiment: str) -> float | None:
    """The swept value the paper found best on `dataset`: Figure 4's rho, Table 4's N by NDCG@10;
    None where it gives none (d, or a data set it did not sweep)."""
    if experiment == "mask_prob":
        return PAPER_BEST_MASK_PROB.get(dataset)
    points = paper_sweep_points(dataset, experiment)
    return max(points, key=lambda n: points[n]["NDCG@10"]) if points else None


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
    from bert4rec_tf.calibration import FIGURES, speed_range

    spans = [speed_range(measurements, figure) for figure in FIGURES]
    if not all(spans):
        return "not measured"
    return ", ".join(f"{low:g}" if low == high else f"{low:g}-{high:g}" for low, high in spans)


def machine_notes(records: list[dict]) -> list[str]:
    """What the report says about its runs' machines (`bert4rec_tf.calibration`): the trained runs
    whose cores were more than 10% slower than the fastest run's on either figure, whose resumes ran
    on cores that differ by more, and which have no measurement. Empty when all were measured alike."""
    from bert4rec_tf.calibration import FIGURES, TOLERANCE, describe, fastest, slower_than, speed_range

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


def write_report(folder: str, name: str, experiment: str, runs: list[Run], records: list[dict],
                 figures: list[str], notes: str | None = None) -> list[dict]:
    """Writes `<folder>/<name>.csv` (every column) and `<name>.md` (the tables, `notes` when given,
    where each run comes from, the figures) from the `records` of the finished `runs`; returns the rows."""
    rows = report_rows(records)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(os.path.join(folder, f"{name}.csv"), buffer.getvalue())

    finished = {record["run"] for record in records}
    lines = [f"# Reproduction report: {experiment}", "",
             "Written by `bert4rec-reproduce` from the records of the finished runs; every run's commit, "
             "machine, date and settings are listed below it.", "",
             f"{len(finished)} of {len(runs)} runs finished. Test metrics of each run's best validation "
             "checkpoint; minutes are training and validation time, samples/s the training instances over it.", ""]
    commands = list(dict.fromkeys(record["command"] for record in records if record.get("command")))
    if commands:
        lines += ["Commands:", "", "```bash", *commands, "```", ""]
    for dataset in dict.fromkeys(run.dataset for run in runs):
        lines += [f"## {dataset}", "",
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
            lines.append(f"| {row['setting']}{flag} | {row['steps']} | {_minutes(row['seconds'])} | {speed} | "
                         f"{triple['pop']} | {triple['uniform']} | {triple['full']} |")
        if any(row["dataset"] == dataset and row["above_pop"] is False for row in rows):
            lines += ["", f"Not above POP: the run's best validation {metric_label(SELECTION_METRIC)} was not above "
                      f"{POP_MARGIN:g} times POP's on the same users: it learned little beyond popularity (too short "
                      "a run, or a collapse)."]
        compared = [row for row in rows if row["dataset"] == dataset and row["published"] is not None]
        if compared:
            lines += ["", "Beside the published numbers (the protocol each paper used):", "",
                      "| run | protocol | metric | published | ours | relative difference | source |",
                      "|---|---|---|---|---|---|---|"]
            for row in compared:
                difference = "" if row["relative_difference"] is None else f"{row['relative_difference']:+.1%}"
                protocol = PROTOCOL_LABELS[row["published_protocol"]]
                lines.append(f"| {row['setting']} | {protocol} | {row['published_metric']} | "
                             f"{row['published']:.4f} | {_cell(row['ours'])} | {difference} | {row['source']} |")
        summary = sweep_summary(rows, experiment, dataset) if experiment in SWEEPS else []
        if summary:
            lines += ["", *summary]
        pairs = [pair for pair in orderings(rows) if pair["dataset"] == dataset]
        if pairs:
            users = tested_users(dataset)
            noise = (f"; a tie when ours differ by less than two standard errors over the {users:,} test users "
                     "(the last column)") if users else ""
            lines += ["", f"Where the published order of two runs holds (each pair as one paper ranked it{noise}):", "",
                      "| runs | protocol | metric | published | ours | order | 2 SE |", "|---|---|---|---|---|---|---|"]
            for pair in pairs:
                protocol = PROTOCOL_LABELS[pair["protocol"]]
                order = {True: "holds", False: "reversed", None: "tie"}[pair["holds"]]
                lines.append(f"| {pair['first']} vs {pair['second']} | {protocol} | {pair['metric']} | "
                             f"{pair['published'][0]:.4f} vs {pair['published'][1]:.4f} | "
                             f"{pair['ours'][0]:.4f} vs {pair['ours'][1]:.4f} | {order} | "
                             f"{pair['margin']:.4f} |")
        lines.append("")
    if notes and notes.strip():
        lines += ["## Discussion", "", f"Written by hand in `{experiment}/notes.md` beside the records, not by the "
                  "script; its figures are quoted from the tables above as they stood on its date.", "",
                  rebase_links(notes.strip(), experiment), ""]
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
    missing = [run.name for run in runs if run.name not in finished]
    if missing:
        lines += [f"Not finished yet: {', '.join(missing)}. Re-run the command to continue.", ""]
    for figure in figures:
        lines += [f"![{os.path.basename(figure)}]({os.path.relpath(figure, folder)})", ""]
    write_text_atomic(os.path.join(folder, f"{name}.md"), "\n".join(lines))
    return rows
