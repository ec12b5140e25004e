import math

import numpy as np
import pytest

from bert4rec_tf.layers import PositionWiseFeedForward
from tests.keras_test_utils import run_layer_test


@pytest.mark.slow
def test_layer_contract(padded_batch, tmp_path):
    hidden, _ = padded_batch
    run_layer_test(
        PositionWiseFeedForward, dict(intermediate_size=16, hidden_size=4), hidden, (2, 5, 4), tmp_path
    )


def test_uses_exact_erf_gelu(padded_batch):
    hidden, _ = padded_batch
    layer = PositionWiseFeedForward(intermediate_size=16, hidden_size=8)
    layer.build(hidden.shape)
    # Inputs of the GELU around +-2, where the tanh approximation is off by ~1e-3.
    layer.intermediate_dense.kernel.assign(np.random.default_rng(3).normal(size=(8, 16)) * 0.7)
    outputs = np.asarray(layer(hidden))
    inner = hidden @ layer.intermediate_dense.kernel.numpy() + layer.intermediate_dense.bias.numpy()
    gelu = np.vectorize(lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))))(inner)
    expected = gelu @ layer.output_dense.kernel.numpy() + layer.output_dense.bias.numpy()
    np.testing.assert_allclose(outputs, expected, atol=1e-6)
