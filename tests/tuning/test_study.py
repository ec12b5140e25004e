"""A study on the planted data, trained for real: trials are run folders with time budgets, the
pruner's reports are their validation curves, best.flags trains as `bert4rec-train` does, and a
study killed (SIGKILL) during a trial, between trials and before a trial's first checkpoint, or
stopped by Ctrl-C, continues to its end with no finished trial changed or counted twice and no
setting trained twice; two workers, or two commands, share one."""

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
import sqlalchemy

from bert4rec_tf.tuning.binding import bind
from bert4rec_tf.tuning.settings import new_settings, starting_point_of
from bert4rec_tf.tuning.study import tune
from bert4rec_tf.tuning.trials import counted
from bert4rec_tf.tuning.workers import open_study
from tests.tasks.harness import planted_source

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# BPR-MF on the planted data: each trial 6 seconds, three trials' worth in all, a warm-up that some
# validations fall in and some after (the recipe's first trial makes about 100 steps of 1024).
FIXED = ["num_negatives=20", "valid_users=0", "warmup_steps=100"]


def _settings(budget: float = 18.0, trial_budget: float = 6.0):
    return new_settings("beauty", "bpr_mf", None, "cpu-30m", budget, trial_budget, FIXED, eval_every=100)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_source(str(tmp_path_factory.mktemp("planted")))


def test_a_study_runs_its_budget_and_writes_its_choice(planted, tmp_path):
    source_file, data_dir = planted
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        done = tune(str(tmp_path), _settings(), data_dir=data_dir, source_file=source_file)
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
    assert trials[0].params == starting_point_of(_settings())[0] and trials[0].user_attrs["start"] == "recipe"
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
    from bert4rec_tf.tuning.settings import new_settings
    from bert4rec_tf.tuning.study import tune

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
    settings = new_settings("beauty", "bpr_mf", None, "cpu-30m", {budget}, {trial_budget}, {fixed!r},
                                   eval_every=100)
    tune({study_dir!r}, settings, data_dir={data_dir!r}, source_file={source_file!r})
""")


# `--jobs 2` needs two cores this process may use (`cli.check_jobs`).
two_cores = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="--jobs 2 needs two usable cores")


def _trials(study_dir: str):
    return optuna.load_study(study_name="beauty-bpr_mf-default", storage=f"sqlite:///{study_dir}/study.db").get_trials()


def _assert_no_setting_twice(trials) -> None:
    """Each run folder trained one setting, and no two folders the same one: no trial shares its
    settings with another but a retry with the trial it trains on from."""
    by_folder: dict[str, set[str]] = {}
    for trial in counted(trials):
        if trial.params:
            by_folder.setdefault(trial.user_attrs["folder"], set()).add(json.dumps(trial.params, sort_keys=True))
    assert all(len(found) == 1 for found in by_folder.values()), by_folder
    settings = [next(iter(found)) for found in by_folder.values()]
    assert len(settings) == len(set(settings)), settings


def _command(source_file: str, data_dir: str, study_dir: str, budget: str, jobs: int = 1) -> list[str]:
    return [sys.executable, os.path.join(ROOT, "run_scripts", "tune.py"), "--dataset=beauty", "--model=bpr_mf",
            f"--source_file={source_file}", f"--data_dir={data_dir}", f"--study_dir={study_dir}", f"--budget={budget}",
            "--trial_budget=6s", f"--jobs={jobs}", "--eval_every=100", *(f"--config={item}" for item in FIXED)]


def _wait_for_a_training_trial(study_dir: str, process: subprocess.Popen, timeout: float = 300) -> None:
    """Returns once a trial of the study has validated (it is mid-training), while `process` runs."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1][-2000:]
        if os.path.isfile(os.path.join(study_dir, "study.db")):
            try:
                if any(trial.state == optuna.trial.TrialState.RUNNING and trial.user_attrs.get("seconds", 0) > 0
                       for trial in _trials(study_dir)):
                    return
            except (KeyError, optuna.exceptions.OptunaError, sqlalchemy.exc.OperationalError):
                pass  # the study's tables or the study itself are being created
        time.sleep(0.5)
    raise AssertionError("no trial started training")


def _stopped_mid_trial(command: list[str], study_dir: str, signal_number: int) -> tuple[int, str]:
    """Runs `command` in a process group of its own until a trial of the study trains, then sends the
    group `signal_number` (as a terminal's Ctrl-C, or a kill of the command and its workers); its exit
    status and standard error."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    _wait_for_a_training_trial(study_dir, process)
    os.killpg(process.pid, signal_number)
    _, err = process.communicate(timeout=120)
    return process.returncode, err


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
    done = tune(study_dir, _settings(24.0, 6.0), data_dir=data_dir, source_file=source_file)
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
    _assert_no_setting_twice(trials)  # the budget went to distinct settings, the kills' retries included


@pytest.mark.slow
@two_cores
def test_two_processes_share_one_study(planted, tmp_path):
    source_file, data_dir = planted
    study_dir = str(tmp_path / "study")
    command = _command(source_file, data_dir, study_dir, "36s", jobs=2)
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    trials = _trials(study_dir)
    processes = {trial.user_attrs["process"] for trial in trials}
    assert len(processes) == 2  # both workers ran trials
    folders = [trial.user_attrs["folder"] for trial in trials]
    assert len(folders) == len(set(folders))  # none ran twice
    assert "best: trial" in result.stdout and os.path.isfile(os.path.join(study_dir, "best.flags"))
    _assert_no_setting_twice(trials)


@pytest.mark.slow
def test_two_commands_on_one_study_draw_apart(planted, tmp_path):
    """Two tuner commands started together on one study, with the same seed, draw apart."""
    source_file, data_dir = planted
    study_dir = str(tmp_path / "study")
    command = _command(source_file, data_dir, study_dir, "30s")
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    results = [process.communicate(timeout=900) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], [err[-2000:] for _, err in results]
    trials = _trials(study_dir)
    assert len({trial.user_attrs["process"] for trial in trials}) == 2
    _assert_no_setting_twice(trials)


@pytest.mark.slow
@two_cores
def test_two_workers_killed_then_run_again_train_no_setting_twice(planted, tmp_path):
    """`--jobs 2` killed (SIGKILL, the command and its workers) mid-trial and run again: each dead trial is
    retried once, in its own folder, by one of the two workers, and no setting is drawn twice."""
    source_file, data_dir = planted
    study_dir = str(tmp_path / "study")
    command = _command(source_file, data_dir, study_dir, "36s", jobs=2)
    assert _stopped_mid_trial(command, study_dir, signal.SIGKILL)[0] == -signal.SIGKILL
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    trials = _trials(study_dir)
    retried = [trial for trial in counted(trials) if "failed_trial" in trial.system_attrs]
    assert retried and len({trial.system_attrs["failed_trial"] for trial in retried}) == len(retried)
    _assert_no_setting_twice(trials)


@pytest.mark.slow
def test_ctrl_c_ends_in_one_line_and_the_same_command_trains_the_trial_on(planted, tmp_path):
    source_file, data_dir = planted
    study_dir = str(tmp_path / "study")
    command = _command(source_file, data_dir, study_dir, "18s")
    status, err = _stopped_mid_trial(command, study_dir, signal.SIGINT)
    assert status == 130 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == (f"interrupted: the study in {study_dir} is kept, and a running trial trains "
                                            "on from its last checkpoint; run the same command again to continue it")
    [interrupted] = [trial for trial in _trials(study_dir) if trial.state == optuna.trial.TrialState.FAIL]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    trials = _trials(study_dir)
    [retry] = [trial for trial in trials if trial.system_attrs.get("failed_trial") == interrupted.number]
    assert retry.state.is_finished() and retry.user_attrs["folder"] == interrupted.user_attrs["folder"]
    _assert_no_setting_twice(trials)


_ASKING_WORKER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from bert4rec_tf.tuning.settings import new_settings
    from bert4rec_tf.tuning.workers import open_study
    settings = new_settings("beauty", "bpr_mf", None, "cpu-30m", 18.0, 6.0, {fixed!r}, eval_every=100)
    study = open_study({study_dir!r}, settings, None)
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
    bind(study_dir, settings)
    study = open_study(study_dir, settings, None)
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
