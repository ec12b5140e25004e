"""Tunes a model on validation: a study of time-budgeted trials, stopped early on their curves.

    bert4rec-tune --dataset ml-1m --model bpr_mf --budget 1h --trial_budget 10m --jobs 2
    bert4rec-train --config_file studies/ml-1m-bpr_mf-default/best_config.json

Each trial trains the recipe (--recipe, default cpu-30m) with the settings the sampler draws from
the model's search space (docs/tuning.md lists them) for --trial_budget: the first minutes of a run
of --schedule_budget (by default the recipe's time budget, the test run's), so that its learning rate
follows the test run's schedule; the pruner stops the trials whose validation falls behind.
--budget is the trials' time in total (one core each), so --jobs 2 spends it in half the wall time.
The study lives in --study_dir (its trials in study.db, SQLite, or a database given by --storage,
which several machines can share). Killing the command and running it again continues the study; a
larger --budget tunes on. At the end best_config.json holds the chosen configuration, which
`bert4rec-train --config_file` trains and tests (best.flags: the same as flags, for people).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from absl import flags

from bert4rec_tf import cli
from bert4rec_tf.config import RECIPES
from bert4rec_tf.constants import SELECTION_METRIC
from bert4rec_tf.tasks import TASKS

cli.define_data_flags()
flags.DEFINE_enum("loss", None, list(dict.fromkeys(loss for task in TASKS.values() for loss in task.losses)),
                  "The loss tuned (default: the model's own); one study per loss.")
flags.DEFINE_enum("recipe", "cpu-30m", list(RECIPES), "The recipe every trial starts from, before the sampled "
                  "settings; its time budget is the default --schedule_budget.")
flags.DEFINE_string("budget", "1h", "The study's budget: its trials' training and validation time in total "
                    "(one core each), e.g. 1h, 90m.")
flags.DEFINE_string("trial_budget", "10m", "Each trial's training and validation time: where it stops.")
flags.DEFINE_string("schedule_budget", None, "The time budget the trials' learning-rate schedule is fitted to "
                    "(default: the recipe's, as the test run trains; at least --trial_budget).")
flags.DEFINE_string("study_dir", None, "The study's folder (default: studies/<dataset>-<model>-<loss>).")
flags.DEFINE_string("storage", None, "A database URL for the trials (e.g. postgresql://host/db), shared by "
                    "several machines; default: SQLite in --study_dir.")
flags.DEFINE_integer("jobs", 1, "Trials at once, each in its own process on its own core.")
flags.DEFINE_integer("eval_every", 500, "Steps between a trial's validations (where the pruner may stop it).")
flags.DEFINE_string("min_resource", None, "The pruner's first rung (default: a ninth of --trial_budget).")
flags.DEFINE_integer("worker", None, "Internal: run as worker N of --jobs (pinned to core N).")
FLAGS = flags.FLAGS


def _settings():
    from bert4rec_tf.tuning.settings import new_settings

    min_resource = cli.parse_duration(FLAGS.min_resource, "--min_resource") if FLAGS.min_resource else None
    schedule = cli.parse_duration(FLAGS.schedule_budget, "--schedule_budget") if FLAGS.schedule_budget else None
    return new_settings(FLAGS.dataset, FLAGS.model, FLAGS.loss, FLAGS.recipe,
                        cli.parse_duration(FLAGS.budget, "--budget"),
                        cli.parse_duration(FLAGS.trial_budget, "--trial_budget"), FLAGS.config, FLAGS.seed,
                        FLAGS.eval_every, min_resource, FLAGS.encoding, schedule)


def _run() -> None:
    from bert4rec_tf.tuning.results import BEST_CONFIG
    from bert4rec_tf.tuning.study import tune
    from bert4rec_tf.tuning.workers import check_jobs, run_worker

    check_jobs(FLAGS.jobs)
    settings = _settings()
    study_dir = FLAGS.study_dir or os.path.join("studies", settings.name)
    if FLAGS.worker is not None:
        _pin(FLAGS.worker)
        try:
            run_worker(study_dir, settings, FLAGS.storage, FLAGS.data_dir, FLAGS.source_file, FLAGS.encoding)
        except KeyboardInterrupt:
            raise SystemExit(130) from None  # the command that started the workers says it once
        return
    print(f"study {settings.name} in {study_dir}: {cli.format_duration(settings.budget)} of trials of "
          f"{cli.format_duration(settings.trial_budget)} each (of a {cli.format_duration(settings.schedule)} "
          f"schedule), {FLAGS.jobs} at once; searching "
          + ", ".join(f"{key} {text}" for key, text in settings.space.items()), flush=True)
    try:
        done = tune(study_dir, settings, FLAGS.storage, FLAGS.data_dir, FLAGS.source_file, FLAGS.encoding,
                           workers=None if FLAGS.jobs == 1 else lambda: _run_workers(study_dir))
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"interrupted: the study in {study_dir} is kept, and a running trial trains on from "
                                "its last checkpoint; run the same command again to continue it") from None
    counts = ", ".join(f"{count} {state}" for state, count in done["trials"].items())
    best = done["best"]
    print(f"trials: {counts}; {cli.format_duration(done['spent_seconds'])} of trials spent")
    print(f"best: trial {best['number']}, validation {'/'.join(SELECTION_METRIC)} {best['value']:.4f} with "
          + ", ".join(f"{key}={value}" for key, value in best["settings"].items()))
    start = done.get("start")
    if start and start.get("value") is not None:
        print(f"the recipe's settings: trial {start['number']} ({start['state']}), validation {start['value']:.4f}")
    print(f"figures: {', '.join(done['figures'])}")
    config = os.path.join(study_dir, BEST_CONFIG)
    print(f"train and test it: bert4rec-train --config_file {config} --model_dir runs/{settings.name}-tuned")


def _pin(worker: int) -> None:
    """Keeps this process on one core (and ends it with its parent, on Linux)."""
    if hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[worker % len(cores)]})
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _run_workers(study_dir: str) -> None:
    """Runs --jobs copies of this command as workers and waits for them."""
    arguments = [argument for argument in sys.argv[1:] if not argument.startswith(("--worker", "--jobs", "--study_dir"))]
    arguments.append(f"--study_dir={study_dir}")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # where bert4rec_tf is
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    workers = [subprocess.Popen([sys.executable, "-m", "bert4rec_tf.scripts.tune", *arguments, f"--worker={number}"],
                                env=environment) for number in range(FLAGS.jobs)]
    try:
        codes = [worker.wait() for worker in workers]
    except KeyboardInterrupt:
        # The workers had Ctrl-C too: each queues its trial again and ends; one that does not in time is
        # killed (its trial is retried once its heartbeat is stale).
        deadline = time.monotonic() + 30
        for worker in workers:
            try:
                worker.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.kill()
        raise
    if any(codes):
        raise ValueError(f"a tuning worker failed (exit statuses {codes}); run the same command again to continue")


def main() -> None:
    """The `bert4rec-tune` command (also `python run_scripts/tune.py` in a checkout)."""
    cli.run_absl_command(_run, __name__)


if __name__ == "__main__":
    main()
