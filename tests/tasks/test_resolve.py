"""The one resolver of an experiment: a tuning trial's settings set on the resolved configuration as
typed values give the configuration that the same settings given as `--config key=value` flags give."""

from __future__ import annotations

import optuna
import pytest

from bert4rec_tf.tasks import preset_names, task_of_preset
from bert4rec_tf.tasks.resolve import experiment_config, with_settings
from bert4rec_tf.tasks.space import suggest
from bert4rec_tf.tuning.settings import base_overrides, new_settings, searched, start_config

TUNED = [model for model in preset_names() if task_of_preset(model).search_space(model)]


def _outcome(build):
    try:
        return build().to_dict()
    except ValueError as error:  # a draw the family refuses is refused the same way on both paths
        return str(error)


@pytest.mark.parametrize("model", TUNED)
def test_typed_settings_give_the_configuration_of_their_flags(model):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    settings = new_settings("beauty", model, None, "cpu-30m", 3600.0, 600.0, [], seed=7)
    before = start_config(settings)
    space = searched(settings, before)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(8):
        sampled = suggest(space, study.ask(), before)
        flags = [*base_overrides(settings), *(f"{key}={value}" for key, value in sampled.items())]
        typed = _outcome(lambda: with_settings(before, sampled, model))
        assert typed == _outcome(lambda: experiment_config("beauty", flags, 7, model, "cpu-30m"))
        assert isinstance(typed, dict)  # the draws of a family's space make valid configurations
    assert before.to_dict() == start_config(settings).to_dict()  # the resolved configuration is not changed


def test_a_setting_the_family_lacks_is_refused_naming_it():
    config = experiment_config("beauty", [], None, "bpr_mf", "cpu-30m")
    with pytest.raises(ValueError, match="bpr_mf has no setting 'num_layers'"):
        with_settings(config, {"num_layers": 3}, "bpr_mf")
