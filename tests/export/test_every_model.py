"""Every model exports the same SavedModel: three signatures, answered in a fresh process without
bert4rec_tf, equal to the Keras model's `score_next` and `user_representation` (of users "u1" and
"u2", model user ids 1 and 2, for a model that reads users).

One fresh process loads every model's export: starting a process that imports TensorFlow is most of
this test's time, more so on slow machines."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import family_config
from bert4rec_tf.constants import vocab_size
from bert4rec_tf.export.saved_model import export_saved_model
from bert4rec_tf.tasks import TASKS
from tests.export.conftest import WITHOUT_PACKAGE

# Builds, exports and serves every model in a fresh process: a slow check.
pytestmark = pytest.mark.slow

ITEMS = [f"i{k}" for k in range(1, 21)]
HISTORIES = [["i1", "", "i2", "nope", "i3"], ["", "", "", "", "i7"]]
USERS = ["u1", "u2"]
# Every model, and the Transformer models again with their blocks on the real positions only
# (`model.padding_free` "on").
NAMES = sorted(TASKS) + ["bert4rec:padding_free", "sasrec:padding_free"]

# argv: a JSON object {name: export folder}, the histories; prints {name: what the export answered}.
LOADER = WITHOUT_PACKAGE + r"""
history = tf.constant(json.loads(sys.argv[2]))
answers = {}
for name, directory in json.loads(sys.argv[1]).items():
    loaded = tf.saved_model.load(directory)
    by_user = {}
    if "user" in loaded.signatures["serving_default"].structured_input_signature[1]:
        by_user = {"user": tf.constant(json.loads(sys.argv[3]))}
    top = loaded.signatures["serving_default"](history=history, **by_user)
    scored = loaded.signatures["score_candidates"](history=history,
                                                   candidates=tf.constant([["i4", "i5"], ["i6", "i1"]]), **by_user)
    user = loaded.signatures["user_embedding"](history=history, **by_user)
    answers[name] = {"signatures": sorted(loaded.signatures.keys()),
                     "item_ids": [[x.decode() for x in row] for row in top["item_ids"].numpy()],
                     "scores": scored["scores"].numpy().tolist(), "embedding": user["embedding"].numpy().tolist(),
                     "dtype": user["embedding"].dtype.name}
print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """{name: (Keras model, what a fresh process got from its export)} for every registered model."""
    models, directories = {}, {}
    for name in NAMES:
        family, _, packed = name.partition(":")
        config = family_config(name=family, vocab_size=vocab_size(len(ITEMS)), max_len=5, hidden_size=8, num_heads=2,
                             intermediate_size=16, num_layers=1, loss=TASKS[family].losses[0], num_users=len(USERS),
                             padding_free="on" if packed else "auto")
        models[name] = TASKS[family].build_model(config)
        models[name].fit_statistics([np.arange(1, 21) % 7 + 1, np.arange(1, 5)])
        directories[name] = export_saved_model(models[name], np.array(ITEMS),
                                               str(tmp_path_factory.mktemp(name.replace(":", "-")) / "export"),
                                               user_ids=np.array(USERS))
    result = subprocess.run([sys.executable, "-c", LOADER, json.dumps(directories), json.dumps(HISTORIES),
                             json.dumps(USERS)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    return {name: (models[name], answers[name]) for name in models}


@pytest.mark.parametrize("name", NAMES)
def test_model_serves_three_signatures_from_a_fresh_process(name, served):
    model, out = served[name]
    assert out["signatures"] == ["score_candidates", "serving_default", "user_embedding"]
    history = np.array([[1, 0, 2, 0, 3], [0, 0, 0, 0, 7]])
    users = {"users": np.array([1, 2])} if model.reads_users else {}
    scores = np.asarray(model.score_next(history, **users))
    np.testing.assert_allclose(out["scores"], [scores[0, [4, 5]], scores[1, [6, 1]]], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out["embedding"], np.asarray(model.user_representation(history, **users)), rtol=1e-5,
                               atol=1e-5)
    assert out["dtype"] == "float32"
    assert not {"i1", "i2", "i3"} & set(out["item_ids"][0]) and "i7" not in out["item_ids"][1]
    assert getattr(model, "pack_positions", False) is name.endswith(":padding_free")
