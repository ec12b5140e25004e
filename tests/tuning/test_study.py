"""A study on the planted data, trained for real: trials are run folders with time budgets, the
pruner's reports are their validation curves, best.flags trains as `bert4rec-train` does, and a
study killed (SIGKILL) during a trial, between trials and before a trial's first checkpoint
continues to its end with no finished trial changed or counted twice; two processes share one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import warnings

import optuna
import pytest

from bert4rec_tf.tuning import study as tuning
from tests.tasks.harness import planted_source

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# BPR-MF on the planted data: each trial 6 seconds, three trials' worth in all, a warm-up that some
# validations fall in and some after (the recipe's first trial makes about 100 steps of 1024).
FIXED = ["num_negatives=20", "valid_users=0", "warmup_steps=100"]


def _settings(budget: float = 18.0, trial_budget: float = 6.0):
    return tuning.new_settings("beauty", "bpr_mf", None, "cpu-30m", budget, trial_budget, FIXED, eval_every=100)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_source(str(tmp_path_factory.mktemp("planted")))


def test_a_study_runs_its_budget_and_writes_its_choice(planted, tmp_path):
    source_file, data_dir = planted
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = tuning.tune(str(tmp_path), _settings(), data_dir=data_dir, source_file=source_file)
    # Validations within one second are reported once (Optuna warned and ignored the second).
    assert not [warning for warning in caught if "already reported" in str(warning.message)]
    study = optuna.load_study(study_name="beauty-bpr_mf-default", storage=f"sqlite:///{tmp_path}/study.db")
    trials = study.get_trials()
    assert done["spent_seconds"] >= 18.0 and len(trials) >= 3
    warming = at_marks = 0
    for trial in trials:  # every trial is a run folder whose curve gave the pruner its reports
        folder = tmp_path / trial.user_attrs["folder"]
        curve = json.load(open(folder / "validation.json"))
        warmup = json.load(open(folder / "config.json"))["train"]["warmup_steps"]
        assert sorted(trial.intermediate_values) == sorted({int(point["seconds"]) for point in curve})
        warming += sum(point["step"] <= warmup for point in curve)
        # Validations also fall at the rungs' seconds (1 s and 3 s here): intervals end off the
        # eval_every grid before the last (which the trial budget cuts); each judgement is at or past its rung.
        at_marks += any(point["step"] % 100 for point in curve[:-1])
        assert all(second >= rung for second, rung in zip(trial.user_attrs.get("judged", []), (1, 3, 9)))
        assert not (folder / "results.json").exists()  # the test was never read
    assert warming and at_marks  # some validations fell in the warm-up, some intervals were cut at a rung
    ended = [trial for trial in trials
             if trial.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert done["stop_in_warmup"]  # a new study's trials may be stopped in their warm-up
    assert done["at_rungs"]["judged"] >= len(ended)  # every ended trial was judged at its first rung at least
    # the first trial is the recipe's settings: the choice never validates below them
    assert trials[0].params == tuning.starting_point_of(_settings())[0] and trials[0].user_attrs["start"] == "recipe"
    if trials[0].state == optuna.trial.TrialState.COMPLETE:
        assert done["best"]["value"] >= trials[0].value
    assert done["start"]["number"] == 0 and done["start"]["state"] == trials[0].state.name.lower()
    best = max((trial for trial in trials if trial.state == optuna.trial.TrialState.COMPLETE), key=lambda t: t.value)
    assert done["best"]["number"] == best.number
    flags = open(done["best_flags"]).read()
    assert all(f"--config={key}={value}" in flags for key, value in best.user_attrs["settings"].items())
    assert all(os.path.isfile(path) for path in done["figures"])


_KILLING_WORKER = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    import optuna
    from bert4rec_tf.training import callbacks
    from bert4rec_tf.tuning import study as tuning

    point = {point!r}
    if point == "between trials":  # after a trial is told, before the next is asked
        optimize = optuna.study.Study.optimize
        def killing(self, *args, **kwargs):
            optimize(self, *args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        optuna.study.Study.optimize = killing
    else:  # during a trial: after its second checkpoint, or as its first interval ends (before the checkpoint)
        end_interval = callbacks.CheckpointAndValidate.end_interval
        calls = []
        def killing(self, *args, **kwargs):
            calls.append(1)
            if point == "before a checkpoint" and len(calls) == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            end_interval(self, *args, **kwargs)
            if point == "during a trial" and len(calls) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        callbacks.CheckpointAndValidate.end_interval = killing
    settings = tuning.new_settings("beauty", "bpr_mf", None, "cpu-30m", {budget}, {trial_budget}, {fixed!r},
                                   eval_every=100)
    tuning.tune({study_dir!r}, settings, data_dir={data_dir!r}, source_file={source_file!r})
""")


def _trials(study_dir: str):
    return optuna.load_study(study_name="beauty-bpr_mf-default", storage=f"sqlite:///{study_dir}/study.db").get_trials()


@pytest.mark.slow
def test_killed_studies_continue_without_losing_or_counting_a_trial_twice(planted, tmp_path):
    source_file, data_dir = planted
    study_dir = str(tmp_path / "study")
    finished = {}
    for point in ("during a trial", "between trials", "before a checkpoint"):
        script = _KILLING_WORKER.format(root=ROOT, point=point, budget=24.0, trial_budget=6.0, fixed=FIXED,
                                        study_dir=study_dir, data_dir=data_dir, source_file=source_file)
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
        assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
        trials = _trials(study_dir)
        for trial in trials:  # what finished before a kill stays as it was
            if trial.number in finished:
                assert (trial.state, trial.value, trial.params) == finished[trial.number]
        finished.update({trial.number: (trial.state, trial.value, trial.params) for trial in trials
                         if trial.state.is_finished() and trial.state != optuna.trial.TrialState.FAIL})
    done = tuning.tune(study_dir, _settings(24.0, 6.0), data_dir=data_dir, source_file=source_file)
    trials = _trials(study_dir)
    for trial in trials:
        if trial.number in finished:
            assert (trial.state, trial.value, trial.params) == finished[trial.number]
    states = optuna.trial.TrialState
    assert not [trial for trial in trials if trial.state in (states.RUNNING, states.WAITING)]
    # each killed trial failed and was retried in its own folder, with its settings
    retried = [trial for trial in trials if "failed_trial" in trial.system_attrs]
    assert retried
    for trial in retried:
        original = next(item for item in trials if item.number == trial.system_attrs["failed_trial"])
        assert original.state == states.FAIL and trial.params == original.params
        assert trial.user_attrs["folder"] == original.user_attrs["folder"]
    folders = [trial.user_attrs["folder"] for trial in trials if "failed_trial" not in trial.system_attrs]
    assert len(folders) == len(set(folders))
    seconds = {}
    for trial in trials:
        folder = trial.user_attrs["folder"]
        seconds[folder] = max(seconds.get(folder, 0.0), trial.user_attrs.get("seconds", 0.0))
    assert done["spent_seconds"] == pytest.approx(sum(seconds.values()))
    assert 24.0 <= done["spent_seconds"] < 24.0 + 2 * 6.0 + 10.0


@pytest.mark.slow
def test_two_processes_share_one_study(planted, tmp_path):
    source_file, data_dir = planted
    study_dir = str(tmp_path / "study")
    command = [sys.executable, os.path.join(ROOT, "run_scripts", "tune.py"), "--dataset=beauty", "--model=bpr_mf",
               f"--source_file={source_file}", f"--data_dir={data_dir}", f"--study_dir={study_dir}", "--budget=36s",
               "--trial_budget=6s", "--jobs=2", "--eval_every=100", *(f"--config={item}" for item in FIXED)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    trials = _trials(study_dir)
    processes = {trial.user_attrs["process"] for trial in trials}
    assert len(processes) == 2  # both workers ran trials
    folders = [trial.user_attrs["folder"] for trial in trials]
    assert len(folders) == len(set(folders))  # none ran twice
    assert "best: trial" in result.stdout and os.path.isfile(os.path.join(study_dir, "best.flags"))


_ASKING_WORKER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from bert4rec_tf.tuning import study as tuning
    settings = tuning.new_settings("beauty", "bpr_mf", None, "cpu-30m", 18.0, 6.0, {fixed!r}, eval_every=100)
    study = tuning.open_study({study_dir!r}, settings, None)
    print("asked", study.ask().number, flush=True)
""")


def test_taking_a_queued_trial_waits_for_the_other_processes(tmp_path):
    """Two workers once both took the recipe's queued trial (SQLite does not lock the row read): the
    taking is serialised by the study's lock file, so a worker waits while another holds it, then
    finds the queued trial taken."""
    import fcntl
    import time

    study_dir = str(tmp_path)
    settings = _settings()
    tuning.bind(study_dir, settings)
    study = tuning.open_study(study_dir, settings, None)
    study.enqueue_trial({"hidden_size": 64})
    script = _ASKING_WORKER.format(root=ROOT, fixed=FIXED, study_dir=study_dir)
    with open(os.path.join(study_dir, ".queue.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        worker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        time.sleep(20)  # time to import and reach the lock
        assert worker.poll() is None  # waiting for the lock
        plain = optuna.load_study(study_name=settings.name, storage=f"sqlite:///{study_dir}/study.db")
        assert plain.ask().number == 0  # another taker (not through the lock) gets the queued trial meanwhile
        fcntl.flock(handle, fcntl.LOCK_UN)
    out, _ = worker.communicate(timeout=120)
    assert out.strip().endswith("asked 1")  # a new trial: the queued one was taken
