"""The main job: prepares the data if missing, trains, validates, tests once and exports.

    bert4rec-train --dataset beauty
    bert4rec-train --dataset ml-1m --model sasrec --loss ce
    bert4rec-train --dataset ml-1m --recipe cpu-2h
    bert4rec-train --dataset ml-1m --source_file ml-1m.txt.gz --model_dir runs/ml1m \\
        --train_steps 20000 --batch_size 128 --learning_rate 1e-3
    bert4rec-train --dataset custom --source_file mine.csv --encoding latin-1
Without --recipe a run trains with the cpu-30m recipe (30 minutes) when TensorFlow sees no GPU, and
with the paper's settings (--recipe paper) when it sees one; the first line printed says which.
Re-running the same command continues from the last checkpoint, with the recipe the run started with.
"""

from __future__ import annotations

import os

from absl import flags

from bert4rec_tf import cli
from bert4rec_tf.config import RECIPES
from bert4rec_tf.tasks import TASKS

cli.define_data_flags()
flags.DEFINE_string("model_dir", None, "The run's folder (default: runs/<dataset>, or runs/<dataset>-<model> "
                    "for another --model).")
flags.DEFINE_integer("train_steps", None, "Override train.train_steps.")
flags.DEFINE_integer("batch_size", None, "Override train.batch_size.")
flags.DEFINE_float("learning_rate", None, "Override train.learning_rate.")
flags.DEFINE_integer("max_len", None, "Override the sequence length (data and model).")
flags.DEFINE_integer("hidden_size", None, "Override model.hidden_size.")
flags.DEFINE_enum("loss", None, list(dict.fromkeys(loss for task in TASKS.values() for loss in task.losses)),
                  "Override model.loss, among those of the --model (the first is its preset's): SASRec bce (the "
                  "paper's, one negative per position) or ce (softmax over all items); GRU4Rec top1, bpr or ce; "
                  "GRU4Rec+ bpr_max or top1_max; BPR-MF and FPMC bpr; NCF and Caser bce; the Cloze models ce.")
flags.DEFINE_string("time_budget", None, "Train until this much wall-clock time has passed (e.g. 2h, 30m, "
                    "1h30m), the learning rate decaying to 0 at the deadline; --train_steps then caps the steps.")
flags.DEFINE_enum("recipe", None, list(RECIPES), "Settings applied to the preset before the other flags: "
                  "cpu-30m, cpu-1h and cpu-2h (a time budget with the batch, rate, masking, dropout, warm-up and "
                  f"length chosen for each data set and model), paper (the preset as it is). Default: the recipe the run's "
                  f"config.json records when it resumes, else {cli.GPU_DEFAULT_RECIPE} with a GPU and "
                  f"{cli.CPU_DEFAULT_RECIPE} without. See docs/training.md.")
flags.DEFINE_integer("eval_every", 1000, "Steps between validation and checkpoint.")
flags.DEFINE_integer("patience", None, "Stop after this many validations without improvement.")
flags.DEFINE_enum("strategy", "default", ["default", "mirrored", "multi_worker"], "tf.distribute strategy.")
flags.DEFINE_integer("logical_cpus", None, "Split the CPU into this many logical devices (to try a strategy "
                     "without GPUs).")
FLAGS = flags.FLAGS


def _run() -> None:
    overrides = cli.flag_overrides(FLAGS.config, {name: getattr(FLAGS, name)
                                                  for name in (*cli.OVERRIDE_FLAGS, "time_budget")})
    model_dir = FLAGS.model_dir or os.path.join("runs", FLAGS.dataset if FLAGS.model == "bert4rec"
                                                else f"{FLAGS.dataset}-{FLAGS.model}")
    recipe, reason = (FLAGS.recipe, "given") if FLAGS.recipe else cli.default_recipe(FLAGS.dataset, FLAGS.model,
                                                                                          model_dir)
    config = cli.experiment_config(FLAGS.dataset, overrides, FLAGS.seed, FLAGS.model, recipe, FLAGS.encoding)
    print(cli.recipe_notice(config, FLAGS.model, reason), flush=True)

    from bert4rec_tf.evaluation.evaluator import format_table
    from bert4rec_tf.training.distribution import split_cpu
    from bert4rec_tf.training.trainer import train_and_evaluate

    if FLAGS.logical_cpus:
        split_cpu(FLAGS.logical_cpus)
    try:
        results = train_and_evaluate(config, model_dir, FLAGS.data_dir, FLAGS.source_file, FLAGS.strategy,
                                     FLAGS.eval_every, FLAGS.patience)
    except KeyboardInterrupt:
        from bert4rec_tf.training.run_folder import RunFolder

        step = RunFolder(model_dir).load_state()["step"]
        where = f"its checkpoint at step {step:,}" if step else "no checkpoint yet"
        raise KeyboardInterrupt(f"interrupted: {model_dir} keeps {where}; run the same command again to "
                                f"{'resume from there' if step else 'start it'}") from None
    print(f"test metrics ({weights_tested(model_dir)}):\n{format_table(results)}")
    print(f"run folder: {model_dir} (config.json, results.json, model.keras, checkpoints/, TensorBoard logs)")


def weights_tested(model_dir: str) -> str:
    """Which weights a finished run tested, from its results.json: the best validation checkpoint, or
    the last weights when there was no validation split (`split=original`) or no training."""
    from bert4rec_tf.files import read_json
    from bert4rec_tf.training.run_folder import RunFolder

    path = RunFolder(model_dir).path("results.json")
    if not os.path.isfile(path):  # a non-chief worker of a multi-worker run, which tested its own copy
        return "this worker's copy of the run; the chief worker writes its results.json"
    record = read_json(path)
    if record.get("best_step") is not None:
        return f"best validation checkpoint, step {record['best_step']:,}"
    if record.get("steps"):
        return f"last weights, step {record['steps']:,}: no validation split to choose a checkpoint"
    return "no training steps"


def main() -> None:
    """The `bert4rec-train` command (also `python run_scripts/train.py` in a checkout)."""
    cli.run_absl_command(_run, __name__)


if __name__ == "__main__":
    main()
