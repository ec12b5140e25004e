"""Train, evaluate and recommend from Python, as the commands do.

    from bert4rec_tf import api

    run = api.train("custom", "runs/example", source_file="docs/examples/interactions.csv",
                    overrides={"train_steps": 20, "batch_size": 8, "num_negatives": 3}, eval_every=10)
    run.metrics["pop"]["HR@10"]                      # test metrics of the best validation checkpoint
    run.recommend([["sku-104", "sku-221"]], k=5)     # [[(raw item id, score), ...]] per history
    run = api.Run.load("runs/example")               # a finished run, trained here or by bert4rec-train

`train` builds the configuration as `bert4rec-train` does (the preset of the model on the data set,
the recipe, then the overrides) and runs the same job, so a run folder written by either one is
resumed, evaluated and served by both. Importing this module loads no TensorFlow; its functions do.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from typing import Any, Mapping, Sequence

from bert4rec_tf import cli
from bert4rec_tf.config import ExperimentConfig
from bert4rec_tf.files import read_json
from bert4rec_tf.tasks.resolve import config_from_file, experiment_config


@dataclasses.dataclass
class Run:
    """A finished run: its folder, configuration and test metrics, and its served recommendations.

    Attributes:
        model_dir: the run folder (config.json, results.json, model.keras, export/, ...).
        config: the run's resolved configuration.
        metrics: the test metrics of the best validation checkpoint (the last weights without
            validation), {protocol: {metric: value}} with protocols "pop" (the paper's pop-100),
            "uniform" (uniform-100) and "full" (all items).
        steps: the training steps the run took.
        best_step: the step of the best validation checkpoint (None without validation).
    """

    model_dir: str
    config: ExperimentConfig
    metrics: dict[str, dict[str, float]]
    steps: int
    best_step: int | None

    @classmethod
    def load(cls, model_dir: str) -> Run:
        """The finished run in `model_dir`.

        Raises:
            FileNotFoundError: when the folder holds no finished run (no results.json).
            ValueError: when a run file is damaged.
        """
        from bert4rec_tf.training.run_folder import RunFolder

        folder = RunFolder(model_dir)
        if not os.path.isfile(folder.path("results.json")):
            raise FileNotFoundError(f"{model_dir} holds no finished run (no results.json); train it to its end first")
        results = read_json(folder.path("results.json"), "run's results")
        return cls(model_dir, folder.config(), results["test"], results["steps"], results["best_step"])

    @property
    def export_dir(self) -> str:
        """The serving SavedModel's folder (with vocab.txt); `tf.saved_model.load` reads it without bert4rec_tf."""
        return os.path.join(self.model_dir, "export")

    def evaluate(self, stage: str = "test", batch_size: int = 256,
                 eval_users: int | None = None) -> dict[str, dict[str, float]]:
        """Evaluates the run's model.keras again, as `bert4rec-evaluate` does, and writes evaluation.json.

        Args:
            stage: "test" (each user's last item) or "valid" (the one before it).
            batch_size: users per forward pass.
            eval_users: a fixed sample of this many users (0: every user; None: the run's own
                `train.eval_users`).

        Returns:
            {protocol: {metric: value}}, as `metrics`.
        """
        if stage not in ("valid", "test"):
            raise ValueError(f"stage must be 'valid' or 'test', got {stage!r}")
        from bert4rec_tf.training.trainer import evaluate_run

        return evaluate_run(self.model_dir, stage, batch_size, eval_users)[0]

    def recommend(self, histories: Sequence[Sequence[str]], k: int = 10,
                  users: Sequence[str] | None = None) -> list[list[tuple[str, float]]]:
        """The best `k` items each history has not seen, from the run's serving SavedModel.

        As `bert4rec-recommend`: ids missing from the export's vocab.txt are ignored, with a warning
        naming them, and a history with no known id is an error. No item of a history is recommended
        for it. A model that reads users serves the users of its data only, by raw user id (`users`):
        one that learned a vector per training user (BPR-MF, NCF, FPMC, Caser; its histories may be
        empty), or BERT4Rec or SASRec trained with user attributes, which reads the user's attributes.

        Args:
            histories: [batch] lists of the data set's raw item ids, oldest first.
            k: how many items per history, 1 to 10.
            users: the raw user id of each history, for a model that reads users; None otherwise.

        Returns:
            [batch] lists of (raw item id, score) pairs, best first; shorter than `k` only when fewer
            items of the catalogue are unseen.

        Raises:
            ValueError: for a history that is empty, holds no known id or is a string, a `k` out of
                range, or users missing for a model that reads them, given to one that does not, or
                unknown.

        Example:
            >>> run.recommend([["sku-104", "sku-221"]], k=3)
            [[('sku-618', 0.083), ('sku-330', 0.059), ('sku-952', 0.055)]]
        """
        from bert4rec_tf.export.recommender import check_histories

        check_histories(histories)
        self._recommender.check_users(users, len(histories))
        for number, history in enumerate(histories):
            unknown = self._recommender.unknown_ids(history, f"history {number}")
            if unknown:
                warnings.warn(f"history {number}: unknown ids (ignored): {', '.join(map(repr, unknown))}",
                              stacklevel=2)
        return self._recommender.recommend(histories, k, users)

    @functools.cached_property
    def _recommender(self):
        from bert4rec_tf.export.recommender import Recommender

        return Recommender(self.export_dir)


def train(dataset: str, model_dir: str, *, model: str = "bert4rec", source_file: str | None = None,
          recipe: str | None = None, overrides: Mapping[str, Any] | Sequence[str] = (), seed: int | None = None,
          encoding: str | None = None, data_dir: str | None = None, eval_every: int = 1000,
          patience: int | None = None, verbose: int = 1, config_file: str | None = None) -> Run:
    """Prepares the data if missing, trains, validates, tests once and exports, as `bert4rec-train`.

    Calling it again on the same `model_dir` resumes the run from its last checkpoint, with the
    recipe it started with; on a finished run it trains and writes nothing (a damaged output is
    tested and exported again).

    Args:
        dataset: a data set name (`bert4rec-train --help` lists them), or "custom" for your own CSV
            given as `source_file`.
        model_dir: the run's folder.
        model: the model preset, e.g. "bert4rec", "sasrec" or "pop" (`bert4rec-train --help` lists them).
        source_file: a local raw or preprocessed file to read instead of downloading.
        recipe: "paper", "cpu-30m", "cpu-1h" or "cpu-2h"; None chooses as the command does (the
            recipe a resumed run records, else "paper" with a GPU and "cpu-30m" without).
        overrides: configuration fields over the preset and recipe, as `--config`: a dict such as
            {"train_steps": 20, "model.num_layers": 3} or strings such as ["train_steps=20"];
            `time_budget` is in seconds.
        seed: the seed of every random choice (default: the preset's).
        encoding: the text encoding of `source_file` (default UTF-8).
        data_dir: the cache of downloads and prepared data (default: $BERT4REC_TF_DATA_DIR, else the
            checkout's datasets/, else ~/.cache/bert4rec_tf).
        eval_every: steps between validations and checkpoints.
        patience: stop after this many validations without improvement (default: never).
        verbose: 0 leaves out the recipe line and the training progress bars that 1 prints (validation
            results and warnings are printed either way).
        config_file: a configuration to train as it is, `overrides`, `seed` and `encoding` over it: a
            tuning study's `best_config.json` or a run's `config.json` (as `bert4rec-train
            --config_file`); it names the model and the recipe, and `dataset` must be its own.

    Returns:
        The finished `Run`.

    Raises:
        ValueError: for an unknown data set, model, recipe or configuration key, a value out of range,
            a missing or malformed `source_file`, or a `model_dir` holding another run.
    """
    if isinstance(overrides, Mapping):
        overrides = [f"{key}={value}" for key, value in overrides.items()]
    elif isinstance(overrides, str):
        raise ValueError(f"overrides is a dict or a list of 'key=value' strings, got the string {overrides!r}")
    if config_file is not None:
        model, config = config_from_file(config_file, list(overrides), seed, encoding)
        if dataset != config.data.dataset or recipe not in (None, config.train.recipe):
            raise ValueError(f"config_file {config_file} trains {config.data.dataset} with recipe "
                             f"{config.train.recipe}: give dataset {config.data.dataset!r} and no other recipe")
        reason = f"recorded in {config_file}"
    else:
        reason = "given"
        if recipe is None:
            recipe, reason = cli.default_recipe(dataset, model, model_dir)
        config = experiment_config(dataset, list(overrides), seed, model, recipe, encoding)
    if verbose:
        print(cli.recipe_notice(config, model, reason), flush=True)

    from bert4rec_tf.training.trainer import train_and_evaluate

    train_and_evaluate(config, model_dir, data_dir=data_dir, source_file=source_file, eval_every=eval_every,
                       patience=patience, verbose=verbose)
    return Run.load(model_dir)


def tune(dataset: str, study_dir: str, *, model: str = "bert4rec", loss: str | None = None, recipe: str = "cpu-30m",
         budget: float | str = 3600.0, trial_budget: float | str = 600.0, overrides: Sequence[str] = (), seed: int | None = None,
         storage: str | None = None, source_file: str | None = None, data_dir: str | None = None,
         encoding: str | None = None, eval_every: int = 500, schedule_budget: float | str | None = None) -> dict:
    """Tunes `model` on validation in this process, as `bert4rec-tune --jobs 1` does (docs/tuning.md).

    Calling it again on the same `study_dir` continues the study (a larger `budget` tunes on).

    Args:
        dataset, model, loss, recipe, overrides, seed, source_file, data_dir, encoding: as `train`;
            `recipe` is where every trial starts, `overrides` ("key=value") are fixed for every trial.
        study_dir: the study's folder (study.json, study.db, trials/, best.flags, figures).
        budget: seconds of trials in total (training and validation), or a duration such as "1h".
        trial_budget: each trial's seconds of training and validation (or a duration).
        schedule_budget: the time budget in seconds the trials' learning-rate schedule is fitted to
            (default: the recipe's, as the test run trains it).
        storage: a database URL for the trials (default: SQLite in `study_dir`).
        eval_every: steps between a trial's validations (where the pruner may stop it).

    Returns:
        {"trials": counts by state, "spent_seconds", "best": {"number", "value", "settings"},
        "best_flags": the flag file for `bert4rec-train --flagfile`, "figures": paths}.

    Raises:
        ValueError: before anything is written, for an argument the command would refuse (budgets
            that are not positive finite seconds or durations, a storage that cannot be opened), a
            model with nothing to tune, budgets that hold no trial, a folder holding another
            study or bound to other data or another storage, or when no trial completed.
    """
    from bert4rec_tf.tuning.settings import new_settings
    from bert4rec_tf.tuning.study import tune as run_study

    settings = new_settings(dataset, model, loss, recipe, budget, trial_budget, list(overrides), seed, eval_every,
                            encoding=encoding, schedule_budget=schedule_budget)
    return run_study(study_dir, settings, storage, data_dir, source_file, encoding)
