"""Search spaces and the study's bookkeeping, without training: every preset's space is made of
settings its family has, the sampled and derived values are what the space says, a retried trial's
time is counted once, a study folder is bound to its study and keeps its warm-up rule, a trial in
its warm-up is stopped unless its study is of the rule that spared it, and best.flags is a flag
file that `bert4rec-train` takes."""

from __future__ import annotations

import dataclasses
import json

import optuna
import pytest

from bert4rec_tf import cli
from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.constants import SELECTION_METRIC
from bert4rec_tf.training import trainer
from bert4rec_tf.tasks import TASKS, preset_names, task_of_preset
from bert4rec_tf.tuning.binding import bind, load_settings
from bert4rec_tf.tuning.objective import make_objective
from bert4rec_tf.tuning.results import best_flags
from bert4rec_tf.tuning.settings import base_overrides, new_settings, searched, start_config, starting_point_of
from bert4rec_tf.tuning.trials import spent_seconds
from bert4rec_tf.tasks.space import Choice, Derived, Float, Int, around, check_space, starting_point, suggest


@pytest.mark.parametrize("model", preset_names())
def test_every_space_names_settings_of_its_family(model):
    task = task_of_preset(model)
    space = task.search_space(model)
    check_space(space, ExperimentConfig.for_family(task.name))
    if task.trains:
        assert "learning_rate" in space
    else:
        assert space == {}


def test_check_space_refuses_a_setting_the_family_lacks():
    with pytest.raises(ValueError, match="search space of bpr_mf names 'masked_lm_prob'"):
        check_space({"masked_lm_prob": Choice((0.2,))}, ExperimentConfig.for_family("bpr_mf"))


def test_sampled_and_derived_values():
    space = {"hidden_size": Choice((16, 64)), "learning_rate": Float(1e-4, 1e-2, log=True), "num_layers": Int(1, 3),
             "intermediate_size": Derived(lambda sampled, config: 4 * sampled["hidden_size"])}
    trial = optuna.trial.FixedTrial({"hidden_size": 64, "learning_rate": 3e-3, "num_layers": 2})
    assert suggest(space, trial, None) == {"hidden_size": 64, "learning_rate": 3e-3, "num_layers": 2,
                                           "intermediate_size": 256}


def test_bert4rec_masks_follow_rho_and_the_one_mask_preset_keeps_its_slot():
    config = cli.experiment_config("beauty", [], model="bert4rec", recipe="cpu-30m")  # N 50
    trial = optuna.trial.FixedTrial({"masked_lm_prob": 0.4, "hidden_size": 32, "hidden_dropout": 0.1,
                                     "learning_rate": 1e-3})
    values = suggest(TASKS["bert4rec"].search_space("bert4rec"), trial, config)
    assert values["max_predictions_per_seq"] == 20 and values["intermediate_size"] == 128
    one_mask = TASKS["bert4rec"].search_space("bert4rec_1mask")
    assert "masked_lm_prob" not in one_mask and "max_predictions_per_seq" not in one_mask


def test_sampled_settings_make_valid_configurations():
    """Any draw of every family's space is a configuration the command line accepts."""
    for model in preset_names():
        task = task_of_preset(model)
        space = task.search_space(model)
        if not space:
            continue
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        for _ in range(5):
            trial = study.ask()
            before = cli.experiment_config("beauty", ["time_budget=60"], model=model, recipe="cpu-30m")
            values = suggest(space, trial, before)
            cli.experiment_config("beauty", ["time_budget=60", *(f"{k}={v}" for k, v in values.items())],
                                  model=model, recipe="cpu-30m")
            study.tell(trial, 0.0)


def test_a_model_with_nothing_to_tune_and_budgets_are_refused():
    with pytest.raises(ValueError, match="pop has nothing to tune"):
        new_settings("beauty", "pop", None, "cpu-30m", 600, 60)
    with pytest.raises(ValueError, match="must hold at least one --trial_budget"):
        new_settings("beauty", "bpr_mf", None, "cpu-30m", 30, 60)


def test_a_trial_trains_the_first_trial_budget_of_the_test_runs_schedule():
    # The recipe's hour (the test run's) by default; a given schedule; a recipe budget overridden.
    for schedule, extra, expected in ((None, [], 3600.0), (1800.0, [], 1800.0), (None, ["time_budget=1200"], 1200.0)):
        settings = new_settings("ml-1m", "bpr_mf", None, "cpu-1h", 3600, 600, extra, schedule_budget=schedule)
        assert settings.schedule_budget == expected
        config = cli.experiment_config("ml-1m", base_overrides(settings), model="bpr_mf", recipe="cpu-1h")
        assert (config.train.time_budget, config.train.stop_after) == (expected, 600.0)
    # A schedule as long as the trial: the trial's own time budget, nothing cut.
    settings = new_settings("ml-1m", "bpr_mf", None, "cpu-1h", 3600, 600, schedule_budget=600)
    config = cli.experiment_config("ml-1m", base_overrides(settings), model="bpr_mf", recipe="cpu-1h")
    assert (config.train.time_budget, config.train.stop_after) == (600.0, 0.0)
    with pytest.raises(ValueError, match=r"--schedule_budget \(5 minutes\) must be at least the --trial_budget"):
        new_settings("ml-1m", "bpr_mf", None, "cpu-1h", 3600, 600, schedule_budget=300)


def _frozen(number: int, seconds: float, state=optuna.trial.TrialState.COMPLETE, original: int | None = None):
    trial = optuna.trial.create_trial(state=state, value=0.1 if state == optuna.trial.TrialState.COMPLETE else None,
                                      user_attrs={"seconds": seconds},
                                      system_attrs={} if original is None else {"failed_trial": original})
    trial.number = number
    return trial


def test_a_retried_trial_is_counted_once():
    fail = optuna.trial.TrialState.FAIL
    trials = [_frozen(0, 60.0), _frozen(1, 25.0, fail), _frozen(2, 60.0, original=1), _frozen(3, 10.0, fail)]
    assert spent_seconds(trials) == 60.0 + 60.0 + 10.0


def test_a_study_folder_is_bound_to_its_study(tmp_path):
    settings = new_settings("beauty", "bpr_mf", None, "cpu-30m", 600, 60)
    bind(str(tmp_path), settings)
    bind(str(tmp_path), new_settings("beauty", "bpr_mf", None, "cpu-30m", 1200, 60))  # tunes on
    with pytest.raises(ValueError, match="holds another study: its trial_budget is 60.0"):
        bind(str(tmp_path), new_settings("beauty", "bpr_mf", None, "cpu-30m", 1200, 120))
    with pytest.raises(ValueError, match="holds another study: its schedule_budget is 1800.0"):
        bind(str(tmp_path), new_settings("beauty", "bpr_mf", None, "cpu-30m", 1200, 60,
                                                       schedule_budget=3600))


def test_a_study_keeps_the_warm_up_rule_it_was_made_with(tmp_path):
    settings = new_settings("beauty", "bpr_mf", None, "cpu-30m", 600, 60)
    assert bind(str(tmp_path / "new"), settings).stop_in_warmup  # a new study judges warming trials
    older = tmp_path / "older"
    bind(str(older), settings)
    recorded = json.load(open(older / "study.json"))
    del recorded["stop_in_warmup"]  # as a study made before the field was
    json.dump(recorded, open(older / "study.json", "w"))
    bound = bind(str(older), settings)
    assert not bound.stop_in_warmup and not json.load(open(older / "study.json"))["stop_in_warmup"]
    assert not load_settings(str(older)).stop_in_warmup


class _Stop(Exception):
    pass


class _AlwaysPrune(optuna.pruners.BasePruner):
    def prune(self, study, trial) -> bool:
        return True


@pytest.mark.parametrize("stop_in_warmup", [True, False])
def test_a_trial_in_its_warm_up_is_stopped_unless_its_study_spares_it(tmp_path, monkeypatch, stop_in_warmup):
    settings = dataclasses.replace(
        new_settings("beauty", "bpr_mf", None, "cpu-30m", 600, 60, ["warmup_steps=100"]),
        stop_in_warmup=stop_in_warmup)
    decisions = []

    def train(config, folder, data_dir, source_file, on_validation, **kwargs):
        for step in (50, 100, 150):  # the pruner would stop the trial at each of these validations
            point = {"step": step, "seconds": step / 10, "/".join(SELECTION_METRIC): 0.1}
            decisions.append((step, on_validation(point)))
        raise _Stop

    monkeypatch.setattr(trainer, "train_and_evaluate", train)
    study = optuna.create_study(direction="maximize", pruner=_AlwaysPrune())
    with pytest.raises(_Stop):
        make_objective(str(tmp_path), settings, None, None, None)(study.ask())
    assert decisions == [(50, stop_in_warmup), (100, stop_in_warmup), (150, True)]


def test_best_flags_are_a_flag_file_of_bert4rec_train(tmp_path):
    settings = new_settings("ml-1m", "sasrec", "ce", "cpu-1h", 600, 60, ["num_negatives=50"])
    trial = optuna.trial.create_trial(value=0.25, user_attrs={"settings": {"hidden_size": 64, "learning_rate": 0.002}})
    trial.number = 0
    path = tmp_path / "best.flags"
    path.write_text(best_flags(settings, trial, [trial]))
    cli.check_train_flags([f"--flagfile={path}"])
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# bert4rec-tune ml-1m-sasrec-ce: trial 0 of 1, best validation pop/NDCG@10 0.2500 in 1 minute of a 1 hour schedule")
    assert lines[1:] == ["--dataset=ml-1m", "--model=sasrec", "--recipe=cpu-1h", "--loss=ce",
                         "--config=num_negatives=50", "--config=hidden_size=64", "--config=learning_rate=0.002"]


def test_every_grid_holds_the_recipes_own_value_and_the_start_is_the_recipe():
    """Caser's recipe d 50 is not in the paper's grid: the study's grid gets it, and the first trial's
    settings are the recipe's; where a derived rule gives another value than the recipe, it is named."""
    caser = cli.experiment_config("ml-1m", [], model="caser", recipe="cpu-1h")
    space = around(TASKS["caser"].search_space("caser"), caser)
    assert space["hidden_size"].values == (16, 32, 50, 64, 128, 256)
    assert TASKS["caser"].search_space("caser")["hidden_size"].values == (16, 32, 64, 128, 256)  # declared as is
    params, differs = starting_point(space, caser)
    assert params["hidden_size"] == 50 and params["max_len"] == caser.data.max_len and differs == {}
    assert cli.experiment_config("ml-1m", [f"{key}={value}" for key, value in params.items()], model="caser",
                                 recipe="cpu-1h").to_dict() == caser.to_dict()
    wide = cli.experiment_config("ml-1m", ["intermediate_size=100"], model="bert4rec", recipe="cpu-1h")
    params, differs = starting_point(around(TASKS["bert4rec"].search_space("bert4rec"), wide), wide)
    assert differs == {"intermediate_size": (100, 4 * params["hidden_size"])}
    narrow = {"learning_rate": Float(1e-4, 1e-3), "hidden_size": Choice((16, 64))}
    params, differs = starting_point(around(narrow, wide), wide)  # the recipe's 3e-3 is outside the range
    assert params == {"hidden_size": 64} and differs == {"learning_rate": (3e-3, None)}


def test_a_setting_fixed_by_config_is_not_searched():
    """`--config learning_rate=1e-3` trains every trial at 1e-3 (the sampled rate came after it and won);
    a derived key follows a fixed one, and a derived key fixed itself stays as given."""
    settings = new_settings("ml-1m", "bert4rec", None, "cpu-1h", 600, 60,
                                   overrides=["learning_rate=1e-3", "model.hidden_size=32"])
    assert "learning_rate" not in settings.space and "hidden_size" not in settings.space
    assert settings.space["intermediate_size"] == "4d" and "masked_lm_prob" in settings.space
    config = start_config(settings)
    space = searched(settings, config)
    trial = optuna.trial.FixedTrial({"masked_lm_prob": 0.4, "hidden_dropout": 0.1})
    assert suggest(space, trial, config) == {"masked_lm_prob": 0.4, "max_predictions_per_seq": 40,
                                             "hidden_dropout": 0.1, "intermediate_size": 128}
    params, differs = starting_point_of(settings)
    assert params == {"masked_lm_prob": 0.2, "hidden_dropout": 0.1} and differs == {"intermediate_size": (256, 128)}
    wide = new_settings("ml-1m", "bert4rec", None, "cpu-1h", 600, 60, overrides=["intermediate_size=100"])
    assert "intermediate_size" not in wide.space and "hidden_size" in wide.space
    with pytest.raises(ValueError, match="--config fixes every setting bpr_mf searches"):
        new_settings("ml-1m", "bpr_mf", None, "cpu-1h", 600, 60,
                            overrides=["hidden_size=32", "l2=0.01", "train_negatives=1", "learning_rate=1e-3",
                                       "batch_size=256"])
