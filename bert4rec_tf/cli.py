"""Helpers shared by the command-line tools in run_scripts/: configuration, errors, printing."""

from __future__ import annotations

import logging
import re
import sys
from typing import Callable

from absl import flags

from bert4rec_tf.config import MODEL_PRESETS, RECIPES, ExperimentConfig, preset, recipe_overrides
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.registry import DATASETS

flags.DEFINE_bool("debug", False, "Show the full traceback of an error instead of one line.")


def define_data_flags() -> None:
    """The flags every data-reading command shares: data set, cache, source file, seed, overrides."""
    flags.DEFINE_string("dataset", None, f"Data set: {', '.join(DATASETS)}.")
    flags.DEFINE_string("model", "bert4rec", f"Model preset: {', '.join(MODEL_PRESETS)}.")
    flags.DEFINE_string("data_dir", None, "Cache root for downloads, the TFDS build and prepared data "
                        "(default: $BERT4REC_TF_DATA_DIR or the checkout's datasets/).")
    flags.DEFINE_string("source_file", None, "A local raw or preprocessed file to read instead of downloading.")
    flags.DEFINE_integer("seed", None, "Seed of every random choice (default: the preset's).")
    flags.DEFINE_multi_string("config", [], "Override a preset field, e.g. --config dupe_factor=5 "
                              "--config model.num_layers=3.")
    flags.mark_flag_as_required("dataset")


def absl_main(run: Callable[[], None]) -> Callable[[list[str]], int]:
    """An `absl.app.run` entry point that runs `run` through `guarded`."""

    def main(argv: list[str]) -> int:
        del argv
        return guarded(run)

    return main


def experiment_config(dataset: str, overrides: list[str], seed: int | None = None,
                      model: str = "bert4rec", recipe: str | None = None) -> ExperimentConfig:
    """The preset of `model` on `dataset`, then the recipe's settings, then the `key=value` overrides
    (and the seed): a flag given on the command line wins over the recipe.

    Raises:
        ValueError: for an unknown data set or model, a malformed override, an unknown key or a value
            out of range.
    """
    config = preset(dataset, model)
    for key, value in (recipe_overrides(recipe, dataset, model) if recipe else {}).items():
        config.override(key, value)
    for override in overrides:
        if "=" not in override:
            raise ValueError(f"override {override!r} is not key=value")
        key, value = override.split("=", 1)
        config.override(key.strip(), value)
    if seed is not None:
        config.override("data.seed", seed)
    config.validate()
    return config


def parse_duration(text: str, flag: str = "--time_budget") -> float:
    """Seconds in a duration such as "2h", "30m", "1h30m", "45s" or "5400" (seconds).

    Raises:
        ValueError: naming `flag` when the text is not such a duration.
    """
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not text.strip() or match is None:
        raise ValueError(f"{flag} {text!r} is not a duration such as 2h, 30m, 1h30m, 45s or 5400")
    hours, minutes, seconds = (float(group) if group else 0.0 for group in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def guarded(run: Callable[[], None]) -> int:
    """Runs `run`; bad input or a fault ends in a one-line error on stderr and exit status 1.

    Errors the package raises for bad input (`ValueError`, `DataError`) and operating-system errors
    (missing, unreadable or damaged files) are shown as `error: <message>`; `--debug` shows the
    traceback instead.
    """
    logging.getLogger("bert4rec_tf").setLevel(logging.INFO)
    try:
        run()
    except (DataError, ValueError, OSError) as error:
        if flags.FLAGS.is_parsed() and flags.FLAGS.debug:
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"error: {message}", file=sys.stderr)
        return 1
    return 0


def print_stats(dataset: str, stats: dict, dropped: dict) -> None:
    """Prints a data set's statistics, what preprocessing dropped on purpose, the duplicate rows it
    kept and the ids that are not positive integers."""
    print(f"{dataset}: users {stats['users']:,} | items {stats['items']:,} | actions {stats['actions']:,} | "
          f"avg length {stats['avg_length']:.2f} | min length {stats['min_length']}")
    if dropped:
        print(f"preprocessing dropped: {dropped.get('users_dropped_short', 0):,} users with too few "
              f"interactions ({dropped.get('interactions_dropped_short_users', 0):,} interactions), "
              f"{dropped.get('items_dropped_rare', 0):,} rare items "
              f"({dropped.get('interactions_dropped_rare_items', 0):,} interactions), "
              f"of {dropped.get('interactions_read', 0):,} interactions read")
        print(f"preprocessing kept: {dropped.get('duplicate_rows', 0):,} duplicate rows (the user, item and "
              "timestamp, if any, of an earlier row; every interaction counts)")
        others = (dropped.get("user_ids_not_positive_integers", 0), dropped.get("item_ids_not_positive_integers", 0))
        if any(others):
            print(f"ids that are not positive integers: {others[0]:,} users, {others[1]:,} items; they are numbered "
                  "after the positive integers, in order of first appearance")
