"""The run folder's checks that need no training: a run of a model family that is not installed says so."""

from __future__ import annotations

import json

import pytest

from bert4rec_tf.tasks import preset
from bert4rec_tf.training.run_folder import RunFolder


def test_a_run_of_a_family_that_is_not_installed_says_so(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    recorded = preset("beauty", "sasrec").to_dict()
    recorded["model"]["name"] = "bigram"  # a plugin's family, its package not installed here
    (folder / "config.json").write_text(json.dumps(recorded), encoding="utf-8")
    with pytest.raises(ValueError) as error:
        RunFolder(str(folder)).config()
    assert str(error.value) == (f"{folder / 'config.json'}: this run's model family 'bigram' is not installed: "
                                "install the package that registers it under the entry-point group bert4rec_tf.tasks")
