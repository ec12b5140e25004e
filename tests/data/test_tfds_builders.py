"""The TFDS build read back: the same sequences as preprocessing the source directly."""

from __future__ import annotations

import numpy as np

from bert4rec_tf.data import tfds_builders
from bert4rec_tf.data.preprocess import preprocess
from bert4rec_tf.data.readers import read_interactions
from bert4rec_tf.data.registry import get_spec
from tests.conftest import toy_sequences, write_pairs


def test_the_build_reads_back_as_the_preprocessed_source_across_batches(tmp_path, monkeypatch):
    # Batches of 5 users: the build's order (TFDS shuffles examples by key) spans several batches, and
    # the 12 users' item runs must come back in user order. Ids that are not integers are numbered in
    # order of first appearance, so that order decides every id.
    monkeypatch.setattr(tfds_builders, "READ_BATCH", 5)
    toy = toy_sequences(num_users=12, num_items=60, seed=3)
    source = write_pairs(str(tmp_path / "toy.txt"),
                         {f"u{user}": [f"i{item}" for item in items] for user, items in toy.items()})
    sequences, builder = tfds_builders.load_user_sequences("beauty", str(tmp_path / "data"), source)
    stored = [int(example["user_index"]) for example in builder.as_dataset(split="train", shuffle_files=False)]
    assert sorted(stored) == list(range(12)) and stored != sorted(stored)  # the build's own order
    spec = get_spec("beauty")
    expected, _ = preprocess(read_interactions(source, spec.source_format), spec.min_user_interactions,
                             spec.min_item_interactions)
    assert list(sequences.user_ids) == list(expected.user_ids)
    assert list(sequences.item_ids) == list(expected.item_ids)
    assert np.array_equal(sequences.offsets, expected.offsets) and np.array_equal(sequences.items, expected.items)
    assert sequences.num_users == 12 and len(set(np.diff(sequences.offsets))) > 1
