"""TensorBoard extras: the heat maps without matplotlib, the flattened configuration."""

from __future__ import annotations

import sys

import numpy as np

from bert4rec_tf.config import preset
from bert4rec_tf.report_figures import attention_head_pixels
from bert4rec_tf.training.callbacks import CheckpointAndValidate
from bert4rec_tf.training.run_folder import RunFolder, fresh_state
from bert4rec_tf.training.summaries import hparam_values

MATRIX = np.linspace(0.0, 1.0, 100).reshape(10, 10)


def test_heat_maps_are_the_labelled_figure_and_bare_squares_without_matplotlib(tmp_path, monkeypatch, capsys):
    callback = CheckpointAndValidate(RunFolder(str(tmp_path)), None, None, fresh_state(), batch_size=1)
    labelled = callback._heat_map(MATRIX, "layer 1, head 1", "[mask]")
    assert labelled.shape == (1, 400, 460, 3) and labelled.dtype == np.uint8
    np.testing.assert_array_equal(labelled, attention_head_pixels(MATRIX, "layer 1, head 1"))
    assert capsys.readouterr().err == ""
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib now fails
    bare = [callback._heat_map(MATRIX, "layer 1, head 1", "[mask]") for _ in range(2)]
    assert all(image.shape == (1, 160, 160, 3) for image in bare)
    assert capsys.readouterr().err.count("matplotlib is not installed") == 1   # said once


def test_hparams_are_the_flattened_configuration():
    config = preset("ml-1m", "sasrec")
    values = hparam_values(config)
    assert values["model.name"] == "sasrec" and values["data.max_len"] == 200
    assert values["train.learning_rate"] == 1e-3 and values["data.static_instances"] is False
    assert len(values) == sum(len(section) for section in config.to_dict().values())
