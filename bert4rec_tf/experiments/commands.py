"""The train command of a run of a plan, as `bert4rec-reproduce` runs it and records its settings."""

from __future__ import annotations

import argparse
import os
import shlex

from bert4rec_tf.experiments import scheduler
from bert4rec_tf.experiments.plans import ATTRIBUTES_TOKEN, derived_flags, run_settings
from bert4rec_tf.tasks import preset


def source_files(args: argparse.Namespace) -> dict[str, str]:
    """The local source file of each data set, from `--source_file DATASET=PATH` (repeatable).

    Raises:
        ValueError: for an item that is not DATASET=PATH.
    """
    if any("=" not in item for item in args.source_file):
        raise ValueError("--source_file takes DATASET=PATH")
    return dict(item.split("=", 1) for item in args.source_file)


def attributes_folder(args: argparse.Namespace) -> str:
    """Where the runs' attribute files are (`--attributes`, default `<out>/attributes`)."""
    return args.attributes or os.path.join(args.out, "attributes")


def missing_attributes(run, args: argparse.Namespace) -> str | None:
    """The first attribute file `run` reads that does not exist, or None."""
    folder = attributes_folder(args)
    for flag in run.flags:
        if ATTRIBUTES_TOKEN in flag:
            path = flag.split("=", 1)[1].replace(ATTRIBUTES_TOKEN, folder)
            if not os.path.isfile(path):
                return path
    return None


def train_command(run, args: argparse.Namespace, sources: dict[str, str], resolve: bool = True) -> list[str]:
    """The train command line of `run`; with `resolve`, the attribute files' folder in place of
    `ATTRIBUTES_TOKEN` (the command to run), else the token (its settings)."""
    command = [*scheduler.TRAIN, "--dataset", run.dataset, "--model", run.model, "--model_dir", os.path.join(args.out, "runs", run.name),
               "--seed", str(args.seed), "--eval_every", str(args.eval_every), "--recipe", args.recipe]
    trains = preset(run.dataset, run.model).has("train_steps")  # a family that trains nothing takes no length
    if args.budget and trains:
        command += ["--time_budget", args.budget]
    if args.train_steps and trains:
        command += ["--train_steps", str(args.train_steps)]
        if args.recipe != "paper":
            command += ["--config", "time_budget=0"]
    if args.data_dir:
        command += ["--data_dir", args.data_dir]
    if run.dataset in sources:
        command += ["--source_file", sources[run.dataset]]
    folder = attributes_folder(args)
    command += [flag.replace(ATTRIBUTES_TOKEN, folder) if resolve else flag for flag in run.flags]
    try:
        extra = shlex.split(args.extra)
    except ValueError as error:
        raise ValueError(f"--extra {args.extra!r} is not a command line ({str(error).lower()}): quote it as the shell "
                         "would, e.g. --extra \"--config item_features='my file.csv'\"") from None
    return command + derived_flags(run, run_settings(command[len(scheduler.TRAIN):]), extra) + extra


def settings_of(run, args: argparse.Namespace, sources: dict[str, str]) -> list[str]:
    """The run's train.py settings: its command line without the script and the local paths."""
    return run_settings(train_command(run, args, sources, resolve=False)[len(scheduler.TRAIN):])
