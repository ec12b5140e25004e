"""The main job: prepares the data if missing, trains, validates, tests once and exports.

    python run_scripts/train.py --dataset beauty
    python run_scripts/train.py --dataset ml-1m --model sasrec --loss ce
    python run_scripts/train.py --dataset ml-1m --recipe cpu-2h
    python run_scripts/train.py --dataset ml-1m --source_file ml-1m.txt.gz --model_dir runs/ml1m \
        --train_steps 20000 --batch_size 128 --learning_rate 1e-3
Re-running the same command continues from the last checkpoint.
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

from bert4rec_tf import cli
from bert4rec_tf.config import RECIPES

cli.define_data_flags()
flags.DEFINE_string("model_dir", None, "The run's folder (default: runs/<dataset>).")
flags.DEFINE_integer("train_steps", None, "Override train.train_steps.")
flags.DEFINE_integer("batch_size", None, "Override train.batch_size.")
flags.DEFINE_float("learning_rate", None, "Override train.learning_rate.")
flags.DEFINE_integer("max_len", None, "Override the sequence length (data and model).")
flags.DEFINE_integer("hidden_size", None, "Override model.hidden_size.")
flags.DEFINE_enum("loss", None, ["bce", "ce"], "SASRec's loss: bce (the paper's, one negative per position) or "
                  "ce (softmax over all items). Override model.loss.")
flags.DEFINE_string("time_budget", None, "Train until this much wall-clock time has passed (e.g. 2h, 30m, "
                    "1h30m), the learning rate decaying to 0 at the deadline; --train_steps then caps the steps.")
flags.DEFINE_enum("recipe", None, list(RECIPES), "Settings for a short run on a CPU, applied to the preset "
                  "before the other flags: cpu-30m, cpu-1h and cpu-2h (a time budget with the batch, rate, masking, "
                  "dropout, warm-up and length chosen for each data set and model), paper (the preset as it is). See "
                  "README, Short-budget recipes.")
flags.DEFINE_integer("eval_every", 1000, "Steps between validation and checkpoint.")
flags.DEFINE_integer("patience", None, "Stop after this many validations without improvement.")
flags.DEFINE_enum("strategy", "default", ["default", "mirrored", "multi_worker"], "tf.distribute strategy.")
flags.DEFINE_integer("logical_cpus", None, "Split the CPU into this many logical devices (to try a strategy "
                     "without GPUs).")
FLAGS = flags.FLAGS


def _run() -> None:
    overrides = list(FLAGS.config)
    for name in ("train_steps", "batch_size", "learning_rate", "max_len", "hidden_size", "loss"):
        if getattr(FLAGS, name) is not None:
            overrides.append(f"{name}={getattr(FLAGS, name)}")
    if FLAGS.time_budget is not None:
        overrides.append(f"time_budget={cli.parse_duration(FLAGS.time_budget)}")
    config = cli.experiment_config(FLAGS.dataset, overrides, FLAGS.seed, FLAGS.model, FLAGS.recipe)
    model_dir = FLAGS.model_dir or os.path.join("runs", FLAGS.dataset if FLAGS.model == "bert4rec"
                                                else f"{FLAGS.dataset}-{FLAGS.model}")

    from bert4rec_tf.evaluation.evaluator import format_table
    from bert4rec_tf.training.trainer import split_cpu, train_and_evaluate

    if FLAGS.logical_cpus:
        split_cpu(FLAGS.logical_cpus)
    results = train_and_evaluate(config, model_dir, FLAGS.data_dir, FLAGS.source_file, FLAGS.strategy,
                                 FLAGS.eval_every, FLAGS.patience)
    print(f"test metrics (best validation checkpoint):\n{format_table(results)}")
    print(f"run folder: {model_dir} (config.json, results.json, model.keras, checkpoints/, TensorBoard logs)")


if __name__ == "__main__":
    sys.exit(app.run(cli.absl_main(_run)))
