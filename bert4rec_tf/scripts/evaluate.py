"""Evaluates a trained run on the test set: pop-100 (the paper), uniform-100 and full ranking.

    bert4rec-evaluate --model_dir runs/ml1m
    bert4rec-evaluate --model_dir runs/large --eval_users 10000
Prints the table, then the same metrics on the test targets grouped by how often they occur in
training (fewer than 5, 5-20, more than 20), and writes both into evaluation.json in the run folder.
--eval_users evaluates a fixed
sample of that many users (by default the run's own `train.eval_users`; 0: every user).
"""

from __future__ import annotations

from absl import flags

from bert4rec_tf import cli

flags.DEFINE_string("model_dir", None, "A folder written by bert4rec-train.")
flags.DEFINE_enum("stage", "test", ["valid", "test"], "Which held-out item to rank.")
flags.DEFINE_integer("batch_size", 256, "Users per forward pass (fewer on a catalogue above 65,534 items).")
flags.DEFINE_integer("eval_users", None, "Evaluate a fixed sample of this many users (0: every user; default: "
                     "the run's train.eval_users).", lower_bound=0)
flags.mark_flag_as_required("model_dir")
FLAGS = flags.FLAGS


def _run() -> None:
    import json
    import os

    from bert4rec_tf.evaluation.evaluator import format_table
    from bert4rec_tf.evaluation.slices import slice_labels
    from bert4rec_tf.training.trainer import evaluate_run

    results, evaluated, users = evaluate_run(FLAGS.model_dir, FLAGS.stage, FLAGS.batch_size, FLAGS.eval_users)
    sample = "" if evaluated == users else f" on a sample of {evaluated:,} of its {users:,} users"
    print(f"{FLAGS.stage} metrics of {FLAGS.model_dir}/model.keras{sample}:\n{format_table(results)}")
    with open(os.path.join(FLAGS.model_dir, "evaluation.json"), encoding="utf-8") as handle:
        slices = json.load(handle)[f"{FLAGS.stage}_slices"]
    for label in slice_labels():  # in their order (the file's keys are sorted)
        found = slices[label]
        metrics = {key: value for key, value in found.items() if key != "users"}
        table = format_table(metrics) if found["users"] else "  (no users)"
        print(f"\ntargets with {label} training occurrences ({found['users']:,} users):\n{table}")


def main() -> None:
    """The `bert4rec-evaluate` command (also `python run_scripts/evaluate.py` in a checkout)."""
    cli.run_absl_command(_run, __name__)


if __name__ == "__main__":
    main()
