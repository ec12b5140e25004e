"""The optimiser: decay exclusions, the schedule's key values, gradient clipping."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops

from bert4rec_tf.config import ModelConfig, TrainConfig
from bert4rec_tf.models import BERT4Rec
from bert4rec_tf.training.optimization import WarmupLinearDecay, make_optimizer


@pytest.fixture(scope="module")
def model():
    model = BERT4Rec(ModelConfig(vocab_size=20, max_len=8, hidden_size=8, num_heads=2, intermediate_size=16,
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


def test_clipping_bounds_the_global_norm(model):
    optimizer = make_optimizer(TrainConfig(train_steps=10, clip_norm=5.0), model.trainable_variables)
    grads = [ops.ones(v.shape) * 10.0 for v in model.trainable_variables]
    clipped = optimizer._clip_gradients(grads)
    norm = np.sqrt(sum(float(np.sum(np.square(ops.convert_to_numpy(g)))) for g in clipped))
    assert norm == pytest.approx(5.0, rel=1e-5)
    small = [g / 1e4 for g in grads]
    kept = optimizer._clip_gradients(small)
    assert np.allclose(ops.convert_to_numpy(kept[0]), ops.convert_to_numpy(small[0]))
