"""benchmark.py --real: the training step of the shipped path on batches of the real prepared data.

The model of --model with the settings of --recipe, its batches made as train.py makes them. For a
family with a sequence input the step is timed padding-aware and full-width side by side; for every
family the table gives the input stream's rate and the share of a budget that validation takes at
--eval_every (see benchmark.py's description of the columns).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from bert4rec_tf.scripts.step_costs import HEAD_FLOOR_ELEMENTS, head_products_seconds, profile_table, training_flops


@dataclasses.dataclass
class RealBatches:
    """Batches of the real prepared data and what they were made for."""

    batches: list
    trainee: object  # bert4rec_tf.training.build.Trainee
    input_rate: float  # samples/s of the input stream alone
    validation_seconds: float | None  # one validation (metrics and loss) of the untrained model


def real_batches(args: argparse.Namespace, dataset: str, groups: int | None) -> RealBatches:
    """`--warmup + --steps` training batches of the real prepared data, as train.py makes them, with
    the model (built, compiled), the input stream's samples/s and, with --validation, the seconds of
    one validation as the trainer runs it. `groups` sets train.length_groups (None: the
    configuration's own, if it has one)."""
    from bert4rec_tf.cli import experiment_config
    from bert4rec_tf.data.prepare import prepare
    from bert4rec_tf.data.split import training_sequences
    from bert4rec_tf.training.build import build_trainee
    from bert4rec_tf.training.run_folder import set_from_data
    from bert4rec_tf.training.validation import make_validation

    overrides = list(args.config) + ([f"model.loss={args.loss}"] if args.loss else [])
    config = experiment_config(dataset, overrides, seed=None, model=args.model, recipe=args.recipe)
    if config.has("time_budget"):
        config.train.time_budget = 0.0
    if args.batch_size and config.has("batch_size"):
        config.train.batch_size = args.batch_size
    if groups is not None and config.has("length_groups"):
        config.train.length_groups = groups
    prepared = prepare(config.data, args.data_dir, (args.source_files or {}).get(dataset), progress=False)
    set_from_data(config, prepared)  # the vocabulary, the users, the attributes, as a run sets them
    if config.has("model.max_len"):
        config.model.max_len = config.data.max_len
    sequences = prepared.sequences()
    train = training_sequences(sequences, config.data.split)
    trainee = build_trainee(config, prepared, train)  # as the trainer builds it (seeded from the data seed)
    seconds = None
    if args.validation:
        validation = make_validation(config, trainee.task, trainee.model, sequences, prepared.candidates())
        if validation is not None:
            seconds = _validation_seconds(trainee.model, validation)
    if trainee.stream is None:  # a family that trains nothing
        return RealBatches([], trainee, float("nan"), seconds)
    stream = iter(trainee.stream(0))
    next(stream)  # the pipeline's start-up is not its rate
    start = time.perf_counter()
    batches = [next(stream) for _ in range(args.warmup + args.steps)]
    rate = len(batches) * config.train.batch_size / (time.perf_counter() - start)
    return RealBatches(batches, trainee, rate, seconds)


def _validation_seconds(model, validation) -> float:
    """The seconds of one validation, its metrics and its loss. The first pass traces the model's
    scoring functions, as a run's first validation does; when it took under a minute a second pass
    is timed instead (a long validation is dominated by its scoring, and timed once)."""
    seconds = 0.0
    for _ in range(2):
        start = time.perf_counter()
        validation.metrics(model)
        if validation.loss is not None:
            validation.loss()
        seconds = time.perf_counter() - start
        if seconds >= 60:
            break
    return seconds


def _features(batch) -> dict:
    return batch[0] if isinstance(batch, tuple) else batch


def _batch_size(batch) -> int:
    return int(next(iter(_features(batch).values())).shape[0])


def time_real(args: argparse.Namespace, dataset: str, limit: float, groups: int | None) -> str:
    """One --real row: the step's ms and samples/s on real batches, its share of the float32 limit,
    the input stream's samples/s and validation's share of the budget."""
    made = real_batches(args, dataset, groups)
    model, task = made.trainee.model, made.trainee.task
    name = f"{dataset:<8} {args.model:<15}"
    if not made.batches:
        validation = "" if made.validation_seconds is None else f" validation {made.validation_seconds:.1f} s"
        return f"{name} trains nothing:{validation}"
    timed = made.batches[args.warmup:]
    # Every batch once untimed: the kernels of each shape are compiled (the XLA-compiled GELU once per
    # shape of its input) before the timed pass, as they are after the first minutes of a run.
    for batch in made.batches:
        model.train_on_batch(batch)
    start = time.perf_counter()
    for batch in timed:
        model.train_on_batch(batch)
    seconds = (time.perf_counter() - start) / len(timed)
    size = _batch_size(timed[0])
    rate = size / seconds
    share, head, width, real = f"{'n/a':>8}", f"{'n/a':>9}", f"{'n/a':>6}", f"{'n/a':>6}"
    features = [_features(batch) for batch in timed]
    sequence = next((key for key in task.sequence_features if key in features[0]), None)
    if sequence is not None:
        widths = [int(batch[sequence].shape[1]) for batch in features]
        width = f"{np.mean(widths):>6.1f}"
        real = f"{np.mean([np.mean(np.asarray(batch[sequence]) != 0) for batch in features]):>6.0%}"
    if "masked_lm_weights" in features[0]:  # `training_flops` counts the Cloze models' work (BERT4Rec's head)
        config = model.model_config
        slots = [float(np.sum(batch["masked_lm_weights"] > 0)) for batch in features]
        flops = np.mean([training_flops(config, w, count / size) for count, w in zip(slots, widths)])
        rows = round(np.mean(slots))
        if config.loss != "sampled_softmax":  # FLOPs and floor of the exact head only
            share = f"{rate * flops / limit:>8.0%}"
            if rows * config.vocab_size <= HEAD_FLOOR_ELEMENTS:  # its [rows, items] matrices fit in memory
                floor = head_products_seconds(rows, config.vocab_size, config.hidden_size)
                head = f"{floor * 1000:>9.1f}"
    label = "n/a" if sequence is None else "full width" if groups == 0 else "padding-aware"
    packed = {True: "yes", False: "no", None: "n/a"}[model.pack_positions]
    validating = f"{'n/a':>10}"
    if made.validation_seconds is not None:
        interval = args.eval_every * seconds
        validating = f"{made.validation_seconds / (made.validation_seconds + interval):>10.0%}"
    line = (f"{name} {label:<14} {width} {real} {packed:>6} {seconds * 1000:>9.1f} {rate:>10.1f} {share} "
            f"{made.input_rate:>10.0f} {made.input_rate / rate:>7.1f}x {head} {validating}")
    if args.profile:
        line += "\n" + profile_table(lambda: model.train_on_batch(timed[0]))
    return line


def main_real(args: argparse.Namespace, limit: float) -> None:
    """The --real table: each data set, padding-aware batches and full-width ones side by side (for a
    family with a sequence input)."""
    from bert4rec_tf.tasks import task_of_preset

    header = (f"{'dataset':<8} {'model':<15} {'batches':<14} {'width':>6} {'real':>6} {'packed':>6} {'ms/step':>9} "
              f"{'samples/s':>10} {'of limit':>8} {'input/s':>10} {'input x':>8} {'head ms':>9} {'validating':>10}")
    settings = "".join(f", --config {override}" for override in args.config)
    print(f"real batches: --model {args.model}, --recipe {args.recipe}"
          + (f", --loss {args.loss}" if args.loss else "") + settings
          + (f"; validation every {args.eval_every} steps" if args.validation else ""))
    print(header)
    print("-" * len(header))
    grouped = bool(task_of_preset(args.model).sequence_features)
    for dataset in args.datasets:
        for groups in ((None, 0) if grouped else (None,)):
            print(time_real(args, dataset, limit, groups), flush=True)
