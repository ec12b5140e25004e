"""benchmark.py --real: the training step of the shipped path on batches of the real prepared data.

The model of --model with the settings of --recipe, its batches made as train.py makes them, timed
padding-aware and full-width side by side (see benchmark.py's description of the columns).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from bert4rec_tf.scripts.step_costs import HEAD_FLOOR_ELEMENTS, head_products_seconds, profile_table, training_flops


def real_batches(args: argparse.Namespace, dataset: str, groups: int | None) -> tuple[list, object, float]:
    """`--warmup + --steps` training batches of the real prepared data, as train.py makes them.

    Returns the batches (in memory), the model (built, compiled) and the input pipeline's
    samples/s. `groups` sets train.length_groups (None: the configuration's own, if it has one).
    """
    from bert4rec_tf.cli import experiment_config
    from bert4rec_tf.data.prepare import prepare
    from bert4rec_tf.data.split import training_sequences
    from bert4rec_tf.training.build import build_trainee

    overrides = list(args.config) + ([f"model.loss={args.loss}"] if args.loss else [])
    config = experiment_config(dataset, overrides, seed=None, model=args.model, recipe=args.recipe)
    config.train.time_budget = 0.0
    config.train.batch_size = args.batch_size or config.train.batch_size
    if groups is not None:
        config.train.length_groups = groups
    prepared = prepare(config.data, args.data_dir, (args.source_files or {}).get(dataset), progress=False)
    config.model.vocab_size = int(prepared.metadata["vocab_size"])
    config.model.num_users = int(prepared.metadata["num_users"])
    config.model.max_len = config.data.max_len
    train = training_sequences(prepared.sequences(), config.data.split)
    trainee = build_trainee(config, prepared, train)  # as the trainer builds it (seeded from the data seed)
    model, stream = trainee.model, iter(trainee.stream(0))
    next(stream)  # the pipeline's start-up is not its rate
    start = time.perf_counter()
    batches = [next(stream) for _ in range(args.warmup + args.steps)]
    rate = len(batches) * config.train.batch_size / (time.perf_counter() - start)
    return batches, model, rate


def time_real(args: argparse.Namespace, dataset: str, limit: float, groups: int | None) -> str:
    """One --real row: the step's ms and samples/s on real batches, and its share of the float32 limit."""
    batches, model, pipeline = real_batches(args, dataset, groups)
    timed = batches[args.warmup:]
    # Every batch once untimed: the kernels of each shape are compiled (the XLA-compiled GELU once per
    # shape of its input) before the timed pass, as they are after the first minutes of a run.
    for batch in batches:
        model.train_on_batch(batch)
    start = time.perf_counter()
    for batch in timed:
        model.train_on_batch(batch)
    seconds = (time.perf_counter() - start) / len(timed)
    size = int(timed[0]["input_ids"].shape[0])
    config = model.model_config
    widths = [int(batch["input_ids"].shape[1]) for batch in timed]
    rate = size / seconds
    share = f"{'n/a':>8}"  # `training_flops` counts the Cloze models' work (BERT4Rec's head)
    head = f"{'n/a':>9}"
    if "masked_lm_weights" in timed[0]:
        slots = [float(np.sum(batch["masked_lm_weights"] > 0)) for batch in timed]
        flops = np.mean([training_flops(config, width, count / size) for count, width in zip(slots, widths)])
        rows = round(np.mean(slots))
        if config.loss != "sampled_softmax":  # FLOPs and floor of the exact head only
            share = f"{rate * flops / limit:>8.0%}"
            if rows * config.vocab_size <= HEAD_FLOOR_ELEMENTS:  # its [rows, items] matrices fit in memory
                floor = head_products_seconds(rows, config.vocab_size, config.hidden_size)
                head = f"{floor * 1000:>9.1f}"
    label = "full width" if groups == 0 else "padding-aware"
    real = np.mean([np.mean(np.asarray(batch["input_ids"]) != 0) for batch in timed])
    packed = {True: "yes", False: "no", None: "n/a"}[model.pack_positions]
    line = (f"{dataset:<8} {args.model:<15} {label:<14} {np.mean(widths):>6.1f} {real:>6.0%} {packed:>6} "
            f"{seconds * 1000:>9.1f} "
            f"{rate:>10.1f} {share} {pipeline:>10.0f} {head}")
    if args.profile:
        line += "\n" + profile_table(lambda: model.train_on_batch(timed[0]))
    return line


def main_real(args: argparse.Namespace, limit: float) -> None:
    """The --real table: each data set, padding-aware batches and full-width ones, side by side."""
    from bert4rec_tf.config import TrainConfig

    header = (f"{'dataset':<8} {'model':<15} {'batches':<14} {'width':>6} {'real':>6} {'packed':>6} {'ms/step':>9} "
              f"{'samples/s':>10} {'of limit':>8} {'input/s':>10} {'head ms':>9}")
    settings = "".join(f", --config {override}" for override in args.config)
    print(f"real batches: --model {args.model}, --recipe {args.recipe}"
          + (f", --loss {args.loss}" if args.loss else "") + settings)
    print(header)
    print("-" * len(header))
    aware = "length_groups" in {field.name for field in dataclasses.fields(TrainConfig)}
    for dataset in args.datasets:
        for groups in ((None, 0) if aware else (0,)):
            print(time_real(args, dataset, limit, groups), flush=True)
