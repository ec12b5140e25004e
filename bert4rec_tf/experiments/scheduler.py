"""The job scheduler of `bert4rec-reproduce`: it trains a plan's runs as train.py processes, one or a
few at a time, each pinned to its own share of the cores, and starts none that would end after a
deadline or on cores too slow to compare.

`run_jobs` is the loop; `time_left`, `expected_seconds` and `parse_deadline` are its clock,
`core_groups` its shares of the cores and `machine_speed` the measurement of a run's cores just
before it trains (`bert4rec_tf.experiments.calibration`). What a run is, and what is done before it
starts and after it ends, the command (`bert4rec_tf.experiments.reproduce`) says.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Callable

from bert4rec_tf import cli
from bert4rec_tf.experiments.plans import Run
from bert4rec_tf.files import package_environment, read_json

# Each run is `bert4rec-train` run as a module by this Python, with this package first on its path.
TRAIN = [sys.executable, "-m", "bert4rec_tf.scripts.train"]


_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


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


def expected_seconds(run, budget: float, spent: list[float], trained: float = 0.0) -> float | None:
    """How long `run` is expected to take: POP about two minutes; a trained run its `budget` and
    `RUN_OVERHEAD`, or the mean of the trained runs before it (`spent`) when that is longer, less the
    seconds it `trained` before (a resumed run; at least the overhead is left). None when neither is
    known (a run of --train_steps before any has ended)."""
    if run.model == "pop":
        return POP_SECONDS
    measured = sum(spent) / len(spent) if spent else 0.0
    expected = max(measured, budget + RUN_OVERHEAD if budget else 0.0)
    if not expected:
        return None
    return max(expected - trained, RUN_OVERHEAD) if trained else expected


def trained_seconds(folder: str) -> float:
    """The training and validation seconds that the run folder `folder` has behind it (its committed
    `checkpoints/state.json`, see training/run_folder.py): 0 for a new folder, or one whose state
    cannot be read (the run itself then says why when it starts)."""
    try:
        return float(read_json(os.path.join(folder, "checkpoints", "state.json")).get("seconds", 0.0))
    except (OSError, ValueError, AttributeError, TypeError):
        return 0.0


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


def _duration(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def machine_speed(pin=None) -> dict | None:
    """`bert4rec_tf.experiments.calibration.measure()` on the cores `pin` gives a process (the run's),
    measured in a process of its own just before the run trains; None, with a warning, when it fails (a
    run is never held up by its calibration)."""
    try:
        result = subprocess.run([sys.executable, "-m", "bert4rec_tf.experiments.calibration"], capture_output=True,
                                text=True, timeout=600, env=package_environment(),
                                preexec_fn=functools.partial(child_setup, os.getpid(), pin))
        if result.returncode == 0:
            return json.loads(result.stdout.strip().splitlines()[-1])
        problem = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as error:
        problem = str(error)
    print(f"warning: the machine's speed could not be measured ({problem}); the record will lack it",
          file=sys.stderr, flush=True)
    return None


def child_setup(parent: int, pin: Callable[[], None] | None) -> None:
    """In a child process (a run's training or its calibration) before it starts: pinned to its cores
    (`pin`), and on Linux ended (SIGTERM) when the reproduce process `parent` dies, however it dies,
    so no run trains on unwatched; its run folder is left as at any kill, and the same command
    resumes it."""
    if pin is not None:
        pin()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the request was made
            os._exit(1)


def failure_cause(log: str, offset: int, returncode: int) -> str:
    """Why a train process failed: the last `error: ` line it wrote to `log` after byte `offset` (its
    own output), else its exit status or signal."""
    with open(log, encoding="utf-8", errors="replace") as handle:
        handle.seek(offset)
        errors = [line.strip() for line in handle.read().replace("\r", "\n").splitlines()
                  if line.startswith("error: ")]
    if errors:
        return errors[-1].removeprefix("error: ")
    if returncode < 0:
        return f"killed by signal {-returncode} ({signal.Signals(-returncode).name})"
    return f"exit status {returncode}, with no error line in its output"


def run_jobs(todo: list[tuple[int, Run, str]], total: int, groups: list[list[int] | None], deadline: float | None,
             out: str, run_budget: Callable[[Run], float], refuse: Callable[[Run, dict], str | None],
             prepare: Callable[[Run, list[int] | None, dict | None], list[str]],
             finished: Callable[[], None], trained: Callable[[Run], float] = lambda run: 0.0
             ) -> tuple[list[str], list[str], list[str], list[float]]:
    """Trains the `todo` runs ((index in the plan of `total` runs, run, state) in order), `len(groups)` at
    a time, each pinned to its group of cores (None: not pinned), its output in `<out>/<run>.log`.

    A run expected to end after `deadline` is not started. Before a trained run starts, its cores are
    measured (`machine_speed`): when `refuse(run, speed)` gives a reason, neither it nor the runs after it
    start. `prepare(run, cores, speed)` gives its train command (and notes what it needs to), or raises
    a one-line ValueError when the run cannot start (it then counts as failed); `finished()` follows
    every run that ends. A run that fails is named with its cause (the last `error:` line of its
    output), and after it no other starts. A train process ends when this process dies (Linux).
    `trained(run)`: the seconds a run trained before this call (resumed from its checkpoint), which its
    deadline check and the time left do not count again.

    Returns:
        The runs that failed, those postponed by the deadline and those refused (by name), and the
        seconds that each trained run took (a resumed run's with those it trained before).
    """
    # A run takes at least its budget (POP, with nothing to train, takes less and says little).
    budget = max((run_budget(run) for _, run, _ in todo), default=0.0)
    spent: list[float] = []
    running: dict = {}  # process -> (run, start time, slot, log file)
    free = list(range(len(groups)))
    failed, postponed, refused = [], [], []
    while running or (todo and not failed):
        while todo and free and not failed:
            index, run, state = todo.pop(0)
            before = trained(run) if run.model != "pop" else 0.0
            expected = expected_seconds(run, run_budget(run), spent, before)
            if deadline is not None and expected is not None and time.time() + expected > deadline:
                postponed.append(run.name)
                print(f"run {index}/{total}: {run.name} not started: it would end after the deadline "
                      f"({time.strftime('%H:%M', time.localtime(deadline))}; it takes about {_duration(expected)})",
                      flush=True)
                continue
            slot = free.pop(0)
            left = len(todo) + len(running) + 1
            counted = trained_runs([run, *(r for _, r, _ in todo), *(entry[0] for entry in running.values())])
            now = time.monotonic()
            going = tuple(now - entry[1] + entry[5] for entry in running.values() if entry[0].model != "pop")
            estimate = time_left(spent, budget, counted, len(groups), (before,) * bool(before) + going)
            cores = groups[slot]
            print(f"run {index}/{total}: {run.name} ({state})"
                  + (f" on core{'s' if len(cores) > 1 else ''} {','.join(map(str, cores))}" if cores else "")
                  + (f", about {_duration(estimate)} left for {left} runs" if estimate else ""), flush=True)
            pin = (lambda cores=cores: os.sched_setaffinity(0, cores)) if cores else None
            speed = machine_speed(pin) if run.model != "pop" else None  # POP has no compute to compare
            why = None if speed is None else refuse(run, speed)
            if why:
                refused = [run.name] + [other.name for _, other, _ in todo]
                todo.clear()
                print(f"error: run {run.name} not started: {why}. Not started: {', '.join(refused)}; train them on "
                      "cores like those, or give --allow_slower_cores to train anyway (the report flags them)",
                      file=sys.stderr, flush=True)
                free.append(slot)
                continue
            try:
                command = prepare(run, cores, speed)
            except ValueError as error:  # the run cannot start (its folder is in use)
                print(f"error: run {run.name} not started: {error}", file=sys.stderr, flush=True)
                failed.append(run.name)
                free.append(slot)
                continue
            path = os.path.join(out, f"{run.name}.log")
            log = open(path, "a", encoding="utf-8")
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=package_environment(),
                                       preexec_fn=functools.partial(child_setup, os.getpid(), pin))
            running[process] = (run, time.monotonic(), slot, log, os.path.getsize(path), before)
        done = next((process for process in running if process.poll() is not None), None)
        if done is None:
            time.sleep(1.0)
            continue
        run, started, slot, log, offset, before = running.pop(done)
        log.close()
        free.append(slot)
        if done.returncode != 0:
            print(f"error: run {run.name} failed: {failure_cause(log.name, offset, done.returncode)}", file=sys.stderr)
            print(f"its output: {log.name}; once the cause is mended, the same command resumes it", file=sys.stderr,
                  flush=True)
            failed.append(run.name)
        elif run.model != "pop":
            spent.append(time.monotonic() - started + before)  # the whole run's, for the estimates
        finished()
    return failed, postponed, refused, spent
