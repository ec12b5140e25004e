"""Reruns a paper's experiment and writes a report beside the published numbers.

    bert4rec-reproduce table2 --datasets ml-1m,beauty --budget 20m --out reports/table2 \\
        --source_file ml-1m=../shared/datasets/ml-1m/ml-1m.txt.gz \\
        --source_file beauty=../shared/datasets/beauty/beauty.txt.gz
    bert4rec-reproduce ablation --datasets ml-1m --budget 10m --out reports/ablation --dry_run

Experiments: table2 (POP, SASRec bce and ce, BERT4Rec with 1 mask, BERT4Rec, BERT4Rec with the
matching task), ablation (the BERT4Rec paper's Table 5 and the matching paper's only-mask and
only-matching rows), mask_prob (rho 0.1 ... 0.9), max_len (the paper's Table 4 lengths, with the
training samples/s) and hidden_size (d 16 ... 256).

Each run is an ordinary model directory, `<out>/runs/<dataset>-<setting>`, trained by bert4rec-train
(bert4rec-evaluate and TensorBoard read it). Re-running the same command skips finished runs and resumes
unfinished ones. The runs use --recipe (default cpu-30m; docs/training.md) with
--budget as each run's time budget, or --train_steps steps. The report (`report.md`, `report.csv`
and PNG figures) is rewritten after every run. With --deadline no run starts that would end after
it (a job's or a session's end): the runs left over train when the command is given again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import bert4rec_tf
from bert4rec_tf import cli
from bert4rec_tf.calibration import START_TOLERANCE, describe, fastest, slower_than
from bert4rec_tf.config import PRESETS, recipe_overrides
from bert4rec_tf.files import read_json, write_json_atomic
from bert4rec_tf.reproduction import (EXPERIMENTS, SWEEPS, derived_flags, make_record, plan, provenance, read_record,
                                      record_path, report_rows, run_settings, run_status, write_report)

# Each run is `bert4rec-train` run as a module by this Python, with this package first on its path.
TRAIN = [sys.executable, "-m", "bert4rec_tf.scripts.train"]
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(bert4rec_tf.__file__)))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.argument_parser(__doc__)
    parser.add_argument("experiment", choices=list(EXPERIMENTS))
    parser.add_argument("--datasets", default="ml-1m,beauty", help="comma-separated data sets")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--budget", default=None, help="wall-clock time per run, e.g. 20m (train.py --time_budget)")
    length.add_argument("--train_steps", type=int, default=None, help="steps per run instead of a budget")
    parser.add_argument("--recipe", default="cpu-30m", help="train.py --recipe for every run (paper: the presets)")
    parser.add_argument("--out", required=True, help="folder of the runs and the report")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--eval_every", type=int, default=500)
    parser.add_argument("--data_dir", default=None, help="train.py --data_dir")
    parser.add_argument("--source_file", action="append", default=[], metavar="DATASET=PATH",
                        help="a local source file for a data set (repeatable); otherwise train.py downloads it")
    parser.add_argument("--extra", default="", help="more train.py flags for every run (quoted)")
    parser.add_argument("--only", default=None,
                        help="comma-separated settings to run (e.g. pop,bert4rec): a part of the plan")
    parser.add_argument("--dry_run", action="store_true", help="print the plan and exit")
    parser.add_argument("--no_figures", action="store_true", help="write report.md and report.csv only")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs trained at once, each pinned to its own share of this process's cores (e.g. 2 "
                             "on 2 cores: one core each, so every run gets the same compute)")
    parser.add_argument("--deadline", default=None,
                        help="start no run expected to end after this: a time of day HH:MM (its next occurrence, "
                             "local time) or a duration from now (e.g. 2h40m). A run is expected to take its budget "
                             "and 5 minutes of preparation, test and export, or as long as the runs trained before "
                             "it in this command took; runs not started train when the command is given again")
    parser.add_argument("--allow_slower_cores", action="store_true",
                        help=f"train a run even when its cores measure more than {START_TOLERANCE * 100:.0f}%% slower than the fastest cores "
                             "that trained a run of the experiment (by default it is not started: its budget would "
                             "buy less training than theirs); the report flags such runs")
    parser.add_argument("--results_dir", default=None,
                        help="also keep each finished run's record (<dir>/<experiment>/<run>.json: metrics, curve, "
                             "commit, machine, settings; no data or weights) and write the report to "
                             "<dir>/<experiment>.md, e.g. docs/results. A run with a record of the same settings "
                             "is finished: the report grows across sessions and machines")
    return parser.parse_args(argv)


def train_command(run, args: argparse.Namespace, sources: dict[str, str]) -> list[str]:
    """The train command line of `run`."""
    command = [*TRAIN, "--dataset", run.dataset, "--model", run.model, "--model_dir", os.path.join(args.out, "runs", run.name),
               "--seed", str(args.seed), "--eval_every", str(args.eval_every), "--recipe", args.recipe]
    if args.budget:
        command += ["--time_budget", args.budget]
    if args.train_steps:
        command += ["--train_steps", str(args.train_steps)]
        if args.recipe != "paper":
            command += ["--config", "time_budget=0"]
    if args.data_dir:
        command += ["--data_dir", args.data_dir]
    if run.dataset in sources:
        command += ["--source_file", sources[run.dataset]]
    command += list(run.flags)
    extra = shlex.split(args.extra)
    return command + derived_flags(run, run_settings(command[len(TRAIN):]), extra) + extra


def _settings(run, args: argparse.Namespace, sources: dict[str, str]) -> list[str]:
    """The run's train.py settings: its command line without the script and the local paths."""
    return run_settings(train_command(run, args, sources)[len(TRAIN):])


def _train_environment() -> dict[str, str]:
    """This process's environment with the package's folder first on PYTHONPATH."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": PACKAGE_ROOT + (os.pathsep + path if path else "")}


def time_left(spent: list[float], budget: float, runs: int, jobs: int, elapsed: tuple[float, ...] = ()) -> float | None:
    """Seconds until `runs` more runs end, `jobs` at a time: each takes the mean of the trained runs
    before it (`spent`), and at least the budget. `elapsed`: the seconds that the runs among `runs`
    already going have run (each has the rest of its time left). None when neither is known."""
    per_run = max(sum(spent) / len(spent) if spent else 0.0, budget)
    if not per_run:
        return None
    going = sorted(max(per_run - seconds, 0.0) for seconds in elapsed[:jobs])
    slots = going + [0.0] * (jobs - len(going))
    for _ in range(max(runs - len(going), 0)):
        slots[slots.index(min(slots))] += per_run  # the next run starts when the first slot is free
    return max(slots)


def trained_runs(runs) -> int:
    """How many of `runs` train: POP has nothing to train and takes about a minute, not a budget."""
    return sum(run.model != "pop" for run in runs)


# What a trained run takes beyond its budget (reading the data, the test in three protocols, the
# export): 2 to 4 minutes for ML-1m and Beauty on a 2-core CPU. POP takes about a minute in all.
RUN_OVERHEAD = 300.0
POP_SECONDS = 120.0


def parse_deadline(text: str, now: float) -> float:
    """The time (seconds since the epoch) that `--deadline text` names: "HH:MM" is the next time the
    local clock shows it, anything else a duration from `now` ("2h40m", "90m", "5400").

    Raises:
        ValueError: when `text` is neither.
    """
    clock = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*", text)
    if clock is None:
        return now + cli.parse_duration(text, "--deadline")
    hour, minute = int(clock.group(1)), int(clock.group(2))
    if hour > 23 or minute > 59:
        raise ValueError(f"--deadline {text!r} is not a time of day HH:MM (00:00 to 23:59)")
    day = time.localtime(now)
    target = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, hour, minute, 0, 0, 0, -1))
    return target if target > now else time.mktime((day.tm_year, day.tm_mon, day.tm_mday + 1, hour, minute, 0, 0, 0, -1))


def expected_seconds(run, budget: float, spent: list[float]) -> float | None:
    """How long `run` is expected to take: POP about two minutes; a trained run its `budget` and
    `RUN_OVERHEAD`, or the mean of the trained runs before it (`spent`) when that is longer. None
    when neither is known (a run of --train_steps before any has ended)."""
    if run.model == "pop":
        return POP_SECONDS
    measured = sum(spent) / len(spent) if spent else 0.0
    expected = max(measured, budget + RUN_OVERHEAD if budget else 0.0)
    return expected or None


def core_groups(jobs: int, cores: list[int]) -> list[list[int]]:
    """`cores` split into `jobs` equal groups (the remainder unused), one per concurrent run.

    Raises:
        ValueError: when there are fewer cores than jobs.
    """
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    if len(cores) < jobs:
        raise ValueError(f"--jobs {jobs} needs at least {jobs} cores; this process may use {len(cores)}")
    size = len(cores) // jobs
    return [sorted(cores)[i * size:(i + 1) * size] for i in range(jobs)]


def _usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def _duration(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def _figures(args: argparse.Namespace, folder: str, records: list[dict], rows: list[dict]) -> list[str]:
    """The report's figures in `folder`: validation curves, the sweep, the best BERT4Rec's attention
    (drawn from its run folder when it is here, else kept from an earlier report)."""
    from bert4rec_tf import report_figures

    os.makedirs(folder, exist_ok=True)
    # One figure of validation quality against minutes per data set: the equal-compute view. A run
    # has the same line style in every data set's figure (the plan's order).
    datasets = list(dict.fromkeys(record["dataset"] for record in records))
    order = list(dict.fromkeys(run.setting for run in plan(args.experiment, datasets)))
    # Beside it, quality against steps: the view that holds when the runs' machines differ in pace.
    made = [report_figures.curves_figure([record for record in records if record["dataset"] == dataset],
                                         os.path.join(folder, f"validation_{name}_{dataset}.png"), order=order, x=x)
            for dataset in datasets for name, x in (("curves", "minutes"), ("steps", "step"))]
    if args.experiment in SWEEPS:
        made.append(report_figures.sweep_figure(rows, args.experiment, os.path.join(folder, f"{args.experiment}.png")))
    bert4rec = [row for row in rows if row["model"] == "bert4rec" and row.get("pop/NDCG@10") is not None]
    attention = os.path.join(folder, "attention.png")
    if bert4rec:
        best = max(bert4rec, key=lambda row: row["pop/NDCG@10"])
        model_dir = os.path.join(args.out, "runs", best["run"])
        if run_status(model_dir) == "finished":
            made.append(report_figures.attention_figure(model_dir, attention))
        elif os.path.isfile(attention):
            made.append(attention)
    return [path for path in made if path]


def _provenance_file(model_dir: str) -> str:
    return os.path.join(model_dir, "reproduce.json")


def machine_speed(pin=None) -> dict | None:
    """`bert4rec_tf.calibration.measure()` on the cores `pin` gives a process (the run's), measured in
    a process of its own just before the run trains; None, with a warning, when it fails (a run is
    never held up by its calibration)."""
    try:
        result = subprocess.run([sys.executable, "-m", "bert4rec_tf.calibration"], capture_output=True, text=True,
                                timeout=600, env=_train_environment(), preexec_fn=pin)
        if result.returncode == 0:
            return json.loads(result.stdout.strip().splitlines()[-1])
        problem = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as error:
        problem = str(error)
    print(f"warning: the machine's speed could not be measured ({problem}); the record will lack it",
          file=sys.stderr, flush=True)
    return None


def _start_provenance(model_dir: str, command: str, cores: list[int] | None, settings: list[str],
                      speed: dict | None = None) -> None:
    """Notes which commit and machine (and how many cores) train the run, with which settings and how
    fast its cores were (`machine_speed`; one measurement per start), the commit and machine joined
    when a resume changes them."""
    now = {**provenance(command, PACKAGE_ROOT, len(cores) if cores else None), "settings": settings,
           "speed": [speed] if speed else []}
    path = _provenance_file(model_dir)
    if os.path.isfile(path):
        before = read_json(path, "run provenance")
        for key in ("commit", "machine"):
            if now[key] not in before[key].split(" + "):
                now[key] = f"{before[key]} + {now[key]}"
        now["date"] = before["date"] if before["date"] == now["date"] else f"{before['date']} to {now['date']}"
        now["speed"] = before.get("speed", []) + now["speed"]
    os.makedirs(model_dir, exist_ok=True)
    write_json_atomic(path, now)


def collect_records(args: argparse.Namespace, runs, sources: dict[str, str], command: str) -> list[dict]:
    """The records of the finished runs: from their run folders (stored in --results_dir when given),
    else the --results_dir record made with the same settings."""
    records = []
    for run in runs:
        model_dir = os.path.join(args.out, "runs", run.name)
        settings = _settings(run, args, sources)
        record = read_record(args.results_dir, args.experiment, run, settings) if args.results_dir else None
        if run_status(model_dir) == "finished" and record is None:
            origin = (read_json(_provenance_file(model_dir), "run provenance")
                      if os.path.isfile(_provenance_file(model_dir)) else provenance(command, PACKAGE_ROOT))
            if origin.pop("settings", settings) != settings:
                continue  # trained with other settings: not a result of this command
            record = make_record(model_dir, run, args.experiment, settings, origin)
            if args.results_dir:
                path = record_path(args.results_dir, args.experiment, run)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                write_json_atomic(path, record)
        if record is not None:
            records.append(record)
    return records


def report(args: argparse.Namespace, runs, sources: dict[str, str], command: str) -> None:
    records = collect_records(args, runs, sources, command)
    rows = report_rows(records)
    figures = [] if args.no_figures or not rows else _figures(args, args.out, records, rows)
    write_report(args.out, "report", args.experiment, runs, records, figures)
    if args.results_dir:
        # The same records make the same figures: copied, not drawn again (the attention figure runs
        # the model). An attention figure kept from an earlier session stays when none is drawn here.
        folder = os.path.join(args.results_dir, args.experiment)
        os.makedirs(folder, exist_ok=True)
        copies = []
        for figure in figures:
            copy = os.path.join(folder, os.path.basename(figure))
            shutil.copyfile(figure, f"{copy}.tmp-{os.getpid()}")
            os.replace(f"{copy}.tmp-{os.getpid()}", copy)
            copies.append(copy)
        kept = os.path.join(folder, "attention.png")
        if figures and kept not in copies and os.path.isfile(kept) and any(row["model"] == "bert4rec" for row in rows):
            copies.append(kept)
        notes = os.path.join(folder, "notes.md")
        text = None
        if os.path.isfile(notes):
            with open(notes, encoding="utf-8") as handle:
                text = handle.read()
        write_report(args.results_dir, args.experiment, args.experiment, runs, records, copies, notes=text)


def report_datasets(asked: list[str], recorded: list[str]) -> list[str]:
    """The data sets a report covers, in the presets' order (ML-1m first) whichever command wrote it."""
    order = list(PRESETS)
    return sorted(dict.fromkeys(asked + recorded), key=lambda name: order.index(name) if name in order else len(order))


def _experiment_records(args: argparse.Namespace, experiment: str | None = None) -> list[dict]:
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


def _recorded_datasets(args: argparse.Namespace) -> list[str]:
    """Data sets that have records of this experiment in --results_dir (they stay in its report)."""
    return [record["dataset"] for record in _experiment_records(args)]


def compared_speeds(args: argparse.Namespace, runs) -> list[list[dict]]:
    """The cores' measurements of the runs that a new run of this experiment is compared with: its
    records in --results_dir and the starts noted in the run folders of `runs` under --out; while
    none of those was measured, every experiment's records in --results_dir (their budgets are the
    same compute on the same kind of core). POP, which trains nothing, is left out."""
    def trained(records: list[dict]) -> list[list[dict]]:
        return [record.get("speed") or [] for record in records if record.get("model") != "pop"]

    speeds = trained(_experiment_records(args))
    for run in runs:
        path = _provenance_file(os.path.join(args.out, "runs", run.name))
        if run.model != "pop" and os.path.isfile(path):
            speeds.append(read_json(path, "run provenance").get("speed") or [])
    if not fastest(speeds):
        speeds += [speed for experiment in EXPERIMENTS if experiment != args.experiment
                   for speed in trained(_experiment_records(args, experiment))]
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "bert4rec-reproduce " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    try:
        datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
        runs = plan(args.experiment, datasets)
        if args.only:
            wanted = {name.strip() for name in args.only.split(",")}
            unknown = wanted - {run.setting for run in runs}
            if unknown:
                raise ValueError(f"--only: no run {', '.join(sorted(unknown))} in {args.experiment}; "
                                 f"its runs: {', '.join(dict.fromkeys(run.setting for run in runs))}")
            runs = [run for run in runs if run.setting in wanted]
        if any("=" not in item for item in args.source_file):
            raise ValueError("--source_file takes DATASET=PATH")
        sources = dict(item.split("=", 1) for item in args.source_file)
        if args.budget:
            cli.parse_duration(args.budget, "--budget")
        deadline = parse_deadline(args.deadline, time.time()) if args.deadline else None
        groups: list[list[int] | None] = core_groups(args.jobs, _usable_cores()) if args.jobs > 1 else [None]
        # The report covers the whole plan of every data set asked for or already recorded.
        reported = plan(args.experiment, report_datasets(datasets, _recorded_datasets(args)))
        for run in reported:  # every run the report reads: a plan whose settings cannot be resolved fails here
            _settings(run, args, sources)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    missing = [path for path in sources.values() if not os.path.isfile(path)]
    if missing:
        print(f"error: --source_file {missing[0]} does not exist", file=sys.stderr)
        return 1

    def status(run) -> str:
        model_dir = os.path.join(args.out, "runs", run.name)
        state = run_status(model_dir)
        settings = _settings(run, args, sources)
        origin = _provenance_file(model_dir)
        if state != "new" and os.path.isfile(origin) and read_json(origin, "run provenance").get("settings",
                                                                                                settings) != settings:
            return "other settings"
        if state != "finished" and args.results_dir and read_record(args.results_dir, args.experiment, run, settings):
            return "recorded"
        return state

    if args.dry_run:
        length = (f"for {args.budget}" if args.budget else f"{args.train_steps} steps" if args.train_steps
                  else "as the recipe says")
        print(f"{args.experiment}: {len(runs)} runs, each {length} (recipe {args.recipe})")
        for index, run in enumerate(runs, 1):
            print(f"{index:>3}. {run.name:<32} [{status(run)}] "
                  f"{shlex.join(train_command(run, args, sources)[len(TRAIN):])}")
        return 0
    states = {run.name: status(run) for run in runs}
    clashes = [name for name, state in states.items() if state == "other settings"]
    if clashes:
        print(f"error: {os.path.join(args.out, 'runs', clashes[0])} was trained with other settings than this "
              "command's; give another --out, or the flags it was started with (--dry_run lists the plan)",
              file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    todo = []
    for index, run in enumerate(runs, 1):
        state = states[run.name]
        if state == "finished":
            print(f"run {index}/{len(runs)}: {run.name} finished earlier, skipped", flush=True)
        elif state == "recorded":
            shared = read_record(args.results_dir, args.experiment, run, _settings(run, args, sources)).get("same_as")
            where = f"as {shared} " if shared else ""
            print(f"run {index}/{len(runs)}: {run.name} recorded in {args.results_dir} {where}with these settings, "
                  "skipped", flush=True)
        else:
            todo.append((index, run, state))

    def run_budget(run) -> float:
        return cli.parse_duration(args.budget) if args.budget else float(
            recipe_overrides(args.recipe, run.dataset, run.model).get("time_budget", 0.0))

    # A run takes at least its budget (POP, with nothing to train, takes less and says little).
    budget = max((run_budget(run) for _, run, _ in todo), default=0.0)
    spent: list[float] = []
    running: dict = {}  # process -> (run, start time, slot, log file)
    free = list(range(len(groups)))
    failed, postponed, refused = [], [], []
    while running or (todo and not failed):
        while todo and free and not failed:
            index, run, state = todo.pop(0)
            expected = expected_seconds(run, run_budget(run), spent)
            if deadline is not None and expected is not None and time.time() + expected > deadline:
                postponed.append(run.name)
                print(f"run {index}/{len(runs)}: {run.name} not started: it would end after the deadline "
                      f"({time.strftime('%H:%M', time.localtime(deadline))}; it takes about {_duration(expected)})",
                      flush=True)
                continue
            slot = free.pop(0)
            model_dir = os.path.join(args.out, "runs", run.name)
            left = len(todo) + len(running) + 1
            trained = trained_runs([run, *(r for _, r, _ in todo), *(entry[0] for entry in running.values())])
            now = time.monotonic()
            estimate = time_left(spent, budget, trained, len(groups),
                                 tuple(now - entry[1] for entry in running.values() if entry[0].model != "pop"))
            cores = groups[slot]
            print(f"run {index}/{len(runs)}: {run.name} ({state})"
                  + (f" on core{'s' if len(cores) > 1 else ''} {','.join(map(str, cores))}" if cores else "")
                  + (f", about {_duration(estimate)} left for {left} runs" if estimate else ""), flush=True)
            pin = (lambda cores=cores: os.sched_setaffinity(0, cores)) if cores else None
            speed = machine_speed(pin) if run.model != "pop" else None  # POP has no compute to compare
            why = None if speed is None or args.allow_slower_cores else slower_cores(
                speed, compared_speeds(args, reported))
            if why:
                refused = [run.name] + [other.name for _, other, _ in todo]
                todo.clear()
                print(f"error: run {run.name} not started: {why}. Not started: {', '.join(refused)}; train them on "
                      "cores like those, or give --allow_slower_cores to train anyway (the report flags them)",
                      file=sys.stderr, flush=True)
                free.append(slot)
                continue
            _start_provenance(model_dir, command, cores, _settings(run, args, sources), speed)
            log = open(os.path.join(args.out, f"{run.name}.log"), "a", encoding="utf-8")
            process = subprocess.Popen(train_command(run, args, sources), stdout=log, stderr=subprocess.STDOUT,
                                       env=_train_environment(), preexec_fn=pin)
            running[process] = (run, time.monotonic(), slot, log)
        done = next((process for process in running if process.poll() is not None), None)
        if done is None:
            time.sleep(1.0)
            continue
        run, started, slot, log = running.pop(done)
        log.close()
        free.append(slot)
        if done.returncode != 0:
            print(f"error: run {run.name} failed (exit {done.returncode}); see {args.out}/{run.name}.log. "
                  "Re-run the command to resume it", file=sys.stderr, flush=True)
            failed.append(run.name)
        elif run.model != "pop":
            spent.append(time.monotonic() - started)
        report(args, reported, sources, command)
    if failed:
        return 1  # the report was written when the run failed
    if not spent:  # every run was skipped: the report has not been written in this call
        report(args, reported, sources, command)
    if postponed:
        print(f"{len(postponed)} run{'s' * (len(postponed) > 1)} not started before the deadline "
              f"({', '.join(postponed)}): give the command again to train "
              f"{'them' if len(postponed) > 1 else 'it'}", flush=True)
    print(f"report: {os.path.join(args.out, 'report.md')}"
          + (f" and {os.path.join(args.results_dir, args.experiment + '.md')}" if args.results_dir else ""))
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
