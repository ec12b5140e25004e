"""The settings only some families read (`bert4rec_tf.tasks.base.FAMILY_SETTINGS`): the command line
refuses one the run's family does not read, and each family declares every one its code reads.

The declaration is checked against the code: the configuration's reads are recorded while a case's
model is built and trained for a step and its training stream gives a batch (`build_trainee`, as the
trainer does); a family setting read there must be among those its Task declares, or the command
line would refuse a setting that does have effect.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys

import pytest

from bert4rec_tf import cli
from bert4rec_tf.config import DataConfig, ModelConfig, TrainConfig
from bert4rec_tf.tasks import TASKS, task_of_preset
from bert4rec_tf.tasks.base import FAMILY_SETTINGS
from tests.tasks.harness import CASES, tiny


@pytest.mark.parametrize("model, setting, loss", [
    ("bert4rec", "l2=0.01", None),  # regularises only the matrix-factorisation families and Caser
    ("bpr_mf", "model.hidden_dropout=0.1", None),  # BPR-MF has no layer to drop out
    ("fpmc", "hidden_dropout=0.1", None),
    ("pop", "hidden_size=32", None),
    ("caser", "prop_sliding_window=0.5", None),  # Caser's windows slide by one item
    ("sasrec", "sampled_negatives=100", "bce"),
    ("gru4rec_plus", "bpr_max_reg=2", "top1_max"),
    ("bpr_mf", "dynamic_masking=true", None),
    ("bert4rec_1mask", "l2=0.01", None),
])
def test_a_setting_the_family_does_not_read_is_refused(model, setting, loss):
    overrides = [setting] + ([f"loss={loss}"] if loss else [])
    family = task_of_preset(model).name
    named = model if model == family else rf"{model} \(a {family} model\)"  # the --model the command named
    with pytest.raises(ValueError, match=rf"^the setting {setting} has no effect on {named} with --loss"):
        cli.experiment_config("ml-1m", overrides, model=model)


def test_a_setting_the_family_reads_is_taken_and_the_refusal_names_its_readers():
    assert cli.experiment_config("ml-1m", ["l2=0.01"], model="bpr_mf").model.l2 == 0.01
    assert cli.experiment_config("ml-1m", ["sampled_negatives=100", "loss=sampled_softmax"],
                                 model="sasrec").model.sampled_negatives == 100
    assert cli.experiment_config("ml-1m", ["bpr_max_reg=2"], model="gru4rec_plus").model.bpr_max_reg == 2.0
    assert cli.experiment_config("ml-1m", ["num_layers=1"], model="ncf").model.num_layers == 1
    # Presets and recipes set what they like: only the command line's own settings are checked
    # (Caser's preset sets prop_sliding_window, the cpu recipes dynamic masking for every family).
    assert cli.experiment_config("ml-1m", [], model="caser", recipe="cpu-1h").data.prop_sliding_window == 1.0
    with pytest.raises(ValueError) as refused:
        cli.experiment_config("ml-1m", ["sampled_negatives=100"], model="sasrec")
    assert str(refused.value) == (
        "the setting sampled_negatives=100 has no effect on sasrec with --loss bce: model.sampled_negatives is read "
        "only by bert4rec with --loss sampled_softmax, sasrec with --loss sampled_softmax, bert4rec_match with "
        "--loss sampled_softmax")


@contextlib.contextmanager
def recorded_reads():
    """The `section.field` names of the configuration read inside the block (by anything but the
    dataclasses module, whose copies read every field)."""
    read: set[str] = set()
    sections = {ModelConfig: "model", DataConfig: "data", TrainConfig: "train"}
    for cls, section in sections.items():
        names = {field.name for field in dataclasses.fields(cls)}

        def getter(self, name, section=section, names=names):
            if name in names and sys._getframe(1).f_globals.get("__name__") != "dataclasses":
                read.add(f"{section}.{name}")
            return object.__getattribute__(self, name)

        cls.__getattribute__ = getter
    try:
        yield read
    finally:
        for cls in sections:
            del cls.__getattribute__


@pytest.mark.parametrize("case", CASES, ids=[name for name, _, _ in CASES])
def test_a_family_declares_every_family_setting_its_code_reads(case, planted):
    from bert4rec_tf.data.prepare import prepare
    from bert4rec_tf.data.split import training_sequences
    from bert4rec_tf.training.build import build_trainee

    name, preset, overrides = case
    task = task_of_preset(preset)
    config = cli.experiment_config("beauty", tiny(preset, overrides), model=preset)
    source_file, data_dir = planted
    prepared = prepare(config.data, data_dir, source_file, progress=False)
    config.model.vocab_size = int(prepared.metadata["vocab_size"])
    config.model.num_users = int(prepared.metadata["num_users"])
    train = training_sequences(prepared.sequences(), config.data.split)
    with recorded_reads() as read:
        trainee = build_trainee(config, prepared, train)
        if trainee.stream is not None:
            trainee.model.train_on_batch(next(iter(trainee.stream(0))))
    family = read & set(FAMILY_SETTINGS)
    assert family - task.reads(config) == set(), name
    if task.trains:  # the recording sees the reads: every trained family has a size
        assert "model.hidden_size" in family, name


def test_every_declared_setting_is_a_family_setting():
    for task in TASKS.values():
        for loss in task.losses:
            config = cli.experiment_config("ml-1m", [f"loss={loss}"], model=next(iter(task.presets)))
            assert task.reads(config) <= set(FAMILY_SETTINGS), task.name


def test_the_heads_must_divide_d_only_where_the_family_has_heads():
    # Steam's preset has 8 heads; Caser's d 50 does not divide by them, and Caser has no heads.
    assert cli.experiment_config("steam", [], model="caser").model.hidden_size == 50
    with pytest.raises(ValueError, match="^--config num_heads must be at least 1 and a divisor of hidden_size 50, got 8$"):
        cli.experiment_config("steam", ["hidden_size=50"], model="bert4rec")


def test_reproduce_refuses_a_plan_with_a_setting_one_of_its_models_does_not_read(tmp_path, capsys):
    from bert4rec_tf.experiments import reproduce

    extra = ["--extra", "--config negative_alpha=1", "--dry_run", "--out", str(tmp_path)]
    assert reproduce.main(["table2", "--datasets", "beauty", "--only", "bpr-mf,pop", *extra]) == 1
    assert capsys.readouterr().err.startswith("error: run beauty-pop: the setting negative_alpha=1 has no effect on pop")
    assert reproduce.main(["table2", "--datasets", "beauty", "--only", "bpr-mf,caser", *extra]) == 0
