"""A run's folder: its configuration, the data it is bound to, and the resume state.

A run is bound to its configuration and its data. Once a folder holds a trained checkpoint, a
command with another configuration (other than a larger `train.train_steps`), another source file
or other prepared data is refused with one line saying what differs, so a folder never mixes two
runs. Nothing binds a folder before its first checkpoint: a command that failed before training
leaves nothing that refuses the corrected one.

Files:
    config.json                      the resolved configuration
    run.json                         the data: source identity, prepared-data key and folder
    checkpoints/state.json           resume point: steps, instances consumed, best, curve, RNG states
    checkpoints/latest.weights.h5    weights at the resume point
    checkpoints/best.weights.h5      weights of the best validation
"""

from __future__ import annotations

import os

from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.data.prepare import PreparedData
from bert4rec_tf.files import read_json, write_json_atomic

STATE_VERSION = 3


def fresh_state() -> dict:
    """The state of a run that has not trained yet."""
    return {"version": STATE_VERSION, "step": 0, "instances": 0, "seconds": 0.0, "scheduled": None, "best": None,
            "best_step": None, "since_best": 0, "curve": [], "seed_states": []}


def data_identity(prepared: PreparedData) -> dict:
    """What binds a run to its data: the source's identity and the prepared data's key and folder."""
    return {"source": prepared.metadata["source"]["identity"],
            "data_key": os.path.basename(os.path.normpath(prepared.directory)),
            "data_directory": prepared.directory}


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
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError(f"{path}: resume state of another format (written by another version of "
                             "bert4rec_tf?); use a new --model_dir")
        if state["step"] and not os.path.isfile(self.checkpoint("latest.weights.h5")):
            raise ValueError(f"{self.checkpoint('latest.weights.h5')}: missing, but {path} records "
                             f"{state['step']} trained steps; use a new --model_dir")
        return state

    def check(self, config: ExperimentConfig, prepared: PreparedData) -> dict:
        """Checks that `config` and `prepared` continue the run in this folder and returns the resume
        state; `config.model.vocab_size` is set from the data first. Writes nothing.

        Raises:
            ValueError: one line saying what differs, when the folder holds a trained run with
                another configuration, other data, or more steps than `config.train.train_steps`.
        """
        config.model.vocab_size = int(prepared.metadata["vocab_size"])
        config.model.max_len = config.data.max_len
        state = self.load_state()
        if state["step"]:
            self._check_same_run(config, data_identity(prepared), state)
        return state

    def record(self, config: ExperimentConfig, prepared: PreparedData) -> None:
        """Writes config.json and run.json (after `check`, once the run's checkpoint has loaded)."""
        os.makedirs(self.directory, exist_ok=True)
        write_json_atomic(self.path("config.json"), config.to_dict())
        write_json_atomic(self.path("run.json"), data_identity(prepared))

    def _check_same_run(self, config: ExperimentConfig, identity: dict, state: dict) -> None:
        where = self.directory
        earlier = read_json(self.path("config.json"), "run configuration")
        current = config.to_dict()
        # A field the recorded configuration lacks came to the package after the run started: not compared
        # (the settings it stands for are, and run.json binds the data).
        changed = sorted(f"{section}.{key}" for section, values in current.items() for key, value in values.items()
                         if (section, key) != ("train", "train_steps") and key in earlier.get(section, {})
                         and earlier[section][key] != value)
        if changed:
            raise ValueError(f"{where} holds a run with another configuration ({', '.join(changed)} differ); "
                             "use a new --model_dir")
        recorded = self.data_record()
        for key, what in (("source", "source file"), ("data_key", "prepared data")):
            if recorded.get(key) != identity[key]:
                raise ValueError(f"{where} was trained on another {what} ({key} {recorded.get(key)}, this "
                                 f"command gives {identity[key]}); use a new --model_dir")
        if state["step"] > config.train.train_steps:
            raise ValueError(f"{where} has trained {state['step']} steps already, more than --train_steps "
                             f"{config.train.train_steps}; give --train_steps {state['step']} or more, or use a "
                             "new --model_dir")

    def config(self) -> ExperimentConfig:
        """The recorded configuration (of a run that has started)."""
        values = read_json(self.path("config.json"), "run configuration")
        try:
            return ExperimentConfig.from_dict(values)
        except (ValueError, AttributeError, TypeError) as error:
            raise ValueError(f"{self.path('config.json')}: not a run configuration ({error})") from None

    def data_record(self) -> dict:
        """run.json: the data the run is bound to."""
        return read_json(self.path("run.json"), "run's data record")

