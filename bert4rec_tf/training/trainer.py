"""The main job: prepare data, train with periodic validation and checkpoints, test once, export.

Model directory layout (see also `bert4rec_tf.training.run_folder`):
    config.json, run.json       the resolved configuration and the data the run is bound to
    checkpoints/                resume point (state.json, which names its latest and best weights)
    event files, train/, validation/, results/   TensorBoard (see `bert4rec_tf.training.summaries`)
    validation.json             the validation curve
    model.keras                 the exported model
    export/                     the serving SavedModel and vocab.txt (escaped raw id <TAB> model id)
    results.json                test metrics of the best checkpoint, POP's validation metrics and
                                whether the best validation is above them (`pop_warning`), the
                                sizes and digests of model.keras and export/, written last: the
                                run is complete

Every file is written under a temporary name and renamed into place, so it is complete or absent.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import zipfile
from typing import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf

from bert4rec_tf.config import RUN_LENGTH, ExperimentConfig, config_differences
from bert4rec_tf.constants import NUM_EVAL_NEGATIVES, POP_MARGIN, SELECTION_METRIC, metric_label
from bert4rec_tf.data.prepare import PreparedData, load_prepared, prepare
from bert4rec_tf.data.split import training_sequences
from bert4rec_tf.evaluation.evaluator import evaluate, evaluation_users
from bert4rec_tf.evaluation.slices import sliced_metrics, target_frequencies
from bert4rec_tf.export.saved_model import export_saved_model
from bert4rec_tf.files import atomic_path, quiet_after_failed_write, write_error, write_json_atomic
from bert4rec_tf.tasks import get_task, reference_model
from bert4rec_tf.training.build import build_trainee
from bert4rec_tf.training.callbacks import (
    CheckpointAndValidate,
    IntervalDriver,
    PaceMeter,
    StopOnDivergence,
    TrainSummaries,
    seed_generators,
)
from bert4rec_tf.training.distribution import is_chief, make_strategy, worker_folder
from bert4rec_tf.training.registration import register_keras_objects
from bert4rec_tf.training.run_folder import RunFolder, same_data
from bert4rec_tf.training.schedule import IntervalPlan, finished, patience_spent
from bert4rec_tf.training.summaries import write_results, write_run_summaries
from bert4rec_tf.training.validation import evaluated_users, make_validation

def pop_warning(best: dict | None, pop: dict[str, dict[str, float]],
                num_negatives: int = NUM_EVAL_NEGATIVES) -> str | None:
    """The one-line warning when `best` (the best checkpoint's validation curve point, {"step": ...,
    "pop/NDCG@10": ...}) is not `POP_MARGIN` times POP's validation `pop` ({protocol: {metric: value}})
    in the selection metric; None when it is, or when there is no best point."""
    if best is None:
        return None
    protocol, metric = SELECTION_METRIC
    mine, theirs = best[f"{protocol}/{metric}"], pop[protocol][metric]
    if mine > POP_MARGIN * theirs:
        return None
    label = metric_label(SELECTION_METRIC, num_negatives)
    return (f"warning: the best validation {label}, {mine:.4f} at step {best['step']:,}, "
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


def load_resume_point(model: keras.Model, run: RunFolder, state: dict) -> None:
    """Loads the weights of the resume point `state`: its latest checkpoint, or, when that file is
    damaged and the best checkpoint is of the same step (the same weights and optimizer state), the
    best one, with a note.

    Raises:
        ValueError: naming the latest checkpoint when it is damaged and no checkpoint of its step is
            intact.
    """
    try:
        load_checkpoint(model, run.checkpoint(state["latest_weights"]))
    except ValueError:
        if state["best_step"] != state["step"] or not state["best_weights"]:
            raise
        load_checkpoint(model, run.checkpoint(state["best_weights"]))
        print(f"note: {run.checkpoint(state['latest_weights'])} is damaged; resuming from "
              f"{run.checkpoint(state['best_weights'])}, the checkpoint of the same step", file=sys.stderr)


def train_and_evaluate(config: ExperimentConfig, model_dir: str, data_dir: str | None = None,
                       source_file: str | None = None, strategy: str = "default", eval_every: int = 1000,
                       patience: int | None = None, verbose: int = 1,
                       on_validation: Callable[[dict], bool] | None = None, test: bool = True,
                       validate_at: Sequence[float] = ()) -> dict | None:
    """Runs the main job for the model `config.model.name` and returns the test metrics
    {protocol: {metric: value}}.

    Re-running the same command in the same `model_dir` continues from the last checkpoint; the data
    stream continues at the instance where it stopped, so the result equals an uninterrupted run. On
    a finished run it trains and writes nothing (`finished_run`).
    `eval_every` may change between runs; a larger `train.train_steps` trains the run for longer.
    With `train.time_budget`, training and validation stop at the deadline and the learning rate
    decays to 0 there (see `budget_plan`); a resumed run continues the same budget.
    A model with nothing to train (POP) takes its statistics from the training data and is evaluated
    and exported at once.

    A tuner's trial (`bert4rec_tf.tuning`) passes `on_validation`, called with each validation's curve
    point after its checkpoint is committed (True stops training there), `test=False`: the run
    trains and validates only, and None is returned (no test, no model.keras, no export), and
    `validate_at`: seconds of training and validation past which an interval ends and validates
    (`IntervalPlan.mark_due`), its pruner's rungs.

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
                                         patience, 0, on_validation, test, validate_at)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return train_and_evaluate_in(config, model_dir, distribution, data_dir, source_file, eval_every, patience,
                                 verbose, on_validation, test, validate_at)


def train_and_evaluate_in(config: ExperimentConfig, model_dir: str, distribution: tf.distribute.Strategy,
                          data_dir: str | None, source_file: str | None, eval_every: int, patience: int | None,
                          verbose: int, on_validation: Callable[[dict], bool] | None = None,
                          test: bool = True, validate_at: Sequence[float] = ()) -> dict | None:
    """`train_and_evaluate` in `model_dir` under `distribution` (already made)."""
    run = RunFolder(model_dir)
    with run.lock():
        return _train_and_evaluate_locked(run, config, distribution, data_dir, source_file, eval_every, patience,
                                          verbose, on_validation, test, validate_at)


def _train_and_evaluate_locked(run: RunFolder, config: ExperimentConfig, distribution: tf.distribute.Strategy,
                               data_dir: str | None, source_file: str | None, eval_every: int, patience: int | None,
                               verbose: int, on_validation: Callable[[dict], bool] | None,
                               test: bool, validate_at: Sequence[float] = ()) -> dict | None:
    """`train_and_evaluate_in`, holding the run folder's lock."""
    state = run.load_state()  # a damaged folder is named before the data is prepared
    run.tidy(state)
    run.check_config(config, state)  # a folder that will refuse the run does so before the data is prepared
    prepared = prepare(config.data, data_dir, source_file, progress=verbose > 0)
    run.check(config, prepared, state)
    recorded = finished_run(run, config, prepared, state, patience)
    if recorded is not None:
        return recorded
    sequences, candidates = prepared.sequences(), prepared.candidates()
    train = training_sequences(sequences, config.data.split)

    with distribution.scope():
        trainee = build_trainee(config, prepared, train)
        model, task = trainee.model, trainee.task
        if state["step"]:
            model.optimizer.build(model.trainable_variables)
            load_resume_point(model, run, state)
            for generator, value in zip(seed_generators(model), state["seed_states"], strict=True):
                generator.state.assign(np.asarray(value, dtype=generator.state.dtype))
    run.record(config, prepared)
    write_run_summaries(run.directory, config, state["step"])

    validation = make_validation(config, task, model, sequences, candidates)
    validate, validation_loss, validation_histories = ((validation.metrics, validation.loss, validation.histories)
                                                       if validation else (None, None, None))
    sample = None if validation is None or validation.users is None else len(validation.users)
    evaluated = evaluated_users(config, sequences)  # None: every user
    if task.trains:
        started, earlier = time.monotonic(), state["seconds"]

        def clock() -> float:
            return earlier + time.monotonic() - started

        checkpointing = CheckpointAndValidate(run, validate, patience, state, config.train.batch_size,
                                              validation_histories, task.attention_last_label, clock,
                                              validation_loss, sample, on_validation)
        pace = PaceMeter()
        spent = state.get("budget_spent", False)
        plan = IntervalPlan(state, config.train, eval_every, pace, clock, trainee.schedule.set_total_steps,
                            lambda: checkpointing.stopped_early, validate_at)
        first = plan.next_steps()
        if first:
            options = tf.data.Options()
            # Under a multi-worker strategy every worker reads the same stream and takes its share of
            # each global batch, so the batches and the resume position are those of one worker.
            options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
            callbacks = [StopOnDivergence(), TrainSummaries(run.directory, every=min(100, eval_every)),
                         IntervalDriver(plan, first, checkpointing, pace, progress=verbose > 0)]
            # One fit for the whole run, cut into intervals by IntervalDriver (which stops it); the
            # stream is shuffled, seeded, as it is built (Keras cannot shuffle a tf.data stream).
            model.fit(trainee.stream(state["instances"]).with_options(options), epochs=1,
                      steps_per_epoch=config.train.train_steps - state["step"], callbacks=callbacks, verbose=0,
                      shuffle=False)
        if state.get("budget_spent", False) != spent:
            run.commit(state)  # the deadline passed after the last checkpoint
    if not test:
        return None

    if validate is not None and state["best_weights"]:
        load_checkpoint(model, run.checkpoint(state["best_weights"]))
    results, slices = evaluate_with_slices(model, sequences, train, "test", config.data.history_length(), candidates,
                                           batch_size=256, users=evaluated)
    best_point = next((point for point in state["curve"] if point["step"] == state["best_step"]), None)
    pop_check = {}
    if task.trains and validate is not None:
        reference = reference_model(config.model)
        reference.fit_statistics(train)
        pop_validation = validate(reference)
        warning = pop_warning(best_point, pop_validation, config.data.num_negatives)
        if warning and is_chief(distribution):
            print(warning, file=sys.stderr)
        # above_pop None: no validation to compare
        pop_check = {"pop_validation": pop_validation, "above_pop": None if best_point is None else warning is None}
    write_results(run.directory, results, best_point, state["step"])
    with quiet_after_failed_write(), atomic_path(run.path("model.keras")) as temporary:
        model.save(temporary)
    try:
        with atomic_path(run.path("export")) as temporary:
            export_saved_model(model, sequences.item_ids, temporary, user_ids=sequences.user_ids)
    except tf.errors.OpError as error:  # TensorFlow's file system reports a failed write so
        raise write_error(run.path("export"), error) from None
    note = config.model.loss_note()
    write_json_atomic(run.path("results.json"),
                      {"test": results, "best_step": state["best_step"], "steps": state["step"],
                       "test_slices": {"by": "the test target's training occurrences", **slices},
                       "outputs": run.output_files(),
                       **({"loss_note": note} if note else {}),
                       **({} if evaluated is None else {"evaluated_users": len(evaluated),
                                                         "users": sequences.num_users}),
                       "config": config.to_dict(), "data": run.data_record(), **pop_check})
    return results


def finished_run(run: RunFolder, config: ExperimentConfig, prepared: PreparedData, state: dict,
                 patience: int | None) -> dict | None:
    """The recorded test metrics when the run in `run` (resume state `state`, checked against `config`
    and `prepared`) has nothing left to train or write, after saying so on stdout; else None.

    Nothing is left when the run finished (its results.json and the outputs it records intact, for
    this configuration and data) and has nothing to train: its steps are done, its time budget is
    spent, it stopped early (as many validations without improvement as `patience`), or its model
    trains nothing. A larger `--train_steps` or `--patience` trains it on; a damaged or missing output
    is tested and exported again from the checkpoint.
    """
    stopped_early = patience_spent(state, patience)
    why = finished(state, config.train, stopped_early) if get_task(config.model.name).trains else \
        "its model trains nothing"
    recorded = run.intact_results() if why else None
    if recorded is None or not same_data(recorded.get("data", {}), prepared, recorded.get("config", {})) or config_differences(
            recorded.get("config", {}), config.to_dict(), ignore=RUN_LENGTH):
        return None
    print(f"{run.directory} holds a finished run: {why}; nothing to train, no file changed"
          f"{' (give a larger --patience to train it on)' if stopped_early else ''}", flush=True)
    return recorded["test"]


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
    register_keras_objects()  # the package's model classes (each Task imports its own only when building)
    again = "; the same train command in this folder tests and exports the run again from its checkpoint"
    if not zipfile.is_zipfile(run.path("model.keras")):  # Keras would call a truncated file "not found"
        raise ValueError(f"{run.path('model.keras')}: the saved model is damaged: not a complete .keras (zip) "
                         f"file, truncated or altered{again}")
    try:
        model = keras.saving.load_model(run.path("model.keras"), safe_mode=True)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise ValueError(f"{run.path('model.keras')}: the saved model is damaged or not this package's "
                         f"({' '.join(str(error).split())[:200]}){again}") from None
    return model, prepared, config


def evaluate_with_slices(model, sequences, train: list, stage: str, history_length: int, candidates: dict,
                         batch_size: int = 256, users=None, progress: bool = False) -> tuple[dict, dict]:
    """`evaluate`'s metrics of `stage`, and the same metrics on its targets grouped by their training
    occurrences in `train` (`bert4rec_tf.evaluation.slices`), with each slice's users."""
    ranks = {}
    results = evaluate(model, sequences, stage, history_length, candidates, batch_size=batch_size, users=users,
                       progress=progress, ranks_out=ranks)
    frequencies = target_frequencies(sequences, train, stage)[ranks.pop("users")]
    names = {protocol: tuple(values) for protocol, values in results.items()}
    return results, sliced_metrics(ranks, frequencies, names)


def evaluate_run(model_dir: str, stage: str = "test", batch_size: int = 256,
                 eval_users: int | None = None) -> tuple[dict, int, int]:
    """Evaluates `model_dir/model.keras` on its prepared data and writes `evaluation.json`.

    Args:
        model_dir: a finished run.
        stage: "valid" or "test".
        batch_size: users per forward pass.
        eval_users: evaluate a fixed sample of this many users (`evaluation_users`); 0 every user;
            None the run's own `train.eval_users`.

    Returns:
        The metrics, the number of users evaluated and the number of users; evaluation.json also holds
        `<stage>_slices`, the metrics by the targets' training occurrences.

    Raises:
        FileNotFoundError: when the folder holds no finished run or its prepared data is gone.
        ValueError: when a run file is damaged.
    """
    model, prepared, config = load_finished_run(model_dir)
    run = RunFolder(model_dir)
    sequences = prepared.sequences()
    evaluated = evaluation_users(sequences.num_users, config.train.eval_users if eval_users is None else eval_users)
    train = training_sequences(sequences, config.data.split)
    results, slices = evaluate_with_slices(model, sequences, train, stage, config.data.history_length(),
                                           prepared.candidates(), batch_size=batch_size, users=evaluated,
                                           progress=True)
    count = sequences.num_users if evaluated is None else len(evaluated)
    write_json_atomic(run.path("evaluation.json"), {
        stage: results, f"{stage}_slices": {"by": f"the {stage} target's training occurrences", **slices},
        **({} if evaluated is None else {"evaluated_users": count, "users": sequences.num_users})})
    return results, count, sequences.num_users
