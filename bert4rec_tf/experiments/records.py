"""A finished run's record and where it comes from: the run's test metrics, validation curve, steps,
time, train.py settings, the configuration they resolved to and the data it read, with its provenance
(the commit, the machine, the reproduce.py command, the date). A run of one experiment whose settings
resolve to another's record is that record (`shared_record`). A record whose configuration is not what
its settings resolve to now (a preset or recipe changed since it was made) does not count
(`stale_fields`): its run trains again."""

from __future__ import annotations

import os

from bert4rec_tf.config import config_differences
from bert4rec_tf.experiments.calibration import usable_cores
from bert4rec_tf.experiments.plans import Run, resolved_settings
from bert4rec_tf.files import read_json


def run_status(model_dir: str) -> str:
    """"finished" (results.json written), "started" (a checkpoint to resume from) or "new"."""
    if os.path.isfile(os.path.join(model_dir, "results.json")):
        return "finished"
    if os.path.isfile(os.path.join(model_dir, "checkpoints", "state.json")):
        return "started"
    return "new"


# A finished run's record: what the report needs, small enough to commit (no data, no weights), so
# that an experiment's report grows across sessions and machines (`--results_dir docs/results`).
RECORD_VERSION = 1


def record_path(results_dir: str, experiment: str, run: Run) -> str:
    return os.path.join(results_dir, experiment, f"{run.name}.json")


def make_record(model_dir: str, run: Run, experiment: str, settings: list[str], provenance: dict) -> dict:
    """The record of the finished run in `model_dir` (see `RECORD_VERSION`). `provenance`: the
    commit, the machine, the reproduce.py command and the date (`provenance()`)."""
    results = read_json(os.path.join(model_dir, "results.json"), "run results")
    state_path = os.path.join(model_dir, "checkpoints", "state.json")
    state = read_json(state_path, "resume state") if os.path.isfile(state_path) else {}
    curve_path = os.path.join(model_dir, "validation.json")
    curve = read_json(curve_path, "validation curve") if os.path.isfile(curve_path) else []
    data_path = os.path.join(model_dir, "run.json")
    data = read_json(data_path, "run's data record") if os.path.isfile(data_path) else {}
    config_path = os.path.join(model_dir, "config.json")
    config = read_json(config_path, "run configuration") if os.path.isfile(config_path) else None
    return {"version": RECORD_VERSION, "experiment": experiment, "run": run.name, "dataset": run.dataset,
            "setting": run.setting, "model": run.model, "value": run.value, "settings": settings,
            **provenance, "steps": results.get("steps", 0), "seconds": state.get("seconds") or 0.0,
            "instances": state.get("instances", 0), "test": results["test"], "curve": curve,
            "data": {key: data[key] for key in ("source", "data_key") if key in data},
            **({"config": config} if config is not None else {}),
            **{key: results[key] for key in ("above_pop", "pop_validation", "evaluated_users", "users", "test_slices")
               if key in results}}


# What a run's configuration holds that its settings do not decide: the data's vocabulary, users and
# attributes, the steps a time budget afforded, and where its attribute files were (the settings name
# their folder by a token; their contents are bound by the prepared data's key, as the source file's).
_FROM_THE_RUN = (("model", "vocab_size"), ("model", "num_users"), ("train", "train_steps"),
                 ("model", "item_attributes"), ("model", "user_attributes"), ("data", "item_features"),
                 ("data", "user_features"))


def stale_fields(record: dict, settings: list[str]) -> list[str]:
    """The fields in which `record`'s configuration differs from what `settings` resolve to now
    (`config.config_differences`, leaving out what the run itself decides: `_FROM_THE_RUN`); empty when
    they agree, or when the record stores no configuration or the settings cannot be resolved (then
    only the settings are compared)."""
    resolved = resolved_settings(settings) if "config" in record else None
    return [] if resolved is None else config_differences(record["config"], resolved["config"], _FROM_THE_RUN)


def own_record(results_dir: str, experiment: str, run: Run, settings: list[str]) -> dict | None:
    """The stored record of `run` made with these `settings`, or with flags that resolve to the same
    (`resolved_settings`: `--time_budget 1h` beside a recipe whose budget is an hour), current or
    stale; else None."""
    path = record_path(results_dir, experiment, run)
    if os.path.isfile(path):
        record = read_json(path, "run record")
        if record.get("version") != RECORD_VERSION:
            return None
        theirs = record.get("settings")
        if theirs == settings:
            return record
        mine = resolved_settings(settings) if theirs else None
        if mine is not None and resolved_settings(theirs) == mine:
            return record
    return None


def _flag_pairs(settings: list[str]) -> list[tuple[str, ...]]:
    """`settings` as (flag, value) pairs, or (flag,) for a flag without a value."""
    pairs = []
    for item in settings:
        if item.startswith("--") or not pairs or len(pairs[-1]) == 2:
            pairs.append((item,))
        else:
            pairs[-1] = (*pairs[-1], item)
    return pairs


def settings_changes(results_dir: str, experiment: str, run: Run, settings: list[str]) -> list[str]:
    """How `settings` differ from those of `run`'s stored record when it was made with others (a
    plan's flags or the command's changed since): "FLAG VALUE (was OLD)" for a flag given once on each
    side with another value, "now also FLAG VALUE" for any other the record lacks, "no longer FLAG
    VALUE" for any other it has that `settings` do not give; empty when there is no record or it was
    made with these settings."""
    path = record_path(results_dir, experiment, run)
    if not os.path.isfile(path):
        return []
    record = read_json(path, "run record")
    theirs, mine = _flag_pairs(record.get("settings") or []), _flag_pairs(settings)
    if record.get("version") != RECORD_VERSION or theirs == mine:
        return []
    added, removed = [pair for pair in mine if pair not in theirs], [pair for pair in theirs if pair not in mine]

    def single(pairs, flag):
        """The one pair of `flag` in `pairs`, or None when it is given never or more than once."""
        found = [pair for pair in pairs if pair[0] == flag]
        return found[0] if len(found) == 1 else None

    changed = {}  # flag: its record's pair, for a flag given once on each side with another value
    for pair in added:
        old = single(theirs, pair[0])
        if old in removed and single(mine, pair[0]):
            changed[pair[0]] = old
    return ([f"{' '.join(pair)} (was {' '.join(changed[pair[0]][1:])})" if pair[0] in changed else f"now also {' '.join(pair)}"
             for pair in added]
            + [f"no longer {' '.join(pair)}" for pair in removed if changed.get(pair[0]) != pair])


def read_record(results_dir: str, experiment: str, run: Run, settings: list[str]) -> dict | None:
    """The stored record of `run` if it was made with these `settings` and its configuration is what
    they resolve to now, else another experiment's record of the same settings (`shared_record`), else
    None: a record of other settings, or of a configuration since changed, does not count."""
    record = own_record(results_dir, experiment, run, settings)
    if record is not None and not stale_fields(record, settings):
        if record.get("same_as"):
            # A kept copy of another experiment's record (a tuned row whose study chose that row's
            # settings): that record as it is now, so that a new training of the same settings that
            # replaced it is reported here too; the copy keeps what is its own (its study).
            origin = shared_record(results_dir, experiment, run, settings)
            if origin is not None:
                return {**origin, **{key: record[key] for key in ("tuning", "settings") if key in record}}
        return record
    return shared_record(results_dir, experiment, run, settings)


def shared_record(results_dir: str, experiment: str, run: Run, settings: list[str],
                  earlier: bool = False) -> dict | None:
    """A record of another run (of another experiment, or another run of this one) whose train.py
    settings resolve to these `settings` (`resolved_settings`; the ablation's default is Table 2's
    BERT4Rec at the same recipe, the sweeps' runs at the recipe's own value are one run, and a tuned
    row whose study chose the untuned settings is its untuned row), as `run`'s record with `same_as`
    naming its origin: one training, not two of the same command. None when there is none. With
    `earlier`, also such a record made under a configuration its settings no longer give, with
    `earlier_configuration` naming the fields that differ (what the report shows, marked, until a run
    trains again), when no current one exists."""
    if not os.path.isdir(results_dir) or not getattr(run, "share", True):
        return None
    mine = resolved_settings(settings)
    # Another experiment's records, and this one's of other runs (a tuned row whose study chose the
    # untuned settings shares the untuned row trained in this experiment).
    candidates = [(other, name) for other in sorted(os.listdir(results_dir))
                  if os.path.isdir(os.path.join(results_dir, other))
                  for name in sorted(os.listdir(os.path.join(results_dir, other)))
                  if name.startswith(f"{run.dataset}-") and name.endswith(".json")
                  and not (other == experiment and name == f"{run.name}.json")]
    # Records of the run's own name first (Table 2's ml-1m-bert4rec for the tuned table's), then of the
    # run it departs from (Table 2's ml-1m-sasrec-ce for a tuned row whose study chose its settings), so
    # that a later experiment's record of the same settings does not take their place.
    against = f"{run.dataset}-{run.against}.json" if getattr(run, "against", None) else None
    candidates.sort(key=lambda candidate: (candidate[1] != f"{run.name}.json", candidate[1] != against))
    found = None  # the first record of an earlier configuration, if no current one turns up
    for other, name in candidates:
        record = read_json(os.path.join(results_dir, other, name), "run record")
        if record.get("version") != RECORD_VERSION or record.get("dataset") != run.dataset or record.get("same_as"):
            continue
        theirs = record.get("settings")
        if theirs == settings or (mine is not None and resolved_settings(theirs or []) == mine):
            stale = stale_fields(record, theirs or [])
            shared = {**record, "experiment": experiment, "run": run.name, "setting": run.setting,
                      "value": run.value, "same_as": f"{other}/{record['run']}",
                      **({"earlier_configuration": stale} if stale else {})}
            if not stale:
                return shared
            if earlier and found is None:
                found = shared
    return found


def provenance(command: str, root: str, cores: int | None = None) -> dict:
    """The commit of the checkout at `root` (with "+changes" when it has uncommitted changes to
    tracked files), the machine (with the `cores` the run may use, default this process's), the
    command and today's date, for a run's record."""
    import datetime
    import platform
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short=7", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += "+changes"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    if cores is None:
        cores = len(usable_cores())
    return {"commit": commit, "machine": f"{cpu}, {cores} of {os.cpu_count()} cores", "command": command,
            "date": datetime.date.today().isoformat()}
