"""Short-budget recipes resolve to the documented settings, and flags win over them."""

import pytest

from bert4rec_tf import cli
from bert4rec_tf.config import RECIPES, preset


@pytest.mark.parametrize("name, budget", [("cpu-30m", 1800.0), ("cpu-1h", 3600.0), ("cpu-2h", 7200.0)])
def test_ml1m_recipes_resolve_to_the_documented_settings(name, budget):
    config = cli.experiment_config("ml-1m", [], recipe=name)
    assert config.train.time_budget == budget
    assert (config.train.batch_size, config.train.learning_rate, config.train.dynamic_masking) == (128, 3e-3, True)
    assert (config.data.max_len, config.model.max_len, config.data.max_predictions_per_seq) == (100, 100, 20)
    assert config.model.hidden_dropout == 0.1
    assert config.train.warmup_steps == preset("ml-1m").train.warmup_steps == 100  # 500 lost on ML-1m's trials
    # The rest stays the paper's.
    paper = preset("ml-1m")
    assert (config.data.masked_lm_prob, config.model.hidden_size, config.model.attention_dropout) == (
        paper.data.masked_lm_prob, paper.model.hidden_size, paper.model.attention_dropout) == (0.2, 64, 0.2)


@pytest.mark.parametrize("dataset", ["beauty", "beauty-5core", "video-games", "custom"])
@pytest.mark.parametrize("name, budget", [("cpu-30m", 1800.0), ("cpu-1h", 3600.0), ("cpu-2h", 7200.0)])
def test_short_sequence_recipes_resolve_to_the_documented_settings(dataset, name, budget):
    config = cli.experiment_config(dataset, [], recipe=name)
    assert (config.data.max_len, config.train.batch_size, config.train.learning_rate) == (50, 128, 3e-3)
    assert (config.model.hidden_dropout, config.train.warmup_steps) == (0.2, 500)
    assert config.train.dynamic_masking and not config.data.static_instances and config.train.time_budget == budget
    # The rest stays the paper's (Beauty's preset).
    paper = preset(dataset)
    assert (config.data.masked_lm_prob, config.model.attention_dropout, config.model.hidden_size) == (
        paper.data.masked_lm_prob, paper.model.attention_dropout, paper.model.hidden_size) == (0.6, 0.2, 64)


@pytest.mark.parametrize("dataset", ["beauty", "custom"])
def test_the_matching_model_trains_at_5e_3_under_the_cpu_recipes_on_short_sequences(dataset):
    config = cli.experiment_config(dataset, [], model="bert4rec_match", recipe="cpu-30m")
    assert config.train.learning_rate == 5e-3
    assert (config.model.hidden_size, config.model.name, config.train.warmup_steps) == (32, "bert4rec_match", 500)
    assert cli.experiment_config(dataset, [], model="bert4rec", recipe="cpu-30m").train.learning_rate == 3e-3
    assert cli.experiment_config(dataset, [], model="bert4rec_match", recipe="paper").train.learning_rate == 1e-4
    assert cli.experiment_config("ml-1m", [], model="bert4rec_match", recipe="cpu-30m").train.learning_rate == 3e-3
    flagged = cli.experiment_config(dataset, ["learning_rate=1e-3"], model="bert4rec_match", recipe="cpu-30m")
    assert flagged.train.learning_rate == 1e-3


def test_paper_recipe_is_the_preset_and_flags_win_over_a_recipe():
    assert cli.experiment_config("ml-1m", [], recipe="paper") == preset("ml-1m")
    config = cli.experiment_config("ml-1m", ["learning_rate=5e-4", "time_budget=600", "max_len=200"],
                                   recipe="cpu-2h")
    assert (config.train.learning_rate, config.train.time_budget, config.data.max_len) == (5e-4, 600.0, 200)


def test_an_unknown_recipe_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown --recipe 'gpu'; known: " + ", ".join(RECIPES)):
        cli.experiment_config("ml-1m", [], recipe="gpu")
