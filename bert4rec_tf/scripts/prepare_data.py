"""Prepares a data set: source -> preprocessing -> split -> masked TFRecords, candidates, metadata.

    bert4rec-prepare-data --dataset ml-1m [--data_dir D] [--seed S] [--source_file F]
    bert4rec-prepare-data --dataset beauty --source_file beauty.txt.gz --stats
    bert4rec-prepare-data --dataset custom --source_file mine.csv --encoding latin-1 --stats
"""

from __future__ import annotations

from absl import flags

from bert4rec_tf import cli

cli.define_data_flags()
flags.DEFINE_bool("stats", False, "Only build the per-user data and print its statistics.")
flags.DEFINE_integer("workers", 2, "TFRecord shards written in parallel (the files do not depend on it).")
FLAGS = flags.FLAGS


def _run() -> None:
    from bert4rec_tf.data import prepare as prepare_lib

    config = cli.experiment_config(FLAGS.dataset, FLAGS.config, FLAGS.seed, FLAGS.model, encoding=FLAGS.encoding)
    data_dir = FLAGS.data_dir or prepare_lib.default_data_dir()
    if FLAGS.stats:
        from bert4rec_tf.data.tfds_builders import load_user_sequences

        with prepare_lib.data_folder_lock(data_dir):
            sequences, builder = load_user_sequences(config.data.dataset, data_dir, FLAGS.source_file,
                                                     config.data.encoding)
        cli.print_stats(config.data.dataset, sequences.stats(), dict(builder.info.metadata or {}))
        print(f"per-user data (TFDS): {builder.data_dir}")
        return
    prepared = prepare_lib.prepare(config.data, data_dir, FLAGS.source_file, workers=FLAGS.workers)
    meta = prepared.metadata
    cli.print_stats(config.data.dataset, meta["stats"], meta["preprocessing"])
    print(f"vocabulary: {meta['vocab_size']} ids (0 padding, items 1..{meta['num_items']}, "
          f"[MASK] {meta['mask_id']})")
    if meta["num_windows"] is not None:  # the Cloze families' masked instances; the others stream theirs
        print(f"training: {meta['num_windows']:,} windows -> {meta['num_instances']:,} instances in "
              f"{len(meta['shards'])} TFRecord files")
    print(f"prepared data: {prepared.directory}")


def main() -> None:
    """The `bert4rec-prepare-data` command (also `python run_scripts/prepare_data.py` in a checkout)."""
    cli.run_absl_command(_run, __name__)


if __name__ == "__main__":
    main()
