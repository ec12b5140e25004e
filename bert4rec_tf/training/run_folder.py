"""A run's folder: its configuration, the data it is bound to, and the resume state.

A run is bound to its configuration and its data. Once a folder holds a trained checkpoint, a
command with another configuration (other than a larger `train.train_steps`), another source file
or other prepared data is refused with one line saying what differs, so a folder never mixes two
runs. Nothing binds a folder before its first checkpoint: a command that failed before training
leaves nothing that refuses the corrected one.

One process at a time works in a folder: the trainer holds `lock` from before it writes anything,
and a second process refuses at once, naming the holder. The lock is the kernel's (`flock`), so a
killed process leaves no lock behind; the next process takes the folder over and sweeps what the
killed one left half-written.

A checkpoint is one atomic commit: its weights are written under names of their own step
(``latest-<step>.weights.h5``, ``best-<step>.weights.h5``), then `state.json`, which names them, is
renamed into place. Only the files the committed `state.json` names count; the others are leftovers of
an uncommitted checkpoint (or of older ones) and are removed.

Files:
    .lock                                the lock, and its holder (process, host, start time)
    config.json                          the resolved configuration
    run.json                             the data: source identity, prepared-data key and folder, and
                                         the identities of the attribute files
    checkpoints/state.json               resume point: steps, instances consumed, best, curve, RNG states,
                                         and the names of its two weight files
    checkpoints/latest-<step>.weights.h5 weights at the resume point
    checkpoints/best-<step>.weights.h5   weights of the best validation
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from typing import Iterator

from bert4rec_tf.config import RUN_LENGTH, ExperimentConfig, config_differences
from bert4rec_tf.config.experiment import UnknownFamily
from bert4rec_tf.data.download import file_records
from bert4rec_tf.data.prepare import PreparedData, attribute_files, earlier_keys
from bert4rec_tf.files import process_running, read_json, remove_abandoned, write_json_atomic

STATE_VERSION = 4
LOCK = ".lock"
# What a finished run exports, beside results.json (which records their sizes and digests).
OUTPUTS = ("model.keras", "export")
# The fixed weight names of state version 3, which a run of that version resumes from.
_VERSION_3_WEIGHTS = {"latest_weights": "latest.weights.h5", "best_weights": "best.weights.h5"}
# The model settings that come from the data (`set_from_data`).
_FROM_DATA = (("model", "vocab_size"), ("model", "num_users"), ("model", "item_attributes"),
              ("model", "user_attributes"))


class RunFolderBusy(ValueError):
    """Another process works in the run folder."""


def fresh_state() -> dict:
    """The state of a run that has not trained yet."""
    return {"version": STATE_VERSION, "step": 0, "instances": 0, "seconds": 0.0, "scheduled": None,
            "budget_spent": False, "best": None, "best_step": None, "since_best": 0, "curve": [], "seed_states": [],
            "latest_weights": None, "best_weights": None}


def weights_name(kind: str, step: int) -> str:
    """The file name of a checkpoint's weights: kind "latest" or "best", at `step`."""
    return f"{kind}-{step:09d}.weights.h5"


def data_identity(prepared: PreparedData) -> dict:
    """What binds a run to its data: the source's identity and the prepared data's key and folder."""
    return {"source": prepared.metadata["source"]["identity"],
            "data_key": os.path.basename(os.path.normpath(prepared.directory)),
            "data_directory": prepared.directory}


def same_data(recorded: dict, prepared: PreparedData, recorded_config: dict) -> bool:
    """Whether the data record `recorded` (run.json's, or results.json's "data") names `prepared`: as
    `data_identity` gives it, or, for a run whose configuration `recorded_config` is of the earlier
    format (one data section for every family), by the key the same data had then
    (`prepare.earlier_keys`), in the same data folder."""
    identity = data_identity(prepared)
    if {key: recorded.get(key) for key in identity} == identity:
        return True
    folder = recorded.get("data_directory")
    return (recorded.get("source") == identity["source"]
            and (folder is None or os.path.dirname(os.path.normpath(folder))
                 == os.path.dirname(os.path.normpath(prepared.directory)))
            and recorded.get("data_key") in earlier_keys(recorded_config.get("data", {}), identity["source"]))


def set_from_data(config: ExperimentConfig, prepared: PreparedData) -> None:
    """Sets the model settings that come from the data: `vocab_size`, `num_users` and, for a family
    that reads attributes, `item_attributes` and `user_attributes` from the prepared attribute files
    (empty without them)."""
    from bert4rec_tf.tasks import get_task

    config.model.vocab_size = int(prepared.metadata["vocab_size"])
    config.model.num_users = int(prepared.metadata["num_users"])
    reads = get_task(config.model.name).reads_features
    for key in ("item", "user"):
        if f"{key}_attributes" in config.model.keys():  # a family whose model reads attributes
            encoded = prepared.features(key) if key in reads else None
            setattr(config.model, f"{key}_attributes", [] if encoded is None else encoded.attributes())


class RunFolder:
    """The files of one run in `model_dir`.

    Raises:
        ValueError: when `model_dir` exists and is not a folder.
    """

    def __init__(self, model_dir: str):
        if os.path.exists(model_dir) and not os.path.isdir(model_dir):
            raise ValueError(f"--model_dir {model_dir} is a file, not a folder")
        self.directory = model_dir
        self.checkpoints = os.path.join(model_dir, "checkpoints")

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def checkpoint(self, name: str) -> str:
        return os.path.join(self.checkpoints, name)

    def load_state(self) -> dict:
        """The resume state, or a fresh one when the folder holds no checkpoint.

        Raises:
            ValueError: naming the file when `state.json` is damaged or from an older version, or
                its checkpoint is missing.
        """
        path = self.checkpoint("state.json")
        if not os.path.isfile(path):
            return fresh_state()
        state = read_json(path, "resume state")
        if isinstance(state, dict) and state.get("version") == 3:
            state = {**state, **_VERSION_3_WEIGHTS, "version": STATE_VERSION}
            if state["best_step"] is None:
                state["best_weights"] = None
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError(f"{path}: resume state of another format (written by another version of "
                             "bert4rec_tf?); use a new --model_dir")
        for key in ("latest_weights", "best_weights"):
            if state["step"] and state[key] and not os.path.isfile(self.checkpoint(state[key])):
                raise ValueError(f"{self.checkpoint(state[key])}: missing, but {path} records "
                                 f"{state['step']} trained steps; use a new --model_dir")
        return state

    def commit(self, state: dict) -> None:
        """Makes `state` the resume point (its weight files written already), then removes the weight
        files it does not name."""
        write_json_atomic(self.checkpoint("state.json"), state)
        self.tidy(state)

    def tidy(self, state: dict) -> None:
        """Removes what no committed checkpoint needs: weight files `state` does not name (older
        checkpoints, an uncommitted one) and the temporaries of processes that no longer run."""
        # Called holding the lock, between two writes of this process: its own temporaries are leftovers too.
        remove_abandoned(self.directory, including_own=True)
        remove_abandoned(self.checkpoints, including_own=True)
        if not os.path.isdir(self.checkpoints):
            return
        keep = {state["latest_weights"], state["best_weights"]}
        for name in os.listdir(self.checkpoints):
            if name.endswith(".weights.h5") and name not in keep:
                os.remove(self.checkpoint(name))

    def holder(self) -> str | None:
        """Who holds the folder now ("process <pid> on <host> since <time>", or "another process"),
        as `lock` would refuse it; None when it is free. Takes nothing."""
        if not os.path.isfile(self.path(LOCK)):
            return None
        with open(self.path(LOCK), "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return _describe(_lock_record(handle))
            fcntl.flock(handle, fcntl.LOCK_UN)
        return None

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Holds the folder for this process (creating it), or refuses. A folder this call created and
        in which nothing else was written is removed again at the end.

        Raises:
            RunFolderBusy: one line naming the folder and the process holding it.
        """
        created = not os.path.isdir(self.directory)
        os.makedirs(self.directory, exist_ok=True)
        with open(self.path(LOCK), "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunFolderBusy(f"{self.directory} is in use by {_describe(_lock_record(handle))}: wait for it "
                                    "to end, or use another --model_dir") from None
            previous = _lock_record(handle)  # None: released cleanly (or never held)
            if previous and not (previous["host"] == socket.gethostname() and process_running(previous["pid"])):
                print(f"note: {self.directory} was held by {_describe(previous)}, which no longer runs; taking it "
                      "over", file=sys.stderr)
            handle.seek(0)
            handle.truncate()
            json.dump({"pid": os.getpid(), "host": socket.gethostname(),
                       "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}, handle)
            handle.flush()
            try:
                yield
            finally:
                handle.seek(0)
                handle.truncate()
                handle.flush()
                if created and os.listdir(self.directory) == [LOCK]:
                    os.remove(self.path(LOCK))  # a start that wrote nothing leaves no folder behind
                    with contextlib.suppress(OSError):
                        os.rmdir(self.directory)
                fcntl.flock(handle, fcntl.LOCK_UN)

    def check(self, config: ExperimentConfig, prepared: PreparedData, state: dict) -> None:
        """Checks that `config` and `prepared` continue the run in this folder, whose resume state is
        `state` (`load_state`); the settings that come from the data are set first (`set_from_data`).
        Writes nothing.

        Raises:
            ValueError: one line saying what differs, when the folder holds a trained run with
                another configuration, other data, or more steps than `config.train.train_steps`.
        """
        set_from_data(config, prepared)
        if state["step"]:
            self._check_same_run(config, prepared, state)

    def record(self, config: ExperimentConfig, prepared: PreparedData) -> None:
        """Writes config.json and run.json (after `check`, once the run's checkpoint has loaded)."""
        os.makedirs(self.directory, exist_ok=True)
        write_json_atomic(self.path("config.json"), config.to_dict())
        write_json_atomic(self.path("run.json"), {**data_identity(prepared),
                                                  "attribute_files": attribute_files(config.data)})

    def check_config(self, config: ExperimentConfig, state: dict) -> None:
        """Refuses, before any data is prepared, a configuration that differs from the trained run in
        this folder, whose resume state is `state` (the vocabulary and the users, which come from the
        data, are checked by `check`).

        Raises:
            ValueError: one line naming the fields that differ.
        """
        if state["step"]:
            self._check_config(config, ignore=_FROM_DATA)

    def _check_config(self, config: ExperimentConfig, ignore: tuple = ()) -> dict:
        """Refuses `config` when it differs from the recorded one (`check_config`); returns the
        recorded one, as written."""
        earlier = read_json(self.path("config.json"), "run configuration")
        # A field the recorded configuration lacks came to the package after the run started: it stands
        # for its default, the behaviour the run had (`config_differences`); run.json binds the data.
        changed = config_differences(earlier, config.to_dict(), ignore=(*RUN_LENGTH, *ignore))
        if changed:
            raise ValueError(f"{self.directory} holds a run with another configuration ({', '.join(changed)} "
                             "differ); use a new --model_dir")
        return earlier

    def _check_same_run(self, config: ExperimentConfig, prepared: PreparedData, state: dict) -> None:
        where, identity = self.directory, data_identity(prepared)
        # What comes from the data differs when the data do: the data are compared first.
        earlier = self._check_config(config, ignore=_FROM_DATA)
        recorded = self.data_record()
        if same_data(recorded, prepared, earlier):
            recorded = identity  # the record `record` writes next
        if recorded.get("source") == identity["source"] and recorded.get("data_key") != identity["data_key"]:
            self._check_attribute_files(config, recorded, identity["data_key"])
        for key, what in (("source", "source file"), ("data_key", "prepared data")):
            if recorded.get(key) != identity[key]:
                raise ValueError(f"{where} was trained on another {what} ({key} {recorded.get(key)}, this "
                                 f"command gives {identity[key]}); use a new --model_dir")
        self._check_config(config)  # with what comes from the data, which are the same
        if state["step"] > config.train.train_steps:
            raise ValueError(f"{where} has trained {state['step']} steps already, more than --train_steps "
                             f"{config.train.train_steps}; give --train_steps {state['step']} or more, or use a "
                             "new --model_dir")

    def _check_attribute_files(self, config: ExperimentConfig, recorded: dict, data_key: str) -> None:
        """Names the attribute file whose contents changed since the run started, when the data key
        differs (`recorded`: run.json; `data_key`: the key of this command's data). A run whose run.json
        holds no "attribute_files" has each of its files named as what may have changed."""
        current, files = attribute_files(config.data), recorded.get("attribute_files")
        paths = config.data.attribute_files()
        if files is None and current:
            raise ValueError(f"{self.directory} was trained on other prepared data of the same source file (data_key "
                             f"{recorded.get('data_key')}, this command gives {data_key}): restore whichever of "
                             f"its attribute files ({', '.join(paths[field] for field in current)}) "
                             "changed since the run started, or use a new --model_dir")
        for field, identity in current.items():
            if files is not None and files.get(field) != identity:
                raise ValueError(f"{self.directory} was trained on another version of the attribute file "
                                 f"{paths[field]} (--config {field}): its contents changed since "
                                 f"(recorded {files.get(field)}, now {identity}); restore the file the run "
                                 "started with, or use a new --model_dir")

    def config(self) -> ExperimentConfig:
        """The recorded configuration (of a run that has started).

        Raises:
            ValueError: naming config.json when it is not a run configuration, or names a model family
                that is not installed (a plugin's).
        """
        values = read_json(self.path("config.json"), "run configuration")
        try:
            return ExperimentConfig.from_dict(values)
        except UnknownFamily as error:
            raise ValueError(f"{self.path('config.json')}: this run's {error}") from None
        except (ValueError, AttributeError, TypeError) as error:
            raise ValueError(f"{self.path('config.json')}: not a run configuration ({error})") from None

    def output_files(self) -> dict[str, dict]:
        """{path in the folder: {"bytes", "sha256"}} of the run's outputs: model.keras and every file of
        export/ (recorded in results.json, so that a finished run can tell they are intact)."""
        names = [name for name in OUTPUTS if os.path.isfile(self.path(name))]
        for top in (name for name in OUTPUTS if os.path.isdir(self.path(name))):
            for folder, _, files in os.walk(self.path(top)):
                names += [os.path.relpath(os.path.join(folder, name), self.directory) for name in files]
        return file_records(self.directory, names)

    def intact_results(self) -> dict | None:
        """results.json when it and every output it records (`output_files`) are as written, else
        None: no results yet, a damaged results.json or output, or one written before outputs were
        recorded. A finished run with intact results has nothing left to write."""
        try:
            results = read_json(self.path("results.json"))
        except (OSError, ValueError):
            return None
        if not isinstance(results, dict) or not isinstance(results.get("outputs"), dict):
            return None
        try:
            return results if self.output_files() == results["outputs"] else None
        except OSError:
            return None

    def tested_weights(self) -> str:
        """Which weights the finished run tested, from its results.json: the best validation checkpoint,
        or the last weights when there was no validation split (`split=original`) or no training."""
        path = self.path("results.json")
        if not os.path.isfile(path):  # a non-chief worker of a multi-worker run, which tested its own copy
            return "this worker's copy of the run; the chief worker writes its results.json"
        record = read_json(path)
        if record.get("best_step") is not None:
            return f"best validation checkpoint, step {record['best_step']:,}"
        if record.get("steps"):
            return f"last weights, step {record['steps']:,}: no validation split to choose a checkpoint"
        return "no training steps"

    def data_record(self) -> dict:
        """run.json: the data the run is bound to."""
        return read_json(self.path("run.json"), "run's data record")


def _lock_record(handle) -> dict | None:
    """The holder the lock file records ({"pid", "host", "started"}), or None when it records none."""
    handle.seek(0)
    try:
        record = json.loads(handle.read() or "null")
        return {"pid": int(record["pid"]), "host": str(record["host"]), "started": str(record["started"])}
    except (ValueError, TypeError, KeyError):
        return None


def _describe(record: dict | None) -> str:
    """"process <pid> on <host> since <time>", or "another process" when the holder is unknown."""
    if record is None:
        return "another process"
    return f"process {record['pid']} on {record['host']} since {record['started']}"
