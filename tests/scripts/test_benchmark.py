"""The step costs that benchmark.py --real builds on (the script's runs themselves are measurements)."""

import math

from bert4rec_tf.scripts.step_costs import head_products_seconds, training_flops


def test_head_products_seconds_times_the_three_products():
    seconds = head_products_seconds(rows=8, classes=50, width=4, repeats=2)
    assert math.isfinite(seconds) and 0.0 < seconds < 10.0


def test_training_flops_counts_the_head_per_slot():
    from tests.conftest import family_config

    config = family_config(hidden_size=4, intermediate_size=16, num_layers=1, vocab_size=50)
    without = training_flops(config, seq_len=10, slots=0.0)
    with_two = training_flops(config, seq_len=10, slots=2.0)
    # forward 2 * slots * d * (d + items) (transform and scores), times 3 for the backward pass
    assert with_two - without == 3 * 2 * 2 * 4 * (4 + 50)
