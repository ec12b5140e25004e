"""The command-line helpers' checks: a seed out of range named by its flag, a flag and a `--config`
item that set one field to different values."""

from __future__ import annotations

import pytest

from bert4rec_tf import cli


def test_a_seed_out_of_range_is_refused_naming_its_flag():
    for seed, overrides in ((-1, []), (None, [f"data.seed={2**32}"])):
        with pytest.raises(ValueError, match=r"^--seed must be a whole number from 0 to 4294967295, got "):
            cli.experiment_config("beauty", overrides, seed=seed)


def test_a_flag_and_a_config_item_that_disagree_are_refused():
    """`--max_len 20 --config max_len=0` would train at 20 without a word (flags apply after --config)."""
    with pytest.raises(ValueError) as caught:
        cli.flag_overrides(["max_len=0"], {"max_len": 20})
    assert str(caught.value) == "--max_len 20 and --config max_len=0 set max_len to different values: give one of them"
    with pytest.raises(ValueError, match="--learning_rate 0.002 and --config train.learning_rate=1e-3"):
        cli.flag_overrides(["train.learning_rate=1e-3"], {"learning_rate": 0.002})
    assert cli.flag_overrides(["learning_rate=2e-3", "hidden_size=32"], {"learning_rate": 0.002}) == [
        "learning_rate=2e-3", "hidden_size=32", "learning_rate=0.002"]  # the same value twice is no conflict
