"""TensorBoard extras: the heat maps without matplotlib, the flattened configuration."""

from __future__ import annotations

import glob
import os
import sys

import numpy as np

from bert4rec_tf.evaluation.attention_plot import attention_head_pixels
from bert4rec_tf.tasks import preset
from bert4rec_tf.training.callbacks import CheckpointAndValidate
from bert4rec_tf.training.run_folder import RunFolder, fresh_state
from bert4rec_tf.training.summaries import hparam_values, write_results, write_run_summaries
from tests.conftest import event_values

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
    assert values["train.learning_rate"] == 1e-3 and "data.static_instances" not in values
    assert len(values) == sum(len(section) for section in config.to_dict().values()) + 1
    assert values["loss_note"] == ""  # the paper's loss
    config.model.loss, config.model.sampled_negatives = "sampled_softmax", 512
    assert hparam_values(config)["loss_note"] == "sampled softmax over 512 negatives (not the paper's loss)"


def test_a_resumed_run_starts_its_hparams_session_anew(tmp_path):
    from tensorboard.plugins.hparams import metadata

    run = str(tmp_path / "run")
    config = preset("beauty")
    config.train.train_steps = 20
    write_run_summaries(run, config)
    write_results(run, {"pop": {"HR@10": 0.5}}, None, step=20)
    config.train.train_steps = 30   # resumed with more steps
    write_run_summaries(run, config, step=20)
    files = glob.glob(os.path.join(run, "results", "events.*"))
    starts = [value for path in files for _, value in event_values(path)
              if value.tag == metadata.SESSION_START_INFO_TAG]
    assert len(files) == len(starts) == 1
    session = metadata.parse_session_start_info_plugin_data(starts[0].metadata.plugin_data.content)
    assert session.hparams["train.train_steps"].number_value == 30 and session.group_name == "run"
    assert len(glob.glob(os.path.join(run, "events.*"))) == 2   # the configuration text of both starts
