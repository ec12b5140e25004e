"""The main job: prepare data, train with periodic validation and checkpoints, test once, export.

Model directory layout (see also `bert4rec_tf.training.run_folder`):
    config.json, run.json       the resolved configuration and the data the run is bound to
    checkpoints/                resume point (latest.weights.h5, state.json) and best.weights.h5
    event files, train/, validation/, results/   TensorBoard (see `bert4rec_tf.training.summaries`)
    validation.json             the validation curve
    model.keras                 the exported model
    export/                     the serving SavedModel and vocab.txt (escaped raw id <TAB> model id)
    results.json                test metrics of the best checkpoint, POP's validation metrics and
                                whether the best validation is above them (`pop_warning`), written
                                last: the run is complete

Every file is written under a temporary name and renamed into place, so it is complete or absent.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.constants import POP_MARGIN, SELECTION_METRIC, metric_label
from bert4rec_tf.data.instances import make_windows
from bert4rec_tf.data.negatives import NegativeSampler
from bert4rec_tf.data.pipeline import (dynamic_training_dataset, evaluation_histories, length_grouped,
                                       next_item_training_dataset, static_training_dataset)
from bert4rec_tf.data.prepare import PreparedData, load_prepared, prepare
from bert4rec_tf.data.split import training_sequences
from bert4rec_tf.evaluation.evaluator import evaluate
from bert4rec_tf.evaluation.validation_loss import validation_loss_function
from bert4rec_tf.export.saved_model import export_saved_model
from bert4rec_tf.files import write_json_atomic
from bert4rec_tf.models import SequentialRecommender, build_model
from bert4rec_tf.training.callbacks import (CheckpointAndValidate, PaceMeter, StopOnDivergence,
                                           TrainSummaries, seed_generators)
from bert4rec_tf.training.optimization import WarmupLinearDecay, make_optimizer
from bert4rec_tf.training.run_folder import RunFolder
from bert4rec_tf.training.summaries import write_results, write_run_summaries

ATTENTION_USERS = 512


def pop_warning(best: dict | None, pop: dict[str, dict[str, float]]) -> str | None:
    """The one-line warning when `best` (the best checkpoint's validation curve point, {"step": ...,
    "pop/NDCG@10": ...}) is not `POP_MARGIN` times POP's validation `pop` ({protocol: {metric: value}})
    in the selection metric; None when it is, or when there is no best point."""
    if best is None:
        return None
    protocol, metric = SELECTION_METRIC
    mine, theirs = best[f"{protocol}/{metric}"], pop[protocol][metric]
    if mine > POP_MARGIN * theirs:
        return None
    return (f"warning: the best validation {metric_label(SELECTION_METRIC)}, {mine:.4f} at step {best['step']:,}, "
            f"is not {POP_MARGIN:g} times POP's {theirs:.4f} on the same users: the model has learned little beyond "
            "popularity (too short a run, or a collapse; docs/training.md)")


def load_checkpoint(model: keras.Model, path: str) -> None:
    """Loads weights, naming the file when it is damaged.

    Raises:
        ValueError: when `path` cannot be read as this model's weights.
    """
    try:
        model.load_weights(path)
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"{path}: the checkpoint is damaged or not this model's "
                         f"({' '.join(str(error).split())[:200]}); use a new --model_dir") from None


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


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes the run: always, except for the non-chief workers of a multi-worker run
    (the chief is task "chief", or worker 0 when the cluster has no "chief")."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "chief" or (not has_chief and resolver.task_type == "worker"
                                             and resolver.task_id == 0)


def worker_folder(model_dir: str) -> str:
    """A private copy of `model_dir` for a non-chief worker: it resumes from the chief's files and
    writes its own (identical) checkpoints there, which are removed at the end."""
    scratch = tempfile.mkdtemp(prefix="bert4rec-worker-")
    if os.path.isdir(model_dir):
        shutil.copytree(model_dir, scratch, dirs_exist_ok=True)
    return scratch


def split_cpu(devices: int) -> None:
    """Splits the CPU into `devices` logical devices (to run a strategy on CPU); call before TF starts."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)


def intervals(done: int, total: int, every: int) -> list[tuple[int, int]]:
    """The (count, steps) runs of training intervals from step `done` to `total`, `every` steps each.

    Validation and checkpoints come after every interval; the last interval is shorter when
    `total - done` is not a multiple of `every`. Example: intervals(10, 32, 5) == [(4, 5), (1, 2)].
    """
    full, rest = divmod(max(0, total - done), every)
    return [(count, steps) for count, steps in ((full, every), (1 if rest else 0, rest)) if count]


def budget_plan(done: int, elapsed: float, budget: float, cap: int, every: int, probe: int,
                scheduled: int | None, pace: float | None, overhead: float = 0.0) -> tuple[int, int]:
    """The next interval under a time budget: (its steps, the total steps the budget affords).

    Until the pace is measured, a first interval of `probe` steps measures it: on a fresh run the
    warm-up, whose rates do not depend on the total; on a resumed run (`scheduled` set, the pace
    unknown to the new process) the rates of the plan it was following, so the rate goes on
    decaying. Afterwards the total is the steps done plus what the time left affords at `pace`
    seconds a step and `overhead` seconds (validation, checkpoint) an interval of `every` steps, at
    most `cap`; the next interval is `every` steps or what is left of that total. Training stops
    (0 steps) at the deadline, at `cap`, or once the schedule's end `scheduled` has been reached, so
    the rate never rises again.

    Examples: budget_plan(100, 60.0, 600.0, 10_000, 500, 100, None, 0.5, 50.0) == (500, 1000);
    resumed at step 900 of a 1,000-step plan: budget_plan(900, 540.0, 600.0, 10_000, 500, 100, 1000, None)
    == (100, 1000).
    """
    if elapsed >= budget or done >= cap or (scheduled is not None and done >= scheduled):
        return 0, done
    if pace is None:
        total = cap if scheduled is None else min(cap, scheduled)
        return min(probe, total - done), total
    total = min(cap, done + int((budget - elapsed) / (pace + overhead / every)))
    return min(every, total - done), total


def warmup_warning(total: int, warmup_steps: int, budget: float) -> str | None:
    """The warning for a time budget that affords fewer steps than the warm-up, else None.

    Such a run ends during the warm-up, with the rate rising, not at 0.
    """
    if total >= warmup_steps:
        return None
    return (f"warning: the {budget:g} s budget affords about {total} steps, fewer than the {warmup_steps} warm-up "
            f"steps: training ends during the warm-up, with the rate not at 0 (lower --config train.warmup_steps)")


def training_stream(model: SequentialRecommender, config: ExperimentConfig, prepared: PreparedData,
                    train: list[np.ndarray]):
    """A function of the first instance number giving the model's endless, batched training stream.

    Every pipeline is a pure function of the instance number, so a resumed run continues it exactly.
    With `train.length_groups` the batches are padding-aware (`length_grouped`).

    Args:
        model: the model; its `TRAINING_INSTANCES` picks the pipeline.
        config: the run's configuration.
        prepared: the prepared data (the static TFRecords).
        train: per user, the training items.
    """
    kind = model.TRAINING_INSTANCES
    full_width = _full_width_stream(kind, config, prepared, train)
    groups = config.train.length_groups
    if not groups:
        return full_width
    return lambda start: length_grouped(full_width, start, config.train.batch_size, groups, kind,
                                        config.data.max_len, config.data.seed)


def _full_width_stream(kind: str, config: ExperimentConfig, prepared: PreparedData, train: list[np.ndarray]):
    """`training_stream` for the pipeline `kind`, every batch max_len wide, in stream order."""
    data, batch_size = config.data, config.train.batch_size
    users = np.arange(1, len(train) + 1)
    if kind == "next_item":
        windows = make_windows(train, users, data.max_len + 1, data.prop_sliding_window)
        sampler = NegativeSampler(train, prepared.num_items)
        return lambda start: next_item_training_dataset(windows, data, sampler, batch_size=batch_size,
                                                        start=start)
    # The matching task's instances also carry negatives for the [UID] output.
    matching = ({"sampler": NegativeSampler(train, prepared.num_items),
                 "match_negatives": config.model.match_negatives} if kind == "masked_matching" else {})
    if config.train.dynamic_masking:
        windows = make_windows(train, users, data.max_len, data.prop_sliding_window)
        return lambda start: dynamic_training_dataset(windows, data, prepared.num_items, batch_size=batch_size,
                                                      start=start, **matching)
    return lambda start: static_training_dataset(prepared.train_files, data, batch_size=batch_size, start=start,
                                                 **matching)


def train_and_evaluate(config: ExperimentConfig, model_dir: str, data_dir: str | None = None,
                       source_file: str | None = None, strategy: str = "default", eval_every: int = 1000,
                       patience: int | None = None, verbose: int = 1) -> dict:
    """Runs the main job for the model `config.model.name` and returns the test metrics
    {protocol: {metric: value}}.

    Re-running the same command in the same `model_dir` continues from the last checkpoint; the data
    stream continues at the instance where it stopped, so the result equals an uninterrupted run.
    `eval_every` may change between runs; a larger `train.train_steps` trains the run for longer.
    With `train.time_budget`, training and validation stop at the deadline and the learning rate
    decays to 0 there (see `budget_plan`); a resumed run continues the same budget.
    A model with nothing to train (POP) takes its statistics from the training data and is evaluated
    and exported at once.

    Raises:
        ValueError: for a folder holding another run, damaged run files, or `TrainingDiverged`.
    """
    if eval_every < 1:
        raise ValueError(f"--eval_every must be at least 1, got {eval_every}")
    if patience is not None and patience < 1:
        raise ValueError(f"--patience must be at least 1, got {patience}")
    if strategy == "multi_worker" and config.train.time_budget:
        # Each worker would plan its steps from its own clock, and workers that disagree deadlock.
        raise ValueError("--time_budget does not work with --strategy multi_worker yet; give --train_steps")
    distribution = make_strategy(strategy)
    if not is_chief(distribution):
        scratch = worker_folder(model_dir)
        try:
            return train_and_evaluate_in(config, scratch, distribution, data_dir, source_file, eval_every,
                                         patience, verbose=0)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return train_and_evaluate_in(config, model_dir, distribution, data_dir, source_file, eval_every, patience,
                                 verbose)


def train_and_evaluate_in(config: ExperimentConfig, model_dir: str, distribution: tf.distribute.Strategy,
                          data_dir: str | None, source_file: str | None, eval_every: int, patience: int | None,
                          verbose: int) -> dict:
    """`train_and_evaluate` in `model_dir` under `distribution` (already made)."""
    run = RunFolder(model_dir)
    run.load_state()  # a damaged folder is named before the data is prepared
    prepared = prepare(config.data, data_dir, source_file, progress=verbose > 0)
    state = run.check(config, prepared)
    sequences, candidates = prepared.sequences(), prepared.candidates()
    train = training_sequences(sequences, config.data.split)
    keras.utils.set_random_seed(config.data.seed)

    with distribution.scope():
        model = build_model(config.model)
        model.fit_statistics(train)
        trainable = bool(model.trainable_variables)
        schedule = WarmupLinearDecay(config.train.learning_rate, config.train.warmup_steps, config.train.train_steps)
        if trainable:
            model.compile(optimizer=make_optimizer(config.train, model.trainable_variables, schedule),
                          jit_compile=False)
        if state["step"]:
            model.optimizer.build(model.trainable_variables)
            load_checkpoint(model, run.checkpoint("latest.weights.h5"))
            for generator, value in zip(seed_generators(model), state["seed_states"], strict=True):
                generator.state.assign(np.asarray(value, dtype=generator.state.dtype))
    run.record(config, prepared)
    write_run_summaries(run.directory, config, state["step"])

    validate = validation_loss = None
    validation_histories = None
    if config.data.split == "valid":
        def validate(m):
            return evaluate(m, sequences, "valid", config.data.max_len, candidates, protocols=("pop", "full"))

        histories, targets = evaluation_histories(sequences, "valid", config.data.max_len)
        validation_histories = histories[:ATTENTION_USERS]
        validation_loss = validation_loss_function(model, histories, targets, candidates["uniform_valid"])
    if trainable:
        stream = training_stream(model, config, prepared, train)
        started, earlier = time.monotonic(), state["seconds"]

        def clock() -> float:
            return earlier + time.monotonic() - started

        checkpointing = CheckpointAndValidate(run, validate, patience, state, config.train.batch_size,
                                              validation_histories if hasattr(model, "encode") else None, clock,
                                              validation_loss)
        pace = PaceMeter()
        callbacks = [StopOnDivergence(), checkpointing, TrainSummaries(run.directory, every=min(100, eval_every)),
                     pace]

        options = tf.data.Options()
        # Under a multi-worker strategy every worker reads the same stream and takes its share of
        # each global batch, so the batches and the resume position are those of one worker.
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA

        def fit(count: int, steps: int) -> None:
            model.fit(stream(state["instances"]).with_options(options), epochs=count, steps_per_epoch=steps,
                      callbacks=callbacks, verbose=verbose)

        if config.train.time_budget:
            probe = min(eval_every, config.train.warmup_steps or eval_every)
            warned = False
            while not checkpointing.stopped_early:
                steps, total = budget_plan(state["step"], clock(), config.train.time_budget,
                                           config.train.train_steps, eval_every, probe, state["scheduled"],
                                           pace.pace, pace.overhead)
                # Warned once the total is planned from the measured pace, or when the budget runs
                # out (no steps, and `total` is the steps done): also inside the first interval,
                # before the pace was measured (a budget shorter than start-up, a few steps and a
                # validation).
                warning = None if warned or (steps and pace.pace is None) else warmup_warning(
                    total, config.train.warmup_steps, config.train.time_budget)
                if warning:
                    print(warning, file=sys.stderr)
                    warned = True
                if not steps:
                    break
                schedule.set_total_steps(total)
                if pace.pace is not None:  # a resumed run keeps its plan until the pace is measured
                    state["scheduled"] = total
                fit(1, steps)
        else:
            for count, steps in intervals(state["step"], config.train.train_steps, eval_every):
                if checkpointing.stopped_early:
                    break
                fit(count, steps)

    best = run.checkpoint("best.weights.h5")
    if validate is not None and os.path.isfile(best):
        load_checkpoint(model, best)
    results = evaluate(model, sequences, "test", config.data.max_len, candidates, batch_size=256)
    best_point = next((point for point in state["curve"] if point["step"] == state["best_step"]), None)
    pop_check = {}
    if trainable and validate is not None:
        pop = build_model(dataclasses.replace(config.model, name="pop"))
        pop.fit_statistics(train)
        pop_validation = validate(pop)
        warning = pop_warning(best_point, pop_validation)
        if warning and is_chief(distribution):
            print(warning, file=sys.stderr)
        # above_pop None: no validation to compare
        pop_check = {"pop_validation": pop_validation, "above_pop": None if best_point is None else warning is None}
    write_results(run.directory, results, best_point, state["step"])
    temporary = run.path(f"tmp-{os.getpid()}-model.keras")
    model.save(temporary)
    os.replace(temporary, run.path("model.keras"))
    replace_folder(run.path("export"), lambda target: export_saved_model(model, sequences.item_ids, target))
    write_json_atomic(run.path("results.json"),
                      {"test": results, "best_step": state["best_step"], "steps": state["step"],
                       "config": config.to_dict(), "data": run.data_record(), **pop_check})
    return results


def replace_folder(path: str, write) -> None:
    """Calls `write(temporary)` to build a folder, then swaps it in for `path`.

    The old folder stays whole until the new one is complete.
    """
    temporary, old = f"{path}.tmp-{os.getpid()}", f"{path}.old-{os.getpid()}"
    shutil.rmtree(temporary, ignore_errors=True)
    write(temporary)
    if os.path.isdir(path):
        os.replace(path, old)
    os.replace(temporary, path)
    shutil.rmtree(old, ignore_errors=True)


def load_finished_run(model_dir: str) -> tuple[keras.Model, PreparedData, ExperimentConfig]:
    """The exported model of a finished run, its prepared data and its configuration.

    Raises:
        FileNotFoundError: when the folder holds no finished run or its prepared data is gone.
        ValueError: when a run file is damaged.
    """
    run = RunFolder(model_dir)
    missing = [name for name in ("results.json", "model.keras", "config.json", "run.json")
               if not os.path.isfile(run.path(name))]
    if missing:
        raise FileNotFoundError(f"{model_dir} holds no finished run (missing {', '.join(missing)})")
    record = run.data_record()
    prepared = load_prepared(record["data_directory"])
    if prepared is None:
        raise FileNotFoundError(f"the prepared data of {model_dir} ({record['data_directory']}) is missing; run "
                                "train.py again to rebuild it")
    config = run.config()
    try:
        model = keras.saving.load_model(run.path("model.keras"), safe_mode=True)
    except (OSError, ValueError) as error:
        raise ValueError(f"{run.path('model.keras')}: cannot be loaded ({' '.join(str(error).split())[:200]})"
                         ) from None
    return model, prepared, config


def evaluate_run(model_dir: str, stage: str = "test", batch_size: int = 256) -> dict:
    """Evaluates `model_dir/model.keras` on its prepared data and writes `evaluation.json`.

    Raises:
        FileNotFoundError: when the folder holds no finished run or its prepared data is gone.
        ValueError: when a run file is damaged.
    """
    model, prepared, config = load_finished_run(model_dir)
    run = RunFolder(model_dir)
    results = evaluate(model, prepared.sequences(), stage, config.data.max_len, prepared.candidates(),
                       batch_size=batch_size, progress=True)
    write_json_atomic(run.path("evaluation.json"), {stage: results})
    return results
