"""The planted-order learning check of every registered model, shared by the two learning test files.

The users mostly follow one hidden order of the items (`tests.conftest.planted_order_sequences`), so
a model that reads the sequence predicts the next item far better than popularity does. A model whose
training does not reach its scores (the matching model of issue 20 learned only popularity) fails.

The check lives in two files (masked-item models, next-item models) so that the two test workers
train them side by side: pytest-xdist keeps a file on one worker.
"""

from __future__ import annotations

import keras

from bert4rec_tf import cli
from bert4rec_tf.data.prepare import prepare
from bert4rec_tf.data.split import training_sequences
from bert4rec_tf.evaluation.evaluator import evaluate
from bert4rec_tf.models import MODELS, build_model
from bert4rec_tf.training.optimization import WarmupLinearDecay, make_optimizer
from bert4rec_tf.training.trainer import training_stream
from tests.conftest import planted_order_sequences, write_pairs

STEPS = 300
# Tiny dimensions, one block and a fast rate; the rest of each model's preset is kept. Full-width
# batches (length_groups=0) have one shape, so the training step is traced once rather than twice
# (tracing, not the steps, took most of this test's time on the slow CI machines).
TINY = ["max_len=20", "model.num_layers=1", "model.hidden_size=16", "model.num_heads=2",
        "model.intermediate_size=32", "model.hidden_dropout=0.1", "model.attention_dropout=0.1",
        "batch_size=32", "learning_rate=1e-2", "warmup_steps=20", f"train_steps={STEPS}", "length_groups=0",
        "dynamic_masking=true", "static_instances=false", "dupe_factor=2", "num_negatives=20"]
# (model, extra overrides): every registered model; SASRec with both losses.
CASES = {"bert4rec": ("bert4rec", []), "bert4rec_match": ("bert4rec_match", []),
         "sasrec-bce": ("sasrec", ["loss=bce"]), "sasrec-ce": ("sasrec", ["loss=ce"])}
# The cases of each learning test file, by the model's training pipeline.
NEXT_ITEM_CASES = [case for case, (model, _) in CASES.items()
                   if MODELS[model].TRAINING_INSTANCES == "next_item"]
MASKED_CASES = [case for case in CASES if case not in NEXT_ITEM_CASES]
MARGIN = 0.1  # full-ranking Recall@10 above POP's (0.36 here)


def planted_source(root: str) -> tuple[str, str]:
    """The planted-order data set as a `user item` file in `root`, and a folder for its preparations."""
    sequences = planted_order_sequences(num_users=400, num_items=100, follow=0.9)
    return write_pairs(f"{root}/planted.txt", sequences), f"{root}/data"


def full_recall(case: str, source: tuple[str, str]) -> float:
    """Test full-ranking Recall@10 of `case` (a key of CASES, or "pop") after training on the planted data."""
    model_name, overrides = CASES.get(case, (case, []))
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
