"""A tuning study: Optuna's sampler and pruner over run folders, its trials in a database.

    study folder/
        study.json          what the study is: data set, model, loss, recipe, budgets, the space
        study.db            the trials (SQLite; or a database URL given as `storage`)
        trials/<number>/    each trial's run folder (`bert4rec-train`'s, without test or export)
        best.flags          the chosen configuration, a flag file for `bert4rec-train --flagfile`

A study folder is bound like a run folder: to what it tunes (study.json's `BINDING` fields), to the
data it tunes on (the source's identity, each attribute file's contents and the prepared data's key)
and to its storage (`storage.storage_record`). A command that gives another of any of them for the
same folder is refused in one line naming what differs, before anything is written.

Each trial is an ordinary time-budgeted run in its own folder, trained with the settings the sampler
chose: the first `trial_budget` seconds (`train.stop_after`) of a run of the test run's budget
(`schedule_budget`, `train.time_budget`), so that its learning rate follows the schedule the chosen
configuration will train with, not one that decays to 0 at the end of the trial. After each
validation it reports its best validation score (`SELECTION_METRIC`) to Optuna at its seconds of
training and validation so far, and the successive-halving pruner may stop it at a rung: the
budget is the fidelity (rungs at `min_resource`, 3x, 9x ... seconds, `rung_seconds`). A trial also
validates at each rung's seconds, so that at a rung every trial is judged on what it reached in the
same time: Optuna's pruner judges a rung on the first report at or past it, which with validations
every `eval_every` steps could be minutes later for a trial of slow steps than for one of fast
steps. A trial is judged at a rung whether or not its learning rate is still warming up
(`stop_in_warmup`): the budget is time, and a setting whose steps are so slow that it is still
warming at a rung has reached less in that time. Studies made before this (their study.json
without the field) spared a warming trial, and keep that rule when they go on. The test is never
read: the study chooses on validation only.

What survives a kill: Optuna's database storage with heartbeats. A trial whose process died stops
beating; once its heartbeat is older than `GRACE_SECONDS` Optuna marks it failed and queues a copy of
it (`RetryHeartbeatStaleTrialCallback`), which trains on in the same run folder from its last
checkpoint (the folder is named by the original trial's number); so does a trial stopped by Ctrl-C.
A finished trial's value is in the database before its process moves on, so it is never trained or
counted again. Every other trial is a new draw that no trial of the study has had (`draws`).

The budget is the sum of the trials' training and validation seconds (one core each), counted once
per run folder, so that a resumed trial's time is not counted twice. No trial starts once it is
reached; those running finish (so a study overruns by up to a trial).

The parts: `settings` (what a study tunes), `binding` (the folder bound to its study, data and
storage), `storage` (the database), `draws` (new settings), `rungs` (when the pruner judges),
`objective` (a trial), `workers` (the processes that run trials), `results` (the choice and the
summary), `report` (the figures), `trials` (what the trials add up to); `tune` below runs them.
"""

from __future__ import annotations

from bert4rec_tf.tuning.results import summary, write_best
from bert4rec_tf.tuning.rungs import rung_seconds
from bert4rec_tf.tuning.settings import StudySettings
from bert4rec_tf.tuning.storage import study_lock
from bert4rec_tf.tuning.workers import enqueue_start, start, work


def tune(study_dir: str, settings: StudySettings, storage: str | None = None, data_dir: str | None = None,
         source_file: str | None = None, encoding: str | None = None, workers=None) -> dict:
    """Runs the study `settings` in `study_dir` to its budget (in this process, or by `workers()`,
    which runs worker processes and waits for them), then writes best.flags, summary.json and the
    figures; returns the summary with "best_flags" and "figures".

    Raises:
        ValueError: for a folder holding another study, other data or another storage (`bind`), a
            storage that cannot be opened (`storage.check_storage`), or when no trial completed.
    """
    from bert4rec_tf.tuning.report import write_report

    settings, study = start(study_dir, settings, storage, data_dir, source_file, encoding)
    with study_lock(study_dir):
        queued = enqueue_start(study, settings, encoding)
    if queued:
        print(queued, flush=True)
    if workers is None:
        work(study_dir, settings, study, data_dir, source_file, encoding)
    else:
        workers()
    path = write_best(study_dir, settings, study, encoding)
    if path is None:
        raise ValueError(f"no trial of {study_dir} completed; see its trials/ folders")
    figures = write_report(study_dir, study, rung_seconds(settings, within_trial=False))
    return {**summary(study, settings), "best_flags": path, "figures": figures}
