"""The tuned runs of a plan (table2_tuned): each trains the settings its study chose, the study run
first where it has chosen nothing, its result kept beside the records."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import os
import shlex
import subprocess
import sys

from bert4rec_tf.experiments.commands import settings_of, source_files
from bert4rec_tf.files import copy_file_atomic, read_json
from bert4rec_tf.tuning.results import BEST_CONFIG, BEST_FLAGS, SUMMARY


def study_dir(run, args: argparse.Namespace) -> str:
    """The folder of the study whose chosen settings the tuned `run` trains."""
    return os.path.join(args.studies or os.path.join(args.out, "studies"), f"{run.dataset}-{run.against}")


# What a study's folder holds of its result that --results_dir keeps beside the records: the chosen
# configuration, its flags and the summary, so that the tuned run trains the same choice on a machine
# without the study.
KEPT_STUDY_FILES = (BEST_CONFIG, BEST_FLAGS, SUMMARY)


def kept_study_dir(run, args: argparse.Namespace) -> str | None:
    """The copy of the result of the study of the tuned `run` in --results_dir
    (`<results_dir>/<experiment>/studies/<dataset>-<setting>`), or None without --results_dir."""
    if not args.results_dir:
        return None
    return os.path.join(args.results_dir, args.experiment, "studies", f"{run.dataset}-{run.against}")


def chosen_dir(run, args: argparse.Namespace) -> str:
    """The study folder whose result the tuned `run` trains: its study's own once it has chosen, else
    the copy kept in --results_dir when there is one (the study ran on another machine)."""
    own, kept = study_dir(run, args), kept_study_dir(run, args)
    if os.path.isfile(os.path.join(own, SUMMARY)) or not kept or not os.path.isfile(os.path.join(kept, SUMMARY)):
        return own
    return kept


def keep_study(run, args: argparse.Namespace) -> None:
    """Copies the result of the study of the tuned `run` (`KEPT_STUDY_FILES`) to `kept_study_dir`, each
    file complete or absent; nothing without --results_dir or before the study has chosen."""
    own, kept = study_dir(run, args), kept_study_dir(run, args)
    if not kept or not all(os.path.isfile(os.path.join(own, name)) for name in KEPT_STUDY_FILES):
        return
    os.makedirs(kept, exist_ok=True)
    for name in KEPT_STUDY_FILES:
        copy_file_atomic(os.path.join(own, name), os.path.join(kept, name))


def chosen_flags(run, args: argparse.Namespace) -> list[str] | None:
    """The --config flags of the settings the study of the tuned `run` chose, from its summary.json's
    "choice" (`tuning.results.choice_record`): the study's fixed overrides, then the chosen settings,
    in their order; None when the study has chosen nothing yet.

    Raises:
        ValueError: when the study tuned another data set, model, recipe, seed or loss than the run
            trains, or tuned on another source file (`_check_study_data`), or its summary.json is of an
            older version, without "choice".
    """
    folder = chosen_dir(run, args)
    path = os.path.join(folder, SUMMARY)
    found = read_json(path, "study summary") if os.path.isfile(path) else {}
    if "best" not in found:
        return None
    choice = found.get("choice")
    if choice is None:
        raise ValueError(f"run {run.name}: the summary.json of its study {folder} was written by an older version (it "
                         "holds no \"choice\"): run the study's bert4rec-tune command again, which rewrites it "
                         "(--dry_run prints the command), or give --studies with another folder")
    pairs = dict(zip(run.flags[0::2], run.flags[1::2]))
    wanted = {"dataset": run.dataset, "model": run.model, "recipe": args.recipe, "seed": args.seed,
              "loss": pairs.get("--loss")}
    for key, value in wanted.items():
        if choice.get(key) != value:
            raise ValueError(f"run {run.name}: its study {folder} was made with --{key} {choice.get(key)}, the run "
                             f"trains {value}: give another --studies or tune it again")
    _check_study_data(run, args, folder)
    overrides = [*choice["overrides"], *(f"{key}={value}" for key, value in choice["settings"])]
    return [flag for override in overrides for flag in ("--config", override)]


def _check_study_data(run, args: argparse.Namespace, folder: str) -> None:
    """Refuses the study in `folder` when it tuned on another source file than the one this command
    gives the tuned `run`'s data set (its summary.json's "data"; a study of older code recorded
    none). Only the data sets this command trains are checked: the report's other rows are records.

    Raises:
        ValueError: one line naming the run, the study and the two sources.
    """
    from bert4rec_tf.data.prepare import source_identity

    path = os.path.join(folder, SUMMARY)
    studied = (read_json(path, "study summary").get("data") or {}).get("source") if os.path.isfile(path) else None
    if studied is None or run.dataset not in [name.strip() for name in args.datasets.split(",")]:
        return
    ours = source_identity(source_files(args).get(run.dataset))
    if studied.split("-")[:2] != ours.split("-")[:2]:  # the same bytes, whatever encoding they were read in
        raise ValueError(f"run {run.name}: its study {folder} tuned on another source file ({studied}; this command's "
                         f"{run.dataset} data is {ours}): give the study of this data with --studies, or tune it "
                         "again in another folder")


def tuned_plan(runs: list, args: argparse.Namespace, recorded=None) -> tuple[list, list]:
    """`runs` with each tuned run's flags followed by its study's chosen settings (`chosen_flags`), and
    the tuned runs whose study has no result yet (left out of the first list). `recorded(run)`: the
    chosen settings of a tuned run that has no study here but a record (its study ran elsewhere), or
    None; the report shows such a run from its record."""
    ready, untuned = [], []
    for run in runs:
        flags = chosen_flags(run, args) if run.tuned else []
        if flags is None and recorded is not None:
            flags = recorded(run)
        if flags is None:
            untuned.append(run)
        else:
            ready.append(dataclasses.replace(run, flags=run.flags + tuple(flags)) if flags else run)
    return ready, untuned


def recorded_choice(run, args: argparse.Namespace, sources: dict[str, str]) -> list[str] | None:
    """The --config flags that the tuned `run`'s own record in --results_dir was trained with beyond
    the run's untuned settings (its study's choice), when they make exactly the record's settings;
    else None."""
    if not args.results_dir:
        return None
    path = os.path.join(args.results_dir, args.experiment, f"{run.name}.json")
    if not os.path.isfile(path):
        return None
    theirs = read_json(path, "run record").get("settings") or []
    base = settings_of(run, args, sources)
    # Each of the run's own pairs is taken away once: the study's best.flags repeats the run's --config
    # (SASRec (bce)'s code_network=true is in its settings twice).
    left = collections.Counter(tuple(pair) for pair in zip(base[0::2], base[1::2]))
    chosen = []
    for pair in zip(theirs[0::2], theirs[1::2]):
        if left[pair] > 0:
            left[pair] -= 1
        elif pair[0] == "--config":
            chosen += pair
    tuned = dataclasses.replace(run, flags=run.flags + tuple(chosen))
    return chosen if settings_of(tuned, args, sources) == theirs else None


def study_summary(run, args: argparse.Namespace) -> dict:
    """What the study of the tuned `run` spent and chose (its summary.json), with its folder's name."""
    folder = chosen_dir(run, args)
    path = os.path.join(folder, SUMMARY)
    found = read_json(path, "study summary") if os.path.isfile(path) else {}
    return {"study": os.path.basename(folder), **found}


def tune_command(run, args: argparse.Namespace, sources: dict[str, str]) -> list[str]:
    """The bert4rec-tune command of the study of the tuned `run`: its loss and --config overrides, the
    command's recipe, seed and validation interval."""
    command = [sys.executable, "-m", "bert4rec_tf.scripts.tune", "--dataset", run.dataset, "--model", run.model,
               "--recipe", args.recipe, "--budget", args.tune_budget or "<--tune_budget>", "--trial_budget", args.trial_budget,
               "--seed", str(args.seed), "--eval_every", str(args.eval_every), "--jobs", str(args.jobs),
               "--study_dir", study_dir(run, args)]
    for flag, value in zip(run.flags[0::2], run.flags[1::2]):
        if flag not in ("--loss", "--config"):
            raise ValueError(f"run {run.name}: bert4rec-tune takes no {flag}")
        command += [flag, value]
    if args.budget:  # the test run's budget: the trials follow its schedule
        command += ["--schedule_budget", args.budget]
    if args.data_dir:
        command += ["--data_dir", args.data_dir]
    if run.dataset in sources:
        command += ["--source_file", sources[run.dataset]]
    return command


def run_study(command: list[str]) -> int:
    """Runs a bert4rec-tune command in the package's environment, ending with this process (Linux);
    its exit status."""
    from bert4rec_tf.experiments.scheduler import child_setup
    from bert4rec_tf.files import package_environment

    return subprocess.run(command, env=package_environment(), check=False,
                          preexec_fn=functools.partial(child_setup, os.getpid(), None)).returncode


def tune_studies(untuned: list, args: argparse.Namespace, sources: dict[str, str]) -> None:
    """Runs the studies of the `untuned` runs, one after another.

    Raises:
        ValueError: when a study fails.
    """
    for index, run in enumerate(untuned, 1):
        command = tune_command(run, args, sources)
        print(f"study {index}/{len(untuned)}: {study_dir(run, args)} ({args.tune_budget} of trials): "
              f"{shlex.join(command[3:])}", flush=True)
        if run_study(command):
            raise ValueError(f"the study of {run.name} failed (its output is above); the same command continues it")
        keep_study(run, args)
