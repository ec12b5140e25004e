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
and PNG figures) is rewritten after every run.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time

import bert4rec_tf
from bert4rec_tf import cli
from bert4rec_tf.reproduction import EXPERIMENTS, SWEEPS, plan, report_rows, run_status, write_report

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
    return command + list(run.flags) + shlex.split(args.extra)


def _train_environment() -> dict[str, str]:
    """This process's environment with the package's folder first on PYTHONPATH."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": PACKAGE_ROOT + (os.pathsep + path if path else "")}


def _duration(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def _figures(args: argparse.Namespace, runs, rows) -> list[str]:
    from bert4rec_tf import report_figures

    made = [report_figures.curves_figure(args.out, runs, os.path.join(args.out, "validation_curves.png"))]
    if args.experiment in SWEEPS:
        sweep = os.path.join(args.out, f"{args.experiment}.png")
        made.append(report_figures.sweep_figure(rows, args.experiment, sweep))
    bert4rec = [row for row in rows if row["model"] == "bert4rec" and row.get("pop/NDCG@10") is not None]
    if bert4rec:
        best = max(bert4rec, key=lambda row: row["pop/NDCG@10"])
        made.append(report_figures.attention_figure(os.path.join(args.out, "runs", best["run"]),
                                                    os.path.join(args.out, "attention.png")))
    return [path for path in made if path]


def report(args: argparse.Namespace, runs, command: str) -> None:
    rows = [] if args.no_figures else report_rows(args.out, runs)
    write_report(args.out, args.experiment, runs, command, _figures(args, runs, rows) if rows else [])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "bert4rec-reproduce " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    try:
        runs = plan(args.experiment, [d.strip() for d in args.datasets.split(",") if d.strip()])
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
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    missing = [path for path in sources.values() if not os.path.isfile(path)]
    if missing:
        print(f"error: --source_file {missing[0]} does not exist", file=sys.stderr)
        return 1
    if args.dry_run:
        length = (f"for {args.budget}" if args.budget else f"{args.train_steps} steps" if args.train_steps
                  else "as the recipe says")
        print(f"{args.experiment}: {len(runs)} runs, each {length} (recipe {args.recipe})")
        for index, run in enumerate(runs, 1):
            status = run_status(os.path.join(args.out, "runs", run.name))
            print(f"{index:>3}. {run.name:<32} [{status}] {shlex.join(train_command(run, args, sources)[len(TRAIN):])}")
        return 0
    os.makedirs(args.out, exist_ok=True)
    spent: list[float] = []
    for index, run in enumerate(runs, 1):
        model_dir = os.path.join(args.out, "runs", run.name)
        if run_status(model_dir) == "finished":
            print(f"run {index}/{len(runs)}: {run.name} finished earlier, skipped", flush=True)
            continue
        left = len(runs) - index + 1
        # A run takes at least its budget (POP, with nothing to train, takes less and says little).
        budget = cli.parse_duration(args.budget) if args.budget else 0.0
        per_run = max(sum(spent) / len(spent) if spent else 0.0, budget)
        estimate = per_run * left if per_run else None
        print(f"run {index}/{len(runs)}: {run.name} ({run_status(model_dir)})"
              + (f", about {_duration(estimate)} left for {left} runs" if estimate else ""), flush=True)
        started = time.monotonic()
        with open(os.path.join(args.out, f"{run.name}.log"), "a", encoding="utf-8") as log:
            result = subprocess.run(train_command(run, args, sources), stdout=log, stderr=subprocess.STDOUT,
                                    env=_train_environment())
        if result.returncode != 0:
            print(f"error: run {run.name} failed (exit {result.returncode}); see {args.out}/{run.name}.log. "
                  "Re-run the command to resume it", file=sys.stderr)
            report(args, runs, command)
            return 1
        spent.append(time.monotonic() - started)
        report(args, runs, command)
    report(args, runs, command)
    print(f"report: {os.path.join(args.out, 'report.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
