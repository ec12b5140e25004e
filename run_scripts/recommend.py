"""Top-10 recommendations from a run's serving SavedModel.

    python run_scripts/recommend.py --model_dir runs/ml1m --history "1 2 3"
    python run_scripts/recommend.py --model_dir runs/ml1m-orig --history "1193 661" \
        --titles ../shared/datasets/ml-1m/movies.dat.gz
Item ids are the data set's raw ids, oldest first. --titles reads a MovieLens movies.dat
(`id::title::genres`, plain or .gz) whose ids are the run's raw item ids.
"""

from __future__ import annotations

import gzip
import os
import sys

from absl import app, flags

from bert4rec_tf import cli

flags.DEFINE_string("model_dir", None, "A folder written by run_scripts/train.py (reads its export/).")
flags.DEFINE_string("history", None, "Raw item ids, oldest first, separated by spaces.")
flags.DEFINE_string("titles", None, "Optional movies.dat-style file giving a title per raw item id.")
flags.mark_flags_as_required(["model_dir", "history"])
FLAGS = flags.FLAGS


def read_titles(path: str) -> dict[str, str]:
    """Raw id -> title from an `id::title::...` file (ISO-8859-1, as MovieLens ships it)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="iso-8859-1") as handle:
        return {fields[0]: fields[1] for fields in (line.rstrip("\n").split("::") for line in handle)
                if len(fields) >= 2}


def _run() -> None:
    import tensorflow as tf

    export = os.path.join(FLAGS.model_dir, "export")
    if not os.path.isfile(os.path.join(export, "saved_model.pb")):
        raise FileNotFoundError(f"{export} holds no SavedModel; train the run to its end first")
    titles = read_titles(FLAGS.titles) if FLAGS.titles else {}
    loaded = tf.saved_model.load(export)
    out = loaded.signatures["serving_default"](history=tf.constant([FLAGS.history.split()]))
    for rank, (item, score) in enumerate(zip(out["item_ids"].numpy()[0], out["scores"].numpy()[0]), start=1):
        item = item.decode()
        print(f"{rank:2d}. {item:>12}  {score:8.3f}  {titles.get(item, '')}")


if __name__ == "__main__":
    sys.exit(app.run(cli.absl_main(_run)))
