"""Short-budget recipes resolve to the documented settings, flags win over them, and a command without
--recipe trains with the CPU recipe unless a GPU is present or the run records another."""

import os
import subprocess
import sys

import pytest

from bert4rec_tf import cli
from bert4rec_tf.config import RECIPES
from bert4rec_tf.files import read_json, write_json_atomic
from bert4rec_tf.tasks import preset
from tests.conftest import REPO, toy_sequences, write_pairs
from tests.training.test_bad_runs import TINY


@pytest.mark.parametrize("name, budget", [("cpu-30m", 1800.0), ("cpu-1h", 3600.0), ("cpu-2h", 7200.0)])
def test_ml1m_recipes_resolve_to_the_documented_settings(name, budget):
    config = cli.experiment_config("ml-1m", [], recipe=name)
    assert config.train.time_budget == budget
    assert (config.train.batch_size, config.train.learning_rate, config.train.dynamic_masking) == (128, 3e-3, True)
    assert (config.data.max_len, config.model.max_len, config.data.max_predictions_per_seq) == (100, 100, 20)
    assert config.model.hidden_dropout == 0.1
    assert config.train.warmup_steps == preset("ml-1m").train.warmup_steps == 100  # 500 lost on ML-1m's trials
    assert config.train.valid_users == 0  # ML-1m's 6,040 users validate in full
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
    assert config.train.valid_users == 10_000 and config.train.eval_users == 0  # validation sampled, test in full
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


@pytest.mark.parametrize("recipe", list(RECIPES))
@pytest.mark.parametrize("dataset", ["ml-1m", "ml-20m", "beauty", "steam", "custom"])
def test_no_recipe_changes_what_defines_a_model(dataset, recipe):
    """A recipe tunes a model's training, never what makes it the model: the ML-1m recipes' 20 masked
    slots once turned BERT4Rec (1 mask) into BERT4Rec."""
    one_mask = cli.experiment_config(dataset, [], model="bert4rec_1mask", recipe=recipe)
    assert one_mask.data.max_predictions_per_seq == 1
    assert one_mask.model.name == "bert4rec"
    match = cli.experiment_config(dataset, [], model="bert4rec_match", recipe=recipe)
    assert (match.model.name, match.model.hidden_size, match.data.matching, match.data.mask_runs) == (
        "bert4rec_match", 32, True, True)
    assert cli.experiment_config(dataset, [], model="sasrec", recipe=recipe).model.name == "sasrec"
    assert cli.experiment_config(dataset, [], model="pop", recipe=recipe).model.name == "pop"
    # and the ordinary model keeps the recipe's slots
    bert4rec = cli.experiment_config(dataset, [], model="bert4rec", recipe=recipe)
    assert bert4rec.data.max_predictions_per_seq == (20 if dataset == "ml-1m" and recipe != "paper"
                                                     else preset(dataset).data.max_predictions_per_seq)


def test_paper_recipe_is_the_preset_and_flags_win_over_a_recipe():
    assert cli.experiment_config("ml-1m", [], recipe="paper") == preset("ml-1m")
    config = cli.experiment_config("ml-1m", ["learning_rate=5e-4", "time_budget=600", "max_len=200"],
                                   recipe="cpu-2h")
    assert (config.train.learning_rate, config.train.time_budget, config.data.max_len) == (5e-4, 600.0, 200)


def test_an_unknown_recipe_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="unknown --recipe 'gpu'; known: " + ", ".join(RECIPES)):
        cli.experiment_config("ml-1m", [], recipe="gpu")


@pytest.mark.parametrize("dataset", ["beauty", "custom", "ml-1m"])
def test_the_default_recipe_is_the_cpu_one_without_a_gpu_and_the_paper_with_one(dataset, tmp_path, monkeypatch):
    model_dir = str(tmp_path / "run")
    monkeypatch.setattr(cli, "gpu_available", lambda: False)
    assert cli.default_recipe(dataset, "bert4rec", model_dir) == ("cpu-30m", "the default without a GPU")
    monkeypatch.setattr(cli, "gpu_available", lambda: True)
    assert cli.default_recipe(dataset, "bert4rec", model_dir) == ("paper", "the default with a GPU")


def test_a_resumed_run_keeps_the_recipe_its_config_records(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "gpu_available", lambda: False)
    model_dir = tmp_path / "run"
    (model_dir / "checkpoints").mkdir(parents=True)
    write_json_atomic(model_dir / "config.json", cli.experiment_config("beauty", [], recipe="paper").to_dict())
    # Before its first checkpoint a folder binds nothing: the machine's default.
    assert cli.default_recipe("beauty", "bert4rec", str(model_dir))[0] == "cpu-30m"
    write_json_atomic(model_dir / "checkpoints" / "state.json", {"step": 5})
    assert cli.default_recipe("beauty", "bert4rec", str(model_dir)) == (
        "paper", f"recorded in {model_dir / 'config.json'}: the run goes on as it started")


def test_the_recipe_line_says_which_recipe_the_budget_and_the_papers_setup():
    config = cli.experiment_config("beauty", [], recipe="cpu-30m")
    assert config.train.recipe == "cpu-30m"
    assert cli.recipe_notice(config, "bert4rec", "the default without a GPU") == (
        "recipe cpu-30m (the default without a GPU): trains for 30 minutes, then tests and exports; "
        "--recipe paper for the paper's setup (400,000 steps at learning rate 1e-4: days on a CPU)")
    config = cli.experiment_config("beauty", [], recipe="paper")
    assert cli.recipe_notice(config, "bert4rec", "the default with a GPU") == (
        "recipe paper (the default with a GPU): trains 400,000 steps at learning rate 1e-4; "
        "--recipe cpu-30m for 30 minutes on a CPU")
    # Flags over the recipe show in the line: a longer budget.
    config = cli.experiment_config("beauty", ["time_budget=5400"], recipe="cpu-30m")
    assert "trains for 1h30m, then" in cli.recipe_notice(config, "bert4rec", "given")


def test_the_recipe_is_chosen_with_its_flag_not_an_override():
    with pytest.raises(ValueError, match="--config recipe records the recipe of a run: choose it with --recipe"):
        cli.experiment_config("beauty", ["recipe=cpu-1h"])


@pytest.mark.slow
def test_train_without_a_recipe_says_which_it_uses_and_records_it(tmp_path):
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    model_dir = str(tmp_path / "run")
    args = [sys.executable, os.path.join(REPO, "run_scripts", "train.py"), "--dataset", "beauty", "--source_file",
            source, "--data_dir", str(tmp_path / "data"), "--model_dir", model_dir, "--time_budget", "3s",
            "--eval_every", "20", *TINY]
    environment = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU, whatever the machine has
    first = subprocess.run(args, capture_output=True, text=True, timeout=600, env=environment)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.splitlines()[0] == (
        "recipe cpu-30m (the default without a GPU): trains for 3 seconds, then tests and exports; "
        "--recipe paper for the paper's setup (400,000 steps at learning rate 1e-4: days on a CPU)")
    recorded = read_json(os.path.join(model_dir, "config.json"))["train"]
    assert (recorded["recipe"], recorded["dynamic_masking"], recorded["warmup_steps"]) == ("cpu-30m", True, 500)
    # Run again, the folder's recipe is kept and said so.
    again = subprocess.run(args, capture_output=True, text=True, timeout=600, env=environment)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.splitlines()[0].startswith(
        f"recipe cpu-30m (recorded in {os.path.join(model_dir, 'config.json')}: the run goes on as it started)")


@pytest.mark.parametrize("model, flag", [("pop", "learning_rate=0.5"), ("bpr_mf", "max_len=30"),
                                         ("pop", "batch_size=64"), ("ncf", "prop_sliding_window=0.3")])
def test_a_family_refuses_a_shared_setting_it_has_no_use_for(model, flag):
    """POP trains nothing, so it takes no optimiser setting; BPR-MF and NCF read no history, so they
    take no window setting: the value would be recorded and change nothing."""
    with pytest.raises(ValueError, match=f"{model} has no setting '{flag.split('=')[0]}'"):
        cli.experiment_config("ml-1m", [flag], model=model)
