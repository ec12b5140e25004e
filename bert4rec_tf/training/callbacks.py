"""The trainer's Keras callbacks: summaries, divergence stop, pace, validation and checkpoints."""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Callable

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from bert4rec_tf.constants import SELECTION_METRIC, metric_label
from bert4rec_tf.evaluation.attention import average_last_attention, heatmap_image
from bert4rec_tf.evaluation.attention_plot import attention_head_pixels
from bert4rec_tf.evaluation.evaluator import format_table
from bert4rec_tf.files import atomic_path, ensure_room, quiet_after_failed_write, write_json_atomic
from bert4rec_tf.training.run_folder import RunFolder, weights_name
from bert4rec_tf.training.schedule import patience_spent

ATTENTION_WINDOW = 10  # the paper's heat maps show the last 10 positions
# Bytes of HDF5 structure in a weights file beyond the variables' own: about 1 KB a variable (the
# model's and the optimizer's), bounded here with room to spare.
WEIGHTS_FILE_OVERHEAD = 64 * 1024
WEIGHTS_FILE_OVERHEAD_PER_VARIABLE = 2 * 1024


class TrainingDiverged(ValueError):
    """The loss, the gradient or the weights stopped being finite."""


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


class StopOnDivergence(keras.callbacks.Callback):
    """Stops training with `TrainingDiverged`, naming the step, once the loss or gradient is not finite.

    Raised before the interval's checkpoint, so the last checkpoint stays the last finite one.
    """

    def on_train_batch_end(self, batch, logs=None):
        logs = logs or {}
        values = {name: float(logs[name]) for name in ("loss", "grad_norm") if name in logs}
        if not all(math.isfinite(value) for value in values.values()):
            step = int(self.model.optimizer.iterations.numpy())
            shown = ", ".join(f"{name} {value}" for name, value in values.items())
            print(flush=True)  # end the progress bar's line before the error
            raise TrainingDiverged(
                f"training diverged at step {step} ({shown}, learning rate "
                f"{float(logs.get('learning_rate', math.nan)):.3g}); stopped before any checkpoint of the "
                "non-finite model: lower --learning_rate (or raise warm-up) and use a new --model_dir")


class PaceMeter:
    """Measures seconds per training step (the first step of each interval, which may trace the graph,
    left out) and, for the latest interval, the seconds not spent in steps (the first step,
    validation, checkpoint). `IntervalDriver` calls it."""

    def __init__(self):
        self.pace = None
        self.overhead = 0.0

    def interval_begin(self) -> None:
        self._begin = time.monotonic()
        self._first_end, self._steps = None, 0

    def step_end(self) -> None:
        now = time.monotonic()
        if self._first_end is None:
            self._first_end = now
            return
        self._steps += 1
        self.pace = (now - self._first_end) / self._steps

    def interval_end(self) -> None:
        self.overhead = time.monotonic() - self._begin - self._steps * (self.pace or 0.0)


class IntervalDriver(keras.callbacks.Callback):
    """Cuts one `model.fit` into the intervals `plan` (a `schedule.IntervalPlan`) plans: after each,
    `checkpointing` validates and writes the resume point, the loss mean starts again (as a new epoch's
    would) and the plan gives the next interval's steps, or 0 to stop training.

    One `fit` for the whole run: a new `fit` per interval costs a second or more of setup each time,
    which for a model whose step takes a few milliseconds is more than its 500 steps. Put it last among
    the callbacks, so that the others have seen an interval's last step before its checkpoint.

    Args:
        plan: the interval plan.
        first: the first interval's steps (from `plan.next_steps()`, before `fit`).
        checkpointing: the `CheckpointAndValidate` run at the end of each interval.
        pace: the `PaceMeter`.
        progress: whether to show a progress bar per interval (Keras's own, as `fit(verbose=1)`).
    """

    def __init__(self, plan, first: int, checkpointing: CheckpointAndValidate, pace: PaceMeter, progress: bool):
        super().__init__()
        self.plan, self.checkpointing, self.pace, self.progress = plan, checkpointing, pace, progress
        self._steps = first

    def on_train_begin(self, logs=None):
        self.checkpointing.set_model(self.model)
        self._begin(self._steps)

    def _begin(self, steps: int) -> None:
        self._steps, self._seen, self._began = steps, 0, time.monotonic()
        self._bar = keras.utils.Progbar(steps, unit_name="step", stateless_metrics=set()) if self.progress else None
        self.pace.interval_begin()

    def on_train_batch_end(self, batch, logs=None):
        self.pace.step_end()
        self._seen += 1
        if self._bar is not None:
            self._bar.update(self._seen, list((logs or {}).items()), finalize=self._seen >= self._steps)
        if self._seen < self._steps and not self.plan.mark_due():  # an interval also ends at a mark
            return
        self.checkpointing.end_interval(logs, training_seconds=time.monotonic() - self._began)
        self.pace.interval_end()
        self.model.reset_metrics()  # the next interval's loss is its own mean, as a new epoch's is
        steps = 0 if self.model.stop_training else self.plan.next_steps()
        if steps:
            self._begin(steps)
        else:
            self.model.stop_training = True


def two_standard_errors(mean: float, users: int) -> float:
    """Two standard errors of a mean over `users` users of a per-user value in [0, 1] with mean `mean`:
    exact for a hit rate (variance m(1 - m)), an upper bound for NDCG and MRR."""
    return 2.0 * math.sqrt(max(mean * (1.0 - mean), 0.0) / users) if users else math.nan


class CheckpointAndValidate(keras.callbacks.Callback):
    """After every interval (`end_interval`, which `IntervalDriver` calls): check the weights, validate, keep the best, write the resume point.

    Args:
        run: the run's folder.
        validate: a function of the model returning {protocol: {metric: value}}, or None.
        patience: stop after this many validations without improvement (None: never).
        state: the resume state (see `run_folder.fresh_state`), updated in place.
        batch_size: instances per step, to count the stream position in instances.
        attention_histories: validation histories whose average attention over the last 10
            positions is logged as heat-map images, per layer and head (None: no heat maps). The
            images are labelled figures (`attention_head_pixels`); without matplotlib they are bare
            colour squares, and a line on stderr says so once.
        attention_last_label: what the last position of the heat maps is (the Task's
            `attention_last_label`, e.g. "[mask]"); None: the model has no attention, no heat maps.
        clock: seconds of training and validation the run has had, over all its processes.
        validation_loss: a function of no argument giving the model's loss on validation instances
            (`evaluation.validation_loss`), logged as "loss" beside the validation metrics and as
            "validation_loss" in the curve; None: not logged.
        sample: the number of users `validate` averages over when they are a sample of the users
            (`train.valid_users`, `train.eval_users`): two standard errors of the selection metric
            over them (`two_standard_errors`) are logged beside it ("<protocol>/<metric>_2se") and
            kept in the curve with the sample's size; None: every user.
        on_validation: called with each validation's curve point once its checkpoint is committed;
            True stops training there (a tuner's pruned trial: `bert4rec_tf.tuning`). None: never.
    """

    def __init__(self, run: RunFolder, validate, patience: int | None, state: dict, batch_size: int,
                 attention_histories: np.ndarray | None = None, attention_last_label: str | None = None, clock=None,
                 validation_loss=None, sample: int | None = None,
                 on_validation: Callable[[dict], bool] | None = None):
        super().__init__()
        self.sample = sample
        self.on_validation = on_validation
        self.halted = False  # stopped by `on_validation`
        self.validation_loss = validation_loss
        self._bare_heat_maps = False
        self.clock = clock
        self.attention_histories = attention_histories if attention_last_label else None
        self.attention_last_label = attention_last_label
        self.run = run
        self.validate = validate
        self.patience = patience
        self.state = state
        self.batch_size = batch_size
        self.stopped_early = patience_spent(state, patience)
        self.writer = tf.summary.create_file_writer(run.path("validation"))

    def end_interval(self, logs=None, training_seconds: float | None = None):
        """After an interval's last step (`IntervalDriver`); `logs` are that step's, with the interval's
        mean loss; `training_seconds` the interval's time from its start to its last step's end (the
        steps, their input and the per-step callbacks; in the first interval also the graph's tracing),
        kept in the curve beside `validation_seconds`."""
        step = int(self.model.optimizer.iterations.numpy())
        if not all(np.isfinite(ops.convert_to_numpy(v)).all() for v in self.model.trainable_variables):
            raise TrainingDiverged(f"training diverged: the weights are not finite at step {step}; the last "
                                   "checkpoint was kept: lower --learning_rate and use a new --model_dir")
        # The next state is built apart and committed at once (`RunFolder.commit`), after the weight
        # files it names are written: a kill anywhere before leaves the previous checkpoint current.
        state = {**self.state, "curve": list(self.state["curve"])}
        state["instances"] += (step - state["step"]) * self.batch_size
        state["step"] = step
        if self.validate is not None:
            began = time.perf_counter()
            results = self.validate(self.model)
            point = {"step": step, "loss": float((logs or {}).get("loss", math.nan))}
            if self.validation_loss is not None:
                point["validation_loss"] = self.validation_loss()
            # What this validation cost (metrics and loss): the curve says which share of a run it takes.
            point["validation_seconds"] = round(time.perf_counter() - began, 3)
            if training_seconds is not None:
                point["training_seconds"] = round(training_seconds, 3)
            score = results[SELECTION_METRIC[0]][SELECTION_METRIC[1]]
            key = f"{SELECTION_METRIC[0]}/{SELECTION_METRIC[1]}_2se"
            spread = {"valid_users": self.sample, key: two_standard_errors(score, self.sample)} if self.sample else {}
            with self.writer.as_default(step=step), tf.summary.record_if(True):
                if "validation_loss" in point:
                    tf.summary.scalar("loss", point["validation_loss"])
                for protocol, values in results.items():
                    for name, value in values.items():
                        tf.summary.scalar(f"{protocol}/{name}", value)
                if spread:
                    tf.summary.scalar(key, spread[key])
            if self.clock is not None:
                point["seconds"] = round(self.clock(), 1)  # training and validation time so far
            state["curve"].append({**point, **{f"{p}/{m}": v for p, r in results.items() for m, v in r.items()},
                                   **spread})
            shown = f" (loss {point['validation_loss']:.4f})" if "validation_loss" in point else ""
            if spread:
                shown += (f" on {self.sample:,} users (two standard errors of {metric_label(SELECTION_METRIC)}: "
                          f"{spread[key]:.4f})")
            print(f"\nvalidation at step {step}{shown}:\n{format_table(results)}")
            if math.isfinite(score) and (state["best"] is None or score > state["best"]):
                state.update(best=score, best_step=step, since_best=0,
                             best_weights=self._save_weights(weights_name("best", step)))
            else:
                state["since_best"] += 1
                if patience_spent(state, self.patience):
                    self.model.stop_training = True
                    self.stopped_early = True
            self._log_attention(step)
        state["latest_weights"] = self._save_weights(weights_name("latest", step))
        if self.clock is not None:
            state["seconds"] = round(self.clock(), 3)
        state["seed_states"] = [ops.convert_to_numpy(g.state).tolist() for g in seed_generators(self.model)]
        self.run.commit(state)
        self.state.update(state)
        if self.validate is not None:
            write_json_atomic(self.run.path("validation.json"), state["curve"])  # a copy of the curve, for readers
            if self.on_validation is not None and self.on_validation(state["curve"][-1]):
                self.model.stop_training = True
                self.halted = True

    def _log_attention(self, step: int) -> None:
        if self.attention_histories is None:
            return
        try:
            # The histories are the first validation users', model user ids 1, 2, ...
            maps = average_last_attention(self.model, self.attention_histories, last=ATTENTION_WINDOW,
                                          users=np.arange(1, len(self.attention_histories) + 1))
        except ValueError:  # no validation sequence is that long
            return
        with self.writer.as_default(step=step), tf.summary.record_if(True):
            for layer, heads in enumerate(maps, start=1):
                for head, matrix in enumerate(heads, start=1):
                    image = self._heat_map(matrix, f"layer {layer}, head {head}", self.attention_last_label)
                    tf.summary.image(f"attention/layer_{layer}/head_{head}", image)
        self.writer.flush()

    def _heat_map(self, matrix: np.ndarray, title: str, last_label: str) -> np.ndarray:
        """The labelled heat map, or the bare one (said once on stderr) when matplotlib is absent."""
        if not self._bare_heat_maps:
            try:
                return attention_head_pixels(matrix, title, last_label)
            except ImportError:
                self._bare_heat_maps = True
                print("TensorBoard: matplotlib is not installed, so the attention heat maps are logged as bare "
                      "colour squares, without axes, position labels or colour bar (pip install -e \".[report]\")",
                      file=sys.stderr)
        return heatmap_image(matrix)

    def _save_weights(self, name: str) -> str:
        """Writes the weights as checkpoints/`name`; returns `name`."""
        os.makedirs(self.run.checkpoints, exist_ok=True)
        # HDF5 fails messily half-way through a file that does not fit (tracebacks, even a crash): it
        # is refused before, in one line. The size is the last weights file's, or before the first a
        # bound of the bytes of the weights and the optimizer's variables (the file holds both) and of
        # HDF5's structure. A write that fails all the same (the disk filled meanwhile) keeps quiet.
        last = self.run.checkpoint(self.state["latest_weights"] or name)
        variables = [*self.model.weights, *self.model.optimizer.variables]
        ensure_room(self.run.checkpoint(name), os.path.getsize(last) if os.path.isfile(last) else
                    sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables)
                    + WEIGHTS_FILE_OVERHEAD + WEIGHTS_FILE_OVERHEAD_PER_VARIABLE * len(variables))
        with quiet_after_failed_write(), atomic_path(self.run.checkpoint(name)) as temporary:
            self.model.save_weights(temporary)
        return name


def seed_generators(model: keras.Model) -> list:
    """The model's random seed generators (dropout), in a fixed order.

    Keras keeps their states out of the saved weights; the checkpoint stores them so that a resumed
    run draws the same dropout masks as an uninterrupted one.
    """
    return [generator for layer in model._flatten_layers() for generator in layer._seed_generators]

