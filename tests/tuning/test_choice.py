"""A study's choice is a configuration (`best_config.json`) that `bert4rec-train --config_file` and
`api.train(config_file=...)` train as it is: the same configuration as its flag file for people
(`best.flags`) gives `bert4rec-train --flagfile`."""

from __future__ import annotations

import json

import optuna
import pytest
from absl import flags

from bert4rec_tf import api, cli
from bert4rec_tf.tasks.space import suggest
from bert4rec_tf.tuning.results import best_flags, chosen_config
from bert4rec_tf.tuning.settings import new_settings, searched, start_config


def _train_config(*arguments: str):
    values = flags.FlagValues()
    cli.define_common_flags(values)
    cli.define_train_flags(values)
    values(["train.py", *arguments])
    return cli.train_experiment(values)


@pytest.mark.parametrize("model, loss, overrides", [("sasrec", "bce", ["num_negatives=50"]), ("bpr_mf", None, []),
                                                    ("bert4rec", None, ["dupe_factor=2"])])
def test_the_choice_trains_from_its_configuration_as_from_its_flag_file(tmp_path, model, loss, overrides):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    settings = new_settings("beauty", model, loss, "cpu-1h", 3600.0, 600.0, overrides, seed=3)
    before = start_config(settings)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    sampled = suggest(searched(settings, before), study.ask(), before)
    trial = optuna.trial.create_trial(value=0.2, user_attrs={"settings": sampled})
    trial.number = 0
    (tmp_path / "best.flags").write_text(best_flags(settings, trial, [trial]), encoding="utf-8")
    (tmp_path / "best_config.json").write_text(json.dumps({"preset": model, "config": chosen_config(settings, trial)
                                                          .to_dict()}), encoding="utf-8")
    by_flags, preset, _, _ = _train_config(f"--flagfile={tmp_path / 'best.flags'}")
    by_file, preset_of_file, reason, model_dir = _train_config(f"--config_file={tmp_path / 'best_config.json'}")
    assert by_file.to_dict() == by_flags.to_dict() and preset_of_file == preset == model
    assert reason == f"recorded in {tmp_path / 'best_config.json'}"
    assert model_dir == ("runs/beauty" if model == "bert4rec" else f"runs/beauty-{model}")
    # Flags over the file set what they name, as over a preset.
    longer, *_ = _train_config(f"--config_file={tmp_path / 'best_config.json'}", "--time_budget=2h", "--seed=9")
    assert (longer.train.time_budget, longer.data.seed) == (7200.0, 9)
    with pytest.raises(ValueError, match=f"^--model ncf is not the one of --config_file .* \\({model}\\): leave "):
        _train_config(f"--config_file={tmp_path / 'best_config.json'}", "--model=ncf")
    with pytest.raises(ValueError, match="config_file .* trains beauty with recipe cpu-1h: give dataset 'beauty'"):
        api.train("ml-1m", str(tmp_path / "run"), config_file=str(tmp_path / "best_config.json"))


def test_a_file_that_is_not_a_configuration_is_one_line(tmp_path):
    (tmp_path / "x.json").write_text('{"config": {"model": {"name": "nosuch"}}}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"^--config_file .*x.json is not a configuration .*nosuch"):
        _train_config(f"--config_file={tmp_path / 'x.json'}")
    with pytest.raises(ValueError, match=r"^--config_file .*absent.json does not exist$"):
        _train_config(f"--config_file={tmp_path / 'absent.json'}")
    with pytest.raises(flags.IllegalFlagValueError, match="--dataset is required"):
        _train_config("--model=sasrec")
