"""Prepares a data set: source -> preprocessing -> split -> masked TFRecords, candidates, metadata.

    python run_scripts/prepare_data.py --dataset ml-1m [--data_dir D] [--seed S] [--source_file F]
    python run_scripts/prepare_data.py --dataset beauty --source_file beauty.txt.gz --stats
"""

from __future__ import annotations

import sys

from absl import app, flags

flags.DEFINE_string("dataset", None, "Data set name: ml-1m, ml-20m, beauty, steam, video-games, beauty-5core, custom.")
flags.DEFINE_string("data_dir", None, "Cache root for downloads, the TFDS build and prepared data "
                    "(default: $BERT4REC_TF_DATA_DIR or the checkout's datasets/).")
flags.DEFINE_string("source_file", None, "A local raw or preprocessed file to read instead of downloading.")
flags.DEFINE_integer("seed", None, "Seed of every random choice (default: the preset's).")
flags.DEFINE_bool("stats", False, "Only build the per-user data and print its statistics.")
flags.DEFINE_multi_string("config", [], "Override a data setting, e.g. --config dupe_factor=5 --config split=original.")
flags.DEFINE_integer("workers", 2, "TFRecord shards written in parallel (the files do not depend on it).")
flags.mark_flag_as_required("dataset")
FLAGS = flags.FLAGS


def main(argv: list[str]) -> int:
    del argv
    from bert4rec_tf import cli

    return cli.guarded(_run)


def _run() -> None:
    from bert4rec_tf import cli
    from bert4rec_tf.data import prepare as prepare_lib

    config = cli.experiment_config(FLAGS.dataset, FLAGS.config, FLAGS.seed)
    data_dir = FLAGS.data_dir or prepare_lib.default_data_dir()
    if FLAGS.stats:
        from bert4rec_tf.data.tfds_builders import load_user_sequences

        sequences, builder = load_user_sequences(config.data.dataset, data_dir, FLAGS.source_file)
        cli.print_stats(config.data.dataset, sequences.stats(), dict(builder.info.metadata or {}))
        print(f"per-user data (TFDS): {builder.data_dir}")
        return
    prepared = prepare_lib.prepare(config.data, data_dir, FLAGS.source_file, workers=FLAGS.workers)
    meta = prepared.metadata
    cli.print_stats(config.data.dataset, meta["stats"], meta["preprocessing"])
    print(f"vocabulary: {meta['vocab_size']} ids (0 padding, items 1..{meta['num_items']}, "
          f"[MASK] {meta['mask_id']})")
    print(f"training: {meta['num_windows']:,} windows -> {meta['num_instances']:,} instances in "
          f"{len(meta['shards'])} TFRecord files")
    print(f"prepared data: {prepared.directory}")


if __name__ == "__main__":
    sys.exit(app.run(main))
