"""An experiment's records and reports: what reproduce.py reads from the run folders and --results_dir.

A finished run's record (`bert4rec_tf.experiments.records`) is made from its run folder and the
provenance noted when it started (commit, machine, cores, settings, the speed of its cores), kept in
--results_dir when one is given, and read back there by later commands: the report grows across
sessions and machines. `write_reports` writes `<out>/report.md` and `<results_dir>/<experiment>.md`.

The functions read reproduce.py's arguments (`args`: experiment, out, results_dir, no_figures) and
take each run's train.py settings as reproduce.py resolves them (`settings`: run name -> settings).
"""

from __future__ import annotations

import argparse
import os

from bert4rec_tf.config import PRESETS
from bert4rec_tf.experiments.calibration import START_TOLERANCE, describe, fastest, slower_than
from bert4rec_tf.experiments.plans import EXPERIMENTS, SWEEPS, plan
from bert4rec_tf.experiments.records import (make_record, own_record, provenance, read_record, record_path, run_status,
                                             settings_changes, shared_record, stale_fields)
from bert4rec_tf.experiments.report import report_rows, write_report
from bert4rec_tf.files import PACKAGE_PARENT, copy_file_atomic, read_json, write_json_atomic


def figures_of(args: argparse.Namespace, folder: str, records: list[dict], rows: list[dict]) -> list[str]:
    """The report's figures in `folder`: validation curves, the sweep, the best BERT4Rec's attention
    (drawn from its run folder when it is here, else kept from an earlier report)."""
    from bert4rec_tf.experiments import figures

    os.makedirs(folder, exist_ok=True)
    # One figure of validation quality against minutes per data set: the equal-compute view. A run
    # has the same line style in every data set's figure (the plan's order).
    datasets = list(dict.fromkeys(record["dataset"] for record in records))
    runs = plan(args.experiment, datasets)
    order = list(dict.fromkeys(run.setting for run in runs))
    # A tuned row is drawn in its untuned row's colour, dashed: 11 families and their tuned rows are
    # too many lines for one colour each.
    partner = {run.setting: run.against for run in runs if run.tuned}
    # Beside it, quality against steps: the view that holds when the runs' machines differ in pace.
    made = [figures.curves_figure([record for record in records if record["dataset"] == dataset],
                                  os.path.join(folder, f"validation_{name}_{dataset}.png"), order=order, x=x,
                                  partner=partner)
            for dataset in datasets for name, x in (("curves", "minutes"), ("steps", "step"))]
    if args.experiment in SWEEPS:
        made.append(figures.sweep_figure(rows, args.experiment, os.path.join(folder, f"{args.experiment}.png")))
    bert4rec = [row for row in rows if row["model"] == "bert4rec" and row.get("pop/NDCG@10") is not None]
    attention = os.path.join(folder, "attention.png")
    if bert4rec:
        best = max(bert4rec, key=lambda row: row["pop/NDCG@10"])
        model_dir = os.path.join(args.out, "runs", best["run"])
        if run_status(model_dir) == "finished":
            made.append(figures.attention_figure(model_dir, attention))
        elif os.path.isfile(attention):
            made.append(attention)
    return [path for path in made if path]


def provenance_file(model_dir: str) -> str:
    return os.path.join(model_dir, "reproduce.json")


def start_provenance(model_dir: str, command: str, cores: list[int] | None, settings: list[str],
                      speed: dict | None = None, tuning: dict | None = None) -> None:
    """Notes which commit and machine (and how many cores) train the run, with which settings and how
    fast its cores were (`machine_speed`; one measurement per start), the commit and machine joined
    when a resume changes them; for a tuned run, its study's `tuning` summary (budget, trials, choice)."""
    now = {**provenance(command, PACKAGE_PARENT, len(cores) if cores else None), "settings": settings,
           "speed": [speed] if speed else [], **({"tuning": tuning} if tuning else {})}
    path = provenance_file(model_dir)
    if os.path.isfile(path):
        before = read_json(path, "run provenance")
        for key in ("commit", "machine"):
            if now[key] not in before[key].split(" + "):
                now[key] = f"{before[key]} + {now[key]}"
        now["date"] = before["date"] if before["date"] == now["date"] else f"{before['date']} to {now['date']}"
        now["speed"] = before.get("speed", []) + now["speed"]
    os.makedirs(model_dir, exist_ok=True)
    write_json_atomic(path, now)


def folder_changed(model_dir: str, settings: list[str]) -> list[str]:
    """The fields in which the configuration the run in `model_dir` trained with differs from what its
    `settings` resolve to now (a preset or recipe changed since it started)."""
    path = os.path.join(model_dir, "config.json")
    return stale_fields({"config": read_json(path, "run configuration")}, settings) if os.path.isfile(path) else []


# The run folders `collect_records` has named as left out of the report, each named once per command.
_NAMED: set[str] = set()


def _own_training(model_dir: str, settings: list[str], command: str) -> dict | None:
    """The provenance (without its settings) of the finished run in `model_dir` when it trained these
    `settings` with the configuration they give now, else None: a run of other settings, or of a
    configuration since changed, is not this command's result whatever its metrics."""
    origin = (read_json(provenance_file(model_dir), "run provenance")
              if os.path.isfile(provenance_file(model_dir)) else provenance(command, PACKAGE_PARENT))
    return origin if origin.pop("settings", settings) == settings and not folder_changed(model_dir, settings) else None


def _recorded_from(record: dict, model_dir: str) -> bool:
    """Whether `record` was made from the finished run in `model_dir` (its steps and test metrics)."""
    results = read_json(os.path.join(model_dir, "results.json"), "run results")
    return results.get("test") == record.get("test") and results.get("steps", 0) == record.get("steps")


def _store(args: argparse.Namespace, run, record: dict) -> None:
    """Writes `record` as `run`'s record in --results_dir (complete or absent)."""
    path = record_path(args.results_dir, args.experiment, run)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_json_atomic(path, record)


def collect_records(args: argparse.Namespace, runs, settings: dict[str, list[str]], command: str,
                    tuning=None) -> list[dict]:
    """The records of the finished runs: from their run folders (stored in --results_dir when given),
    else the --results_dir record made with the same settings, else that run's own record (or another
    experiment's, `shared_record`) of the same settings made under a configuration they no longer give
    (a recipe changed since), with `earlier_configuration` naming the fields that differ: kept in the
    report, marked, until the run trains again and its new record replaces it. `tuning(run)`: the
    summary of a tuned run's study, for a tuned run whose record is another run's (its study chose
    that run's settings), or None."""
    records = []
    for run in runs:
        model_dir = os.path.join(args.out, "runs", run.name)
        wanted = settings[run.name]
        record = read_record(args.results_dir, args.experiment, run, wanted) if args.results_dir else None
        finished = run_status(model_dir) == "finished"
        if finished and record is None:
            origin = _own_training(model_dir, wanted, command)
            if origin is not None:
                record = make_record(model_dir, run, args.experiment, wanted, origin)
                if args.results_dir:
                    _store(args, run, record)
        elif (finished and not record.get("same_as") and model_dir not in _NAMED
              and not _recorded_from(record, model_dir) and _own_training(model_dir, wanted, command) is not None):
            _NAMED.add(model_dir)
            # Two trainings of the same settings: the stored record stays the result, and saying so keeps
            # the other run from being taken for the one reported.
            print(f"{run.name}: {model_dir} holds a finished run, but {record_path(args.results_dir, args.experiment, run)} "
                  f"(commit {record.get('commit', '?')}, {record.get('date', '?')}) is of the same settings and "
                  "stays the reported one; remove that record to report this run instead", flush=True)
        if record is None and args.results_dir:
            earlier = own_record(args.results_dir, args.experiment, run, wanted)
            record = ({**earlier, "earlier_configuration": stale_fields(earlier, wanted)} if earlier is not None
                      else shared_record(args.results_dir, args.experiment, run, wanted, earlier=True))
        if record is not None and record.get("same_as") and tuning is not None:
            summary = tuning(run)  # its study here (a continued study's summary replaces the kept one)
            if summary:
                record = {**record, "tuning": summary, "settings": wanted}
            kept = own_record(args.results_dir, args.experiment, run, wanted) if args.results_dir else None
            if (args.results_dir and (summary or kept is not None) and not record.get("earlier_configuration")
                    and record != kept):
                # The study's choice is kept as the run's own record, beside the record it shares:
                # where the study's folder is not (another machine), the row is reported from it and
                # not tuned again. The copy follows a continued study and a new record it shares. (A
                # run without a study of its own keeps no copy, whatever the record it shares holds.)
                _store(args, run, record)
        if record is not None:
            records.append(record)
    return records


def write_reports(args: argparse.Namespace, runs, settings: dict[str, list[str]], command: str,
                  tuning=None, awaiting_study: list[str] | None = None) -> None:
    """Writes `<out>/report.md` (with its figures) and, with --results_dir, `<results_dir>/<experiment>.md`
    (the same figures copied beside the records, and the hand-written `notes.md` quoted) from the
    records of the finished `runs`. `awaiting_study`: the names of the plan's tuned runs whose study
    has chosen no settings yet (they have none to report), counted and named as such."""
    records = collect_records(args, runs, settings, command, tuning)
    rows = report_rows(records)
    figures = [] if args.no_figures or not rows else figures_of(args, args.out, records, rows)
    finished = {record["run"] for record in records}
    other_flags = {run.name: settings_changes(args.results_dir, args.experiment, run, settings[run.name])
                   for run in runs if args.results_dir and run.name not in finished}
    write_report(args.out, "report", args.experiment, runs, records, figures, other_flags=other_flags,
                 awaiting_study=awaiting_study)
    if args.results_dir:
        # The same records make the same figures: copied, not drawn again (the attention figure runs
        # the model). An attention figure kept from an earlier session stays when none is drawn here.
        folder = os.path.join(args.results_dir, args.experiment)
        os.makedirs(folder, exist_ok=True)
        copies = []
        for figure in figures:
            copy = os.path.join(folder, os.path.basename(figure))
            copy_file_atomic(figure, copy)
            copies.append(copy)
        kept = os.path.join(folder, "attention.png")
        if figures and kept not in copies and os.path.isfile(kept) and any(row["model"] == "bert4rec" for row in rows):
            copies.append(kept)
        notes = os.path.join(folder, "notes.md")
        text = None
        if os.path.isfile(notes):
            with open(notes, encoding="utf-8") as handle:
                text = handle.read()
        write_report(args.results_dir, args.experiment, args.experiment, runs, records, copies, notes=text,
                     other_flags=other_flags, awaiting_study=awaiting_study)


def report_datasets(asked: list[str], recorded: list[str]) -> list[str]:
    """The data sets a report covers, in the presets' order (ML-1m first) whichever command wrote it."""
    order = list(PRESETS)
    return sorted(dict.fromkeys(asked + recorded), key=lambda name: order.index(name) if name in order else len(order))


def experiment_records(args: argparse.Namespace, experiment: str | None = None) -> list[dict]:
    """The records of this (or another) experiment in --results_dir (files that are not records are
    passed over)."""
    folder = os.path.join(args.results_dir, experiment or args.experiment) if args.results_dir else None
    if not folder or not os.path.isdir(folder):
        return []
    records = []
    for file in sorted(os.listdir(folder)):
        if file.endswith(".json"):
            try:
                record = read_json(os.path.join(folder, file), "run record")
            except ValueError:
                continue
            if isinstance(record, dict) and "dataset" in record:
                records.append(record)
    return records


def recorded_datasets(args: argparse.Namespace) -> list[str]:
    """Data sets that have records of this experiment in --results_dir (they stay in its report)."""
    return [record["dataset"] for record in experiment_records(args)]


def compared_speeds(args: argparse.Namespace, runs) -> list[list[dict]]:
    """The cores' measurements of the runs that a new run of this experiment is compared with: its
    records in --results_dir and the starts noted in the run folders of `runs` under --out; while
    none of those was measured, every experiment's records in --results_dir (their budgets are the
    same compute on the same kind of core). POP, which trains nothing, is left out."""
    def trained(records: list[dict]) -> list[list[dict]]:
        return [record.get("speed") or [] for record in records if record.get("model") != "pop"]

    speeds = trained(experiment_records(args))
    for run in runs:
        path = provenance_file(os.path.join(args.out, "runs", run.name))
        if run.model != "pop" and os.path.isfile(path):
            speeds.append(read_json(path, "run provenance").get("speed") or [])
    if not fastest(speeds):
        speeds += [speed for experiment in EXPERIMENTS if experiment != args.experiment
                   for speed in trained(experiment_records(args, experiment))]
    return speeds


def slower_cores(speed: dict, speeds: list[list[dict]]) -> str | None:
    """Why a run measured at `speed` is not started (its cores more than START_TOLERANCE slower, on
    either figure, than the fastest of `speeds`), or None when it may start."""
    reference = fastest(speeds)
    found = slower_than([speed], reference, START_TOLERANCE)
    if not found:
        return None
    return (f"its cores measure {speed['float32_gflops']:g} GFLOP/s and {speed['stream_gbs']:g} GB/s "
            f"({describe(found)} against the fastest cores of the runs it is compared with: "
            f"{reference['float32_gflops']:g} GFLOP/s, {reference['stream_gbs']:g} GB/s), so its budget would buy "
            "less training than theirs")
