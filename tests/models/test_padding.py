"""Padding-aware batches: every model reads a trimmed batch as it reads the full-width one."""

from __future__ import annotations

import types

import keras
import numpy as np
import pytest

from bert4rec_tf.constants import vocab_size
from bert4rec_tf.data.pipeline import length_grouped
from bert4rec_tf.tasks import TASKS, get_task
from tests.data.test_instances import small_experiment
from tests.models.test_relatives import build_model, config

# Each check builds and runs every model: slow checks (the default run keeps no model-building loops).
pytestmark = pytest.mark.slow

NUM_ITEMS = 30
MAX_LEN = 24
TRAINED = sorted(name for name, task in TASKS.items() if task.trains)
# The families whose training batches run along the sequence (padding-aware batches apply to them).
SEQUENCE_FAMILIES = sorted(name for name in TRAINED if TASKS[name].sequence_features)


def built(name: str, **changes):
    """A small model of `name` without dropout, its weights drawn from one seed."""
    keras.utils.set_random_seed(11)
    values = dict(vocab_size=vocab_size(NUM_ITEMS), max_len=MAX_LEN, hidden_size=16, intermediate_size=32,
                  hidden_dropout=0.0, attention_dropout=0.0)
    model = build_model(config(name, **{**values, "num_users": 4, **changes}))
    model.fit_statistics([np.arange(1, NUM_ITEMS + 1)])
    return model


def trainable_models() -> list:
    """Every trainable model whose batches run along the sequence, once per loss."""
    return [(name, {"loss": loss}) for name in SEQUENCE_FAMILIES for loss in TASKS[name].losses]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_scores_do_not_depend_on_the_padding_around_a_history(name):
    model = built(name)
    rng = np.random.default_rng(0)
    histories = [rng.integers(1, NUM_ITEMS + 1, size=n) for n in (1, 3, 9, 30)]
    tight = np.zeros((4, 30), np.int32)
    for row, items in enumerate(histories):
        tight[row, :len(items)] = items
    users = {"users": np.arange(1, 5)} if model.reads_users else {}

    def score_next(history):
        return model.score_next(history, **{key: value[:len(history)] for key, value in users.items()})

    reference = keras.ops.convert_to_numpy(score_next(tight))
    for width in (MAX_LEN, MAX_LEN + 7):  # trailing padding, and padding before and between the items
        for layout in ("after", "before"):
            padded = np.zeros((4, max(width, 30) + 3), np.int32)
            for row, items in enumerate(histories):
                begin = padded.shape[1] - len(items) if layout == "before" else 0
                padded[row, begin:begin + len(items)] = items
            assert np.allclose(keras.ops.convert_to_numpy(score_next(padded)), reference, atol=1e-5)
    short = tight[:3, :9]  # a batch of short histories trimmed to its longest: a narrower model input
    assert np.allclose(keras.ops.convert_to_numpy(score_next(short)), reference[:3], atol=1e-5)


@pytest.mark.parametrize("name", SEQUENCE_FAMILIES)
def test_encoder_outputs_at_real_positions_do_not_depend_on_the_padding_width(name):
    model = built(name)
    rows = [[3, 4, 5, 6, 7], [8, 9]]
    left = get_task(name).padded_left  # SASRec's inputs are padded on the left, the others' on the right
    outputs = []
    for width in (5, 8, MAX_LEN):
        ids = np.zeros((2, width), np.int32)
        for row, items in enumerate(rows):
            if left:
                ids[row, width - len(items):] = items
            else:
                ids[row, :len(items)] = items
        hidden = keras.ops.convert_to_numpy(model.encode({"input_ids": ids, "input_mask": (ids != 0).astype(np.int32)}))
        outputs.append([hidden[row, width - len(items):] if left else hidden[row, :len(items)]
                        for row, items in enumerate(rows)])  # [items, hidden] per row
    for other in outputs[1:]:
        for mine, reference in zip(other, outputs[0]):
            assert np.allclose(mine, reference, atol=1e-5)


def _streams(name: str):
    """The Task's full-width batched stream on small windows, as a function of its start."""
    task = get_task(name)
    config = small_experiment(name, max_len=MAX_LEN, prop_sliding_window=1.0)
    config.apply({"match_negatives": 5, "batch_size": 4, "dynamic_masking": True}, only_known=True)
    rng = np.random.default_rng(4)
    train = [rng.choice(np.arange(1, NUM_ITEMS + 1), size=n, replace=False) for n in (2, 3, 5, 9, 17, 4, 6, 12)]
    prepared = types.SimpleNamespace(num_items=NUM_ITEMS)
    return config.data, task.training_stream(config, prepared, train)


@pytest.mark.parametrize("name, changes", trainable_models())
def test_trimmed_and_full_width_batches_give_the_same_loss(name, changes):
    model = built(name, **changes)
    task = get_task(name)
    config, full = _streams(name)
    trimmed = length_grouped(full, 0, 4, 1, task.sequence_features, task.padded_left, MAX_LEN, config.seed)
    narrower = 0
    for whole, short in zip(full(0).take(4), trimmed.take(4)):
        narrower += short["input_ids"].shape[1] < MAX_LEN
        assert all(short[key].shape[1] <= MAX_LEN for key in task.sequence_features)
        losses = [float(model.compute_loss(x=batch, y_pred=model(batch, training=False))) for batch in (whole, short)]
        assert np.isclose(losses[0], losses[1], rtol=1e-5, atol=1e-6), losses
    assert narrower  # the check compared trimmed batches
