"""A run's TensorBoard summaries besides the training curves: configuration, HParams, results.

The event files of a run folder (each folder is one TensorBoard run):
    ./           "config": the resolved config.json (text), written at every (re)start
    train/       loss, grad_norm, learning_rate (`callbacks.TrainSummaries`)
    validation/  each validation: loss (the training loss on validation instances, see
                 `evaluation.validation_loss`), <protocol>/<metric> and the attention heat maps
                 (`callbacks.CheckpointAndValidate`)
    results/     the HParams session: every configuration field is a hyperparameter (data.*, model.*,
                 train.*), written anew at every (re)start (HParams reads only the first session
                 start of a folder, and a resumed run may have a larger train.train_steps); at the
                 end, at the last step, its metrics:
                 test/<protocol>/<metric> of the tested (best) checkpoint and
                 validation_best/<protocol>/<metric> and validation_best/loss of that checkpoint

The session lives in its own folder so that its metrics are these results only (HParams takes every
scalar under the session's folder as a metric, with its last value). In a log folder holding several
run folders, the HParams tab lists one row per run, named after its folder, with its settings and
results; the settings that differ between the runs come first.
"""

from __future__ import annotations

import json
import os
import shutil

import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api

from bert4rec_tf.config import ExperimentConfig

RESULTS = "results"


def hparam_values(config: ExperimentConfig) -> dict[str, bool | int | float | str]:
    """The configuration flattened to {"section.field": value}, e.g. {"model.hidden_size": 64, ...}
    (a list, as the item attributes, as its JSON text), and "loss_note": what `loss_note` says of a
    loss that is not the paper's ("" for the paper's)."""
    values = {f"{section}.{name}": json.dumps(value) if isinstance(value, (list, dict)) else value
              for section, fields in config.to_dict().items() for name, value in fields.items()}
    return {**values, "loss_note": config.model.loss_note() or ""}


def _write(directory: str, step: int, write) -> None:
    """Calls `write()` under a summary writer of `directory` at `step`, then closes the file."""
    writer = tf.summary.create_file_writer(directory)
    with writer.as_default(step=step), tf.summary.record_if(True):
        write()
    writer.close()


def write_run_summaries(directory: str, config: ExperimentConfig, step: int = 0) -> None:
    """Writes the configuration text and starts the HParams session of the run in `directory`.

    The results folder is emptied first: it holds the session of this configuration only.

    Args:
        directory: the run folder (the model directory).
        config: the resolved configuration.
        step: the step the run starts (or resumes) at.
    """
    name = os.path.basename(os.path.normpath(os.path.abspath(directory)))
    _write(directory, step, lambda: tf.summary.text("config", f"```json\n{config.to_json()}\n```"))
    shutil.rmtree(os.path.join(directory, RESULTS), ignore_errors=True)
    _write(os.path.join(directory, RESULTS), step, lambda: hparams_api.hparams(hparam_values(config), trial_id=name))


def write_results(directory: str, test: dict[str, dict[str, float]], best: dict | None, step: int) -> None:
    """Writes the HParams session's metrics: the test metrics and the best checkpoint's validation ones.

    Args:
        directory: the run folder.
        test: {protocol: {metric: value}} of the tested checkpoint.
        best: the validation curve's point of the best checkpoint ({"pop/HR@10": value, ...,
            "validation_loss": value}), or None (no validation).
        step: the run's last step.
    """
    scalars = {f"test/{protocol}/{name}": value for protocol, values in test.items() for name, value in values.items()}
    for name, value in (best or {}).items():
        if "/" in name or name == "validation_loss":
            scalars[f"validation_best/{name.replace('validation_loss', 'loss')}"] = value

    def write():
        for tag, value in scalars.items():
            tf.summary.scalar(tag, value)

    _write(os.path.join(directory, RESULTS), step, write)
