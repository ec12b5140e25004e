"""Without a feature file every family computes exactly what it computed before item attributes existed.

`outputs()` builds each registered family's model at tiny sizes from one seed and records its scores
for fixed histories and, where the family has a validation loss, that loss and its gradient's norm
per weight. `tests/fixtures/no_features_outputs.json` holds what it gave at commit 41c1c41, the last
before the models could read attributes (`python -m tests.models.test_parity_without_features
FILE` writes it; run it in a checkout of that commit). The test compares today's outputs with them to
float32 rounding: on the machine that wrote the file they were the same bits, but two runs of the
same commit can differ in a gradient's last bits (the order in which a sparse gradient's rows are
summed), and another CPU may round a product differently.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "no_features_outputs.json"
HISTORIES = np.array([[3, 5, 7, 0], [2, 0, 0, 0], [9, 8, 1, 4]], np.int32)
TARGETS = np.array([6, 4, 2], np.int32)
NEGATIVES = np.array([[10, 9], [7, 8], [5, 6]], np.int32)
USERS = np.array([1, 2, 3], np.int32)
TRAIN = [np.array([1, 2, 3, 4, 6]), np.array([5, 6, 7, 8, 9, 2, 4]), np.array([2, 4, 6, 10])]
SIZES = {"hidden_size": 8, "max_len": 6, "num_heads": 2, "intermediate_size": 16, "num_layers": 1}


def outputs() -> dict:
    """Per registered family: its scores for `HISTORIES`, and its validation loss and gradient norms."""
    import keras
    import tensorflow as tf

    from bert4rec_tf.tasks import TASKS

    found = {}
    for name, task in sorted(TASKS.items()):
        kind = task.model_config
        sizes = {key: value for key, value in SIZES.items() if key in kind.keys()}
        keras.utils.set_random_seed(7)
        model = task.build_model(kind(name=name, vocab_size=12, num_users=3, **sizes))
        model.fit_statistics(TRAIN)
        users = {"users": USERS} if model.reads_users else {}
        record = {"scores": keras.ops.convert_to_numpy(model.score_next(HISTORIES, **users)).tolist()}
        features = task.loss_features(model, HISTORIES, TARGETS, NEGATIVES, USERS)
        if features is not None:
            with tf.GradientTape() as tape:
                loss = model.compute_loss(x=features, y_pred=model(features, training=False), training=False)
            gradients = tape.gradient(loss, model.trainable_variables)
            record["loss"] = float(loss)
            record["gradient_norms"] = {variable.path.split("/", 1)[1]: float(tf.norm(tf.convert_to_tensor(gradient)))
                                        for variable, gradient in zip(model.trainable_variables, gradients)
                                        if gradient is not None}
        found[name] = record
    return found


def test_without_features_every_family_computes_what_it_did_before():
    expected = json.loads(FIXTURE.read_text(encoding="utf-8"))
    got = outputs()
    assert sorted(got) == sorted(expected)
    for name, record in expected.items():
        np.testing.assert_allclose(got[name]["scores"], record["scores"], rtol=1e-5, atol=1e-6, err_msg=name)
        assert ("loss" in got[name]) == ("loss" in record), name
        if "loss" in record:
            np.testing.assert_allclose(got[name]["loss"], record["loss"], rtol=1e-5, err_msg=name)
            assert sorted(got[name]["gradient_norms"]) == sorted(record["gradient_norms"]), name
            # A gradient many orders below the family's largest (a key bias's, 1e-13) is rounding.
            floor = 1e-6 * max(record["gradient_norms"].values())
            for weight, norm in record["gradient_norms"].items():
                np.testing.assert_allclose(got[name]["gradient_norms"][weight], norm, rtol=1e-4, atol=floor,
                                           err_msg=f"{name}: {weight}")


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(outputs(), indent=1) + "\n", encoding="utf-8")
