"""The main job: prepare data, train with periodic validation and checkpoints, test once, export.

Model directory layout:
    config.json                 the resolved configuration
    run.json                    where the prepared data is
    checkpoints/latest.weights.h5, checkpoints/state.json   resume point (written atomically)
    checkpoints/best.weights.h5 the best validation checkpoint
    train/, validation/         TensorBoard logs
    validation.json             the validation curve
    results.json                test metrics of the best checkpoint
    model.keras                 the exported model
    export/                     the serving SavedModel and vocab.txt (raw id <TAB> model id)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.data.instances import make_windows
from bert4rec_tf.data.pipeline import dynamic_training_dataset, evaluation_features, static_training_dataset
from bert4rec_tf.data.prepare import PreparedData, load_prepared, prepare
from bert4rec_tf.data.split import training_sequences
from bert4rec_tf.evaluation.attention import average_last_attention, heatmap_image
from bert4rec_tf.evaluation.evaluator import evaluate, format_table
from bert4rec_tf.export.saved_model import export_saved_model
from bert4rec_tf.training.instrumented import InstrumentedBERT4Rec
from bert4rec_tf.training.optimization import make_optimizer

SELECTION_METRIC = ("pop", "NDCG@10")
ATTENTION_WINDOW = 10  # the paper's heat maps show the last 10 positions
ATTENTION_USERS = 512


def write_json_atomic(path: str, value) -> None:
    """Writes JSON under a temporary name, then renames it into place."""
    temporary = f"{path}.tmp"
    with open(temporary, "w") as handle:
        json.dump(value, handle, indent=2, sort_keys=True)
    os.replace(temporary, path)


def resolve_config(config: ExperimentConfig, prepared: PreparedData, model_dir: str) -> ExperimentConfig:
    """Fills the vocabulary from the data and records the configuration in `model_dir/config.json`.

    Only `train.train_steps` may change between runs in one folder: raising it continues the run for
    longer (the learning rate then decays to zero at the new last step).

    Raises:
        ValueError: when `model_dir` holds a run with a different configuration.
    """
    config.model.vocab_size = int(prepared.metadata["vocab_size"])
    config.model.max_len = config.data.max_len
    path = os.path.join(model_dir, "config.json")
    if os.path.isfile(path):
        with open(path) as handle:
            earlier = json.load(handle)
        earlier["train"]["train_steps"] = config.train.train_steps
        if earlier != config.to_dict():
            changed = sorted(f"{section}.{key}" for section, values in config.to_dict().items()
                             for key, value in values.items() if earlier[section].get(key) != value)
            raise ValueError(f"{model_dir} holds a run with another configuration ({', '.join(changed)} "
                             "differ); use a new --model_dir")
    write_json_atomic(path, config.to_dict())
    return config


class TrainSummaries(keras.callbacks.Callback):
    """Writes loss, gradient norm and learning rate to `model_dir/train` every `every` steps."""

    def __init__(self, model_dir: str, every: int = 100):
        super().__init__()
        self.every = every
        self.writer = tf.summary.create_file_writer(os.path.join(model_dir, "train"))

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if logs and step % self.every == 0:
            with self.writer.as_default(step=step), tf.summary.record_if(True):
                for name in ("loss", "grad_norm", "learning_rate"):
                    if name in logs:
                        tf.summary.scalar(name, float(logs[name]))
            self.writer.flush()


class CheckpointAndValidate(keras.callbacks.Callback):
    """After every epoch (an evaluation interval): validate, keep the best, write the resume point.

    Args:
        model_dir: the run's folder.
        validate: a function of the model returning {protocol: {metric: value}}, or None.
        patience: stop after this many validations without improvement (None: never).
        state: the restored state (epoch, best) or a fresh one.
        attention_inputs: validation inputs whose average attention over the last 10 positions is
            logged as heat-map images, per layer and head.
    """

    def __init__(self, model_dir: str, validate, patience: int | None, state: dict,
                 attention_inputs: dict[str, np.ndarray] | None = None):
        super().__init__()
        self.attention_inputs = attention_inputs
        self.directory = os.path.join(model_dir, "checkpoints")
        self.validate = validate
        self.patience = patience
        self.state = state
        self.writer = tf.summary.create_file_writer(os.path.join(model_dir, "validation"))
        self.curve_path = os.path.join(model_dir, "validation.json")

    def on_epoch_end(self, epoch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if self.validate is not None:
            results = self.validate(self.model)
            with self.writer.as_default(step=step), tf.summary.record_if(True):
                for protocol, values in results.items():
                    for name, value in values.items():
                        tf.summary.scalar(f"{protocol}/{name}", value)
            self.state["curve"].append({"step": step, "loss": float((logs or {}).get("loss", math.nan)),
                                        **{f"{p}/{m}": v for p, r in results.items() for m, v in r.items()}})
            score = results[SELECTION_METRIC[0]][SELECTION_METRIC[1]]
            print(f"\nvalidation at step {step}:\n{format_table(results)}")
            if self.state["best"] is None or score > self.state["best"]:
                self.state.update(best=score, best_step=step, since_best=0)
                self._save_weights("best.weights.h5")
            else:
                self.state["since_best"] += 1
                if self.patience is not None and self.state["since_best"] >= self.patience:
                    self.model.stop_training = True
            write_json_atomic(self.curve_path, self.state["curve"])
            self._log_attention(step)
        self._save_weights("latest.weights.h5")
        self.state["epoch"] = epoch + 1
        self.state["seed_states"] = [ops.convert_to_numpy(g.state).tolist() for g in seed_generators(self.model)]
        write_json_atomic(os.path.join(self.directory, "state.json"), self.state)

    def _log_attention(self, step: int) -> None:
        if self.attention_inputs is None:
            return
        try:
            maps = average_last_attention(self.model, self.attention_inputs, last=ATTENTION_WINDOW)
        except ValueError:  # no validation sequence is that long
            return
        with self.writer.as_default(step=step), tf.summary.record_if(True):
            for layer, heads in enumerate(maps):
                for head, matrix in enumerate(heads):
                    tf.summary.image(f"attention/layer_{layer}/head_{head}", heatmap_image(matrix))
        self.writer.flush()

    def _save_weights(self, name: str) -> None:
        os.makedirs(self.directory, exist_ok=True)
        temporary = os.path.join(self.directory, f"tmp-{name}")
        self.model.save_weights(temporary)
        os.replace(temporary, os.path.join(self.directory, name))


def seed_generators(model: keras.Model) -> list:
    """The model's random seed generators (dropout), in a fixed order.

    Keras keeps their states out of the saved weights; the checkpoint stores them so that a resumed
    run draws the same dropout masks as an uninterrupted one.
    """
    return [generator for layer in model._flatten_layers() for generator in layer._seed_generators]


def load_state(model_dir: str) -> dict:
    path = os.path.join(model_dir, "checkpoints", "state.json")
    if os.path.isfile(path):
        with open(path) as handle:
            return json.load(handle)
    return {"epoch": 0, "best": None, "best_step": None, "since_best": 0, "curve": []}


def make_strategy(name: str) -> tf.distribute.Strategy:
    """"default", "mirrored" (all local GPUs, else all logical CPUs) or "multi_worker" (TF_CONFIG)."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy(devices=[device.name for device in devices])
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise ValueError(f"unknown strategy {name!r}; known: default, mirrored, multi_worker")


def split_cpu(devices: int) -> None:
    """Splits the CPU into `devices` logical devices (to run a strategy on CPU); call before TF starts."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)


def train_and_evaluate(config: ExperimentConfig, model_dir: str, data_dir: str | None = None,
                       source_file: str | None = None, strategy: str = "default", eval_every: int = 1000,
                       patience: int | None = None, verbose: int = 1) -> dict:
    """Runs the main job and returns the test metrics {protocol: {metric: value}}.

    Re-running the same command in the same `model_dir` continues from the last checkpoint; with the
    same seed the data stream continues where it stopped, so the result equals an uninterrupted run.
    """
    os.makedirs(model_dir, exist_ok=True)
    prepared = prepare(config.data, data_dir, source_file, progress=verbose > 0)
    config = resolve_config(config, prepared, model_dir)
    write_json_atomic(os.path.join(model_dir, "run.json"), {"data_directory": prepared.directory})
    sequences, candidates = prepared.sequences(), prepared.candidates()
    steps_per_epoch = max(1, min(eval_every, config.train.train_steps))
    epochs = math.ceil(config.train.train_steps / steps_per_epoch)
    state = load_state(model_dir)
    keras.utils.set_random_seed(config.data.seed)

    with make_strategy(strategy).scope():
        model = InstrumentedBERT4Rec(config.model, packed=True)
        model.build()
        model.compile(optimizer=make_optimizer(config.train, model.trainable_variables), jit_compile=False)
        if state["epoch"]:
            model.optimizer.build(model.trainable_variables)
            model.load_weights(os.path.join(model_dir, "checkpoints", "latest.weights.h5"))
            for generator, value in zip(seed_generators(model), state["seed_states"], strict=True):
                generator.state.assign(np.asarray(value, dtype=generator.state.dtype))

    consumed = state["epoch"] * steps_per_epoch * config.train.batch_size
    if config.train.dynamic_masking:
        windows = make_windows(training_sequences(sequences, config.data.split),
                               np.arange(1, sequences.num_users + 1), config.data.max_len,
                               config.data.prop_sliding_window)
        dataset = dynamic_training_dataset(windows, config.data, prepared.num_items,
                                           batch_size=config.train.batch_size, start=consumed)
    else:
        dataset = static_training_dataset(prepared.train_files, config.data, batch_size=config.train.batch_size)
        dataset = dataset.skip(state["epoch"] * steps_per_epoch)

    validate = None
    if config.data.split == "valid":
        def validate(m):
            return evaluate(m, sequences, "valid", config.data.max_len, candidates, protocols=("pop", "full"))

    attention_inputs = None
    if validate is not None:
        inputs = evaluation_features(sequences, "valid", config.data.max_len)
        attention_inputs = {name: inputs[name][:ATTENTION_USERS] for name in ("input_ids", "input_mask")}
    callbacks = [
        CheckpointAndValidate(model_dir, validate, patience, state, attention_inputs),
        TrainSummaries(model_dir, every=min(100, steps_per_epoch)),
    ]
    if state["epoch"] < epochs:
        model.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch, initial_epoch=state["epoch"],
                  callbacks=callbacks, verbose=verbose)

    best = os.path.join(model_dir, "checkpoints", "best.weights.h5")
    if validate is not None and os.path.isfile(best):
        model.load_weights(best)
    results = evaluate(model, sequences, "test", config.data.max_len, candidates, batch_size=256)
    write_json_atomic(os.path.join(model_dir, "results.json"),
                      {"test": results, "best_step": state["best_step"],
                       "config": config.to_dict(), "data": prepared.directory})
    plain = model.plain()
    plain.save(os.path.join(model_dir, "model.keras"))
    export_saved_model(plain, sequences.item_ids, config.data.max_len, os.path.join(model_dir, "export"))
    return results


def evaluate_run(model_dir: str, stage: str = "test", batch_size: int = 256) -> dict:
    """Evaluates `model_dir/model.keras` on its prepared data and writes `evaluation.json`.

    Raises:
        FileNotFoundError: when the folder holds no finished run.
    """
    paths = {name: os.path.join(model_dir, name) for name in ("model.keras", "config.json", "run.json")}
    missing = [name for name, path in paths.items() if not os.path.isfile(path)]
    if missing:
        raise FileNotFoundError(f"{model_dir} holds no finished run (missing {', '.join(missing)})")
    with open(paths["run.json"]) as handle:
        prepared = load_prepared(json.load(handle)["data_directory"])
    if prepared is None:
        raise FileNotFoundError(f"the prepared data of {model_dir} is missing; run train.py again to rebuild it")
    with open(paths["config.json"]) as handle:
        config = ExperimentConfig.from_dict(json.load(handle))
    model = keras.saving.load_model(paths["model.keras"], safe_mode=True)
    results = evaluate(model, prepared.sequences(), stage, config.data.max_len, prepared.candidates(),
                       batch_size=batch_size, progress=True)
    write_json_atomic(os.path.join(model_dir, "evaluation.json"), {stage: results})
    return results
