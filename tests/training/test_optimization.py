"""The optimiser: decay exclusions, the schedule's key values, gradient clipping."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops

from bert4rec_tf.config import TrainConfig
from bert4rec_tf.models import BERT4Rec
from bert4rec_tf.training.optimization import WarmupLinearDecay, make_optimizer
from tests.conftest import family_config


@pytest.fixture(scope="module")
def model():
    model = BERT4Rec(family_config(vocab_size=20, max_len=8, hidden_size=8, num_heads=2, intermediate_size=16,
                                 num_layers=2))
    model.build()
    return model


def test_decay_skips_exactly_layer_norm_and_bias_variables(model):
    optimizer = make_optimizer(TrainConfig(train_steps=10), model.trainable_variables)
    decayed = {v.path for v in model.trainable_variables if optimizer._use_weight_decay(v)}
    expected = {v.path for v in model.trainable_variables
                if "layer_norm" not in v.path and v.name not in ("bias", "output_bias")}
    assert decayed == expected
    assert any(path.endswith("embedding/item_embedding/embeddings") for path in decayed)  # decayed
    assert not any(name.endswith(("gamma", "beta", "bias")) for name in decayed)
    assert len(decayed) == 2 + 2 * 6 + 1    # item, position; 6 kernels per block; head transform


def test_schedule_start_end_of_warmup_and_last_step():
    schedule = WarmupLinearDecay(1e-4, warmup_steps=100, total_steps=1000)
    value = lambda step: float(ops.convert_to_numpy(schedule(step)))  # noqa: E731
    assert value(0) == 0.0
    assert value(50) == pytest.approx(0.5e-4)
    assert value(100) == pytest.approx(1e-4 * (1 - 100 / 1000))
    assert value(999) == pytest.approx(1e-4 / 1000, rel=1e-4)  # float32 arithmetic
    assert value(1000) == 0.0 and value(1200) == 0.0


def test_a_schedule_without_decay_keeps_the_rate_after_the_warmup():
    schedule = WarmupLinearDecay(1e-3, warmup_steps=10, total_steps=100, decay=False)
    value = lambda step: float(ops.convert_to_numpy(schedule(step)))  # noqa: E731
    assert value(5) == pytest.approx(0.5e-3)
    assert [value(step) for step in (10, 99, 100, 5000)] == pytest.approx([1e-3] * 4)
    constant = WarmupLinearDecay(1e-3, warmup_steps=0, total_steps=100, decay=False)
    assert float(ops.convert_to_numpy(constant(0))) == pytest.approx(1e-3)
    assert WarmupLinearDecay.from_config(schedule.get_config()).decay is False


def test_train_decay_false_reaches_the_optimizers_schedule():
    from bert4rec_tf.config import ExperimentConfig

    config = ExperimentConfig.for_family("bert4rec")
    config.override("train.decay", "false")
    assert config.train.decay is False
    config.train.train_steps, config.train.warmup_steps, config.train.learning_rate = 100, 0, 1e-3
    schedule = make_optimizer(config.train, [])._learning_rate
    assert float(ops.convert_to_numpy(schedule(99))) == pytest.approx(1e-3)


def test_clipping_bounds_the_global_norm(model):
    optimizer = make_optimizer(TrainConfig(train_steps=10, clip_norm=5.0), model.trainable_variables)
    grads = [ops.ones(v.shape) * 10.0 for v in model.trainable_variables]
    clipped = optimizer._clip_gradients(grads)
    norm = np.sqrt(sum(float(np.sum(np.square(ops.convert_to_numpy(g)))) for g in clipped))
    assert norm == pytest.approx(5.0, rel=1e-5)
    small = [g / 1e4 for g in grads]
    kept = optimizer._clip_gradients(small)
    assert np.allclose(ops.convert_to_numpy(kept[0]), ops.convert_to_numpy(small[0]))


def _table_and_bias(name):
    import keras

    rng = np.random.default_rng(5)
    table = keras.Variable(rng.normal(size=(6, 3)).astype(np.float32), name=f"{name}_table")
    bias = keras.Variable(rng.normal(size=(3,)).astype(np.float32), name=f"{name}_bias")  # "bias": no decay
    return table, bias


def _gradients(step):
    rng = np.random.default_rng(100 + step)
    return rng.normal(size=(6, 3)).astype(np.float32) * 4.0, rng.normal(size=(3,)).astype(np.float32)


def _numpy_adamw_step(weights, m, v, gradient, step):
    """One step of a float64 NumPy AdamW (Keras' bias correction, the decay 0.01 before the step) at
    the tests' schedule, lr 0.01 decaying to 0 at step 100: the new (weights, m, v)."""
    rate = 0.01 * (1 - step / 100)
    m = 0.9 * m + 0.1 * gradient
    v = 0.999 * v + 0.001 * np.asarray(gradient, np.float64) ** 2
    alpha = rate * np.sqrt(1 - 0.999 ** (step + 1)) / (1 - 0.9 ** (step + 1))
    return weights - weights * 0.01 * rate - m * alpha / (np.sqrt(v) + 1e-6), m, v


def test_sparse_row_updates_of_every_row_equal_adamw_with_decay_and_clipping():
    import tensorflow as tf

    from bert4rec_tf.training.optimization import AdamW, SparseRowsAdamW

    config = TrainConfig(train_steps=10, warmup_steps=2, learning_rate=0.1, clip_norm=2.0)
    variables, optimizers = [], []
    for sparse in (False, True):
        table, bias = _table_and_bias("sparse" if sparse else "dense")
        optimizer = make_optimizer(TrainConfig(**{**config.__dict__, "sparse_updates": sparse}), [table, bias])
        assert type(optimizer) is (SparseRowsAdamW if sparse else AdamW)
        variables.append((table, bias))
        optimizers.append(optimizer)
    for step in range(4):
        table_gradient, bias_gradient = _gradients(step)  # norm about 10: clipped to 2
        rows = np.array([3, 0, 5, 1, 4, 2])  # every row, in another order
        sparse = tf.IndexedSlices(tf.constant(table_gradient[rows]), tf.constant(rows), tf.constant([6, 3]))
        optimizers[0].apply([tf.constant(table_gradient), tf.constant(bias_gradient)], list(variables[0]))
        optimizers[1].apply([sparse, tf.constant(bias_gradient)], list(variables[1]))
    for dense, lazy in zip(variables[0], variables[1]):
        np.testing.assert_allclose(ops.convert_to_numpy(lazy), ops.convert_to_numpy(dense), rtol=1e-5, atol=1e-6)


def test_sparse_row_updates_leave_untouched_rows_and_follow_adam_on_the_others():
    import tensorflow as tf

    table, bias = _table_and_bias("lazy")
    start = ops.convert_to_numpy(table).copy()
    config = TrainConfig(train_steps=100, warmup_steps=0, learning_rate=0.01, clip_norm=1e6, sparse_updates=True)
    optimizer = make_optimizer(config, [table, bias])
    rows = np.array([4, 1])
    # A NumPy reference of AdamW on the touched rows.
    weights, m, v = start[rows].astype(np.float64), np.zeros((2, 3)), np.zeros((2, 3))
    for step in range(3):
        values = _gradients(step)[0][:2]
        optimizer.apply([tf.IndexedSlices(tf.constant(values), tf.constant(rows), tf.constant([6, 3])),
                         tf.zeros(3)], [table, bias])
        weights, m, v = _numpy_adamw_step(weights, m, v, values, step)
    after = ops.convert_to_numpy(table)
    np.testing.assert_array_equal(np.delete(after, rows, axis=0), np.delete(start, rows, axis=0))
    np.testing.assert_allclose(after[rows], weights, rtol=1e-5)
    moments = ops.convert_to_numpy(optimizer._momentums[optimizer._get_variable_index(table)])
    assert not np.any(np.delete(moments, rows, axis=0)) and np.all(moments[rows] != 0)


def test_the_fused_dense_update_follows_a_numpy_adamw_and_keras_own():
    import keras
    import tensorflow as tf

    from bert4rec_tf.training.optimization import AdamW

    config = TrainConfig(train_steps=100, warmup_steps=0, learning_rate=0.01, clip_norm=1e6)
    table, bias = _table_and_bias("fused")
    twin_table, twin_bias = _table_and_bias("keras")
    optimizer = make_optimizer(config, [table, bias])
    assert type(optimizer) is AdamW
    twin = keras.optimizers.AdamW(learning_rate=optimizer._learning_rate, weight_decay=0.01, beta_1=0.9,
                                  beta_2=0.999, epsilon=1e-6, global_clipnorm=1e6)
    twin.exclude_from_weight_decay(var_list=[twin_bias])
    start = ops.convert_to_numpy(table).astype(np.float64)
    weights, m, v = start, np.zeros((6, 3)), np.zeros((6, 3))  # the NumPy reference
    for step in range(5):
        gradient, bias_gradient = _gradients(step)
        optimizer.apply([tf.constant(gradient), tf.constant(bias_gradient)], [table, bias])
        twin.apply([tf.constant(gradient), tf.constant(bias_gradient)], [twin_table, twin_bias])
        weights, m, v = _numpy_adamw_step(weights, m, v, gradient, step)
    after = ops.convert_to_numpy(table)
    assert np.abs(after - start).max() > 0.04  # five steps of about lr each moved it
    np.testing.assert_allclose(after, weights, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(after, ops.convert_to_numpy(twin_table), rtol=1e-6, atol=1e-6)  # rounding only
    np.testing.assert_allclose(ops.convert_to_numpy(bias), ops.convert_to_numpy(twin_bias), rtol=1e-6, atol=1e-6)
