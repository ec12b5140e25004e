"""The padding-free blocks (`run_blocks(packed=True)`: the real positions packed between the
attention layers) against the blocks run on the whole window, for every registered model: with
dropout off the same outputs at the real positions, the same training loss and the same gradients,
eagerly and traced; and `model.padding_free` deciding between them from the training windows."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import family_config
from bert4rec_tf.models import base
from bert4rec_tf.tasks import TASKS
from tests.models.test_relatives import build_model, config, training_batch


FAMILIES = [name for name, task in TASKS.items() if task.trains]


def small_blocks(causal: bool, layers: int = 2):
    cfg = family_config(hidden_size=8, num_heads=2, intermediate_size=16, num_layers=layers, hidden_dropout=0.0,
                      attention_dropout=0.0)
    return base.transformer_blocks(cfg, "float32", causal=causal)


def loss_and_gradients(model, batch):
    with tf.GradientTape() as tape:
        loss = model.training_loss(batch)
    grads = tape.gradient(loss, model.trainable_variables)
    return float(loss), [None if g is None else np.asarray(tf.convert_to_tensor(g)) for g in grads]


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("name", FAMILIES)
def test_packed_blocks_give_the_whole_windows_loss_and_gradients(name, traced):
    model_config = config(name, hidden_dropout=0.0, attention_dropout=0.0)
    model = build_model(model_config)
    if not hasattr(model, "pack_positions"):
        pytest.skip(f"{name} has no Transformer blocks")
    batch = {key: tf.constant(value) for key, value in training_batch(name, model_config).items()}
    results = []
    for packed in (True, False):
        model.pack_positions = packed  # read when the model's call is traced
        if traced:
            def compute(features):
                with tf.GradientTape() as tape:
                    loss = model.training_loss(features)
                return loss, tape.gradient(loss, model.trainable_variables)

            loss, grads = tf.function(compute)(batch)
            results.append((float(loss), [None if g is None else np.asarray(tf.convert_to_tensor(g)) for g in grads]))
        else:
            results.append(loss_and_gradients(model, batch))
    (packed_loss, packed_grads), (whole_loss, whole_grads) = results
    assert packed_loss == pytest.approx(whole_loss, rel=1e-5)
    assert [g is None for g in packed_grads] == [g is None for g in whole_grads]
    for packed, whole in zip(packed_grads, whole_grads):
        if packed is not None:
            np.testing.assert_allclose(packed, whole, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_packed_blocks_match_the_whole_window_at_real_positions(causal):
    blocks = small_blocks(causal)
    rng = np.random.default_rng(3)
    hidden = tf.constant(rng.normal(size=(3, 6, 8)), tf.float32)
    # Right padding, left padding, and a row with one real position.
    mask = tf.constant([[1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1]], tf.int32)
    whole, whole_scores = base.run_blocks(blocks, hidden, mask)
    packed, packed_scores = base.run_blocks(blocks, hidden, mask, packed=True)
    real = mask.numpy().astype(bool)
    np.testing.assert_allclose(packed.numpy()[real], whole.numpy()[real], rtol=1e-5, atol=1e-6)
    assert not packed.numpy()[~real].any()  # zeros at the padding
    for one, other in zip(packed_scores, whole_scores):  # every real query attends alike
        np.testing.assert_allclose(one.numpy().transpose(0, 2, 1, 3)[real], other.numpy().transpose(0, 2, 1, 3)[real],
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_a_traced_packed_step_takes_batches_of_any_width_and_fill(causal):
    """One tf.function (as in training) meets batches of other widths and real counts, the fused
    GELU's hand-written gradient included: the loss and the gradients equal the whole window's."""
    blocks = small_blocks(causal)
    rng = np.random.default_rng(5)
    base.run_blocks(blocks, tf.zeros((1, 8, 8)), tf.ones((1, 8), tf.int32))  # builds the blocks
    weights = [w for block in blocks for w in block.trainable_weights]

    def loss_and_grads(hidden, mask, packed):
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            outputs, _ = base.run_blocks(blocks, hidden, mask, training=True, packed=packed)
            loss = tf.reduce_sum(tf.square(outputs) * tf.cast(mask, tf.float32)[..., tf.newaxis])
        return loss, tape.gradient(loss, [hidden, *weights])

    traced = tf.function(lambda hidden, mask: loss_and_grads(hidden, mask, True), reduce_retracing=True)
    for mask in ([[0] * 6 + [1] * 2] * 3, [[1] * 8, [0] * 2 + [1] * 6, [1] * 8], [[0, 1, 1, 1, 1]] * 2):
        mask = tf.constant(mask, tf.int32)
        hidden = tf.constant(rng.normal(size=(*mask.shape, 8)), tf.float32)
        loss, grads = traced(hidden, mask)
        want_loss, want_grads = loss_and_grads(hidden, mask, False)
        np.testing.assert_allclose(float(loss), float(want_loss), rtol=1e-5)
        # atol: the key projection's bias has a gradient of zero (the softmax does not see it), in
        # float32 a few 1e-7 either way.
        for got, want in zip(grads, want_grads):
            np.testing.assert_allclose(tf.convert_to_tensor(got).numpy(), tf.convert_to_tensor(want).numpy(),
                                       rtol=1e-4, atol=1e-5)


def test_window_fill_counts_the_windows_each_history_is_cut_into():
    # Histories of 2, 4 and 9 items in windows of 4: 1 + 1 + 3 windows, 15 items in 20 positions.
    assert base.window_fill([[1, 2], [1, 2, 3, 4], list(range(1, 10))], 4) == pytest.approx(15 / 20)
    assert base.window_fill([], 4) == 1.0


@pytest.mark.parametrize("choice, lengths, packs", [
    ("auto", [1, 2, 3], True),  # 6 items in 3 windows of 10: 20% full
    ("auto", [10, 10, 5], False),  # 25 in 30: 83%
    ("on", [10, 10, 10], True),
    ("off", [1, 1, 1], False),
])
def test_padding_free_is_chosen_from_the_training_windows(choice, lengths, packs):
    sequences = [list(range(1, n + 1)) for n in lengths]
    assert base.packs_positions(choice, sequences, 10) is packs
    for name in ("bert4rec", "sasrec"):
        model = build_model(config(name, padding_free=choice, max_len=10))
        model.fit_statistics(sequences)
        assert model.pack_positions is packs


def test_an_unknown_padding_free_choice_is_refused_in_one_line():
    from bert4rec_tf.config import ExperimentConfig

    experiment = ExperimentConfig.for_family("bert4rec")
    experiment.model.padding_free = "yes"
    with pytest.raises(ValueError, match="padding_free") as error:
        experiment.validate()
    assert "\n" not in str(error.value)
