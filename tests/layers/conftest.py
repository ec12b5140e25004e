"""Fixtures shared by the layer tests: a small padded batch."""

import keras
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(7)


@pytest.fixture
def padded_batch():
    """Hidden states [2, 5, 8] and a padding mask: row 0 has 3 items, row 1 has 5."""
    hidden = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
    padding_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype="int32")
    return hidden, padding_mask
