"""Bad-input and fault cases of issue 91, run against one checkout of the package and classified.

    cd /work/main
    .venv/bin/python -m tests.robustness.bad_input_cases --tree /tmp/old91 --work /tmp/corpus_old --out /tmp/corpus_old.json
    .venv/bin/python -m tests.robustness.bad_input_cases --tree /work/main --work /tmp/corpus_new --out /tmp/corpus_new.json
    .venv/bin/python -m tests.robustness.bad_input_cases --compare /tmp/corpus_old.json /tmp/corpus_new.json \
        --table /tmp/corpus_table.md

Not a pytest module (its name does not start with test_): each case runs the package's commands as a
user does, `PYTHONPATH=<tree> python <tree>/run_scripts/<name>.py ...` (API cases `python -c`), from a
folder of its own under --work (never from the checkout, whose `bert4rec_tf` would shadow the tree's),
one command at a time unless the case is about two processes. Every command has a timeout and runs in
its own session, so that a timeout ends its workers too.

Each case records the command(s), the judged command's exit code, its last stderr lines, whether a
Python traceback appeared (and its lines), what on disk matters (files compared byte for byte with a
snapshot taken before the refused command) and a classification made by the case's own checks:

- ok: the right thing (exit 0 and the correct result, or a refusal in one line that names the
  flag, value or file, with nothing changed on disk);
- clear: refused in one clear line, but something else is off (the reason says what);
- unclear: one line that names none of the cause's flag, value or file;
- traceback: a Python traceback shown (for an API case: an exception other than the ValueError or
  DataError the API documents for bad arguments; an uncaught exception always prints a traceback);
- silent: exit 0 with a wrong result;
- lost: data of an earlier run or study destroyed or overwritten;
- hang: the command did not end within its timeout (killed).

The data are the planted-order set of the package's tests (`tests.tasks.harness.planted_source`:
400 users, 100 items, ids u1 / i86), as data set `beauty` with --source_file.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from typing import Callable

PY = sys.executable
STUDY_NAME = "beauty-bpr_mf-default"
FIXED = ["num_negatives=20", "valid_users=0", "warmup_steps=100"]
MARKER = ".bad_input_cases"
CLASSES = ("ok", "clear", "unclear", "traceback", "silent", "lost", "hang")

# Lines on stderr that are libraries' logs, not what the command says: absl / TensorFlow native
# (I1208 03:00:10.918922 1406 prepare.py:278] ...), Optuna ([I 2026-12-08 03:00:10,338] ...), absl's
# pre-init notice, Python warnings (path.py:12: UserWarning: ...).
LOG_LINE = re.compile(r"^([IWEF]\d{4} [\d:.]+\s+\d+ \S+\]|\[[IWED] \d{4}-\d\d-\d\d |WARNING: All log messages"
                      r"|\S+\.py:\d+: \w*Warning: |(DEBUG|INFO|WARNING|ERROR):[\w.]+:|\s)")


def is_log(line: str) -> bool:
    """A library's log line, or a progress bar (carriage returns, cursor moves, items per second)."""
    return bool(LOG_LINE.match(line)) or bool(re.search(r"\x1b\[|\r|\w+/s\]|\d+%\||^To enable the following instr",
                                                         line))


EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Busy|Warning)\w*)(: (.*))?$")


# --- running commands -----------------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    label: str
    argv: list
    display: str
    rc: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    cwd: str = ""

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stderr

    @property
    def traceback_lines(self) -> int:
        return traceback_lines(self.stderr)

    @property
    def messages(self) -> list[str]:
        return message_lines(self.stderr)

    @property
    def line(self) -> str:
        """What the user reads last: the last message line on stderr; after exit 0 without one, the
        last line on stdout."""
        if self.rc == 0:
            said = [line.strip() for line in self.stdout.splitlines() if line.strip() and not is_log(line)]
            if said:
                return said[-1]
        found = self.messages
        if found and (found[-1].startswith("error:") or not self.traceback):
            return found[-1]
        if self.traceback:
            raised = [line for line in self.stderr.splitlines() if EXCEPTION_LINE.match(line)]
            if raised:
                return raised[-1]
        if self.rc == 0:
            lines = [line.strip() for line in self.stdout.splitlines() if line.strip()]
            return lines[-1] if lines else ""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def tail(self, count: int = 3) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()][-count:]


def traceback_lines(text: str) -> int:
    """The lines of the Python tracebacks in `text`: from each `Traceback` line through its exception
    line (chained tracebacks' linking lines included)."""
    count, inside = 0, False
    for line in text.splitlines():
        if line.startswith("Traceback (most recent call last)"):
            inside = True
        if not inside:
            continue
        count += 1
        if line and not line[0].isspace() and not line.startswith("Traceback") and EXCEPTION_LINE.match(line):
            inside = False
    return count


def message_lines(text: str) -> list[str]:
    """The non-empty stderr lines that are neither libraries' logs nor part of a traceback."""
    found, inside = [], False
    for line in text.splitlines():
        if line.startswith("Traceback (most recent call last)"):
            inside = True
            continue
        if inside:
            if line and not line[0].isspace() and EXCEPTION_LINE.match(line):
                inside = False
            continue
        if line.strip() and not is_log(line) and not line.startswith(("During handling", "The above exception")):
            found.append(line.strip())
    return found


def names_cause(line: str, tokens, folder: str = "") -> list[str]:
    """The tokens (flag, value or file) that `line` names; a path counts only as itself, not as the
    start of a longer path, and a word is not found inside the case's own folder name."""
    found = []
    for token in tokens:
        text = line.replace(folder, "<case folder>") if folder and not token.startswith("/") else line
        if re.search(re.escape(token) + r"(?![\w/])", text):
            found.append(token)
    return found


def says(result: "Result", words: str) -> bool:
    """Whether the judged line holds `words` outside the case's folder name."""
    return words in (result.line.replace(result.cwd, "<case folder>") if result.cwd else result.line)


class Tree:
    """One checkout to run: its scripts, with PYTHONPATH=<tree>."""

    def __init__(self, tree: str, work: str):
        self.tree = os.path.abspath(tree)
        self.work = os.path.abspath(work)
        self.env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        self.env["PYTHONPATH"] = self.tree
        self.source = ""
        self.data = os.path.join(self.work, "_shared", "data")
        self.counter = 0

    def script(self, name: str) -> str:
        return os.path.join(self.tree, "run_scripts", f"{name}.py")

    def _files(self, folder: str, label: str):
        self.counter += 1
        slug = re.sub(r"[^\w]+", "_", label)
        stem = os.path.join(folder, f"cmd{self.counter:02d}-{slug}")
        return stem + ".out", stem + ".err"

    def display(self, argv: list, cwd: str, prefix=()) -> str:
        return f"cd {shlex.quote(cwd)} && PYTHONPATH={shlex.quote(self.tree)} " + shlex.join([*prefix, *argv])

    def start(self, folder: str, label: str, argv: list, prefix=()):
        """Starts a command in its own session; returns (process, stdout path, stderr path, display)."""
        out, err = self._files(folder, label)
        command = [*prefix, *argv]
        with open(out, "w") as stdout, open(err, "w") as stderr:
            process = subprocess.Popen(command, cwd=folder, env=self.env, stdout=stdout, stderr=stderr,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        return process, out, err, self.display(argv, folder, prefix)

    def finish(self, label: str, argv: list, started, timeout: float, began: float) -> Result:
        process, out, err, display = started
        timed_out = False
        try:
            rc = process.wait(timeout=max(1.0, timeout - (time.monotonic() - began)))
        except subprocess.TimeoutExpired:
            kill_group(process.pid, signal.SIGKILL)
            process.wait()
            rc, timed_out = None, True
        return Result(label, argv, display, rc, read(out), read(err), round(time.monotonic() - began, 1), timed_out,
                      os.path.dirname(out))

    def run(self, folder: str, label: str, argv: list, timeout: float = 300, prefix=()) -> Result:
        began = time.monotonic()
        return self.finish(label, argv, self.start(folder, label, argv, prefix), timeout, began)

    def command(self, name: str, folder: str, label: str, arguments: list, timeout: float = 300, prefix=()) -> Result:
        return self.run(folder, label, [PY, self.script(name), *arguments], timeout, prefix)

    def api(self, folder: str, label: str, code: str, timeout: float = 300) -> Result:
        guard = ("import sys, bert4rec_tf\n"
                 f"if not bert4rec_tf.__file__.startswith({self.tree + os.sep!r}):\n"
                 "    sys.exit('harness: the wrong bert4rec_tf was imported: ' + bert4rec_tf.__file__)\n")
        return self.run(folder, label, [PY, "-c", guard + code], timeout)

    def imported(self) -> str:
        probe = subprocess.run([PY, "-c", "import bert4rec_tf; print(bert4rec_tf.__file__)"], cwd=self.work,
                               env=self.env, capture_output=True, text=True, timeout=120)
        return probe.stdout.strip()


def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def kill_group(pid: int, sig) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def group_processes(pgid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes of process group `pgid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z" or int(fields[2]) != pgid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                found.append((int(entry), handle.read().replace(b"\0", b" ").decode(errors="replace")))
        except (OSError, IndexError, ValueError):
            continue
    return found


# --- what is on disk ------------------------------------------------------------------------------

def snapshot(*paths: str) -> dict[str, str]:
    """Every file under `paths` (folders or files) and the sha256 of its bytes."""
    found = {}
    for path in paths:
        if os.path.isfile(path):
            found[path] = digest(path)
        for parent, _, names in os.walk(path):
            for name in names:
                full = os.path.join(parent, name)
                if os.path.isfile(full):
                    found[full] = digest(full)
    return found


def digest(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def compare(before: dict, after: dict) -> dict:
    return {"changed": sorted(path for path in before if path in after and after[path] != before[path]),
            "removed": sorted(path for path in before if path not in after),
            "added": sorted(path for path in after if path not in before)}


def unchanged(difference: dict) -> bool:
    return not any(difference.values())


def short(difference: dict, root: str) -> dict:
    """`compare`'s lists with paths relative to `root`, at most 8 each."""
    def rel(path):
        return os.path.relpath(path, root)
    return {key: [rel(path) for path in value[:8]] + ([f"... {len(value) - 8} more"] if len(value) > 8 else [])
            for key, value in difference.items() if value}


def study_trials(study_dir: str, storage: str | None = None) -> list:
    """The trials of the study in `study_dir` (Optuna's FrozenTrials), read with optuna.load_study."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = storage or f"sqlite:///{os.path.abspath(os.path.join(study_dir, 'study.db'))}"
    return optuna.load_study(study_name=STUDY_NAME, storage=url).get_trials(deepcopy=False)


def trial_rows(trials) -> list[dict]:
    return [{"number": trial.number, "state": trial.state.name, "folder": trial.user_attrs.get("folder"),
             "process": trial.user_attrs.get("process"), "duplicate": bool(trial.user_attrs.get("duplicate")),
             "params": trial.params} for trial in trials]


def duplicate_folders(trials) -> list[list[str]]:
    """Groups of run folders (user attr "folder") whose trials have the same params, ignoring trials
    marked "duplicate" and trials with no params yet."""
    by_params: dict[str, set] = {}
    for trial in trials:
        if trial.user_attrs.get("duplicate") or not trial.params or not trial.user_attrs.get("folder"):
            continue
        by_params.setdefault(json.dumps(trial.params, sort_keys=True), set()).add(trial.user_attrs["folder"])
    return [sorted(folders) for folders in by_params.values() if len(folders) > 1]


def running_trial(database: str, min_number: int = 0) -> int | None:
    """The number of a RUNNING trial (number >= `min_number`) whose user attr "seconds" is above 0."""
    if not os.path.exists(database):
        return None
    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=2)
        try:
            rows = connection.execute(
                "SELECT t.number, a.value_json FROM trials t JOIN trial_user_attributes a ON a.trial_id = t.trial_id "
                "WHERE t.state = 'RUNNING' AND a.key = 'seconds'").fetchall()
        finally:
            connection.close()
    except sqlite3.Error:
        return None
    for number, value in rows:
        try:
            if number >= min_number and float(json.loads(value)) > 0:
                return number
        except (TypeError, ValueError):
            continue
    return None


def wait_for(predicate: Callable[[], object], process, timeout: float, step: float = 0.5):
    """Polls `predicate` until it returns a truthy value, the process ends or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found is not None and found is not False:
            return found
        if process.poll() is not None:
            return None
        time.sleep(step)
    return None


def load_json(path: str):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


# --- classification -------------------------------------------------------------------------------

def refusal(result: Result, tokens, difference: dict | None = None, expected_refusal: bool = True,
            root: str = "") -> tuple[str, str]:
    """The class of a command that did not end with 0: traceback, unclear, clear or ok."""
    if result.timed_out:
        return "hang", f"no end within its timeout ({result.seconds:.0f} s): killed"
    if result.traceback:
        return "traceback", f"a traceback of {result.traceback_lines} lines (exit {result.rc})"
    messages = [line for line in result.messages if not line.lower().startswith("warning")]
    line = result.line
    named = names_cause(line, tokens, result.cwd)
    if not named:
        return "unclear", f"the line names none of {list(tokens)}"
    issues = []
    if not expected_refusal:
        issues.append("refused a command that should have run")
    if len(messages) > 1:
        issues.append(f"{len(messages)} message lines on stderr")
    if difference is not None and not unchanged(difference):
        issues.append(f"disk changed by the refused command: {short(difference, root)}")
    if issues:
        return "clear", "; ".join(issues)
    return "ok", f"refused in one line naming {named}" + ("; nothing changed on disk" if difference is not None else "")


def api_class(result: Result, tokens, difference: dict | None = None, root: str = "") -> tuple[str, str]:
    """The class of an API call that raised: ok/clear/unclear for the documented ValueError (or
    DataError), traceback for any other exception."""
    if result.timed_out:
        return "hang", f"no end within its timeout ({result.seconds:.0f} s): killed"
    last = [line for line in result.stderr.splitlines() if line.strip()]
    match = EXCEPTION_LINE.match(last[-1]) if last else None
    kind = match.group(1) if match else "?"
    message = (match.group(4) or "") if match else (last[-1] if last else "")
    if kind.split(".")[-1] not in ("ValueError", "DataError"):
        return "traceback", f"{kind} raised, a traceback of {result.traceback_lines} lines"
    named = names_cause(message, tokens, result.cwd)
    if not named:
        return "unclear", f"{kind} naming none of {list(tokens)}"
    if difference is not None and not unchanged(difference):
        return "clear", f"{kind} naming {named}, but disk changed: {short(difference, root)}"
    return "ok", f"{kind} in one line naming {named}" + ("; nothing written" if difference is not None else "")


def record(name: str, item: str, expected: str, commands: list[Result], judged: Result, classification: str,
           reason: str, disk: dict | None = None, line: str | None = None, **details) -> dict:
    return {"name": name, "item": item, "expected": expected,
            "commands": [{"label": result.label, "command": result.display, "exit": result.rc,
                          "seconds": result.seconds, "timed_out": result.timed_out,
                          "traceback": result.traceback, "traceback_lines": result.traceback_lines,
                          "stderr_tail": result.tail()} for result in commands],
            "exit": judged.rc, "line": (judged.line if line is None else line)[:400], "stderr_tail": judged.tail(),
            "traceback": judged.traceback, "traceback_lines": judged.traceback_lines,
            "disk": disk or {}, "classification": classification, "reason": reason, "details": details}


# --- the cases ------------------------------------------------------------------------------------

CASES: list[tuple[str, str, str, Callable]] = []


def case(name: str, item: str, expected: str):
    def register(function):
        CASES.append((name, item, expected, function))
        return function
    return register


def tune_args(tree: Tree, study_dir: str, budget: str = "12s", model: str = "bpr_mf", config=(), extra=(),
              source: str | None = None, data_dir: str | None = None, eval_every: str = "100",
              trial_budget: str = "6s") -> list[str]:
    arguments = ["--dataset", "beauty", "--source_file", source or tree.source, "--data_dir", data_dir or tree.data,
                 "--model", model]
    for override in [*FIXED, *config]:
        arguments += ["--config", override]
    return arguments + ["--eval_every", eval_every, "--trial_budget", trial_budget, "--budget", budget,
                        "--study_dir", study_dir, *extra]


def train_args(tree: Tree, model_dir: str, config=(), extra=(), source: str | None = None,
               data_dir: str | None = None, model: str = "sasrec") -> list[str]:
    arguments = ["--dataset", "beauty", "--source_file", source or tree.source, "--data_dir", data_dir,
                 "--model", model, "--model_dir", model_dir, "--train_steps", "20", "--eval_every", "10",
                 "--batch_size", "8"]
    for override in ["num_negatives=20", *config]:
        arguments += ["--config", override]
    return arguments + list(extra)


def items_file(path: str, row=lambda item: f"i{item},g{item % 7}", header: str = "item,group",
               items=range(1, 101), encoding: str = "utf-8") -> str:
    with open(path, "w", encoding=encoding, newline="") as handle:
        handle.write(header + "\n" + "".join(row(item) + "\n" for item in items))
    return path


def other_source(tree: Tree, folder: str) -> str:
    """A copy of the planted file with one line appended (its first line again: one interaction more)."""
    other = os.path.join(folder, "other.txt")
    shutil.copy(tree.source, other)
    with open(tree.source, encoding="utf-8") as handle:
        first = handle.readline()
    with open(other, "a", encoding="utf-8") as handle:
        handle.write(first)
    return other


_BASE: dict[str, tuple[str, Result]] = {}


def base_study(tree: Tree) -> tuple[str, Result]:
    """A finished study of the planted data (made once per tree, copied by the cases that need one)."""
    if tree.tree not in _BASE:
        folder = os.path.join(tree.work, "_shared")
        study = os.path.join(folder, "base_study")
        result = tree.command("tune", folder, "base study", tune_args(tree, study))
        _BASE[tree.tree] = (study, result)
    return _BASE[tree.tree]


def copied_study(tree: Tree, folder: str) -> tuple[str, Result]:
    source, made = base_study(tree)
    study = os.path.join(folder, "ST")
    if made.rc == 0:
        shutil.copytree(source, study)
    return study, made


def setup_failed(name, item, expected, results: list[Result], failed: Result, what: str) -> dict:
    """A case whose set-up command failed: classified by that command's own output."""
    cls, reason = refusal(failed, [], expected_refusal=False)
    if cls == "unclear":
        cls = "clear" if failed.rc not in (None, 0) else cls
    return record(name, item, expected, results, failed, cls, f"set-up failed ({what}): {reason}")


@case("storage-dropped", "1", "exit 1, one line saying the folder keeps its trials in --storage ...ext.db; "
      "W/ST byte for byte unchanged")
def case_storage_dropped(tree: Tree, folder: str, name, item, expected):
    study, external = os.path.join(folder, "ST"), os.path.join(folder, "ext.db")
    first = tree.command("tune", folder, "with --storage", tune_args(tree, study, extra=["--storage", f"sqlite:///{external}"]))
    if first.rc != 0:
        return setup_failed(name, item, expected, [first], first, "the study with --storage")
    before = snapshot(study, external)
    second = tree.command("tune", folder, "without --storage", tune_args(tree, study))
    difference = compare(before, snapshot(study, external))
    disk = {"study_dir": short(difference, study), "study_db_created": os.path.exists(os.path.join(study, "study.db"))}
    lost = [path for path in difference["changed"] + difference["removed"]]
    if lost:
        return record(name, item, expected, [first, second], second, "lost",
                      f"files of the first study overwritten or removed: {short({'x': lost}, study)['x']}", disk)
    if second.rc == 0:
        return record(name, item, expected, [first, second], second, "silent",
                      "accepted: an empty study started in study.db beside the --storage study's trials", disk)
    cls, reason = refusal(second, ["--storage", f"sqlite:///{external}", external, "storage"], difference, root=study)
    return record(name, item, expected, [first, second], second, cls, reason, disk)


def _study_other_source(tree: Tree, folder: str, name, item, expected, budget: str):
    study, made = copied_study(tree, folder)
    if made.rc != 0:
        return setup_failed(name, item, expected, [made], made, "the base study")
    other = other_source(tree, folder)
    trials_before = len(study_trials(study))
    before = snapshot(study)
    again = tree.command("tune", folder, "another --source_file", tune_args(tree, study, budget=budget, source=other))
    difference = compare(before, snapshot(study))
    try:
        trials_after = len(study_trials(study))
    except Exception as error:  # noqa: BLE001 - a damaged database is a finding, not a crash of this script
        trials_after = f"unreadable: {type(error).__name__}"
    disk = {"study_dir": short(difference, study), "trials_before": trials_before, "trials_after": trials_after}
    if again.rc == 0:
        trained = trials_after - trials_before if isinstance(trials_after, int) else "?"
        changed = short(difference, study).get("changed", [])
        return record(name, item, expected, [made, again], again, "silent",
                      f"accepted the study of the planted file for another source file: {trained} new trials trained "
                      f"on it" + (f"; changed {changed}" if changed else "; it reports the planted file's result "
                                  "as this data's"), disk)
    cls, reason = refusal(again, ["--source_file", "source file", other], difference, root=study)
    return record(name, item, expected, [made, again], again, cls, reason, disk)


@case("study-other-source", "2a", "exit 1, one line naming the other source file; the study unchanged")
def case_other_source(tree, folder, name, item, expected):
    return _study_other_source(tree, folder, name, item, expected, "12s")


@case("study-other-source-larger-budget", "2b", "with a larger --budget (24s) too: exit 1, one line naming the "
      "other source file; no trial trained on it")
def case_other_source_budget(tree, folder, name, item, expected):
    return _study_other_source(tree, folder, name, item, expected, "24s")


@case("study-edited-item-features", "2c", "SASRec study, item_features file edited between two runs: exit 1, "
      "one line naming --config item_features and the file; the study unchanged")
def case_edited_study_features(tree, folder, name, item, expected):
    study, items = os.path.join(folder, "ST"), items_file(os.path.join(folder, "items.csv"))
    data = os.path.join(folder, "data")
    arguments = tune_args(tree, study, model="sasrec", config=[f"item_features={items}"], data_dir=data)
    first = tree.command("tune", folder, "sasrec study", arguments)
    if first.rc != 0:
        return setup_failed(name, item, expected, [first], first, "the SASRec study")
    items_file(items, row=lambda number: f"i{number},g{number % 5}")  # edited: other groups
    before = snapshot(study)
    second = tree.command("tune", folder, "same command, file edited", arguments)
    difference = compare(before, snapshot(study))
    disk = {"study_dir": short(difference, study)}
    if second.rc == 0:
        return record(name, item, expected, [first, second], second, "silent",
                      "accepted the study with an edited attribute file (its trials mix the two files)", disk)
    cls, reason = refusal(second, ["item_features", items], difference, root=study)
    return record(name, item, expected, [first, second], second, cls, reason, disk)


@case("reproduce-study-other-source", "2d", "reproduce table2_tuned --dry_run with --source_file beauty=OTHER and "
      "a study tuned on the planted file: exit 1, one line naming the other source (possible only when the "
      "study's summary.json records its data); with the planted file itself: exit 0")
def case_reproduce_other_source(tree, folder, name, item, expected):
    studies = os.path.join(folder, "studies")
    study = os.path.join(studies, "beauty-bpr-mf")
    made = tree.command("tune", folder, "the study (cpu-1h, seed 12345)",
                        tune_args(tree, study, extra=["--recipe", "cpu-1h", "--seed", "12345"]))
    if made.rc != 0:
        return setup_failed(name, item, expected, [made], made, "the study")
    summary = load_json(os.path.join(study, "summary.json")) or {}
    recorded = (summary.get("data") or {}).get("source")
    other = other_source(tree, folder)

    def plan(source, label):
        return tree.command("reproduce", folder, label, [
            "table2_tuned", "--datasets", "beauty", "--only", "bpr-mf-tuned", "--source_file", f"beauty={source}",
            "--studies", studies, "--dry_run", "--recipe", "cpu-1h", "--budget", "1m", "--out",
            os.path.join(folder, "out")], timeout=180)

    before = snapshot(studies)
    refused = plan(other, "dry run, other source")
    control = plan(tree.source, "dry run, the study's own source (control)")
    difference = compare(before, snapshot(studies))
    disk = {"summary_records_data_source": recorded, "studies": short(difference, studies),
            "control_exit": control.rc, "control_line": control.line[:200]}
    if refused.rc == 0:
        why = ("its summary.json records no data, so nothing can tell" if recorded is None
               else f"its summary.json records source {recorded}")
        return record(name, item, expected, [made, refused, control], refused, "silent",
                      f"planned the tuned run on another source file with the study's choice ({why})", disk)
    cls, reason = refusal(refused, ["source file", other, "--source_file"], difference, root=studies)
    if cls == "ok" and control.rc != 0:
        cls, reason = "clear", reason + f"; but the control (the study's own file) also fails: {control.line[:200]}"
    return record(name, item, expected, [made, refused, control], refused, cls, reason, disk)


def _killed_then_rerun(tree: Tree, folder: str, name, item, expected, jobs: int):
    study = os.path.join(folder, "ST")
    extra = ["--jobs", str(jobs)] if jobs > 1 else []
    arguments = tune_args(tree, study, extra=extra)
    database = os.path.join(study, "study.db")
    began = time.monotonic()
    started = tree.start(folder, f"jobs {jobs}, killed mid-trial", [PY, tree.script("tune"), *arguments])
    killed_at = wait_for(lambda: running_trial(database, min_number=1), started[0], timeout=240)
    workers = len([1 for _, line in group_processes(started[0].pid) if "--worker" in line])
    kill_group(started[0].pid, signal.SIGKILL)
    first = tree.finish(f"jobs {jobs}, killed mid-trial", [], started, 30, time.monotonic())
    first.seconds = round(time.monotonic() - began, 1)
    if killed_at is None:
        return record(name, item, expected, [first], first, "clear" if first.rc else "silent",
                      f"set-up: no RUNNING trial >= 1 with seconds > 0 was seen before the command ended (exit {first.rc})")
    rows_before = trial_rows(study_trials(study))
    rerun = tree.command("tune", folder, f"jobs {jobs}, run again to completion", arguments, timeout=420)
    try:
        trials = study_trials(study)
    except Exception as error:  # noqa: BLE001
        return record(name, item, expected, [first, rerun], rerun, "lost", f"the study cannot be read: {error}")
    duplicates = duplicate_folders(trials)
    busy = "RunFolderBusy" in rerun.stderr
    disk = {"killed_during_trial": killed_at, "workers_seen": workers, "trials_before_rerun": rows_before,
            "trials_after": trial_rows(trials), "duplicate_folders": duplicates, "run_folder_busy": busy}
    if rerun.timed_out:
        return record(name, item, expected, [first, rerun], rerun, "hang", "the rerun did not end in 420 s", disk)
    if rerun.traceback or busy:
        return record(name, item, expected, [first, rerun], rerun, "traceback",
                      f"the rerun showed a traceback of {rerun.traceback_lines} lines"
                      + (" (RunFolderBusy)" if busy else "") + (f"; duplicates {duplicates}" if duplicates else ""), disk)
    if duplicates:
        return record(name, item, expected, [first, rerun], rerun, "silent",
                      f"the same settings trained in two run folders: {duplicates}", disk)
    if rerun.rc != 0:
        cls, reason = refusal(rerun, ["--study_dir", study], expected_refusal=False)
        return record(name, item, expected, [first, rerun], rerun, cls, reason, disk)
    return record(name, item, expected, [first, rerun], rerun, "ok",
                  f"rerun exit 0, {len(trials)} trials, no two run folders with the same settings", disk)


@case("killed-then-rerun", "3a", "after SIGKILL mid-trial the same command ends with exit 0 and no two run folders "
      "hold the same settings")
def case_killed(tree, folder, name, item, expected):
    return _killed_then_rerun(tree, folder, name, item, expected, 1)


@case("killed-then-rerun-jobs2", "3b", "--jobs 2, its process group SIGKILLed mid-trial, run again: exit 0, no "
      "traceback or RunFolderBusy, no two run folders with the same settings")
def case_killed_jobs(tree, folder, name, item, expected):
    return _killed_then_rerun(tree, folder, name, item, expected, 2)


@case("two-commands-one-study", "3c", "two tune commands started at once on one study: both exit 0, their first "
      "trials' settings differ, no two run folders with the same settings")
def case_two_commands(tree, folder, name, item, expected):
    study = os.path.join(folder, "ST")
    arguments = [PY, tree.script("tune"), *tune_args(tree, study)]
    began = time.monotonic()
    one = tree.start(folder, "command A", arguments)
    two = tree.start(folder, "command B", arguments)
    first = tree.finish("command A", arguments, one, 420, began)
    second = tree.finish("command B", arguments, two, 420, began)
    try:
        trials = study_trials(study)
    except Exception as error:  # noqa: BLE001
        worse = first if first.rc else second
        return record(name, item, expected, [first, second], worse, "lost" if os.path.exists(study) else "clear",
                      f"the study cannot be read: {type(error).__name__}: {error}")
    pids = {one[0].pid: "A", two[0].pid: "B"}
    firsts = {}
    for trial in sorted(trials, key=lambda trial: trial.number):
        process = trial.user_attrs.get("process", "")
        pid = int(process.rsplit(":", 1)[1]) if ":" in process else None
        if pid in pids and pids[pid] not in firsts and trial.params:
            firsts[pids[pid]] = trial.params
    duplicates = duplicate_folders(trials)
    disk = {"first_trials": firsts, "trials": trial_rows(trials), "duplicate_folders": duplicates,
            "exits": [first.rc, second.rc]}
    worse = next((result for result in (first, second) if result.rc != 0), second)
    shared = len(firsts) == 2 and firsts["A"] == firsts["B"]
    if any(result.traceback for result in (first, second)):
        return record(name, item, expected, [first, second], worse, "traceback",
                      f"traceback of {worse.traceback_lines} lines" + ("; first trials share settings" if shared else ""),
                      disk)
    if shared or duplicates:
        said = ["both commands' first trials trained the same settings" if shared else
                "the first trials differ"]
        if duplicates:
            said.append(f"but the same settings trained in run folders {duplicates}")
        return record(name, item, expected, [first, second], worse, "silent", "; ".join(said), disk)
    if worse.rc != 0:
        cls, reason = refusal(worse, ["--study_dir", study], expected_refusal=False)
        return record(name, item, expected, [first, second], worse, cls, reason, disk)
    return record(name, item, expected, [first, second], worse, "ok",
                  f"both exit 0; first trials differ ({len(firsts)} seen); no duplicate settings", disk)


@case("jobs-above-cores", "4", "taskset -c 0 ... --jobs 3: exit 1, one line naming --jobs and the 1 usable core; "
      "nothing written")
def case_jobs(tree, folder, name, item, expected):
    study = os.path.join(folder, "ST")
    arguments = [PY, tree.script("tune"), *tune_args(tree, study, extra=["--jobs", "3"])]
    began = time.monotonic()
    started = tree.start(folder, "taskset -c 0, --jobs 3", arguments, prefix=["taskset", "-c", "0"])
    workers = wait_for(lambda: [line for _, line in group_processes(started[0].pid) if "--worker" in line] or None,
                       started[0], timeout=180)
    if workers:
        time.sleep(3)
        workers = [line for _, line in group_processes(started[0].pid) if "--worker" in line] or workers
        kill_group(started[0].pid, signal.SIGKILL)
    result = tree.finish("taskset -c 0, --jobs 3", arguments, started, 60, began)
    disk = {"workers_started": len(workers or []), "study_dir_created": os.path.exists(study)}
    if workers:
        return record(name, item, expected, [result], result, "silent",
                      f"accepted: started {len(workers)} workers on 1 usable core (stopped by this script)", disk,
                      line=f"(no refusal: {len(workers)} workers started, then killed by the harness)")
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent", "accepted --jobs 3 on 1 core", disk)
    cls, reason = refusal(result, ["--jobs"], {"added": [study] if os.path.exists(study) else []}, root=folder)
    return record(name, item, expected, [result], result, cls, reason, disk)


def prepared_features(data_dir: str, key: str = "item") -> list[dict]:
    """The {kind}_features.json descriptions prepared under `data_dir` (with their folder)."""
    found = []
    for path in sorted(glob.glob(os.path.join(data_dir, "beauty", "*", f"{key}_features.json"))):
        description = load_json(path) or {}
        found.append({"folder": os.path.basename(os.path.dirname(path)), "covered": description.get("covered"),
                      "unseen": description.get("unseen")})
    return found


@case("attribute-ids-unmatched", "5a", "train.py sasrec with an item file of ids 1..100 against the data's i1..i100: "
      "exit 1, one line naming the file")
def case_ids_unmatched(tree, folder, name, item, expected):
    items = items_file(os.path.join(folder, "items.csv"), row=lambda number: f"{number},g{number % 7}")
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    result = tree.command("train", folder, "ids 1..100", train_args(tree, run, [f"item_features={items}"], data_dir=data))
    prepared = prepared_features(data)
    disk = {"prepared_item_features": prepared, "run_dir_created": os.path.exists(run)}
    if result.rc == 0:
        covered = [entry["covered"] for entry in prepared]
        return record(name, item, expected, [result], result, "silent" if not any(covered) else "ok",
                      f"trained with an attribute file that matched {covered} of the data's items", disk)
    written = {"added": [path for path in [run] if os.path.exists(run)] + [entry["folder"] for entry in prepared]}
    cls, reason = refusal(result, [items, "item_features"], written, root=folder)
    return record(name, item, expected, [result], result, cls, reason, disk)


@case("attribute-ids-spaces", "5b", "ids written ' i5 ': matched (item_features.json covered 100) and the run trains, "
      "exit 0")
def case_ids_spaces(tree, folder, name, item, expected):
    items = items_file(os.path.join(folder, "items.csv"), row=lambda number: f" i{number} ,g{number % 7}")
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    result = tree.command("train", folder, "ids with spaces", train_args(tree, run, [f"item_features={items}"], data_dir=data))
    prepared = prepared_features(data)
    disk = {"prepared_item_features": prepared}
    covered = [entry["covered"] for entry in prepared]
    if result.rc == 0:
        if covered and all(count == 100 for count in covered):
            return record(name, item, expected, [result], result, "ok", "trained; covered 100 of 100 items", disk)
        return record(name, item, expected, [result], result, "silent",
                      f"trained, but the file matched {covered} of the data's 100 items", disk)
    cls, reason = refusal(result, [items, "item_features"], expected_refusal=False)
    return record(name, item, expected, [result], result, cls, reason, disk)


@case("attribute-latin1", "5c", "a Latin-1 item file (a value café; the data UTF-8 with an item i7é): one line naming "
      "the file and an encoding setting; following its advice trains, the data's vocab.txt holds i7é (not i7Ã©) and the "
      "file covers all 100 items")
def case_latin1(tree, folder, name, item, expected):
    source = os.path.join(folder, "planted_utf8.txt")
    with open(tree.source, encoding="utf-8") as handle:
        text = handle.read()
    with open(source, "w", encoding="utf-8") as handle:
        handle.write(re.sub(r"\bi7$", "i7é", text, flags=re.M))
    items = items_file(os.path.join(folder, "items_latin1.csv"), header="item,group,label",
                       row=lambda number: f"i{number}{'é' if number == 7 else ''},g{number % 7},"
                                          f"{'café' if number == 5 else 'plain'}", encoding="latin-1")
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    arguments = train_args(tree, run, [f"item_features={items}"], source=source, data_dir=data)
    first = tree.command("train", folder, "latin-1 item file", arguments)
    if first.rc == 0:
        return record(name, item, expected, [first], first, "silent", "read the Latin-1 file as UTF-8 without a word",
                      {"prepared_item_features": prepared_features(data)})
    cls, reason = refusal(first, [items])
    advice = re.search(r"e\.g\. (--\w+)[ =](\S+)", first.line)
    if cls != "ok" or not advice:
        return record(name, item, expected, [first], first, cls if cls != "ok" else "unclear",
                      reason if cls != "ok" else "the line gives no encoding setting to follow")
    flag, value = advice.group(1), advice.group(2).rstrip(";,.)")
    second = tree.command("train", folder, f"following the advice: {flag} {value}", arguments + [flag, value])
    vocabularies = {}
    for path in sorted(glob.glob(os.path.join(data, "beauty", "*", "vocab.txt"))):
        with open(path, encoding="utf-8", errors="replace") as handle:
            words = set(handle.read().split())
        vocabularies[os.path.basename(os.path.dirname(path))] = {"i7é": "i7é" in words, "i7Ã©": "i7Ã©" in words}
    run_record = load_json(os.path.join(run, "run.json")) or {}
    used = os.path.basename(run_record.get("data_directory", "") or "")
    prepared = prepared_features(data)
    disk = {"first_line": first.line[:300], "advice": f"{flag} {value}", "vocab": vocabularies, "run_data_folder": used,
            "prepared_item_features": prepared}
    if second.rc != 0:
        cls2, reason2 = refusal(second, [items], expected_refusal=False)
        return record(name, item, expected, [first, second], second, cls2 if cls2 != "ok" else "clear",
                      f"following the advice ({flag} {value}) fails: {reason2}", disk)
    ours = vocabularies.get(used) or next(iter(vocabularies.values()), {})
    covered = next((entry["covered"] for entry in prepared if entry["folder"] == used), None)
    if ours.get("i7Ã©") or not ours.get("i7é"):
        return record(name, item, expected, [first, second], second, "silent",
                      f"following the advice ({flag} {value}) mis-decoded the UTF-8 data: vocab.txt holds "
                      f"{'i7Ã©' if ours.get('i7Ã©') else 'no i7é'}; the file covered {covered} items", disk)
    if covered != 100:
        return record(name, item, expected, [first, second], second, "silent",
                      f"after the advice the file covered {covered} of 100 items", disk)
    return record(name, item, expected, [first, second], second, "ok",
                  f"one line naming the file and {flag} {value}; following it trains with vocab.txt intact and the "
                  "file covering 100 items", disk)


@case("feature-items-without-output", "5d", "--config feature_items=true without attributes_at_output=true: exit 1, "
      "one line naming both settings")
def case_feature_items(tree, folder, name, item, expected):
    items = items_file(os.path.join(folder, "items.csv"), items=range(1, 111))  # i101..i110: items the data lacks
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    result = tree.command("train", folder, "feature_items=true", train_args(
        tree, run, [f"item_features={items}", "feature_items=true"], data_dir=data))
    disk = {"run_dir_created": os.path.exists(run), "prepared_item_features": prepared_features(data)}
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent",
                      "trained with added items whose own embedding rows never train (no attributes at the output)",
                      disk)
    cls, reason = refusal(result, ["feature_items", "attributes_at_output"],
                          {"added": [run] if os.path.exists(run) else []}, root=folder)
    return record(name, item, expected, [result], result, cls, reason, disk)


@case("min-resource-above-trial", "6a", "--min_resource 1h with 6 s trials: exit 1, one line naming --min_resource; "
      "nothing written")
def case_min_resource(tree, folder, name, item, expected):
    study = os.path.join(folder, "ST")
    result = tree.command("tune", folder, "--min_resource 1h", tune_args(tree, study, extra=["--min_resource", "1h"]))
    disk = {"study_dir_created": os.path.exists(study)}
    if result.rc == 0:
        pruned = None
        try:
            pruned = sum(1 for trial in study_trials(study) if trial.state.name == "PRUNED")
        except Exception:  # noqa: BLE001
            pass
        disk["pruned_trials"] = pruned
        return record(name, item, expected, [result], result, "silent",
                      f"ran a study whose pruner's first rung (1 h) no 6 s trial reaches ({pruned} pruned)", disk)
    cls, reason = refusal(result, ["--min_resource"], {"added": [study] if os.path.exists(study) else []}, root=folder)
    return record(name, item, expected, [result], result, cls, reason, disk)


def api_tune_code(study: str, tree: Tree, data: str, **arguments) -> str:
    given = {"model": "bpr_mf", "trial_budget": 6.0, "overrides": FIXED, "eval_every": 100,
             "source_file": tree.source, "data_dir": data, **arguments}
    text = ", ".join(f"{key}={value}" for key, value in
                     ((key, value if isinstance(value, str) and value.startswith("float(") else repr(value))
                      for key, value in given.items()))
    return ("from bert4rec_tf import api\n"
            f"done = api.tune('beauty', {study!r}, {text})\n"
            "print('trials', done['trials'], 'spent', done['spent_seconds'])\n")


@case("api-budget-nan", "6b", "api.tune(budget=float('nan')): ValueError naming budget; nothing written")
def case_api_nan(tree, folder, name, item, expected):
    study, data = os.path.join(folder, "ST"), os.path.join(folder, "data")
    result = tree.api(folder, "api.tune budget nan", api_tune_code(study, tree, data, budget="float('nan')"), timeout=240)
    written = {"added": [path for path in (study, data) if os.path.exists(path)]}
    disk = {"written": written["added"]}
    if result.rc == 0:
        said = [line for line in result.stdout.splitlines() if line.startswith("trials ")]
        return record(name, item, expected, [result], result, "silent",
                      f"ran a study with budget nan: {said[-1] if said else result.line}", disk)
    cls, reason = api_class(result, ["budget", "nan"], written, root=folder)
    return record(name, item, expected, [result], result, cls, reason, disk)


@case("flag-config-conflict", "6c", "train.py --max_len 20 --config max_len=0: exit 1, one line naming max_len")
def case_conflict(tree, folder, name, item, expected):
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    result = tree.command("train", folder, "--max_len 20 --config max_len=0",
                          train_args(tree, run, ["max_len=0"], ["--max_len", "20"], data_dir=data))
    config = load_json(os.path.join(run, "config.json")) or {}
    trained = (config.get("model") or {}).get("max_len", config.get("max_len"))
    disk = {"run_dir_created": os.path.exists(run), "config_max_len": trained}
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent",
                      f"trained with max_len {trained}, one of the two values dropped without a word", disk)
    cls, reason = refusal(result, ["max_len", "--max_len"], {"added": [run] if os.path.exists(run) else []}, root=folder)
    return record(name, item, expected, [result], result, cls, reason, disk)


@case("attribute-empty-kind", "6d", "an item file whose header has 'year:' (an empty kind): exit 1, one line naming "
      "the column and the file")
def case_empty_kind(tree, folder, name, item, expected):
    items = items_file(os.path.join(folder, "items.csv"), header="item,year:",
                       row=lambda number: f"i{number},{1990 + number % 20}")
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    result = tree.command("train", folder, "header year:", train_args(tree, run, [f"item_features={items}"], data_dir=data))
    config = load_json(os.path.join(run, "config.json")) or {}
    attributes = (config.get("model") or {}).get("item_attributes")
    disk = {"item_attributes": attributes}
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent",
                      f"trained, reading 'year:' as {attributes}", disk)
    cls, reason = refusal(result, [items], {"added": [run] if os.path.exists(run) else []}, root=folder)
    if cls == "ok" and not says(result, "year"):
        cls, reason = "clear", "names the file but not the column 'year'"
    return record(name, item, expected, [result], result, cls, reason, disk)


def _storage_case(tree, folder, name, item, expected, url):
    study = os.path.join(folder, "ST")
    result = tree.command("tune", folder, f"--storage {url}", tune_args(tree, study, extra=["--storage", url]))
    left = sorted(os.listdir(study)) if os.path.isdir(study) else []
    disk = {"study_dir_left": left, "study_json_left": "study.json" in left}
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent", f"accepted --storage {url}", disk)
    cls, reason = refusal(result, ["--storage", url], {"added": [study] if os.path.exists(study) else []}, root=folder)
    if "study.json" in left and cls in ("traceback", "unclear"):
        reason += "; study.json left behind"
    missing = re.search(r"No module named '([\w.]+)'", result.line)
    advised = re.search(r"e\.g\. ([\w-]+)", result.line)
    if cls == "ok" and missing and advised and \
            advised.group(1).lower().removesuffix("-binary") != missing.group(1).split(".")[0].lower():
        cls, reason = "clear", (f"{reason}; but its advice installs {advised.group(1)} while the module missing is "
                                f"{missing.group(1)!r}: following it does not make the URL work")
    return record(name, item, expected, [result], result, cls, reason, disk)


@case("storage-unknown-scheme", "7a", "--storage notadb://x: exit 1, one line naming --storage; no study folder left")
def case_storage_scheme(tree, folder, name, item, expected):
    return _storage_case(tree, folder, name, item, expected, "notadb://x")


@case("storage-missing-folder", "7b", "--storage sqlite:////no/such/folder/x.db: exit 1, one line naming --storage; "
      "no study folder left")
def case_storage_folder(tree, folder, name, item, expected):
    return _storage_case(tree, folder, name, item, expected, "sqlite:////no/such/folder/x.db")


@case("storage-no-driver", "7c", "--storage postgresql://u@127.0.0.1:9/db (psycopg2 not installed): exit 1, one line "
      "naming --storage; no study folder left")
def case_storage_driver(tree, folder, name, item, expected):
    return _storage_case(tree, folder, name, item, expected, "postgresql://u@127.0.0.1:9/db")


@case("truncated-study-db", "7d", "a study whose study.db was cut to half, run again: exit 1, one line naming "
      "study.db; the folder unchanged")
def case_truncated(tree, folder, name, item, expected):
    study, made = copied_study(tree, folder)
    if made.rc != 0:
        return setup_failed(name, item, expected, [made], made, "the base study")
    database = os.path.join(study, "study.db")
    with open(database, "rb") as handle:
        content = handle.read()
    with open(database, "wb") as handle:
        handle.write(content[:len(content) // 2])
    before = snapshot(study)
    result = tree.command("tune", folder, "study.db cut to half", tune_args(tree, study))
    difference = compare(before, snapshot(study))
    disk = {"study_db_bytes": [len(content), len(content) // 2], "study_dir": short(difference, study)}
    lost = [path for path in difference["changed"] + difference["removed"] if "/trials/" in path]
    if lost:
        return record(name, item, expected, [made, result], result, "lost",
                      f"run folders of the earlier trials overwritten: {short({'x': lost}, study)['x']}", disk)
    if result.rc == 0:
        return record(name, item, expected, [made, result], result, "silent", "ran on a damaged study.db", disk)
    cls, reason = refusal(result, [database, "study.db"], difference, root=study)
    return record(name, item, expected, [made, result], result, cls, reason, disk)


@case("eval-every-zero", "7e", "--eval_every 0: exit 1, one line naming --eval_every; nothing written")
def case_eval_every(tree, folder, name, item, expected):
    study = os.path.join(folder, "ST")
    result = tree.command("tune", folder, "--eval_every 0", tune_args(tree, study, eval_every="0"))
    disk = {"study_dir_created": os.path.exists(study)}
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent", "ran with --eval_every 0", disk)
    cls, reason = refusal(result, ["--eval_every", "eval_every"], {"added": [study] if os.path.exists(study) else []},
                          root=folder)
    return record(name, item, expected, [result], result, cls, reason, disk)


def _interrupted(tree: Tree, folder: str, name, item, expected, jobs: int):
    study = os.path.join(folder, "ST")
    extra = ["--jobs", str(jobs)] if jobs > 1 else []
    arguments = [PY, tree.script("tune"), *tune_args(tree, study, budget="60s", extra=extra)]
    began = time.monotonic()
    started = tree.start(folder, f"Ctrl-C, jobs {jobs}", arguments)
    database = os.path.join(study, "study.db")
    during = wait_for(lambda: running_trial(database, min_number=0), started[0], timeout=240)
    offset = os.path.getsize(started[2])
    signalled, signalled_wall = time.monotonic(), datetime.datetime.now()
    if during is not None:
        kill_group(started[0].pid, signal.SIGINT)
    result = tree.finish(f"Ctrl-C, jobs {jobs}", arguments, started, 120, time.monotonic())
    to_exit = round(time.monotonic() - signalled, 1)
    result.seconds = round(time.monotonic() - began, 1)
    left = [pid for pid, _ in group_processes(started[0].pid)]
    if left:
        kill_group(started[0].pid, signal.SIGKILL)
    after = result.stderr.encode(errors="replace")[offset:].decode(errors="replace")
    lines_after = [line for line in after.splitlines() if line.strip()]
    tracebacks = after.count("Traceback (most recent call last)")
    try:
        trials = study_trials(study)
        states = {}
        for trial in trials:
            states[trial.state.name] = states.get(trial.state.name, 0) + 1
        readable = True
    except Exception as error:  # noqa: BLE001
        states, readable, trials = {"error": f"{type(error).__name__}: {error}"[:200]}, False, []
    # Trials that started more than a second after Ctrl-C: training the user asked to stop.
    later = sorted(trial.number for trial in trials if trial.datetime_start
                   and trial.datetime_start > signalled_wall + datetime.timedelta(seconds=1))
    disk = {"interrupted_during_trial": during, "seconds_from_ctrl_c_to_exit": to_exit,
            "trials_started_after_ctrl_c": later, "stderr_lines_after_ctrl_c": len(lines_after),
            "tracebacks_after_ctrl_c": tracebacks, "traceback_lines_after_ctrl_c": traceback_lines(after),
            "lines_after_ctrl_c": lines_after[:12], "trial_states": states, "processes_left": len(left)}
    if during is None:
        return record(name, item, expected, [result], result, "clear" if result.rc else "silent",
                      f"set-up: no running trial seen before the command ended (exit {result.rc})", disk)
    if not readable:
        return record(name, item, expected, [result], result, "lost", "the study cannot be read after Ctrl-C", disk)
    if result.timed_out:
        return record(name, item, expected, [result], result, "hang", "no end within 120 s of Ctrl-C", disk)
    went_on = (f"; {len(later)} trial(s) started after Ctrl-C ({later}), the command ended {to_exit} s after it"
               if later else "")
    if tracebacks:
        return record(name, item, expected, [result], result, "traceback",
                      f"{tracebacks} traceback(s), {traceback_lines(after)} traceback lines, {len(lines_after)} stderr "
                      f"lines after Ctrl-C (exit {result.rc})" + went_on, disk)
    if later:
        return record(name, item, expected, [result], result, "clear",
                      f"exit {result.rc}, {len(lines_after)} stderr lines after Ctrl-C" + went_on, disk)
    messages = message_lines(after)
    if len(messages) == 1 and result.rc == 130 and names_cause(messages[0], [study]):
        if len(lines_after) == 1:
            return record(name, item, expected, [result], result, "ok",
                          "exit 130 with one line naming the study folder, nothing else after Ctrl-C", disk)
        failed = [line for line in lines_after if "KeyboardInterrupt" in line or "failed with value None" in line]
        return record(name, item, expected, [result], result, "clear",
                      f"exit 130, the line names the study folder, but {len(lines_after)} stderr lines follow Ctrl-C: "
                      f"{len(failed)} of them Optuna's warnings that a trial failed (KeyboardInterrupt / value None), "
                      "though the trial is queued to go on", disk)
    if len(messages) <= 1:
        return record(name, item, expected, [result], result, "unclear" if messages else "clear",
                      f"exit {result.rc}; " + (f"the line does not name the study folder: {messages[0]}" if messages
                                               else "nothing said after Ctrl-C"), disk)
    return record(name, item, expected, [result], result, "clear",
                  f"exit {result.rc}; {len(messages)} message lines after Ctrl-C (of {len(lines_after)} lines)", disk)


@case("ctrl-c-jobs1", "7f", "SIGINT to the process group of a running tune --jobs 1: exit 130, one line naming the "
      "study folder, no traceback, the study readable")
def case_ctrl_c(tree, folder, name, item, expected):
    return _interrupted(tree, folder, name, item, expected, 1)


@case("ctrl-c-jobs2", "7f", "SIGINT to the process group of a running tune --jobs 2: exit 130, one line naming the "
      "study folder, no traceback, the study readable")
def case_ctrl_c_jobs(tree, folder, name, item, expected):
    return _interrupted(tree, folder, name, item, expected, 2)


@case("run-edited-attribute-file", "8a", "train.py twice in one run folder, its item file edited between: exit 1, one "
      "line naming the file; the run folder unchanged")
def case_run_edited(tree, folder, name, item, expected):
    items = items_file(os.path.join(folder, "items.csv"))
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    arguments = train_args(tree, run, [f"item_features={items}"], data_dir=data)
    first = tree.command("train", folder, "first run", arguments)
    if first.rc != 0:
        return setup_failed(name, item, expected, [first], first, "the first run")
    items_file(items, row=lambda number: f"i{number},g{number % 5}")
    before = snapshot(run)
    second = tree.command("train", folder, "same command, file edited", arguments)
    difference = compare(before, snapshot(run))
    disk = {"run_dir": short(difference, run)}
    if second.rc == 0:
        return record(name, item, expected, [first, second], second, "silent",
                      "went on in the run folder with the edited file", disk)
    cls, reason = refusal(second, [items], difference, root=run)
    return record(name, item, expected, [first, second], second, cls, reason, disk)


@case("numeric-attribute-1e308", "8b", "a numeric item column with a value 1e308: exit 1, one line naming the column "
      "and the file")
def case_huge_number(tree, folder, name, item, expected):
    items = items_file(os.path.join(folder, "items.csv"), header="item,price:numeric",
                       row=lambda number: f"i{number},{'1e308' if number == 3 else number}")
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    result = tree.command("train", folder, "price 1e308", train_args(tree, run, [f"item_features={items}"], data_dir=data))
    results = load_json(os.path.join(run, "results.json")) or {}
    disk = {"results_keys": sorted(results)[:8]}
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent",
                      "trained with a number float32 cannot hold (inf after conversion)", disk)
    cls, reason = refusal(result, [items])
    if cls == "ok" and not says(result, "price"):
        cls, reason = "clear", "names the file but not the column 'price'"
    return record(name, item, expected, [result], result, cls, reason, disk)


@case("family-not-installed", "8c", "evaluate.py on a run whose config.json names model 'bigram': exit 1, one line "
      "naming the family 'bigram' as not installed")
def case_bigram(tree, folder, name, item, expected):
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    first = tree.command("train", folder, "a sasrec run", train_args(tree, run, data_dir=data))
    if first.rc != 0:
        return setup_failed(name, item, expected, [first], first, "the run")
    path = os.path.join(run, "config.json")
    config = load_json(path)
    config["model"]["name"] = "bigram"
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
    before = snapshot(run)
    result = tree.command("evaluate", folder, "evaluate, model bigram", ["--model_dir", run])
    difference = compare(before, snapshot(run))
    if result.rc == 0:
        return record(name, item, expected, [first, result], result, "silent", "evaluated a run of model 'bigram'",
                      {"run_dir": short(difference, run)})
    cls, reason = refusal(result, ["bigram"], difference, root=run)
    if cls == "ok" and not says(result, "not installed"):
        cls, reason = "clear", "names 'bigram' but not that its family is not installed"
    return record(name, item, expected, [first, result], result, cls, reason, {"run_dir": short(difference, run)})


@case("user-attributes-without-user", "8d", "recommend.py on a SASRec run trained with user_features, without --user: "
      "exit 1, one line naming --user")
def case_without_user(tree, folder, name, item, expected):
    users = os.path.join(folder, "users.csv")
    with open(users, "w", encoding="utf-8") as handle:
        handle.write("user,age\n" + "".join(f"u{user},{18 + user % 50}\n" for user in range(1, 401)))
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    first = tree.command("train", folder, "sasrec with user_features", train_args(tree, run, [f"user_features={users}"],
                                                                                    data_dir=data))
    if first.rc != 0:
        return setup_failed(name, item, expected, [first], first, "the run")
    result = tree.command("recommend", folder, "recommend without --user", ["--model_dir", run, "--history", "i1 i2 i3"])
    if result.rc == 0:
        return record(name, item, expected, [first, result], result, "silent",
                      "recommended without the user's attributes", {"stdout_lines": len(result.stdout.splitlines())})
    cls, reason = refusal(result, ["--user"])
    if cls == "ok" and not says(result, "attribute"):
        cls, reason = "clear", ("names --user, but not what this model reads of the user (its attributes from "
                                "user_features): the line gives another cause")
    return record(name, item, expected, [first, result], result, cls, reason)


@case("seed-negative", "8e", "train.py --seed -1: exit 1, one line naming --seed; nothing written")
def case_seed(tree, folder, name, item, expected):
    data, run = os.path.join(folder, "data"), os.path.join(folder, "run")
    result = tree.command("train", folder, "--seed -1", train_args(tree, run, extra=["--seed", "-1"], data_dir=data))
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent", "trained with seed -1",
                      {"run_dir_created": os.path.exists(run)})
    cls, reason = refusal(result, ["--seed"], {"added": [run] if os.path.exists(run) else []}, root=folder)
    return record(name, item, expected, [result], result, cls, reason, {"run_dir_created": os.path.exists(run)})


@case("study-dir-is-a-file", "8f", "tune.py --study_dir <a file>: exit 1, one line naming --study_dir and the file; "
      "the file unchanged")
def case_study_dir_file(tree, folder, name, item, expected):
    afile = os.path.join(folder, "afile")
    with open(afile, "w", encoding="utf-8") as handle:
        handle.write("x")
    before = snapshot(afile)
    result = tree.command("tune", folder, "--study_dir a file", tune_args(tree, afile))
    difference = compare(before, snapshot(afile))
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent", "accepted a file as --study_dir")
    cls, reason = refusal(result, ["--study_dir", afile], difference, root=folder)
    return record(name, item, expected, [result], result, cls, reason, {"file": short(difference, folder)})


@case("api-storage-unknown", "8g", "api.tune(storage='notadb://x'): ValueError naming the storage; nothing written")
def case_api_storage(tree, folder, name, item, expected):
    study, data = os.path.join(folder, "ST"), os.path.join(folder, "data")
    result = tree.api(folder, "api.tune storage notadb", api_tune_code(study, tree, data, budget=12.0,
                                                                      storage="notadb://x"), timeout=240)
    written = {"added": [path for path in (study, data) if os.path.exists(path)]}
    left = sorted(os.listdir(study)) if os.path.isdir(study) else []
    disk = {"written": written["added"], "study_dir_left": left}
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent", "accepted storage notadb://x", disk)
    cls, reason = api_class(result, ["notadb://x", "storage", "notadb"], written, root=folder)
    if cls == "traceback" and "study.json" in left:
        reason += "; study.json left behind"
    return record(name, item, expected, [result], result, cls, reason, disk)


@case("api-budget-duration", "8h", "api.tune(budget='1m'): a duration, accepted (exit 0, a study of about a minute), "
      "or a ValueError naming budget")
def case_api_duration(tree, folder, name, item, expected):
    study, data = os.path.join(folder, "ST"), os.path.join(folder, "data")
    result = tree.api(folder, "api.tune budget '1m'", api_tune_code(study, tree, data, budget="1m"), timeout=420)
    summary = load_json(os.path.join(study, "summary.json")) or {}
    disk = {"summary_budget": (summary.get("budgets") or {}).get("budget", summary.get("budget")),
            "spent_seconds": summary.get("spent_seconds")}
    if result.rc == 0:
        spent = summary.get("spent_seconds") or 0
        good = isinstance(spent, (int, float)) and spent >= 30
        return record(name, item, expected, [result], result, "ok" if good else "silent",
                      f"ran a study of {spent} s of trials" + ("" if good else " (not a minute)"), disk)
    cls, reason = api_class(result, ["budget", "'1m'", "1m"])
    return record(name, item, expected, [result], result, cls, reason, disk)


@case("reproduce-extra-unclosed-quote", "8i", "reproduce.py table2 --extra \"--config 'a=b\" --dry_run: exit 1, one "
      "line naming --extra")
def case_extra(tree, folder, name, item, expected):
    out = os.path.join(folder, "out")
    result = tree.command("reproduce", folder, "--extra unclosed quote", [
        "table2", "--datasets", "beauty", "--source_file", f"beauty={tree.source}", "--out", out, "--budget", "1m",
        "--extra", "--config 'a=b", "--dry_run"], timeout=180)
    if result.rc == 0:
        return record(name, item, expected, [result], result, "silent", "planned runs with an --extra that is not a "
                      "command line", {"out_created": os.path.exists(out)})
    cls, reason = refusal(result, ["--extra"], {"added": [out] if os.path.exists(out) else []}, root=folder)
    return record(name, item, expected, [result], result, cls, reason, {"out_created": os.path.exists(out)})


# --- the two modes --------------------------------------------------------------------------------

def run_cases(tree_path: str, work: str, out: str, only: list[str] | None) -> dict:
    from tests.tasks.harness import planted_source

    if os.path.exists(work):
        if os.listdir(work) and not os.path.exists(os.path.join(work, MARKER)):
            raise SystemExit(f"--work {work} exists and was not made by this script: give another folder")
        if not only:
            shutil.rmtree(work)
    if only and os.path.exists(os.path.join(work, "_shared")):
        shutil.rmtree(os.path.join(work, "_shared"))  # the base study is made anew; the other cases' folders stay
    os.makedirs(os.path.join(work, "_shared"))
    open(os.path.join(work, MARKER), "w").close()
    # With --only, the cases run replace theirs in an earlier --out of the same tree; the rest are kept.
    kept = (load_json(out) or {}).get("cases", []) if only else []
    tree = Tree(tree_path, work)
    imported = tree.imported()
    if not imported.startswith(os.path.join(tree.tree, "bert4rec_tf") + os.sep):
        raise SystemExit(f"PYTHONPATH={tree.tree} imports {imported!r}, not the tree's bert4rec_tf")
    tree.source, _ = planted_source(os.path.join(work, "_shared"))
    commit = subprocess.run(["git", "-C", tree.tree, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    earlier = (load_json(out) or {}) if only else {}
    if kept and (earlier.get("tree"), earlier.get("commit")) != (tree.tree, commit):
        raise SystemExit(f"{out} holds the cases of {earlier.get('tree')} at {earlier.get('commit')}: --only adds to "
                         "an --out of the same tree and commit only")
    report = {"tree": tree.tree, "commit": commit, "imported": imported, "python": PY, "cases": []}
    for name, item, expected, function in CASES:
        if only and name not in only and item not in only:
            report["cases"] += [entry for entry in kept if entry["name"] == name]
            continue
        folder = os.path.join(work, f"{item}-{name}")
        if os.path.exists(folder):
            shutil.rmtree(folder)
        os.makedirs(folder)
        began = time.monotonic()
        print(f"[{item}] {name} ...", flush=True)
        try:
            entry = function(tree, folder, name, item, expected)
        except Exception:  # noqa: BLE001 - one case's crash must not lose the others
            import traceback

            entry = {"name": name, "item": item, "expected": expected, "commands": [], "exit": None, "line": "",
                     "stderr_tail": [], "traceback": False, "traceback_lines": 0, "disk": {},
                     "classification": "error-in-harness", "reason": traceback.format_exc()[-1500:], "details": {}}
            print(entry["reason"], file=sys.stderr)
        entry["seconds"] = round(time.monotonic() - began, 1)
        if not os.path.isdir(os.path.join(tree.tree, "bert4rec_tf")):
            raise SystemExit(f"the tree {tree.tree} disappeared during case {name}: its outcome is not the tree's")
        report["cases"].append(entry)
        print(f"[{item}] {name}: {entry['classification']} (exit {entry['exit']}) {entry['reason'][:200]}", flush=True)
        with open(out, "w", encoding="utf-8") as handle:  # written after every case: a crash keeps the rest
            json.dump(report, handle, indent=2, ensure_ascii=False)
    totals = {}
    for entry in report["cases"]:
        totals[entry["classification"]] = totals.get(entry["classification"], 0) + 1
    report["totals"] = totals
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2, ensure_ascii=False)
    return report


def cell(entry: dict | None) -> str:
    if entry is None:
        return "not run"
    line = entry.get("line", "").replace("|", "\\|").replace("\n", " ")
    if len(line) > 220:
        line = line[:217] + "..."
    exit_code = entry.get("exit")
    return (f"exit {exit_code if exit_code is not None else '-'} · **{entry['classification']}** · "
            f"`{line}`" if line else f"exit {exit_code} · **{entry['classification']}**") \
        + f"<br>{entry.get('reason', '')[:260].replace('|', chr(92) + '|')}"


def compare_mode(old_path: str, new_path: str) -> str:
    with open(old_path, encoding="utf-8") as handle:
        old = json.load(handle)
    with open(new_path, encoding="utf-8") as handle:
        new = json.load(handle)
    olds = {entry["name"]: entry for entry in old["cases"]}
    news = {entry["name"]: entry for entry in new["cases"]}
    names = list(dict.fromkeys([*olds, *news]))
    rows = [f"Before: {old['tree']} at {old['commit'][:7]}; after: {new['tree']} at {new['commit'][:7]}.", "",
            "| case | issue item | before | after |", "|---|---|---|---|"]
    for name in names:
        item = (news.get(name) or olds.get(name))["item"]
        rows.append(f"| {name} | {item} | {cell(olds.get(name))} | {cell(news.get(name))} |")
    rows += ["", "| classification | before | after |", "|---|---|---|"]
    for cls in [*CLASSES, "error-in-harness"]:
        before = sum(1 for entry in old["cases"] if entry["classification"] == cls)
        after = sum(1 for entry in new["cases"] if entry["classification"] == cls)
        if before or after:
            rows.append(f"| {cls} | {before} | {after} |")
    return "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", help="the checkout to run (its bert4rec_tf and run_scripts)")
    parser.add_argument("--work", help="a folder for the cases' files (made anew)")
    parser.add_argument("--out", help="the JSON of the outcomes")
    parser.add_argument("--only", help="comma-separated case names or issue items (e.g. 2a,7f)")
    parser.add_argument("--compare", nargs=2, metavar=("OLD_JSON", "NEW_JSON"), help="print the before/after table")
    parser.add_argument("--table", help="with --compare: also write the table to this file")
    args = parser.parse_args()
    if args.compare:
        table = compare_mode(*args.compare)
        print(table)
        if args.table:
            with open(args.table, "w", encoding="utf-8") as handle:
                handle.write(table)
        return
    if not (args.tree and args.work and args.out):
        parser.error("give --tree, --work and --out (or --compare OLD NEW)")
    report = run_cases(args.tree, args.work, args.out, args.only.split(",") if args.only else None)
    print(json.dumps(report["totals"]))


if __name__ == "__main__":
    main()
