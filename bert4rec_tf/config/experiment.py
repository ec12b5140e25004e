"""A run's configuration: its family's three sections, set key by key against the family's schema.

Flags only pick a preset and override fields; the resolved configuration is written as JSON next to
every run's outputs (`to_dict`: {"data": {...}, "model": {...}, "train": {...}}).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, NamedTuple

from bert4rec_tf.config.model_parts import ModelConfig
from bert4rec_tf.config.sections import DataConfig, RunConfig, Section, flag_of


class Family(NamedTuple):
    """The section classes of a model family (`bert4rec_tf.tasks.Task` declares them)."""

    data: type[DataConfig]
    model: type[ModelConfig]
    train: type[RunConfig]


# model name -> its sections, filled by `bert4rec_tf.tasks.register_task`.
FAMILIES: dict[str, Family] = {}
SECTIONS = ("data", "model", "train")
# The entry-point group through which an installed distribution adds a model family
# (`bert4rec_tf.tasks.load_plugins`).
PLUGIN_GROUP = "bert4rec_tf.tasks"


def register_family(name: str, family: Family) -> None:
    """Makes `name`'s sections known to `ExperimentConfig.for_family` and to the models' loading."""
    FAMILIES[name] = family


class UnknownFamily(ValueError):
    """A family name that no installed distribution registers (a plugin's, not installed here): the
    one-line message names it and the entry-point group a plugin registers under."""

    def __init__(self, name: str):
        super().__init__(f"model family {name!r} is not installed: install the package that registers it under the "
                         f"entry-point group {PLUGIN_GROUP}")


def family(name: str) -> Family:
    """The sections of the family `name`.

    Raises:
        UnknownFamily: for a name no family is registered under.
        ValueError: for an empty name, listing the registered ones.
    """
    if not name:
        raise ValueError(f"--config model.name must be one of {', '.join(FAMILIES)}, got {name!r}")
    if name not in FAMILIES:
        raise UnknownFamily(name)
    return FAMILIES[name]


def model_section(values: ModelConfig | dict) -> ModelConfig:
    """`values` as its family's model section: a section as it is, or a dict (a saved model's
    `get_config`, of this format or the earlier one, `migrate_section`)."""
    if isinstance(values, ModelConfig):
        return values
    kind = family(values.get("name", "")).model
    return kind(**migrate_section(kind, values, "model"))


class UnknownSetting(ValueError):
    """A key the family's sections do not have: the one-line message names the family (or `named`,
    e.g. the `--model` preset), the key and its flag, and lists the family's keys."""

    def __init__(self, config: "ExperimentConfig", key: str, named: str | None = None):
        super().__init__(f"{named or config.model.name} has no setting {key!r} ({flag_of(key.split('.')[-1])}); "
                         f"its settings: {', '.join(config.keys())}")


@dataclasses.dataclass
class ExperimentConfig:
    """Everything one run needs: data, model and training sections, of the classes its family chose."""

    data: DataConfig
    model: ModelConfig
    train: RunConfig

    @classmethod
    def for_family(cls, name: str) -> "ExperimentConfig":
        """The family `name`'s sections at their defaults."""
        sections = family(name)
        return cls(data=sections.data(), model=sections.model(name=name), train=sections.train())

    def to_dict(self) -> dict[str, Any]:
        return {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "ExperimentConfig":
        """The configuration `to_dict` gave (or the earlier format, one flat schema for every family:
        the fields the family does not have are left out, `migrate_section`).

        Raises:
            ValueError: for an unknown family, key or value.
        """
        config = cls.for_family(values.get("model", {}).get("name", ""))
        for section in SECTIONS:
            fields = migrate_section(type(getattr(config, section)), values.get(section, {}), section)
            for key, value in fields.items():
                if (section, key) != ("model", "name"):
                    config.override(f"{section}.{key}", value)
        return config

    def validate(self) -> None:
        """Checks every section's fields (`Section.check`); what a family checks across sections,
        its Task checks (`bert4rec_tf.tasks.validate` runs both).

        Raises:
            ValueError: one line naming the flag (or `--config section.key`) and the value.
        """
        for name in SECTIONS:
            getattr(self, name).check()

    def keys(self) -> list[str]:
        """Every `section.field` of this family."""
        return [f"{name}.{field}" for name in SECTIONS for field in getattr(self, name).keys()]

    def has(self, key: str) -> bool:
        """Whether this family has the setting `key` (`section.field` or a field name)."""
        try:
            self.resolve(key)
        except ValueError:
            return False
        return True

    def resolve(self, key: str) -> tuple[str, str]:
        """(section, field) of `key`, `section.field` or a field name of one section (`max_len`: data).

        Raises:
            UnknownSetting: for a key this family does not have, listing its keys.
            ValueError: for a field name of several sections.
        """
        if "." in key:
            section, field = key.split(".", 1)
            if section in SECTIONS and field in getattr(self, section).keys():
                return section, field
        else:
            owners = [name for name in SECTIONS if key in getattr(self, name).keys()]
            if key == "max_len" and "data" in owners:
                return "data", key
            if len(owners) == 1:
                return owners[0], key
            if owners:
                raise ValueError(f"ambiguous configuration key {key!r}: {' or '.join(f'{s}.{key}' for s in owners)}")
        raise UnknownSetting(self, key)

    def override(self, key: str, value: Any) -> str:
        """Sets `section.field` (or a field name of one section) to `value`; returns `section.field`.

        A string value is converted to the field's type. `max_len` is kept equal in data and model.
        The family is chosen by the preset (`--model`), not set.

        Raises:
            ValueError: naming the key when this family does not have it, or the value does not parse.
        """
        section_name, field_name = self.resolve(key)
        if (section_name, field_name) == ("model", "name"):
            raise ValueError(f"the model family is chosen with --model, not set with --config {key}")
        section = getattr(self, section_name)
        parsed = _parse_value(key, value, type(getattr(section, field_name)))
        setattr(section, field_name, parsed)
        if field_name == "max_len":
            for name in ("data", "model"):
                if "max_len" in getattr(self, name).keys():
                    setattr(getattr(self, name), "max_len", parsed)
        return f"{section_name}.{field_name}"

    def apply(self, overrides: dict[str, Any], only_known: bool = False) -> None:
        """Sets each `key: value` of `overrides`; with `only_known`, the keys this family does not
        have are passed over (a data set's preset or a shared recipe, written for every family)."""
        for key, value in overrides.items():
            if not only_known or self.has(key):
                self.override(key, value)


# The fields that say how long a run trains, not what it trains: a run folder resumed with other values
# trains on (`config_differences` callers ignore them).
RUN_LENGTH = (("train", "train_steps"), ("train", "stop_after"))

# The fields of the one configuration every family shared before each had its own sections: a
# record (config.json, a model's `get_config`) holding only such fields is of that format, and the
# fields its family does not have are left out as it is read (the family never read them).
EARLIER_FIELDS = {
    "data": ("dataset", "max_len", "masked_lm_prob", "max_predictions_per_seq", "prop_sliding_window", "dupe_factor",
             "mask_prob", "split", "num_negatives", "num_shards", "static_instances", "matching", "match_only_prob",
             "mask_runs", "seed", "encoding"),
    "model": ("name", "vocab_size", "max_len", "hidden_size", "num_layers", "num_heads", "intermediate_size",
              "hidden_dropout", "attention_dropout", "use_position_embedding", "use_ffn", "use_layer_norm",
              "use_residual", "loss", "match_negatives", "match_scale", "num_users", "train_negatives",
              "negative_alpha", "l2", "next_targets", "conv_filters", "vertical_filters", "learned_padding",
              "code_network", "bpr_max_reg", "sampled_negatives", "padding_free"),
    "train": ("batch_size", "learning_rate", "train_steps", "warmup_steps", "decay", "weight_decay", "clip_norm",
              "dynamic_masking", "time_budget", "length_groups", "eval_users", "sparse_updates", "recipe"),
}


def migrate_section(kind: type[Section], values: dict[str, Any], section: str) -> dict[str, Any]:
    """`values` of section `section` with only the fields `kind` has, when they are a record of the
    earlier format (every key among `EARLIER_FIELDS`); a record of this format as it is (a key `kind`
    does not have is then refused where it is set)."""
    keys = set(kind.keys())
    if set(values) <= keys or not set(values) <= set(EARLIER_FIELDS[section]):
        return dict(values)
    return {key: value for key, value in values.items() if key in keys}


def config_differences(recorded: dict, current: dict, ignore: tuple = ()) -> list[str]:
    """The `section.key` fields whose values differ between a recorded configuration (`to_dict()`
    form) and `current`, sorted, leaving out the (section, key) pairs in `ignore`.

    A field the recorded one lacks came to the package after it was written, and its default keeps the
    behaviour of before: the record stands for that default (of `current`'s family), so the field
    differs when `current` sets another value (a recipe's `train.valid_users` 10,000 against a record
    made when every user was validated).

    Raises:
        ValueError: when `current` names a family that is not registered.

    Example: config_differences({"model": {"l2": 0.0}}, {"model": {"l2": 0.01, "name": "ncf"}}) == ["model.l2"]
    """
    defaults = ExperimentConfig.for_family(current.get("model", {}).get("name", "")).to_dict()
    missing = object()

    def was(section: str, key: str):
        values = recorded.get(section, {})
        return values[key] if key in values else defaults.get(section, {}).get(key, missing)

    return sorted(f"{section}.{key}" for section, values in current.items() for key, value in values.items()
                  if (section, key) not in ignore and was(section, key) is not missing
                  and was(section, key) != value)


def _parse_value(key: str, value: Any, kind: type) -> Any:
    if not isinstance(value, str):
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, kind):
            return value
        raise ValueError(f"configuration key {key!r} needs a {kind.__name__}, got {value!r}")
    text = value.strip()
    try:
        if kind is bool:
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return lowered in ("true", "1", "yes")
        if kind is int:
            number = float(text)  # accepts 4e5 as well as 400000
            if not number.is_integer():
                raise ValueError(text)
            return int(number)
        if kind is float:
            return float(text)
        return text
    except ValueError:
        raise ValueError(f"configuration key {key!r} needs a {kind.__name__}, got {value!r}") from None
