"""train.py names the weights whose test metrics it prints."""

import json

import pytest

from bert4rec_tf.training.run_folder import RunFolder


@pytest.mark.parametrize("record, expected", [
    ({"best_step": 1500, "steps": 2000}, "best validation checkpoint, step 1,500"),
    ({"best_step": None, "steps": 8536}, "last weights, step 8,536: no validation split to choose a checkpoint"),
    ({"best_step": None, "steps": 0}, "no training steps"),
])
def test_the_tested_weights_are_read_from_the_results_record(tmp_path, record, expected):
    (tmp_path / "results.json").write_text(json.dumps({"test": {}, **record}))
    assert RunFolder(str(tmp_path)).tested_weights() == expected
