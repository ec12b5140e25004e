"""Every registered model learns: on a tiny planted-order data set, a few hundred steps beat POP clearly.

The users mostly follow one hidden order of the items (`tests.conftest.planted_order_sequences`), so
a model that reads the sequence predicts the next item far better than popularity does. A model whose
training does not reach its scores (the matching model of issue 20 learned only popularity) fails here.
"""

from __future__ import annotations

import keras
import pytest

from bert4rec_tf import cli
from bert4rec_tf.data.prepare import prepare
from bert4rec_tf.data.split import training_sequences
from bert4rec_tf.evaluation.evaluator import evaluate
from bert4rec_tf.models import MODELS, build_model
from bert4rec_tf.training.optimization import WarmupLinearDecay, make_optimizer
from bert4rec_tf.training.trainer import training_stream
from tests.conftest import planted_order_sequences, write_pairs

STEPS = 300
# Tiny dimensions and a fast rate; the rest of each model's preset is kept.
TINY = ["max_len=20", "model.hidden_size=16", "model.num_heads=2", "model.intermediate_size=32",
        "model.hidden_dropout=0.1", "model.attention_dropout=0.1", "batch_size=32", "learning_rate=1e-2",
        "warmup_steps=30", f"train_steps={STEPS}", "dynamic_masking=true", "static_instances=false",
        "dupe_factor=2", "num_negatives=20"]
# (model, extra overrides): every registered model; SASRec with both losses.
CASES = {"bert4rec": ("bert4rec", []), "bert4rec_match": ("bert4rec_match", []),
         "sasrec-bce": ("sasrec", ["loss=bce"]), "sasrec-ce": ("sasrec", ["loss=ce"])}
MARGIN = 0.1  # full-ranking Recall@10 above POP's (0.36 here)


def test_every_trainable_model_is_covered():
    assert {model for model, _ in CASES.values()} == set(MODELS) - {"pop"}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The planted-order data set as a `user item` file, and a folder for its preparations."""
    root = tmp_path_factory.mktemp("planted")
    sequences = planted_order_sequences(num_users=400, num_items=100, follow=0.9)
    return write_pairs(str(root / "planted.txt"), sequences), str(root / "data")


def full_recall(model_name: str, overrides: list[str], source) -> float:
    """Test full-ranking Recall@10 of `model_name` after training (POP: its counts) on the planted data."""
    source_file, data_dir = source
    config = cli.experiment_config("beauty", TINY + overrides, model=model_name)
    prepared = prepare(config.data, data_dir, source_file, progress=False)
    config.model.vocab_size = int(prepared.metadata["vocab_size"])
    sequences = prepared.sequences()
    train = training_sequences(sequences, config.data.split)
    keras.utils.set_random_seed(config.data.seed)
    model = build_model(config.model)
    model.fit_statistics(train)
    if model.trainable_variables:
        schedule = WarmupLinearDecay(config.train.learning_rate, config.train.warmup_steps, config.train.train_steps)
        model.compile(optimizer=make_optimizer(config.train, model.trainable_variables, schedule))
        model.fit(training_stream(model, config, prepared, train)(0), epochs=1,
                  steps_per_epoch=config.train.train_steps, verbose=0)
    return evaluate(model, sequences, "test", config.data.max_len, protocols=("full",))["full"]["Recall@10"]


@pytest.fixture(scope="module")
def pop_recall(source) -> float:
    return full_recall("pop", [], source)


@pytest.mark.parametrize("case", sorted(CASES))
def test_model_beats_pop_on_planted_order(case, source, pop_recall):
    model_name, overrides = CASES[case]
    recall = full_recall(model_name, overrides, source)
    assert recall >= pop_recall + MARGIN, f"{case}: full Recall@10 {recall:.3f}, POP {pop_recall:.3f}"
