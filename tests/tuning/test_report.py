"""The study's figures draw each trial's whole validation curve from its run folder, the warm-up's
validations included, beside the points the pruner judged it on."""

from __future__ import annotations

import json

import optuna

from bert4rec_tf.tuning.report import _curve, judged_seconds, write_report
from bert4rec_tf.tuning.rungs import rung_seconds
from bert4rec_tf.tuning.settings import new_settings

METRIC = "pop/NDCG@10"


def _trial(folder: str, state, reports: dict[int, float], value: float | None = None):
    return optuna.trial.create_trial(state=state, value=value, params={}, distributions={},
                                     user_attrs={"folder": folder}, intermediate_values=reports)


def test_a_trials_curve_is_its_best_so_far_at_every_validation_warm_up_included(tmp_path):
    (tmp_path / "trials" / "0000").mkdir(parents=True)
    curve = [{"step": 100, "seconds": 3.0, METRIC: 0.2}, {"step": 200, "seconds": 6.5, METRIC: 0.1},
             {"step": 600, "seconds": 20.0, METRIC: float("nan")}, {"step": 700, "seconds": 24.0, METRIC: 0.4}]
    (tmp_path / "trials" / "0000" / "validation.json").write_text(json.dumps(curve))
    done = _trial("trials/0000", optuna.trial.TrialState.COMPLETE, {24: 0.4}, 0.4)
    assert _curve(str(tmp_path), done, METRIC) == ([3.0, 6.5, 24.0], [0.2, 0.2, 0.4])
    # Without its folder (a study moved without its trials): the reports alone.
    lost = _trial("trials/0001", optuna.trial.TrialState.PRUNED, {9: 0.3, 4: 0.1})
    assert _curve(str(tmp_path), lost, METRIC) == ([4, 9], [0.1, 0.3])

    study = optuna.create_study(direction="maximize")
    study.add_trial(done)
    study.add_trial(lost)
    paths = write_report(str(tmp_path), study, [66, 198, 594])
    assert [path.rsplit("/", 1)[-1] for path in paths] == ["tuning.png"]  # one completed trial: no importance


def test_a_trial_is_judged_at_each_rung_on_its_first_report_there():
    rungs = [66, 198, 594]
    assert judged_seconds({30: 0.1, 70: 0.2, 150: 0.3, 250: 0.4}, rungs) == [70, 250]  # rungs 66 and 198
    assert judged_seconds({300: 0.4, 320: 0.5}, rungs) == [300]  # one late report serves rungs 66 and 198
    assert judged_seconds({30: 0.1}, rungs) == []                # stopped before the first rung: never judged
    assert judged_seconds({66: 0.1, 198: 0.2, 594: 0.3}, rungs) == [66, 198, 594]


def test_the_rungs_a_trial_validates_at_stop_short_of_its_end():
    def settings(trial_budget, min_resource=None):
        return new_settings("beauty", "bpr_mf", None, "cpu-30m", 3600.0, trial_budget, min_resource=min_resource)

    assert rung_seconds(settings(600.0)) == [66, 198]         # the third rung, 594 s, is the trial's end
    assert rung_seconds(settings(600.0, 100.0)) == [100, 300]
    assert rung_seconds(settings(6.0)) == [1, 3]              # at least a second
