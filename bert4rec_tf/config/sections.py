"""The configuration's sections and the parts they are composed of.

A run's configuration has three sections: `data` (the data set, its split and evaluation candidates,
and what a family reads of the histories), `model` (the family's own settings) and `train` (what a
run does with the model). Each family chooses one class per section (`bert4rec_tf.tasks.Task`): the
class's fields are the settings the family has, so a key it does not have is refused when it is
set (`ExperimentConfig.override`). The data and train sections here are shared; a family's model section is composed of the parts in `bert4rec_tf.config.model_parts`, next to its Task (`bert4rec_tf.tasks`).

Every section checks its own fields (`check`); a part's checks run for every section built from it.
"""

from __future__ import annotations

import codecs
import dataclasses
import math
from typing import Any, ClassVar

from bert4rec_tf import constants

# Fields with a flag of their own in bert4rec-train; the others are set with --config.
FLAG_FIELDS = ("max_len", "hidden_size", "batch_size", "learning_rate", "train_steps", "loss", "time_budget", "seed",
               "recipe", "encoding")

# The data settings that name feature files (`SlidingWindowData`).
FEATURE_FIELDS = ("item_features", "user_features")

# What an encoding setting must be.
ENCODING_EXPECTED = "a text encoding Python knows, e.g. utf-8, latin-1 or cp1252"

# `padding_free`'s values (`bert4rec_tf.models.base.packs_positions`).
PADDING_FREE_CHOICES = ("auto", "on", "off")


def require(condition: bool, field: str, value: Any, expected: str) -> None:
    """Raises a one-line ValueError naming the flag of `field` unless `condition` holds."""
    if not condition:
        raise ValueError(f"{flag_of(field)} must be {expected}, got {value!r}")


def flag_of(field: str) -> str:
    """How the command line sets `field`: `--max_len` or `--config field`."""
    return f"--{field}" if field in FLAG_FIELDS else f"--config {field}"


def setting_of(field: str, value: str) -> str:
    """How the command line gives `field` the value `value`: `--encoding latin-1` or `--config field=value`."""
    return f"--{field} {value}" if field in FLAG_FIELDS else f"--config {field}={value}"


@dataclasses.dataclass
class Section:
    """A configuration section: its fields are its settings."""

    # field -> the values of `loss` under which the family reads it (a field not listed is read
    # under every loss); a command line that sets it under another loss is refused.
    loss_fields: ClassVar[dict[str, tuple[str, ...]]] = {}

    def check(self) -> None:
        """Checks the fields' ranges (each part checks its own, then calls the next part's).

        Raises:
            ValueError: one line naming the flag (or `--config key`) and the value.
        """

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The section's field names."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def losses_reading(cls, field: str) -> tuple[str, ...] | None:
        """The losses under which `field` is read (None: under every loss)."""
        for klass in cls.__mro__:
            if field in vars(klass).get("loss_fields", {}):
                return vars(klass)["loss_fields"][field]
        return None


# The data sections.

@dataclasses.dataclass
class DataConfig(Section):
    """What every run reads: the data set, its split and the sampled evaluation candidates.

    Attributes:
        dataset: data set name (see `bert4rec_tf.data.registry.DATASETS`).
        split: "valid" (last item test, second last validation) or "original" (validation item
            appended to training, no validation set).
        num_negatives: negatives per user for the sampled evaluation protocols.
        seed: seed of every random choice in data preparation.
        encoding: the source file's text encoding (a `codecs` name); part of the source's identity,
            so data read in another encoding is other data.
    """

    dataset: str = "ml-1m"
    split: str = "valid"
    num_negatives: int = constants.NUM_EVAL_NEGATIVES
    seed: int = constants.EVAL_SEED
    encoding: str = "utf-8"

    # Whether the data are masked instances with the matching task's (only `MatchingData`).
    matching: ClassVar[bool] = False
    # Whether the items of the item attribute file join the catalogue (a field of `SlidingWindowData`).
    feature_items: ClassVar[bool] = False

    def check(self) -> None:
        super().check()
        require(self.split in ("valid", "original"), "split", self.split, "'valid' or 'original'")
        require(self.num_negatives >= 1, "num_negatives", self.num_negatives, "at least 1")
        require(0 <= self.seed < 2**32, "seed", self.seed, f"a whole number from 0 to {2**32 - 1}")
        require(_is_encoding(self.encoding), "encoding", self.encoding, ENCODING_EXPECTED)

    def history_length(self) -> int:
        """The latest items of a history the evaluation gives the model: a family that reads no
        window of the history (a vector per user, or the newest item) needs only the newest."""
        return 1

    def key_settings(self) -> dict[str, Any]:
        """The settings that name the prepared data (`bert4rec_tf.data.prepare.output_directory`);
        the encoding is part of the source's identity instead."""
        return {name: value for name, value in dataclasses.asdict(self).items() if name != "encoding"}

    def attribute_files(self) -> dict[str, str]:
        """{field ("item_features", "user_features"): path} of the attribute files the data name:
        none for a family that reads no attributes (`SlidingWindowData` names them)."""
        return {}

    def features_encoding(self, field: str) -> str:
        """The text encoding the attribute file of `field` is read in: the data's."""
        return self.encoding


@dataclasses.dataclass
class WindowData(DataConfig):
    """A family that reads the latest `max_len` items of a history.

    Attributes:
        max_len: sequence length N of the model ([MASK] included for BERT4Rec).
    """

    max_len: int = 200

    def check(self) -> None:
        super().check()
        require(self.max_len >= 2, "max_len", self.max_len, "at least 2 (history plus [MASK])")

    def history_length(self) -> int:
        return self.max_len


@dataclasses.dataclass
class SlidingWindowData(WindowData):
    """A family trained on windows that slide over each user's training items.

    Attributes:
        prop_sliding_window: window step as a fraction of max_len (-1: step max_len).
        item_features, user_features: feature files of item and user attributes
            (`bert4rec_tf.data.features`; "": none), encoded with the prepared data, whose key holds
            their contents' SHA-256 (not their paths).
        item_features_encoding, user_features_encoding: the text encoding of each file ("": the
            data's `encoding`); a file read in another encoding than the data's is other data
            (`bert4rec_tf.data.prepare.attribute_files`).
        feature_items: the items of `item_features` without interactions join the catalogue (after
            the others): a model that scores items from their attributes can recommend them.
    """

    prop_sliding_window: float = 0.5
    item_features: str = ""
    item_features_encoding: str = ""
    user_features: str = ""
    user_features_encoding: str = ""
    feature_items: bool = False

    def key_settings(self) -> dict[str, Any]:
        # Without a feature file the key holds none of these fields, so the key of data prepared
        # without attributes does not depend on them. A file's encoding counts in its identity
        # (`bert4rec_tf.data.prepare.attribute_files`), as the data's in the source's.
        encodings = [f"{field}_encoding" for field in FEATURE_FIELDS]
        return {name: value for name, value in super().key_settings().items()
                if name not in encodings and (name not in (*FEATURE_FIELDS, "feature_items") or value)}

    def attribute_files(self) -> dict[str, str]:
        return {field: path for field, path in (("item_features", self.item_features),
                                                ("user_features", self.user_features)) if path}

    def features_encoding(self, field: str) -> str:
        encodings = {"item_features": self.item_features_encoding, "user_features": self.user_features_encoding}
        return encodings[field] or self.encoding

    def check(self) -> None:
        super().check()
        if self.feature_items and not self.item_features:
            raise ValueError("--config feature_items=true adds the items of the item feature file: give it with "
                             "--config item_features=FILE")
        for field in FEATURE_FIELDS:
            encoding = getattr(self, f"{field}_encoding")
            if encoding and not getattr(self, field):
                raise ValueError(f"--config {field}_encoding={encoding} is the encoding of the {field.split('_')[0]} "
                                 f"feature file: give it with --config {field}=FILE")
            require(not encoding or _is_encoding(encoding), f"{field}_encoding", encoding,
                    f"{ENCODING_EXPECTED} (or empty: the data's --encoding)")
        if self.prop_sliding_window == -1:
            return
        require(0.0 < self.prop_sliding_window <= 1.0, "prop_sliding_window", self.prop_sliding_window,
                "in (0, 1] or -1")
        step = int(self.prop_sliding_window * self.max_len)
        if step < 1:
            raise ValueError(
                f"--max_len {self.max_len} is too short for the {self.dataset} preset's window step "
                f"(prop_sliding_window {self.prop_sliding_window} x {self.max_len} = {step} items): use "
                f"--max_len {math.ceil(1 / self.prop_sliding_window)} or more, or set --config prop_sliding_window")


@dataclasses.dataclass
class MaskedData(SlidingWindowData):
    """The Cloze task's masked instances, as the original code writes them.

    Attributes:
        masked_lm_prob: fraction of a window's items masked in a random-mask instance.
        max_predictions_per_seq: P, the number of masked slots per instance.
        dupe_factor: random-mask copies of each window (one mask-last instance is added).
        mask_prob: probability a chosen item becomes [MASK]; otherwise it is kept (half) or replaced
            by a random item (half). 1.0 in every original script.
        num_shards: TFRecord shards for the static training instances.
        static_instances: write the static masked TFRecords at preparation (dynamic masking does
            not need them).
        mask_runs: mask runs of equal successive items together (the matching paper).
    """

    masked_lm_prob: float = 0.2
    max_predictions_per_seq: int = 40
    dupe_factor: int = 10
    mask_prob: float = 1.0
    num_shards: int = 4
    static_instances: bool = True
    mask_runs: bool = False

    # The share of matching-only instances (`MatchingData`); none here.
    match_only_prob: ClassVar[float] = 0.1

    def check(self) -> None:
        super().check()
        require(0.0 < self.masked_lm_prob <= 1.0, "masked_lm_prob", self.masked_lm_prob, "in (0, 1]")
        require(self.max_predictions_per_seq >= 1, "max_predictions_per_seq", self.max_predictions_per_seq,
                "at least 1")
        require(self.dupe_factor >= 0, "dupe_factor", self.dupe_factor, "at least 0")
        require(0.0 <= self.mask_prob <= 1.0, "mask_prob", self.mask_prob, "in [0, 1]")
        require(self.num_shards >= 1, "num_shards", self.num_shards, "at least 1")

    def key_settings(self) -> dict[str, Any]:
        return {**super().key_settings(), "matching": self.matching, "match_only_prob": self.match_only_prob}


@dataclasses.dataclass
class MatchingData(MaskedData):
    """The masked instances of BERT4Rec with the matching task: besides the mask-last instances, a
    share `match_only_prob` of the others are matching-only (no mask) and the rest mask+matching; a
    matching instance's last item is its matching target and leaves its input.

    Attributes:
        match_only_prob: the share of matching-only among the non-mask-last instances.
    """

    match_only_prob: float = 0.1
    matching: ClassVar[bool] = True

    def check(self) -> None:
        super().check()
        require(0.0 <= self.match_only_prob <= 1.0, "match_only_prob", self.match_only_prob, "in [0, 1]")


# The train sections.

@dataclasses.dataclass
class RunConfig(Section):
    """What every run does: evaluate, and record the recipe it started from.

    `eval_users` (0: every user) validates and tests on a fixed sample of that many users instead of
    all (`bert4rec_tf.evaluation.evaluator.evaluation_users`), for data sets whose full evaluation
    would take longer than the training; results.json says how many were evaluated. `valid_users`
    (0: the users tested) validates during training on a fixed sample of that many of the users
    tested, the same at every validation, while the test takes them all: the checkpoint is chosen
    and training stopped on the sample, and its two standard errors are logged beside the curve.
    `recipe` records the name of `RECIPES` whose settings the run started from (before the
    command's own overrides); "paper": the preset as it is.
    """

    eval_users: int = 0
    valid_users: int = 0
    recipe: str = "paper"

    def check(self) -> None:
        super().check()
        from bert4rec_tf.config.presets import RECIPES

        require(self.eval_users >= 0, "eval_users", self.eval_users, "at least 0 (0: every user)")
        require(self.valid_users >= 0, "valid_users", self.valid_users, "at least 0 (0: the users tested)")
        require(self.recipe in RECIPES, "recipe", self.recipe, f"one of {', '.join(RECIPES)}")


@dataclasses.dataclass
class TrainConfig(RunConfig):
    """Optimisation (original optimization.py and run scripts), for a family with weights to train.

    `time_budget` (seconds, 0: none) trains until that much wall-clock time of training and
    validation has passed, with the learning-rate schedule fitted to the steps the budget affords;
    `train_steps` then only caps the steps. `stop_after` (seconds, 0: none; with a time budget) stops
    training once that much time has passed, the schedule still fitted to `time_budget`: the first
    `stop_after` seconds of the `time_budget` run, as a tuning trial trains them. Like `train_steps`,
    it binds nothing: the same command with a larger `stop_after` trains on.

    `length_groups` (padding-aware batches, see `bert4rec_tf.data.pipeline.length_grouped`): 1 (the
    default) trims each batch to its longest sequence, the batches as in the stream; N > 1 also sorts
    the instances of N consecutive batches by length before cutting them into batches (narrower
    batches, but it learned less per step on Beauty); 0 keeps full-width batches, as the original code.

    `sparse_updates` (`bert4rec_tf.training.optimization.SparseRowsAdamW`): a table whose gradient is
    sparse (lookups only: the item table under `--loss sampled_softmax`) has only the rows of the
    batch updated, moments and weight decay included; off by default (every row moves at every step,
    as the original's AdamW).

    `decay` (true: the original's schedule) decays the learning rate linearly to 0 at the last step
    after the warm-up; false keeps it at `learning_rate` after the warm-up (the SASRec paper's Adam at
    a constant rate, with `warmup_steps` 0 and `weight_decay` 0).
    """

    batch_size: int = 256
    learning_rate: float = 1e-4
    train_steps: int = 400_000
    warmup_steps: int = constants.WARMUP_STEPS
    decay: bool = True
    weight_decay: float = constants.WEIGHT_DECAY_RATE
    clip_norm: float = constants.CLIP_NORM
    time_budget: float = 0.0
    stop_after: float = 0.0
    length_groups: int = 1
    sparse_updates: bool = False

    def check(self) -> None:
        super().check()
        require(self.batch_size >= 1, "batch_size", self.batch_size, "at least 1")
        require(math.isfinite(self.learning_rate) and self.learning_rate > 0, "learning_rate", self.learning_rate,
                "a positive finite number")
        require(self.train_steps >= 1, "train_steps", self.train_steps, "at least 1")
        require(self.warmup_steps >= 0, "warmup_steps", self.warmup_steps, "at least 0")
        require(math.isfinite(self.weight_decay) and self.weight_decay >= 0, "weight_decay", self.weight_decay,
                "a finite number >= 0")
        require(math.isfinite(self.clip_norm) and self.clip_norm > 0, "clip_norm", self.clip_norm,
                "a positive finite number")
        require(math.isfinite(self.time_budget) and self.time_budget >= 0, "time_budget", self.time_budget,
                "a finite number of seconds >= 0")
        require(math.isfinite(self.stop_after) and self.stop_after >= 0, "stop_after", self.stop_after,
                "a finite number of seconds >= 0")
        require(not self.stop_after or self.time_budget, "stop_after", self.stop_after,
                "0 without a time_budget (it cuts a time-budgeted run short)")
        require(self.length_groups >= 0, "length_groups", self.length_groups, "at least 0")


@dataclasses.dataclass
class MaskedTraining(TrainConfig):
    """Training on masked instances.

    Attributes:
        dynamic_masking: fresh masks each epoch instead of the static TFRecords.
    """

    dynamic_masking: bool = False


def check_dropout(section: Section, *names: str) -> None:
    """Each of `names` in [0, 1)."""
    for name in names:
        require(0.0 <= getattr(section, name) < 1.0, name, getattr(section, name), "in [0, 1)")


def check_nonnegative(section: Section, *names: str) -> None:
    """Each of `names` a finite number >= 0."""
    for name in names:
        value = getattr(section, name)
        require(math.isfinite(value) and value >= 0, name, value, "a finite number >= 0")


def check_at_least_one(section: Section, *names: str) -> None:
    """Each of `names` at least 1."""
    for name in names:
        require(getattr(section, name) >= 1, name, getattr(section, name), "at least 1")


def _is_encoding(name: str) -> bool:
    try:
        return codecs.lookup(name) is not None
    except LookupError:
        return False
