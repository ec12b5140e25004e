"""The study's figures draw each trial's whole validation curve from its run folder, the warm-up's
validations included, beside the points the pruner was given."""

from __future__ import annotations

import json

import optuna

from bert4rec_tf.tuning.report import _curve, write_report

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
    paths = write_report(str(tmp_path), study)
    assert [path.rsplit("/", 1)[-1] for path in paths] == ["tuning.png"]  # one completed trial: no importance
