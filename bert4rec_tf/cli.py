"""Helpers shared by the command-line tools in run_scripts/: configuration, errors, printing."""

from __future__ import annotations

import logging
import sys
from typing import Callable

from bert4rec_tf.config import ExperimentConfig, preset
from bert4rec_tf.data.errors import DataError


def experiment_config(dataset: str, overrides: list[str], seed: int | None = None) -> ExperimentConfig:
    """The preset of `dataset` with `key=value` overrides (and the seed) applied.

    Raises:
        ValueError: for an unknown data set, a malformed override or an unknown key.
    """
    config = preset(dataset)
    for override in overrides:
        if "=" not in override:
            raise ValueError(f"override {override!r} is not key=value")
        key, value = override.split("=", 1)
        config.override(key.strip(), value)
    if seed is not None:
        config.override("data.seed", seed)
    return config


def guarded(run: Callable[[], None]) -> int:
    """Runs `run`; bad input ends in a one-line error on stderr and exit status 1."""
    logging.getLogger("bert4rec_tf").setLevel(logging.INFO)
    try:
        run()
    except (DataError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def print_stats(dataset: str, stats: dict, dropped: dict) -> None:
    """Prints a data set's statistics and what preprocessing dropped on purpose."""
    print(f"{dataset}: users {stats['users']:,} | items {stats['items']:,} | actions {stats['actions']:,} | "
          f"avg length {stats['avg_length']:.2f} | min length {stats['min_length']}")
    if dropped:
        print(f"preprocessing dropped: {dropped.get('users_dropped_short', 0):,} users with too few "
              f"interactions ({dropped.get('interactions_dropped_short_users', 0):,} interactions), "
              f"{dropped.get('items_dropped_rare', 0):,} rare items "
              f"({dropped.get('interactions_dropped_rare_items', 0):,} interactions), "
              f"of {dropped.get('interactions_read', 0):,} interactions read")
