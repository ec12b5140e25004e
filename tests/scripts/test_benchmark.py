"""The step costs that benchmark.py --real builds on (the script's runs themselves are measurements)."""

import math
from pathlib import Path

import pytest

from bert4rec_tf.scripts.step_costs import head_products_seconds, training_flops

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "interactions.csv"


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


@pytest.mark.parametrize("model, grouped", [("bpr_mf", False), ("sasrec", True), ("pop", False)])
def test_the_real_benchmark_times_any_family(model, grouped, tmp_path, capsys):
    """--real builds the batches of any family as train.py does, and times its step, its input stream
    and its validation's share (a family that trains nothing: its validation only)."""
    from bert4rec_tf.scripts import benchmark

    benchmark.main(["--real", "--model", model, "--datasets", "custom", "--source_files", f"custom={EXAMPLE}",
                    "--data_dir", str(tmp_path), "--config", "num_negatives=3", "--steps", "2", "--warmup", "1",
                    "--batch_size", "4", "--validation", "--eval_every", "10"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("custom")]
    if model == "pop":
        assert len(rows) == 1 and "trains nothing: validation" in rows[0]
        return
    assert len(rows) == (2 if grouped else 1)
    for row in rows:
        fields = row.split()
        assert fields[1] == model
        samples, input_rate, share = float(fields[-6]), float(fields[-4]), fields[-1]
        assert samples > 0 and input_rate > 0 and share.endswith("%")


def test_the_real_benchmark_builds_a_model_with_attributes_as_a_run_does(tmp_path, capsys):
    """--real sets the attributes from the prepared data as train.py does (on 2026-12-04 it built the
    model without them and `attributes_at_output` failed)."""
    from bert4rec_tf.scripts import benchmark

    import csv

    with open(EXAMPLE, encoding="utf-8", newline="") as handle:
        items = sorted({row[1] for row in list(csv.reader(handle))[1:]})  # one id holds a comma, quoted
    attributes = tmp_path / "items.csv"
    with open(attributes, "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([["item", "shelf"], *([item, f"s{index % 3}"] for index, item in enumerate(items))])
    benchmark.main(["--real", "--model", "sasrec", "--datasets", "custom", "--source_files", f"custom={EXAMPLE}",
                    "--data_dir", str(tmp_path / "data"), "--config", "num_negatives=3", "--config",
                    f"item_features={attributes}", "--config", "attributes_at_output=true", "--steps", "2",
                    "--warmup", "1", "--batch_size", "4"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("custom")]
    assert len(rows) == 2 and all(float(row.split()[-6]) > 0 for row in rows)
