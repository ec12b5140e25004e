"""Every model through the shared boundary: SASRec, POP, BERT4Rec with matching (and BERT4Rec), and
every other registered family through its own training stream."""

from __future__ import annotations

import types

import keras
import numpy as np
import pytest

from bert4rec_tf.config import ModelConfig
from bert4rec_tf.constants import vocab_size
from bert4rec_tf.models import POP, SASRec
from bert4rec_tf.tasks import TASKS, get_task
from tests.data.test_instances import small_experiment
from tests.conftest import family_config

NUM_ITEMS = 12
MAX_LEN = 6
HISTORY = np.array([[1, 2, 3, 4, 0, 0], [5, 0, 0, 0, 0, 0], [0, 7, 8, 9, 10, 11]])
USERS = 3  # model user ids 1..3, for the families that learn a vector per user
# The families whose training batch is written out here; the others' comes from their own stream.
HAND_MADE_BATCHES = ("sasrec", "bert4rec", "bert4rec_match")
# Settings that make a family build other layers, run through the same checks as its defaults.
VARIANTS = {"sasrec-code_network": ("sasrec", {"code_network": True})}


def cases(names) -> list:
    """(family, config changes) for every family in `names` with its defaults, then its `VARIANTS`."""
    names = sorted(names)
    return ([pytest.param(name, {}, id=name) for name in names]
            + [pytest.param(name, changes, id=case) for case, (name, changes) in VARIANTS.items() if name in names])


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(5)


def config(name: str, **changes) :
    values = dict(name=name, vocab_size=vocab_size(NUM_ITEMS), max_len=MAX_LEN, hidden_size=8, num_heads=2,
                  intermediate_size=16, num_layers=2, hidden_dropout=0.1, attention_dropout=0.1,
                  num_users=USERS, loss=(get_task(name).losses or ('',))[0])
    values.update(changes)
    return family_config(**values)


def scores_and_user(model, history: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`score_next` and `user_representation` of `history`, as NumPy; users 1, 2, ... for a model
    that reads users."""
    users = {"users": np.arange(1, len(history) + 1)} if model.reads_users else {}
    return (np.asarray(model.score_next(history, **users)), np.asarray(model.user_representation(history, **users)))


def stream_batch(model_config: ModelConfig, batch_size: int = 4) -> dict[str, np.ndarray]:
    """The first batch of the family's own training stream on three small users' items."""
    task = get_task(model_config.name)
    experiment = small_experiment(model_config.name, max_len=MAX_LEN, prop_sliding_window=1.0)
    experiment.model = model_config
    experiment.apply({"train.batch_size": batch_size, "train.dynamic_masking": True}, only_known=True)
    rng = np.random.default_rng(0)
    train = [rng.choice(np.arange(1, NUM_ITEMS + 1), size=n, replace=False) for n in (4, 6, 9)][:model_config.num_users]
    stream = task.training_stream(experiment, types.SimpleNamespace(num_items=NUM_ITEMS), train)
    return {key: value.numpy() for key, value in next(iter(stream(0))).items()}


def build_model(config: ModelConfig):
    """The model of `config` as its Task builds it."""
    return get_task(config.name).build_model(config)


def training_batch(name: str, model_config: ModelConfig | None = None) -> dict[str, np.ndarray]:
    """A small batch of the model's training features: written out here for `HAND_MADE_BATCHES`, else
    the first batch of the family's own stream (`stream_batch`) for `model_config`."""
    if name not in HAND_MADE_BATCHES:
        return stream_batch(model_config or config(name))
    rng = np.random.default_rng(0)
    if name == "sasrec":
        inputs = np.array([[0, 0, 1, 2, 3, 4], [0, 5, 6, 7, 8, 9]])
        positives = np.array([[0, 0, 2, 3, 4, 5], [0, 6, 7, 8, 9, 10]])
        negatives = np.where(positives > 0, 12, 0)
        return {"input_ids": inputs, "positive_ids": positives, "negative_ids": negatives}
    features = {"input_ids": np.array([[1, 13, 3, 4, 0, 0], [5, 6, 13, 0, 0, 0]]),
                "input_mask": np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0]]),
                "masked_lm_positions": np.array([[1, 0], [2, 0]]), "masked_lm_ids": np.array([[2, 0], [7, 0]]),
                "masked_lm_weights": np.array([[1.0, 0.0], [1.0, 0.0]], "float32")}
    if name == "bert4rec_match":
        features["match_positive"] = np.array([[9], [0]])
        features["match_negatives"] = rng.integers(10, 13, (2, 5))
    return features


@pytest.mark.slow
@pytest.mark.parametrize("name, changes", cases(name for name, task in TASKS.items() if task.trains))
def test_one_fit_step_trains_every_weight_and_logs_the_gradient_norm(name, changes):
    settings = config(name, hidden_dropout=0.0, attention_dropout=0.0, **changes)
    model = build_model(settings)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    before = [v.numpy().copy() for v in model.trainable_variables]
    batch = training_batch(name, settings)
    logs = model.fit(batch, batch_size=len(next(iter(batch.values()))), epochs=1, verbose=0).history
    assert np.isfinite(logs["loss"][0]) and logs["grad_norm"][0] > 0
    unchanged = [v.path for v, old in zip(model.trainable_variables, before) if np.array_equal(v.numpy(), old)]
    if name == "bert4rec_match":  # the masked-item head's bias row of the unseen [UID] logit is sliced off
        unchanged = [path for path in unchanged if not path.endswith("output_bias")]
    assert not unchanged, unchanged


def test_sasrec_attention_is_causal():
    model = build_model(config("sasrec"))
    inputs = {"input_ids": np.array([[0, 1, 2, 3, 4, 5]])}
    changed = {"input_ids": np.array([[0, 1, 2, 3, 9, 11]])}
    before, after = np.asarray(model.encode(inputs)), np.asarray(model.encode(changed))
    # Real positions before the change are unchanged (position 0 is padding, which nothing reads).
    np.testing.assert_array_equal(before[:, 1:4], after[:, 1:4])
    assert not np.allclose(before[:, 4:], after[:, 4:])


def test_sasrec_scores_are_the_last_output_times_the_item_table_without_bias():
    model = build_model(config("sasrec"))
    representation = np.asarray(model.user_representation(HISTORY))
    table = np.asarray(model.embedding.item_embeddings)
    np.testing.assert_allclose(np.asarray(model.score_next(HISTORY)), representation @ table.T, rtol=1e-5, atol=1e-6)
    assert not [w.path for w in model.weights if "output_bias" in w.path]


def test_pop_scores_are_the_training_counts():
    model = POP(config("pop"))
    model.fit_statistics([np.array([1, 2, 2, 3]), np.array([2, 3, 12])])
    expected = np.zeros(vocab_size(NUM_ITEMS))
    expected[[1, 2, 3, 12]] = [1, 3, 2, 1]
    scores = np.asarray(model.score_next(HISTORY))
    assert scores.shape == (3, vocab_size(NUM_ITEMS))
    np.testing.assert_array_equal(scores, np.tile(expected, (3, 1)))
    assert np.asarray(model.user_representation(HISTORY)).tolist() == [[1.0]] * 3
    assert not model.trainable_variables


def test_bert4rec_scores_are_its_representation_times_the_table_plus_bias():
    model = build_model(config("bert4rec"))
    representation = np.asarray(model.user_representation(HISTORY))
    table = np.asarray(model.embedding.item_embeddings)
    expected = representation @ table.T + np.asarray(model.head.output_bias)
    np.testing.assert_allclose(np.asarray(model.score_next(HISTORY)), expected, rtol=1e-5, atol=1e-5)


def test_matching_model_prepends_one_uid_token_and_represents_users_by_its_output():
    model = build_model(config("bert4rec_match"))
    assert model.embedding.vocab_size == vocab_size(NUM_ITEMS) + 1 and model.embedding.max_len == MAX_LEN + 1
    scores = np.asarray(model.score_next(HISTORY))
    assert scores.shape == (3, vocab_size(NUM_ITEMS))
    features = model.history_inputs(HISTORY)
    _, user, _ = model._encode_with_user(features)
    np.testing.assert_array_equal(np.asarray(model.user_representation(HISTORY)), np.asarray(user))
    # The [UID] output depends on the items: two histories, two vectors.
    assert not np.allclose(np.asarray(user)[0], np.asarray(user)[1])


def test_matching_model_loss_is_one_mean_over_the_masked_slots_and_the_matching_targets():
    model = build_model(config("bert4rec_match", hidden_dropout=0.0, attention_dropout=0.0))
    features = training_batch("bert4rec_match")  # two real slots (items 2 and 7), one matching target (row 0)
    logits, user = (np.asarray(output, "float64") for output in model(features))
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    slots = -log_softmax[[0, 1], [2, 7]]
    table = np.asarray(model.embedding.item_embeddings, "float64")
    c = model.model_config.match_scale
    positive, negative = table[9] @ user[0], np.mean(table[features["match_negatives"][0]] @ user[0])
    match = np.logaddexp(0, -c * positive) + np.logaddexp(0, c * negative)
    expected = (slots.sum() + match) / 3
    loss = model.compute_loss(x=features, y_pred=model(features))
    assert float(loss) == pytest.approx(expected, rel=1e-4)
    assert float(model.loss_terms(features)) == 3


@pytest.mark.slow
@pytest.mark.parametrize("name, changes", cases(TASKS))
def test_every_model_survives_keras_save_and_reload(name, changes, tmp_path):
    model = build_model(config(name, **changes))
    if name == "pop":
        model.fit_statistics([np.array([1, 2, 2, 3])])
    path = tmp_path / f"{name}.keras"
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert type(restored) is type(model) and restored.model_config == model.model_config
    for mine, theirs in zip(scores_and_user(restored, HISTORY), scores_and_user(model, HISTORY)):
        np.testing.assert_array_equal(mine, theirs)


def test_sasrec_rejects_an_unknown_loss():
    with pytest.raises(ValueError, match="--loss must be .* for sasrec"):
        SASRec(config("sasrec", loss="hinge"))


@pytest.mark.slow
def test_fit_with_separate_labels_trains_like_labels_in_the_features():
    features = training_batch("bert4rec")
    losses = []
    for data in ((features,), (features, features["masked_lm_ids"])):
        keras.utils.set_random_seed(1)
        model = build_model(config("bert4rec", num_layers=1, hidden_dropout=0.0, attention_dropout=0.0))
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        losses.append(model.fit(*data, batch_size=2, epochs=2, verbose=0).history["loss"])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_score_items_gives_what_score_next_gives_at_those_items(name):
    model = build_model(config(name))
    users = {"users": np.arange(1, len(HISTORY) + 1)} if model.reads_users else {}
    items = np.array([[1, 5, 12], [2, 2, 7], [11, 3, 9]])
    every = np.asarray(model.score_next(HISTORY, training=False, **users))
    np.testing.assert_allclose(np.asarray(model.score_items(HISTORY, items, training=False, **users)),
                               np.take_along_axis(every, items, axis=1), rtol=1e-5, atol=1e-6)
    assert model.scores_chosen_items == (name == "ncf")  # the one family whose own score_items is cheaper
