"""The main job: prepares the data if missing, trains, validates, tests once and exports.

    bert4rec-train --dataset beauty
    bert4rec-train --dataset ml-1m --model sasrec --loss ce
    bert4rec-train --dataset ml-1m --recipe cpu-2h
    bert4rec-train --dataset ml-1m --source_file ml-1m.txt.gz --model_dir runs/ml1m \\
        --train_steps 20000 --batch_size 128 --learning_rate 1e-3
    bert4rec-train --dataset custom --source_file mine.csv --encoding latin-1
    bert4rec-train --config_file studies/ml-1m-bpr_mf-default/best_config.json --model_dir runs/tuned
Without --recipe a run trains with the cpu-30m recipe (30 minutes) when TensorFlow sees no GPU, and
with the paper's settings (--recipe paper) when it sees one; the first line printed says which.
Re-running the same command continues from the last checkpoint, with the recipe the run started with.
"""

from __future__ import annotations


from absl import flags

from bert4rec_tf import cli

cli.define_train_flags()
FLAGS = flags.FLAGS


def _run() -> None:
    config, model, reason, model_dir = cli.train_experiment(FLAGS)
    print(cli.recipe_notice(config, model, reason), flush=True)

    from bert4rec_tf.evaluation.evaluator import format_table
    from bert4rec_tf.training.distribution import split_cpu
    from bert4rec_tf.training.run_folder import RunFolder
    from bert4rec_tf.training.trainer import train_and_evaluate

    if FLAGS.logical_cpus:
        split_cpu(FLAGS.logical_cpus)
    try:
        results = train_and_evaluate(config, model_dir, FLAGS.data_dir, FLAGS.source_file, FLAGS.strategy,
                                     FLAGS.eval_every, FLAGS.patience)
    except KeyboardInterrupt:
        step = RunFolder(model_dir).load_state()["step"]
        where = f"its checkpoint at step {step:,}" if step else "no checkpoint yet"
        raise KeyboardInterrupt(f"interrupted: {model_dir} keeps {where}; run the same command again to "
                                f"{'resume from there' if step else 'start it'}") from None
    print(f"test metrics ({RunFolder(model_dir).tested_weights()}):\n{format_table(results)}")
    print(f"run folder: {model_dir} (config.json, results.json, model.keras, checkpoints/, TensorBoard logs)")


def main() -> None:
    """The `bert4rec-train` command (also `python run_scripts/train.py` in a checkout)."""
    cli.run_absl_command(_run, __name__)


if __name__ == "__main__":
    main()
