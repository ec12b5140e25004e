"""Faults in a run folder: two processes on one folder, a kill at each write point of a checkpoint and
of the export. Each ends in a clear error or an exact resume, never in a mixed folder.

A kill is injected, not timed: `os.replace` (every file of a run is renamed into place when complete)
raises at the chosen rename, before it happens, and the temporaries are left behind as a killed
process leaves them.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import keras
import numpy as np
import pytest

from bert4rec_tf import cli, files
from bert4rec_tf.training import trainer
from bert4rec_tf.training.run_folder import RunFolder, RunFolderBusy
from tests.conftest import toy_sequences, write_pairs

TINY = ["max_len=10", "dupe_factor=2", "model.hidden_size=8", "model.num_heads=2", "model.intermediate_size=16",
        "model.num_layers=1", "batch_size=4", "learning_rate=1e-3", "train_steps=20", "dynamic_masking=true",
        "static_instances=false", "length_groups=0", "num_negatives=20"]
EVAL_EVERY = 10
# The renames of a run after its first interval, by the file they make current: the checkpoint at step
# 10 (best weights, latest weights, then state.json, the commit; validation.json is a copy after it),
# and the export (model.keras, the SavedModel folder, results.json, the run's last file).
CHECKPOINT_POINTS = ["best-000000010.weights.h5", "latest-000000010.weights.h5", "state.json", "validation.json"]
EXPORT_POINTS = ["model.keras", "export", "results.json"]
DEFAULT_POINTS = ["state.json"]  # the commit itself; the rest are slow checks


class Killed(BaseException):
    """The process dies here."""


def config(*extra: str):
    return cli.experiment_config("beauty", TINY + list(extra), recipe="paper")


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("faults")
    return write_pairs(str(root / "toy.txt"), toy_sequences(num_users=30, num_items=120)), str(root / "data")


@pytest.fixture(scope="module")
def whole(source, tmp_path_factory) -> tuple[dict, str, Exception | None]:
    """An uninterrupted run, and a second start on its folder while it trains: (its test metrics, its
    folder, what the second start raised)."""
    model_dir = str(tmp_path_factory.mktemp("whole") / "run")
    outcome = {}
    first = threading.Thread(target=lambda: outcome.update(results=train(source, model_dir)))
    first.start()
    lock, deadline = os.path.join(model_dir, ".lock"), time.time() + 300
    while time.time() < deadline and not (os.path.exists(lock) and os.path.getsize(lock)):  # the first holds it
        time.sleep(0.01)
    try:
        train(source, model_dir, "model.hidden_size=16")
        refused = None
    except RunFolderBusy as error:
        refused = error
    first.join()
    return outcome["results"], model_dir, refused


def train(source: tuple[str, str], model_dir: str, *extra: str) -> dict:
    return trainer.train_and_evaluate(config(*extra), model_dir, data_dir=source[1], source_file=source[0],
                                      eval_every=EVAL_EVERY, verbose=0)


def leftovers(model_dir: str) -> list[str]:
    """Temporaries, and weight files no committed checkpoint names."""
    state = RunFolder(model_dir).load_state()
    named = {state["latest_weights"], state["best_weights"]}
    found = [os.path.join(folder, name) for folder, folders, names in os.walk(model_dir)
             for name in folders + names if name.startswith(files.TEMPORARY_PREFIX)]
    found += [path for path in glob.glob(os.path.join(model_dir, "checkpoints", "*.weights.h5"))
              if os.path.basename(path) not in named]
    return sorted(found)


def test_a_held_folder_is_refused_at_once_naming_the_holder(tmp_path):
    with RunFolder(str(tmp_path / "run")).lock():
        with pytest.raises(RunFolderBusy) as refused:
            with RunFolder(str(tmp_path / "run")).lock():
                pass
    message = str(refused.value)
    assert "\n" not in message and str(tmp_path / "run") in message
    assert f"process {os.getpid()} on " in message and "since " in message
    with RunFolder(str(tmp_path / "run")).lock():  # released at the end of the first
        pass


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    os.makedirs(tmp_path / "run")
    with open(tmp_path / "run" / ".lock", "w") as handle:
        json.dump({"pid": dead.pid, "host": __import__("socket").gethostname(), "started": "earlier"}, handle)
    with RunFolder(str(tmp_path / "run")).lock():
        with open(tmp_path / "run" / ".lock") as handle:
            assert json.load(handle)["pid"] == os.getpid()
    assert f"process {dead.pid} on" in capsys.readouterr().err


def test_two_starts_on_one_folder_exactly_one_trains(whole):
    results, model_dir, refused = whole
    assert refused is not None and "is in use by process" in str(refused)
    recorded = json.load(open(os.path.join(model_dir, "config.json")))
    finished = json.load(open(os.path.join(model_dir, "results.json")))
    assert recorded["model"]["hidden_size"] == finished["config"]["model"]["hidden_size"] == 8
    assert finished["test"] == results
    model = keras.saving.load_model(os.path.join(model_dir, "model.keras"), safe_mode=True)
    assert model.model_config.hidden_size == 8
    assert not leftovers(model_dir)


@pytest.mark.parametrize("point", [pytest.param(point, marks=() if point in DEFAULT_POINTS else pytest.mark.slow)
                                   for point in CHECKPOINT_POINTS + EXPORT_POINTS])
def test_a_kill_at_a_write_point_then_a_resume_gives_the_uninterrupted_run(source, whole, tmp_path, monkeypatch,
                                                                           point):
    model_dir = str(tmp_path / "run")
    replace, remove = os.replace, files._remove

    def dying_replace(source_path, target):
        if os.path.basename(os.fspath(target)) == point:
            raise Killed
        return replace(source_path, target)

    monkeypatch.setattr(os, "replace", dying_replace)
    monkeypatch.setattr(files, "_remove", lambda path: None)  # a killed process cleans nothing up
    with pytest.raises(Killed):
        train(source, model_dir)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(files, "_remove", remove)
    committed = RunFolder(model_dir).load_state()["step"]
    # Killed before its commit, the checkpoint at step 10 does not count; after it, it does.
    assert committed == {"validation.json": 10, **dict.fromkeys(EXPORT_POINTS, 20)}.get(point, 0)
    assert not os.path.isfile(os.path.join(model_dir, "results.json"))
    results = train(source, model_dir)
    assert results == whole[0]
    assert json.load(open(os.path.join(model_dir, "results.json")))["test"] == whole[0]
    for mine, theirs in zip(*(keras.saving.load_model(os.path.join(d, "model.keras")).get_weights()
                              for d in (model_dir, whole[1])), strict=True):
        np.testing.assert_array_equal(mine, theirs)
    assert not leftovers(model_dir)


def test_a_write_beyond_the_file_size_limit_names_the_file_and_leaves_nothing(tmp_path):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    target = str(tmp_path / "big.bin")
    resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, hard))
    try:
        with pytest.raises(OSError, match=f"^{target}: cannot be written: file too large") as refused:
            files.ensure_room(target, 100_000)
        files.ensure_room(target, 10_000)  # fits
        with pytest.raises(OSError, match=f"^{target}: cannot be written: file too large"):
            with files.atomic_path(target) as temporary, open(temporary, "wb") as handle:
                handle.write(b"x" * 100_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert refused.value.errno == 27 and os.listdir(tmp_path) == []


class Complains:
    """An object that raises while being finalised, as h5py's do after a failed write."""

    def __del__(self):
        raise RuntimeError("complaint while finalised")


def test_what_a_failed_write_leaves_raising_while_finalised_is_dropped(tmp_path, capfd, monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)  # where Python would report it
    def failing_writer(path: str) -> None:
        objects = [Complains() for _ in range(3)]  # noqa: F841  (kept alive by the error's traceback)
        Complains()
        raise OSError(27, f"File too large: {path}")

    target = str(tmp_path / "cut.bin")
    with pytest.raises(OSError, match=f"^{target}: cannot be written: file too large"):
        with files.quiet_after_failed_write(), files.atomic_path(target) as temporary:
            failing_writer(temporary)
    printed = capfd.readouterr().err
    assert reported == [] and "complaint" not in printed and "Traceback" not in printed, printed


def test_what_is_finalised_in_a_block_that_did_not_fail_is_still_shown(capfd):
    with files.quiet_after_failed_write():
        Complains()
    assert "complaint while finalised" in capfd.readouterr().err


def train_command(source: tuple[str, str], model_dir: str) -> list[str]:
    args = [sys.executable, os.path.join(os.path.dirname(__file__), "..", "..", "run_scripts", "train.py"),
            "--dataset", "beauty", "--source_file", source[0], "--data_dir", source[1], "--model_dir", model_dir,
            "--recipe", "paper", "--eval_every", str(EVAL_EVERY)]
    for override in TINY:
        args += ["--config", override]
    return args


@pytest.mark.slow
@pytest.mark.parametrize("share", [None, 0.5, 0.97])
def test_a_full_disk_is_one_line_and_the_run_resumes_once_there_is_room(source, whole, tmp_path, share):
    import resource

    model_dir = str(tmp_path / "run")
    # The config and logs fit, a weights file does not: 80 KB, or a share of the file (HDF5 would fail
    # half-way through it, with tracebacks or a crash, were it not refused before it starts).
    weights = glob.glob(os.path.join(whole[1], "checkpoints", "latest-*.weights.h5"))[0]
    limit = 80 * 1024 if share is None else int(share * os.path.getsize(weights))
    failed = subprocess.run(train_command(source, model_dir), capture_output=True, text=True, timeout=600,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr
    assert failed.stderr.strip().splitlines()[-1] == (
        f"error: {model_dir}/checkpoints/best-000000010.weights.h5: cannot be written: file too large for the disk "
        "or the file-size limit (ulimit -f)")
    assert not leftovers(model_dir) and RunFolder(model_dir).load_state()["step"] == 0
    resumed = subprocess.run(train_command(source, model_dir), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.load(open(os.path.join(model_dir, "results.json")))["test"] == whole[0]


@pytest.mark.slow
def test_ctrl_c_ends_in_one_line_saying_where_the_run_stopped(source, tmp_path):
    import signal

    model_dir = str(tmp_path / "run")
    command = train_command(source, model_dir)
    command[command.index("train_steps=20")] = "train_steps=100000"
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    state, deadline = os.path.join(model_dir, "checkpoints", "state.json"), time.time() + 600
    while time.time() < deadline and not os.path.isfile(state):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:  # a run that did not stop trains on (100,000 steps): never leave it behind
            process.kill()
            process.wait()
    assert process.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    step = RunFolder(model_dir).load_state()["step"]
    assert err.strip().splitlines()[-1] == (f"interrupted: {model_dir} keeps its checkpoint at step {step:,}; run the "
                                            "same command again to resume from there")


def test_a_damaged_model_file_is_named_damaged(whole, tmp_path):
    copy = str(tmp_path / "copy")
    shutil.copytree(whole[1], copy)
    with open(os.path.join(copy, "model.keras"), "rb+") as handle:
        handle.truncate(os.path.getsize(os.path.join(copy, "model.keras")) // 2)
    with pytest.raises(ValueError, match=f"^{copy}/model.keras: the saved model is damaged: not a complete .keras "
                                         "\\(zip\\) file, truncated or altered; the same train command in this folder "
                                         "tests and exports the run again") as refused:
        trainer.load_finished_run(copy)
    assert "not found" not in str(refused.value)


def test_a_run_folder_that_will_refuse_refuses_before_preparing_data(source, whole, tmp_path):
    copy, data_dir = str(tmp_path / "copy"), str(tmp_path / "fresh-data")
    shutil.copytree(whole[1], copy)
    with pytest.raises(ValueError, match="holds a run with another configuration .model.hidden_size differ"):
        trainer.train_and_evaluate(config("model.hidden_size=16"), copy, data_dir=data_dir, source_file=source[0],
                                   eval_every=EVAL_EVERY, verbose=0)
    assert not os.path.exists(data_dir)
