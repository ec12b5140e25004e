"""The experiments' plans: their runs and flags, the settings that bind a run, and the flags derived
from what they resolve to (bert4rec_tf/experiments/plans.py)."""

from __future__ import annotations

import pytest

from bert4rec_tf.experiments.plans import derived_flags, plan, run_settings


def test_ablation_and_sweep_plans():
    ablation = {run.setting: run for run in plan("ablation", ["ml-1m"])}
    assert len(ablation) == 14
    assert ablation["ablation-no-pe"].flags == ("--config", "use_position_embedding=false")
    assert ablation["ablation-no-dropout"].flags == ("--config", "hidden_dropout=0", "--config", "attention_dropout=0")
    assert ablation["ablation-heads-8"].flags == ("--config", "num_heads=8")
    assert ablation["ablation-only-matching"].model == "bert4rec_match"
    rho = plan("mask_proportion", ["beauty"])
    assert [run.value for run in rho] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert rho[0].flags == ("--config", "masked_lm_prob=0.1") and rho[0].rho == 0.1  # slots: derived_flags
    assert [run.value for run in plan("max_len", ["ml-1m"])] == [10, 50, 100, 200, 400]
    assert plan("max_len", ["ml-1m"])[-1].flags == ("--max_len", "400", "--config", "max_predictions_per_seq=80")
    assert [run.value for run in plan("hidden_size", ["beauty"])] == [16, 32, 64, 128, 256]
    with pytest.raises(ValueError, match="unknown experiment 'table9'"):
        plan("table9", ["ml-1m"])


def test_the_sweep_of_rho_is_not_named_after_the_configs_mask_prob():
    """The sweep of the mask proportion rho (`data.masked_lm_prob`) was called `mask_prob`, the name of
    the config's rate at which a chosen item becomes [mask]: the old name says the new one."""
    with pytest.raises(ValueError, match="experiment 'mask_prob' is now 'mask_proportion'"):
        plan("mask_prob", ["ml-1m"])


def test_run_settings_leave_out_local_paths_only():
    flags = ["--dataset", "ml-1m", "--model_dir", "/a/runs/x", "--seed", "1", "--data_dir", "/d",
             "--source_file", "/s.txt", "--time_budget", "1h", "--config", "model_dir_note=1"]
    assert run_settings(flags) == ["--dataset", "ml-1m", "--seed", "1", "--time_budget", "1h",
                                   "--config", "model_dir_note=1"]


def test_derived_flags_follow_the_resolved_length_and_learning_rate():
    """The mask sweep's slots are sized from the N the recipe and flags resolve to, and the no-residual
    run's rate is capped at 1e-3 only where the resolved rate is above it; --extra still overrides."""
    base = ["--dataset", "ml-1m", "--model", "bert4rec", "--seed", "12345", "--recipe"]
    rho = plan("mask_proportion", ["ml-1m", "beauty"])
    assert derived_flags(_run(rho, "ml-1m", 0.2), [*base, "cpu-30m", "--config", "masked_lm_prob=0.2"]) == [
        "--config", "max_predictions_per_seq=20"]  # cpu-30m trains N 100 on ML-1m
    assert derived_flags(_run(rho, "ml-1m", 0.2), [*base, "paper"]) == ["--config", "max_predictions_per_seq=40"]
    assert derived_flags(_run(rho, "ml-1m", 0.3), [*base, "cpu-30m", "--max_len", "50"]) == [
        "--config", "max_predictions_per_seq=15"]
    beauty = [*base[:1], "beauty", *base[2:], "cpu-30m"]
    assert derived_flags(_run(rho, "beauty", 0.1), beauty) == ["--config", "max_predictions_per_seq=5"]
    residual = next(run for run in plan("ablation", ["ml-1m"]) if run.setting == "ablation-no-residual")
    assert derived_flags(residual, [*base, "cpu-1h"]) == ["--learning_rate", "0.001"]  # the recipe's 3e-3
    assert derived_flags(residual, [*base, "paper"]) == []  # 1e-4 is below the cap
    assert derived_flags(residual, [*base, "cpu-1h"], ["--learning_rate", "0.0005"]) == []  # --extra's rate
    # --extra flags that cannot be read (train.py checks them) are left out; the plan's own are kept.
    assert derived_flags(residual, [*base, "cpu-1h"], ["--debug"]) == ["--learning_rate", "0.001"]
    assert derived_flags(_run(rho, "ml-1m", 0.2), [*base, "cpu-30m"], ["--max_len", "50", "--debug"]) == [
        "--config", "max_predictions_per_seq=20"]
    widths = {run.value: run for run in plan("hidden_size", ["ml-1m"])}
    assert derived_flags(widths[256], [*base, "cpu-30m"]) == ["--learning_rate", "0.001"]
    assert derived_flags(widths[128], [*base, "cpu-30m"]) == []  # learns at the recipe's 3e-3
    assert derived_flags(widths[256], [*base, "paper"]) == []
    default = next(run for run in plan("ablation", ["ml-1m"]) if run.setting == "ablation-default")
    assert derived_flags(default, [*base, "cpu-1h"]) == []
    with pytest.raises(ValueError, match="run ml-1m-ablation-no-residual: cannot resolve"):
        derived_flags(residual, [*base, "cpu-1h", "--no_such_flag", "1"])


def _run(runs, dataset, rho):
    return next(run for run in runs if run.dataset == dataset and run.value == rho)

