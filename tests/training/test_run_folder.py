"""The run folder's checks that need no training: a resumed run whose attribute file changed names that
file, and a run of a model family that is not installed says so."""

from __future__ import annotations

import json
import re

import pytest

from bert4rec_tf.data.prepare import prepare
from bert4rec_tf.tasks import preset
from bert4rec_tf.training.run_folder import RunFolder
from tests.conftest import toy_sequences, write_pairs


def _config(items: str):
    config = preset("beauty", "sasrec")
    for key, value in {"max_len": 10, "item_features": items, "attributes_at_output": True}.items():
        config.override(key, value)
    return config


def _write_items(path, odd: str) -> str:
    path.write_text("item,parity\n" + "".join(f"{item},{odd if item % 2 else 'even'}\n" for item in range(1, 401)),
                    encoding="utf-8")
    return str(path)


def test_a_run_whose_attribute_file_changed_names_the_file(tmp_path):
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    items = _write_items(tmp_path / "items.csv", "odd")
    config = _config(items)
    run, trained = RunFolder(str(tmp_path / "run")), {"step": 5}
    prepared = prepare(config.data, str(tmp_path / "data"), source, progress=False)
    run.check(config, prepared, run.load_state())
    run.record(config, prepared)
    _write_items(tmp_path / "items.csv", "uneven")  # an edit, between two commands of the run
    config = _config(items)
    edited = prepare(config.data, str(tmp_path / "data"), source, progress=False)
    with pytest.raises(ValueError) as error:
        run.check(config, edited, trained)
    assert str(error.value).startswith(f"{run.directory} was trained on another version of the attribute file "
                                       f"{items} (--config item_features): its contents changed since (recorded file-")
    assert str(error.value).endswith("restore the file the run started with, or use a new --model_dir")
    # A run.json that does not record its attribute files: each is named as what may have changed.
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    del record["attribute_files"]
    (tmp_path / "run" / "run.json").write_text(json.dumps(record))
    with pytest.raises(ValueError) as error:
        run.check(config, edited, trained)
    assert re.fullmatch(r".* was trained on other prepared data of the same source file \(data_key \w+, this command "
                        rf"gives \w+\): restore whichever of its attribute files \({re.escape(items)}\) changed "
                        "since the run started, or use a new --model_dir", str(error.value))


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
