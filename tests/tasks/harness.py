"""The shared test of a registered Task, through the real trainer (`train_and_evaluate`) on tiny data.

`run_task_test(case, ...)`, in the default test run, checks for one case (a Task, with one of its
losses):

- it learns: on a planted-order data set (users mostly follow one hidden order of the items) a few
  hundred steps beat POP's full-ranking Recall@10 by `MARGIN`, or, for a family that reads no order
  (`Task.sequential` False: BPR-MF, NCF), by `UNORDERED_MARGIN` (a user's items lie on one stretch
  of the order, which a vector per user can learn); a Task with nothing to train is POP itself: it
  must equal the reference;
- its training stream is what an exact resume needs: built anew from the same seed and started at an
  instance number, it gives the bytes the stream from 0 gives there;
- it serves: the run's `export/` answers `serving_default` with 10 items of the catalogue, none of
  the history; a model that reads users is served by raw user id and refuses an unknown user.

`run_resume_test(case, ...)` (a slow check) stops the same run after its first checkpoint and starts
it again in its folder: it must end with the uninterrupted run's test metrics and weights, bit for bit.
(`tests/training/test_faults.py` does this in the default run for one Task, at a kill injected at
each write point of a checkpoint.)

The cases come from the registry (`CASES`): every registered Task, once per loss it trains with; a
new Task is tested without naming it here. Cases are split over two test files, so that the two test
workers train them side by side (pytest-xdist keeps a file on one worker).
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf import cli
from bert4rec_tf.data.prepare import prepare
from bert4rec_tf.data.split import training_sequences
from bert4rec_tf.export.recommender import Recommender
from bert4rec_tf.tasks import TASKS, task_of_preset
from bert4rec_tf.training import callbacks
from bert4rec_tf.training.build import training_stream
from bert4rec_tf.training.trainer import train_and_evaluate
from tests.conftest import planted_order_sequences, write_pairs

STEPS = 300
EVAL_EVERY = 150  # the resume test's checkpoint; the learning run validates once, at the end
MARGIN = 0.1  # full-ranking Recall@10 above POP's (0.36 here)
UNORDERED_MARGIN = 0.03
# Tiny dimensions, one block and a fast rate; the rest of each preset is kept; each case gets the
# settings its family has (`tiny`). Full-width batches
# (length_groups=0) have one shape, so the training step is traced once rather than twice.
TINY = ["max_len=20", "model.num_layers=1", "model.hidden_size=16", "model.num_heads=2",
        "model.intermediate_size=32", "model.hidden_dropout=0.1", "model.attention_dropout=0.1",
        "batch_size=32", "learning_rate=1e-2", "warmup_steps=20", f"train_steps={STEPS}", "length_groups=0",
        "dynamic_masking=true", "static_instances=false", "dupe_factor=2", "num_negatives=20"]


def tiny(preset: str, overrides: list[str]) -> list[str]:
    """`TINY` without the settings the preset's family does not have (the command line refuses
    those), then `overrides`."""
    schema = cli.experiment_config("beauty", overrides, model=preset)
    return [item for item in TINY if schema.has(item.split("=", 1)[0])] + overrides


# (name, preset, overrides): each registered Task by its first preset, once per loss.
CASES = [(f"{preset}-{loss}" if len(task.losses) > 1 else preset, preset, [f"loss={loss}"] if loss else [])
         for task in TASKS.values() for preset in list(task.presets)[:1] for loss in task.losses or (None,)]


def planted_source(root: str) -> tuple[str, str]:
    """The planted-order data set as a `user item` file in `root`, and a folder for its preparations."""
    sequences = planted_order_sequences(num_users=400, num_items=100, follow=0.9)
    return write_pairs(f"{root}/planted.txt", sequences), f"{root}/data"


class Interrupted(Exception):
    """Stops a run right after its first checkpoint, as a kill would."""


def train_case(preset: str, overrides: list[str], source: tuple[str, str], model_dir: str, eval_every: int = STEPS,
               stop_after_first_checkpoint: bool = False, monkeypatch=None) -> dict:
    """Trains the preset on the planted data through `train_and_evaluate`; its test metrics."""
    source_file, data_dir = source
    config = cli.experiment_config("beauty", tiny(preset, overrides), model=preset)
    if stop_after_first_checkpoint:
        checkpoint = callbacks.CheckpointAndValidate.on_epoch_end

        def stop(self, epoch, logs=None):
            checkpoint(self, epoch, logs)
            raise Interrupted

        monkeypatch.setattr(callbacks.CheckpointAndValidate, "on_epoch_end", stop)
    try:
        return train_and_evaluate(config, model_dir, data_dir=data_dir, source_file=source_file,
                                  eval_every=eval_every, verbose=0)
    finally:
        if stop_after_first_checkpoint:
            monkeypatch.setattr(callbacks.CheckpointAndValidate, "on_epoch_end", checkpoint)


def weights(model_dir: str) -> list[np.ndarray]:
    """The weights of the run's exported Keras model."""
    return keras.saving.load_model(os.path.join(model_dir, "model.keras"), safe_mode=True).get_weights()


def stream_batches(preset: str, overrides: list[str], source: tuple[str, str], start: int, count: int) -> list:
    """`count` batches of the Task's training stream (as the trainer builds it) from instance `start`."""
    source_file, data_dir = source
    config = cli.experiment_config("beauty", tiny(preset, overrides), model=preset)
    prepared = prepare(config.data, data_dir, source_file, progress=False)
    stream = training_stream(task_of_preset(preset), config, prepared,
                             training_sequences(prepared.sequences(), config.data.split))
    return [{name: value.numpy() for name, value in batch.items()} for batch in stream(start).take(count)]


def run_task_test(case: tuple[str, str, list[str]], source: tuple[str, str], pop_recall: float, root: str) -> None:
    """The default-run checks for `case`, in folders under `root`: it learns (or is POP), it serves,
    and its training stream is a pure function of the instance number (what an exact resume needs of
    a Task; `run_resume_test` resumes a whole run)."""
    name, preset, overrides = case
    task = task_of_preset(preset)
    results = train_case(preset, overrides, source, f"{root}/whole")
    recall = results["full"]["Recall@10"]
    curve = []
    if task.trains:  # POP has no checkpoint
        with open(f"{root}/whole/checkpoints/state.json", encoding="utf-8") as handle:
            curve = json.load(handle)["curve"]
    with open(f"{root}/whole/results.json", encoding="utf-8") as handle:
        note = json.load(handle).get("loss_note")
    # A loss that is not the paper's says so beside the results.
    assert (note is not None and "not the paper's loss" in note) == ("loss=sampled_softmax" in overrides), name
    # Validation ranks every item too unless the Task says it costs too much; the test always does.
    assert all(("full/NDCG@10" in point) == task.full_ranking_validation for point in curve) and (
        curve or not task.trains), name
    if task.trains:
        margin = MARGIN if task.sequential else UNORDERED_MARGIN
        assert recall >= pop_recall + margin, f"{name}: full Recall@10 {recall:.3f}, POP {pop_recall:.3f}"
        batch = int(cli.experiment_config("beauty", tiny(preset, overrides), model=preset).train.batch_size)
        # Built anew from the same seed and started at its third batch, the stream gives that batch's bytes.
        first, resumed = stream_batches(preset, overrides, source, 0, 3), stream_batches(preset, overrides, source,
                                                                                          2 * batch, 1)
        assert resumed[0].keys() == first[2].keys()
        for key in first[2]:
            np.testing.assert_array_equal(resumed[0][key], first[2][key], err_msg=f"{name}: {key}")
    else:
        assert recall == pop_recall

    served = tf.saved_model.load(f"{root}/whole/export")
    history = tf.constant([["i1", "i2", ""], ["i7", "", ""]])
    recommender = Recommender(f"{root}/whole/export")
    by_user = {} if recommender.users is None else {"user": tf.constant(["u1", "u7"])}
    answer = served.signatures["serving_default"](history=history, **by_user)
    items = answer["item_ids"].numpy().astype(str)
    assert items.shape == (2, 10) and list(answer["num_items"].numpy()) == [10, 10]
    catalogue = {f"i{item}" for item in range(1, 101)}
    for row, seen in enumerate(({"i1", "i2"}, {"i7"})):
        assert set(items[row]) <= catalogue - seen and len(set(items[row])) == 10
    if by_user:
        with pytest.raises(tf.errors.InvalidArgumentError, match="serves only the users it was trained on"):
            served.signatures["serving_default"](history=history, user=tf.constant(["u1", "stranger"]))
        with pytest.raises(ValueError, match="unknown user 'stranger'"):
            recommender.recommend([["i1"]], users=["stranger"])
        assert len(recommender.recommend([[]], users=["u3"])[0]) == 10  # the user's vector alone
    else:
        with pytest.raises(ValueError, match="leave users out"):
            recommender.recommend([["i1"]], users=["u1"])


def run_resume_test(case: tuple[str, str, list[str]], source: tuple[str, str], root: str, monkeypatch) -> None:
    """A run stopped after its first checkpoint and started again in its folder ends with the metrics
    and the weights, bit for bit, of the uninterrupted run."""
    name, preset, overrides = case
    whole = train_case(preset, overrides, source, f"{root}/whole", EVAL_EVERY)
    try:
        train_case(preset, overrides, source, f"{root}/cut", EVAL_EVERY, stop_after_first_checkpoint=True,
                   monkeypatch=monkeypatch)
        assert not task_of_preset(preset).trains  # a Task that trains checkpoints after its first interval
    except Interrupted:
        with open(f"{root}/cut/checkpoints/state.json") as handle:
            assert json.load(handle)["step"] == EVAL_EVERY
    resumed = train_case(preset, overrides, source, f"{root}/cut", EVAL_EVERY)
    assert resumed == whole, f"{name}: resumed {resumed} != uninterrupted {whole}"
    for mine, theirs in zip(weights(f"{root}/cut"), weights(f"{root}/whole"), strict=True):
        np.testing.assert_array_equal(mine, theirs)


def task_tests(cases: list) -> tuple:
    """The two tests of `cases`, for a test file to bind to its names: the default-run checks
    (`run_task_test`) and the slow exact resume (`run_resume_test`)."""
    ids = [name for name, _, _ in cases]

    @pytest.mark.parametrize("case", cases, ids=ids)
    def learns_and_serves(case, planted, planted_pop_recall, tmp_path):
        run_task_test(case, planted, planted_pop_recall, str(tmp_path))

    @pytest.mark.slow
    @pytest.mark.parametrize("case", cases, ids=ids)
    def resumes_exactly(case, planted, tmp_path, monkeypatch):
        run_resume_test(case, planted, str(tmp_path), monkeypatch)

    return learns_and_serves, resumes_exactly
