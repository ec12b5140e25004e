"""`--loss sampled_softmax` in the models whose loss is a softmax over the catalogue: the sampler, and
the models' sampled loss against their exact loss when every id is a negative."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert4rec_tf.layers.catalogue_sampler import NEVER, CatalogueSampler
from bert4rec_tf.tasks import TASKS
from bert4rec_tf.training.callbacks import seed_generators
from tests.models.test_relatives import build_model, config, training_batch

SOFTMAX_FAMILIES = [name for name, task in TASKS.items() if "sampled_softmax" in task.losses]


def test_the_softmax_families_take_the_sampled_loss():
    assert sorted(SOFTMAX_FAMILIES) == ["bert4rec", "bert4rec_match", "sasrec"]


def test_the_sampler_draws_real_items_by_popularity_and_knows_their_log_q():
    keras.utils.set_random_seed(1)
    sampler = CatalogueSampler(vocab_size=7, count=20_000, alpha=1.0)  # items 1..5
    sampler.build()
    sampler.fit_counts(np.array([9, 4, 0, 1, 3, 2, 9]))  # padding and [MASK] counts are ignored; 0 counts as 1
    q = np.array([4, 1, 1, 3, 2]) / 11
    np.testing.assert_allclose(sampler.log_q.numpy()[1:6], np.log(q), rtol=1e-6)
    assert sampler.log_q.numpy()[0] == sampler.log_q.numpy()[6] == np.float32(NEVER)
    draws = sampler().numpy()
    assert draws.shape == (20_000,) and draws.min() >= 1 and draws.max() <= 5
    np.testing.assert_allclose(np.bincount(draws, minlength=6)[1:] / 20_000, q, atol=0.015)
    uniform = CatalogueSampler(vocab_size=7, count=20_000)
    uniform.build()
    draws = uniform().numpy()
    np.testing.assert_allclose(np.bincount(draws, minlength=6)[1:] / 20_000, 0.2, atol=0.015)
    np.testing.assert_allclose(uniform.log_q.numpy()[1:6], np.log(0.2), rtol=1e-6)
    with pytest.raises(ValueError, match="at least one negative"):
        CatalogueSampler(vocab_size=7, count=0)


@pytest.mark.parametrize("name", SOFTMAX_FAMILIES)
def test_with_every_id_as_a_negative_the_sampled_loss_is_the_exact_loss_with_its_gradients(name):
    """The sampler made to return every id once under a uniform log q: the sampled training loss is
    the exact one (dropout off), with the same gradients."""
    exact_config = config(name, hidden_dropout=0.0, attention_dropout=0.0, loss="ce")
    sampled_config = config(name, hidden_dropout=0.0, attention_dropout=0.0, loss="sampled_softmax")
    exact, sampled = build_model(exact_config), build_model(sampled_config)
    sampled.set_weights(exact.get_weights() + [w.numpy() for w in sampled.sampler.weights])
    vocab = sampled_config.vocab_size
    sampled.sampler.call = lambda inputs=None: tf.random.shuffle(tf.range(vocab, dtype=tf.int32), seed=3)
    sampled.sampler.log_q.assign(np.full(vocab, -np.log(vocab), np.float32))
    batch = {key: tf.constant(value) for key, value in training_batch(name, exact_config).items()}
    results = []
    for model in (exact, sampled):
        with tf.GradientTape() as tape:
            loss = model.training_loss(batch)
        grads = tape.gradient(loss, model.trainable_variables)
        results.append((float(loss), [np.asarray(tf.convert_to_tensor(g)) for g in grads]))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    for one, other in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_allclose(other, one, rtol=1e-4, atol=1e-6)
    # With a real sampler of a few negatives the loss differs (it is an estimate) and the validation
    # loss (`compute_loss`) is still the exact one.
    few = build_model(config(name, hidden_dropout=0.0, attention_dropout=0.0, loss="sampled_softmax",
                             sampled_negatives=3))
    few.set_weights(sampled.get_weights())
    assert float(few.training_loss(batch)) < results[0][0] - 1e-3
    exact_validation = exact.compute_loss(x=batch, y_pred=exact(batch, training=False))
    assert float(few.compute_loss(x=batch, y_pred=few(batch, training=False))) == pytest.approx(
        float(exact_validation), rel=1e-6)


@pytest.mark.parametrize("name", SOFTMAX_FAMILIES)
def test_the_draws_are_seeded_and_resume_from_the_checkpointed_state(name):
    model = build_model(config(name, loss="sampled_softmax", sampled_negatives=5))
    assert model.sampler.seed_generator in seed_generators(model)
    keras.utils.set_random_seed(4)
    model = build_model(config(name, loss="sampled_softmax", sampled_negatives=5))
    first = [model.sampler().numpy() for _ in range(3)]
    keras.utils.set_random_seed(4)
    again = build_model(config(name, loss="sampled_softmax", sampled_negatives=5))
    state = None
    for index in range(3):
        if index == 1:
            state = again.sampler.seed_generator.state.numpy()
        np.testing.assert_array_equal(again.sampler().numpy(), first[index])
    resumed = build_model(config(name, loss="sampled_softmax", sampled_negatives=5))
    resumed.sampler.seed_generator.state.assign(state)
    np.testing.assert_array_equal(resumed.sampler().numpy(), first[1])


@pytest.mark.parametrize("name", SOFTMAX_FAMILIES)
def test_sparse_updates_move_only_the_item_rows_of_the_batch_and_its_negatives(name):
    from bert4rec_tf.config import TrainConfig
    from bert4rec_tf.training.optimization import make_optimizer

    batch = {key: tf.constant(value) for key, value in training_batch(name, config(name)).items()}
    items = [np.ravel(value) for key, value in batch.items() if "ids" in key or key.startswith("match_")]
    seen = set(np.unique(np.concatenate(items)))  # every item id the batch holds (BERT4Rec with matching: its negatives)
    changed = {}
    for sparse in (False, True):
        model = build_model(config(name, loss="sampled_softmax", sampled_negatives=3))
        model.compile(optimizer=make_optimizer(TrainConfig(train_steps=10, warmup_steps=0, learning_rate=0.1,
                                                           sparse_updates=sparse), model.trainable_variables))
        [table] = [v for v in model.trainable_variables if "item_embedding" in v.path]
        before = table.numpy().copy()
        model.train_step(batch)  # eagerly: the step `fit` traces
        changed[sparse] = set(np.flatnonzero(np.any(table.numpy() != before, axis=1)))
    assert len(changed[False]) == table.shape[0]  # AdamW decays every row
    assert 0 < len(changed[True]) <= len(seen) + 3 and len(changed[True] - seen) <= 3, changed[True]
