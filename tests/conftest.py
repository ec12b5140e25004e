"""Shared test fixtures: real-data location, small hand-made sequences."""

from __future__ import annotations

import os

import numpy as np
import pytest

import bert4rec_tf  # noqa: F401  (first: it turns on oneDNN before TensorFlow loads, as the scripts do)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The files that take longest (per-file worker time: the two Task harness files, the run folder's
# faults and the POP guard train through the real trainer; most checks of the others are slow checks
# now), longest first. They start first, so the test workers (pytest-xdist
# keeps a file on one worker, in collection order with --no-loadscope-reorder) finish together instead
# of one training alone at the end.
LONGEST_FIRST = ("tasks/test_tasks.py", "tasks/test_tasks_other_half.py", "training/test_faults.py",
                 "training/test_pop_guard.py", "models/test_bert4rec.py",
                 "models/test_relatives.py", "training/test_trainer.py", "export/test_every_model.py",
                 "export/test_saved_model.py", "training/test_feature_learning.py", "models/test_padding.py")


def pytest_collection_modifyitems(config, items):
    """Puts the files of LONGEST_FIRST first, in that order; the others keep theirs."""
    rank = {f"tests/{path}": place for place, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def import_blocker(package: str) -> str:
    """Python source that, run first in a new process, makes every import of `package` (and of its
    submodules) fail with ModuleNotFoundError, as when it is not installed."""
    return f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == {package!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
"""


def shared_datasets_dir() -> str:
    """`$BERT4REC_SHARED_DATASETS`, else ../shared/datasets beside the checkout."""
    return os.environ.get("BERT4REC_SHARED_DATASETS",
                          os.path.join(os.path.dirname(REPO), "shared", "datasets"))


def real_file(relative: str) -> str:
    """Path of a real data file; skips the test, saying why, when it is absent."""
    path = os.path.join(shared_datasets_dir(), relative)
    if not os.path.isfile(path):
        pytest.skip(f"real data not found: {path} (set BERT4REC_SHARED_DATASETS)")
    return path


def write_pairs(path: str, sequences: dict[str, list[str]]) -> str:
    """Writes `user item` lines, users in blocks, items in the given (time) order."""
    with open(path, "w") as handle:
        for user, items in sequences.items():
            for item in items:
                handle.write(f"{user} {item}\n")
    return path


def toy_sequences(num_users: int = 12, num_items: int = 400, seed: int = 0) -> dict[str, list[str]]:
    """Users 1..num_users with 5-40 distinct items each, ids as strings."""
    rng = np.random.default_rng(seed)
    return {str(u): [str(i) for i in rng.choice(np.arange(1, num_items + 1), rng.integers(5, 41), replace=False)]
            for u in range(1, num_users + 1)}


def event_values(path: str) -> list[tuple[int, object]]:
    """The summary values of one TensorBoard event file as (step, `Summary.Value`) pairs, in order."""
    import tensorflow as tf

    return [(event.step, value) for event in tf.compat.v1.train.summary_iterator(path)
            for value in event.summary.value]


def planted_order_sequences(num_users: int = 300, num_items: int = 60, lengths: tuple[int, int] = (8, 20),
                            follow: float = 0.8, skew: float = 1.0, seed: int = 0) -> dict[str, list[str]]:
    """Users whose items mostly follow one hidden order of the items, ids as strings.

    Each user starts at a random item; every next item is the successor of the current one in a
    hidden cyclic order with probability `follow`, else an item drawn with Zipf-like popularity (the
    k-th most popular item weighs 1 / k ** `skew`).
    A sequence model that learns the order predicts the next item far better than popularity.

    Args:
        num_users, num_items: users "u1".. and items "i1"..; item ids are strings.
        lengths: the shortest and longest sequence (inclusive).
        follow: the chance that the next item is the successor.
        skew: the popularity exponent.
        seed: the generator's seed.
    """
    rng = np.random.default_rng(seed)
    order = rng.permutation(num_items)
    successor = np.empty(num_items, dtype=np.int64)
    successor[order] = np.roll(order, -1)
    popularity = 1.0 / np.arange(1, num_items + 1) ** skew
    popularity = rng.permutation(popularity / popularity.sum())
    sequences = {}
    for user in range(1, num_users + 1):
        items = [int(rng.choice(num_items, p=popularity))]
        for _ in range(int(rng.integers(lengths[0], lengths[1] + 1)) - 1):
            follows = rng.random() < follow
            items.append(int(successor[items[-1]]) if follows else int(rng.choice(num_items, p=popularity)))
        sequences[f"u{user}"] = [f"i{item + 1}" for item in items]
    return sequences


def planted_category_sequences(num_users: int = 500, categories: int = 10, per_category: int = 300,
                                lengths: tuple[int, int] = (8, 16), follow: float = 0.9, cold: int = 0,
                                seed: int = 0) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Users who move through categories in one cyclic order, each item drawn uniformly in its category:
    the category is the signal, and with many items per category each item occurs too rarely for its
    own row to learn it.

    Each user starts in a random category; every next item is from the next category with probability
    `follow`, else from a random one. Items "i1".. belong to categories 0.. in blocks of `per_category`;
    the `cold` items after each block (ids continuing the numbering) are in the category and never
    occur in a sequence.

    Returns:
        the sequences, and every item's category (the cold items' too).
    """
    rng = np.random.default_rng(seed)
    block = per_category + cold
    category = {f"i{c * block + k + 1}": c for c in range(categories) for k in range(block)}
    sequences = {}
    for user in range(1, num_users + 1):
        current, items = int(rng.integers(categories)), []
        for _ in range(int(rng.integers(lengths[0], lengths[1] + 1))):
            items.append(f"i{current * block + int(rng.integers(per_category)) + 1}")
            current = (current + 1) % categories if rng.random() < follow else int(rng.integers(categories))
        sequences[f"u{user}"] = items
    return sequences, category


def event_scalars(path: str) -> dict[str, dict[int, float]]:
    """The scalars {tag: {step: value}} of one TensorBoard event file (images, text and hparams left out)."""
    import tensorflow as tf

    values: dict[str, dict[int, float]] = {}
    for step, value in event_values(path):
        if value.metadata.plugin_data.plugin_name == "scalars":
            values.setdefault(value.tag, {})[step] = float(tf.make_ndarray(value.tensor))
    return values


def family_config(name: str = "bert4rec", **values):
    """The model section of the family `name` (its class: `bert4rec_tf.config.family`) with those of
    `values` it has: the tests give every family the same sizes, and each takes its own."""
    import bert4rec_tf.tasks  # noqa: F401  (registers the families' sections)
    from bert4rec_tf.config import family

    kind = family(name).model
    return kind(name=name, **{key: value for key, value in values.items() if key in kind.keys()})
