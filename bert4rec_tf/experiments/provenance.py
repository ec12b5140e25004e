"""Where each run of a report comes from: the speed of its machine and the command that trained it.

`machine_notes` says which runs had slower cores than the fastest (from the speed measurement each
record holds, `bert4rec_tf.experiments.calibration`); `portable_command` rewrites a record's command
so that it runs from any checkout and names nothing of the machine that ran it.
"""

from __future__ import annotations

import os
import posixpath
import shlex

from bert4rec_tf.files import PACKAGE_PARENT

def speed_cell(measurements: list[dict] | None) -> str:
    from bert4rec_tf.experiments.calibration import FIGURES, speed_range

    spans = [speed_range(measurements, figure) for figure in FIGURES]
    if not all(spans):
        return "not measured"
    return ", ".join(f"{low:g}" if low == high else f"{low:g}-{high:g}" for low, high in spans)


def machine_notes(records: list[dict]) -> list[str]:
    """What the report says about its runs' machines (`bert4rec_tf.experiments.calibration`): the
    trained runs whose cores were more than 10% slower than the fastest run's on either figure, whose
    resumes ran on cores that differ by more, and which have no measurement. Empty when all were
    measured alike."""
    from bert4rec_tf.experiments.calibration import (
        FIGURES,
        TOLERANCE,
        describe,
        fastest,
        slower_than,
        speed_range,
    )

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


# reproduce.py's flags that take a value (`--flag value` or `--flag=value`); the others are switches.
_VALUE_FLAGS = ("--datasets", "--budget", "--train_steps", "--recipe", "--out", "--seed", "--eval_every",
                "--data_dir", "--source_file", "--extra", "--only", "--jobs", "--deadline", "--results_dir")
# Flags a report leaves out of the commands it lists: where the data cache was and when a command had
# to stop change no result.
_LOCAL_ONLY = ("--data_dir", "--deadline")


def _in_checkout(path: str, roots: list[str]) -> str | None:
    """`path` relative to the checkout it lies in (an absolute path under one of `roots`, or a relative
    path that does not leave the checkout), else None."""
    if os.path.isabs(path):
        for root in roots:
            relative = os.path.relpath(path, root)
            if relative != ".." and not relative.startswith(".." + os.sep):
                return relative.replace(os.sep, "/")
        return None
    relative = posixpath.normpath(path.replace(os.sep, "/"))
    return None if relative == ".." or relative.startswith("../") else relative


def portable_command(command: str, experiment: str, roots: tuple[str, ...] = ()) -> str:
    """A record's reproduce.py command as a report lists it: from the checkout's root, with no path of
    the machine that ran it and no clock time. Paths inside the checkout (the one of this package, one
    of `roots`, or the one an absolute `--results_dir .../docs/results` names) become relative to it;
    outside it, a `--source_file` is named by its file name, `--out` becomes `reports/<experiment>` and
    `--results_dir` `docs/results`; `--data_dir` and `--deadline` are left out."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    roots = [*roots, PACKAGE_PARENT]
    for index, word in enumerate(words):
        value = word.split("=", 1)[1] if word.startswith("--results_dir=") else (
            words[index + 1] if word == "--results_dir" and index + 1 < len(words) else None)
        if value and os.path.isabs(value) and posixpath.normpath(value).endswith("/docs/results"):
            roots.insert(0, posixpath.dirname(posixpath.dirname(posixpath.normpath(value))))
    kept, index = [], 0
    while index < len(words):
        word = words[index]
        flag, equals, value = word.partition("=")
        if not word.startswith("--") or flag not in _VALUE_FLAGS:
            kept.append(word)
            index += 1
            continue
        if not equals:
            value = words[index + 1] if index + 1 < len(words) else ""
            index += 1
        index += 1
        if flag in _LOCAL_ONLY:
            continue
        if flag == "--source_file":
            dataset, separator, path = value.rpartition("=")
            inside = _in_checkout(path, roots)
            value = f"{dataset}{separator}{inside if inside is not None else posixpath.basename(path)}"
        elif flag in ("--out", "--results_dir"):
            inside = _in_checkout(value, roots)
            value = inside if inside is not None else (f"reports/{experiment}" if flag == "--out" else "docs/results")
        kept += [flag, value]
    return shlex.join(kept)
