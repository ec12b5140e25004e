"""Reruns a paper's experiment and writes a report beside the published numbers.

    bert4rec-reproduce table2 --datasets ml-1m,beauty --budget 20m --out reports/table2 \\
        --source_file ml-1m=../shared/datasets/ml-1m/ml-1m.txt.gz \\
        --source_file beauty=../shared/datasets/beauty/beauty.txt.gz
    bert4rec-reproduce ablation --datasets ml-1m --budget 10m --out reports/ablation --dry_run

Experiments: table2 (the BERT4Rec paper's nine methods: POP, BPR-MF, NCF, FPMC, GRU4Rec, GRU4Rec+,
Caser, SASRec with bce and with ce, BERT4Rec; and BERT4Rec with 1 mask and with the matching task),
sampled_softmax (BERT4Rec and SASRec with the sampled head, not the papers' loss, beside their exact
runs, and sparse updates of the item table), ablation (the BERT4Rec paper's Table 5 and the matching
paper's only-mask and only-matching rows), mask_proportion (rho 0.1 ... 0.9), max_len (the paper's
Table 4 lengths, with the training samples/s), hidden_size (d 16 ... 256), table2_tuned
(every trained Table 2 row beside the same row with the settings bert4rec-tune chose on validation)
and features (SASRec with ce and BERT4Rec with item attributes, and with user attributes too, beside
the same runs without; the attribute files from --attributes, docs/features.md).

Each run is an ordinary model directory, `<out>/runs/<dataset>-<setting>`, trained by bert4rec-train
(bert4rec-evaluate and TensorBoard read it). Re-running the same command skips finished runs and resumes
unfinished ones. The runs use --recipe (default cpu-30m; docs/training.md) with
--budget as each run's time budget, or --train_steps steps. The report (`report.md`, `report.csv`
and PNG figures) is rewritten after every run. With --deadline no run starts that would end after
it (a job's or a session's end): the runs left over train when the command is given again.

A tuned run (table2_tuned) trains the settings of its study, `<studies>/<dataset>-<setting>/best.flags`
(--studies, default <out>/studies). With --tune_budget the studies missing run first (bert4rec-tune
with the run's loss and overrides, --recipe, --seed and --eval_every; --jobs trials at once), each
continued from where it stopped when the command is given again:

    bert4rec-reproduce table2_tuned --datasets ml-1m --recipe cpu-1h --budget 1h --tune_budget 1h \\
        --out reports/tuned --source_file ml-1m=../shared/datasets/ml-1m/ml-1m.txt.gz
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys
import time

from bert4rec_tf import cli
from bert4rec_tf.data.registry import get_spec
from bert4rec_tf.experiments import scheduler
from bert4rec_tf.experiments.calibration import START_TOLERANCE, usable_cores
from bert4rec_tf.experiments.plans import EXPERIMENTS, RENAMED, plan, resolved_settings
from bert4rec_tf.experiments.records import own_record, read_record, run_status, settings_changes, stale_fields
from bert4rec_tf.experiments.results import (compared_speeds, folder_changed, provenance_file, recorded_datasets,
                                             report_datasets, slower_cores, start_provenance, write_reports)
from bert4rec_tf.experiments.commands import (attributes_folder, missing_attributes, settings_of, source_files,
                                              train_command)
from bert4rec_tf.experiments.scheduler import core_groups, parse_deadline, run_jobs, trained_seconds
from bert4rec_tf.experiments.tuned import (keep_study, recorded_choice, study_dir, study_summary, tune_command,
                                           tune_studies, tuned_plan)
from bert4rec_tf.files import read_json
from bert4rec_tf.tasks import recipe_overrides
from bert4rec_tf.tuning.results import SUMMARY


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.argument_parser(__doc__)
    # A renamed experiment is accepted here, so that `plan` names its new name in one line.
    parser.add_argument("experiment", choices=[*EXPERIMENTS, *RENAMED], metavar="{" + ",".join(EXPERIMENTS) + "}")
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
    parser.add_argument("--studies", default=None,
                        help="folder of the tuned runs' studies, <dataset>-<setting> each (default <out>/studies)")
    parser.add_argument("--tune_budget", default=None,
                        help="tune the tuned runs whose study has no result yet first, each with this budget of "
                             "trials (bert4rec-tune --budget, e.g. 1h); a study stopped earlier continues")
    parser.add_argument("--trial_budget", default="10m", help="bert4rec-tune --trial_budget of those studies")
    parser.add_argument("--attributes", default=None,
                        help="folder of the attribute files (item_features.csv, user_features.csv) of the runs that "
                             "read them (features; default <out>/attributes; for ML-1m bert4rec-movielens-features "
                             "writes them)")
    return parser.parse_args(argv)


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
        sources = source_files(args)
        if args.budget:
            cli.parse_duration(args.budget, "--budget")
        if args.tune_budget:
            cli.parse_duration(args.tune_budget, "--tune_budget")
        cli.parse_duration(args.trial_budget, "--trial_budget")
        # A tuned run whose study ran on another machine and whose record is here is not tuned again.
        recorded = functools.partial(recorded_choice, args=args, sources=sources)
        runs, untuned = tuned_plan(runs, args, recorded)
        if untuned and not args.tune_budget and not args.dry_run:
            raise ValueError(f"run {untuned[0].name}: its study {study_dir(untuned[0], args)} has chosen nothing yet: "
                             "give --tune_budget (e.g. 1h) to tune it first, or --studies with the folder of its study")
        for run in untuned:
            tune_command(run, args, sources)  # a run bert4rec-tune cannot take fails here
        deadline = parse_deadline(args.deadline, time.time()) if args.deadline else None
        groups: list[list[int] | None] = core_groups(args.jobs, usable_cores()) if args.jobs > 1 else [None]

        def report_plan() -> tuple[list, list, dict[str, list[str]]]:
            # The report covers the whole plan of every data set asked for or already recorded, and
            # counts and names the tuned runs whose study has chosen nothing yet (it cannot read them).
            # Every run it reads has its settings resolved: a plan that cannot be resolved fails here.
            ready, awaiting = tuned_plan(plan(args.experiment, report_datasets(datasets, recorded_datasets(args))),
                                         args, recorded)
            return ready, awaiting, {run.name: settings_of(run, args, sources) for run in ready}

        reported, awaiting, reported_settings = report_plan()
        for run in runs:  # a run train.py would refuse (a flag it lacks, a setting its model does not read) fails here
            try:
                cli.check_train_flags(train_command(run, args, sources)[len(scheduler.TRAIN):])
                resolved_settings(settings_of(run, args, sources), strict=True)
                if get_spec(run.dataset).url is None and run.dataset not in sources:
                    raise ValueError(f"data set {run.dataset!r} has no download: give --source_file "
                                     f"{run.dataset}=PATH")
                absent = None if args.dry_run else missing_attributes(run, args)
                if absent:
                    raise ValueError(f"its attribute file {absent} does not exist: give --attributes with the folder "
                                     "of item_features.csv and user_features.csv (for ML-1m: bert4rec-movielens-"
                                     f"features --folder <the folder of movies.dat> --out {attributes_folder(args)})")
            except ValueError as error:
                raise ValueError(f"run {run.name}: {error}") from None
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
        settings = settings_of(run, args, sources)
        origin = provenance_file(model_dir)
        if state != "new" and ((os.path.isfile(origin) and read_json(origin, "run provenance").get(
                "settings", settings) != settings) or folder_changed(model_dir, settings)):
            return "other settings"
        if state != "finished" and args.results_dir and read_record(args.results_dir, args.experiment, run, settings):
            return "recorded"
        return state

    def changed(run) -> list[str]:
        """What differs in the run's own record made with another configuration (a preset or recipe
        changed since): the run trains again."""
        settings = settings_of(run, args, sources)
        record = own_record(args.results_dir, args.experiment, run, settings) if args.results_dir else None
        return stale_fields(record, settings) if record else []

    def other_flags(run, state: str) -> list[str]:
        """The flags by which the new run's record in --results_dir differs, when it was made with other
        flags than the plan gives now (`settings_changes`): the run trains again and replaces it."""
        return settings_changes(args.results_dir, args.experiment, run, settings_of(run, args, sources)) if (
            args.results_dir and state == "new") else []

    if args.dry_run:
        for run in untuned:
            print(f"to tune first ({args.tune_budget or 'give --tune_budget'}): {run.name}: bert4rec-tune "
                  f"{shlex.join(tune_command(run, args, sources)[3:])}")
        length = (f"for {args.budget}" if args.budget else f"{args.train_steps} steps" if args.train_steps
                  else "as the recipe says")
        print(f"{args.experiment}: {len(runs)} runs, each {length} (recipe {args.recipe})")
        for index, run in enumerate(runs, 1):
            state, stale = status(run), changed(run)
            flags = other_flags(run, state)
            if state == "new" and stale:
                state = f"new: its record is of another configuration ({', '.join(stale)})"
            elif flags:
                state = f"new: its record was made with other flags ({'; '.join(flags)})"
            print(f"{index:>3}. {run.name:<32} [{state}] "
                  f"{shlex.join(train_command(run, args, sources)[len(scheduler.TRAIN):])}")
        return 0
    if untuned:
        try:
            tune_studies(untuned, args, sources)
            order = [run.name for run in plan(args.experiment, datasets)]
            runs = sorted(runs + tuned_plan(untuned, args)[0], key=lambda run: order.index(run.name))
            reported, awaiting, reported_settings = report_plan()
            for run in runs:
                resolved_settings(settings_of(run, args, sources), strict=True)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    states = {run.name: status(run) for run in runs}
    clashes = [name for name, state in states.items() if state == "other settings"]
    if clashes:
        print(f"error: {os.path.join(args.out, 'runs', clashes[0])} was trained with other settings than this "
              "command's (or with a configuration they no longer give); give another --out, or the flags it was "
              "started with (--dry_run lists the plan)",
              file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    todo = []
    for index, run in enumerate(runs, 1):
        state = states[run.name]
        if state == "finished":
            print(f"run {index}/{len(runs)}: {run.name} finished earlier, skipped", flush=True)
        elif state == "recorded":
            shared = read_record(args.results_dir, args.experiment, run, settings_of(run, args, sources)).get("same_as")
            where = f"as {shared} " if shared else ""
            print(f"run {index}/{len(runs)}: {run.name} recorded in {args.results_dir} {where}with these settings, "
                  "skipped", flush=True)
        else:
            stale = changed(run) if state == "new" else []
            flags = other_flags(run, state)
            if stale:
                print(f"run {index}/{len(runs)}: {run.name}: its record in {args.results_dir} was made with another "
                      f"configuration than its settings give now ({', '.join(stale)} differ): it trains again",
                      flush=True)
            elif flags:
                print(f"run {index}/{len(runs)}: {run.name}: its record in {args.results_dir} was made with other flags "
                      f"({'; '.join(flags)}): it trains again and its record is replaced", flush=True)
            todo.append((index, run, state))

    def run_budget(run) -> float:
        return cli.parse_duration(args.budget) if args.budget else float(
            recipe_overrides(args.recipe, run.dataset, run.model).get("time_budget", 0.0))

    def refuse(run, speed: dict) -> str | None:
        return None if args.allow_slower_cores else slower_cores(speed, compared_speeds(args, reported))

    def prepare(run, cores: list[int] | None, speed: dict | None) -> list[str]:
        from bert4rec_tf.training.run_folder import RunFolder  # it loads TensorFlow: only once a run starts

        holder = RunFolder(os.path.join(args.out, "runs", run.name)).holder()
        if holder:
            raise ValueError(f"{os.path.join(args.out, 'runs', run.name)} is in use by {holder}: wait for it to end, "
                             "or give another --out")
        settings = settings_of(run, args, sources)
        if run.tuned:  # a study that chose in an earlier command: its result is kept too
            keep_study(run, args)
        start_provenance(os.path.join(args.out, "runs", run.name), command, cores, settings, speed,
                         study_summary(run, args) if run.tuned else None)
        return train_command(run, args, sources)

    def report() -> None:
        write_reports(args, reported, reported_settings, command,
                      lambda run: study_summary(run, args) if run.tuned and os.path.isfile(
                          os.path.join(study_dir(run, args), SUMMARY)) else None,
                      awaiting_study=[run.name for run in awaiting])

    def trained(run) -> float:
        return trained_seconds(os.path.join(args.out, "runs", run.name))

    failed, postponed, refused, spent = run_jobs(todo, len(runs), groups, deadline, args.out, run_budget, refuse,
                                                 prepare, report, trained)
    if failed:
        return 1  # the report was written when the run failed
    if not spent:  # every run was skipped: the report has not been written in this call
        report()
    if postponed:
        print(f"{len(postponed)} run{'s' * (len(postponed) > 1)} not started before the deadline "
              f"({', '.join(postponed)}): give the command again to train "
              f"{'them' if len(postponed) > 1 else 'it'}", flush=True)
    print(f"report: {os.path.join(args.out, 'report.md')}"
          + (f" and {os.path.join(args.results_dir, args.experiment + '.md')}" if args.results_dir else ""))
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
