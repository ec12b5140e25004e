"""Ranks and metrics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bert4rec_tf.evaluation.metrics import FULL_METRICS, SAMPLED_METRICS, metrics_from_ranks, target_rank
from bert4rec_tf.tasks import REFERENCE_TASK, TASKS


def test_rank_counts_ties_against_the_target():
    target = np.array([0.5, 0.5, 2.0], dtype=np.float32)
    others = np.array([[0.1, 0.9, 0.5], [0.1, 0.2, 0.3], [2.0, 2.0, 2.0]], dtype=np.float32)
    # row 0: 0.9 beats, 0.5 ties -> rank 2; row 1: rank 0; row 2: three ties -> rank 3
    assert np.asarray(target_rank(target, others)).tolist() == [2, 0, 3]


def test_invalid_items_do_not_compete():
    target = np.array([0.5], dtype=np.float32)
    others = np.array([[0.9, 0.8, 0.1]], dtype=np.float32)
    valid = np.array([[False, True, True]])
    assert np.asarray(target_rank(target, others, valid)).tolist() == [1]


def test_nan_scores_rank_the_target_last_never_first():
    nan = np.nan
    target = np.array([nan, 0.5, nan, 0.5], dtype=np.float32)
    others = np.array([[0.1, 0.2, 0.3], [nan, 0.1, 0.2], [nan, nan, nan], [0.1, 0.2, 0.3]], dtype=np.float32)
    valid = np.array([[True, True, True], [True, True, True], [True, False, True], [True, True, True]])
    # row 0: NaN target -> last (3); row 1: the NaN competitor beats it (1); row 2: 2 valid competitors;
    # row 3: no NaN, the target is first
    assert np.asarray(target_rank(target, others, valid)).tolist() == [3, 1, 2, 0]
    assert metrics_from_ranks(np.asarray(target_rank(target[:1], others[:1])), SAMPLED_METRICS)["HR@1"] == 0.0


def test_metrics_by_hand():
    ranks = [0, 3, 9, 40]
    out = metrics_from_ranks(np.array(ranks), SAMPLED_METRICS)
    assert out["HR@1"] == pytest.approx(1 / 4)
    assert out["HR@5"] == pytest.approx(2 / 4)
    assert out["HR@10"] == pytest.approx(3 / 4)
    assert out["NDCG@5"] == pytest.approx((1 / math.log2(2) + 1 / math.log2(5)) / 4)
    assert out["NDCG@10"] == pytest.approx((1.0 + 1 / math.log2(5) + 1 / math.log2(11)) / 4)
    assert out["MRR"] == pytest.approx((1 + 1 / 4 + 1 / 10 + 1 / 41) / 4)
    full = metrics_from_ranks(np.array([19, 20]), FULL_METRICS)
    assert full["Recall@20"] == 0.5 and full["Recall@10"] == 0.0
    assert full["NDCG@20"] == pytest.approx((1 / math.log2(21)) / 2)


def test_unknown_metric_is_an_error():
    with pytest.raises(ValueError, match="unknown metric"):
        metrics_from_ranks(np.array([1]), ("AUC@3",))


class StandIn:
    """What the evaluator asks of a model beside its scores, as `SequentialRecommender` declares it."""

    reads_users = False
    scores_chosen_items = False


class FixedScores(StandIn):
    """A stand-in model: every user gets the same scores, item i scores table[i]."""

    def __init__(self, table):
        self.table = np.asarray(table, dtype=np.float32)

    def score_next(self, history, training=False):
        return np.tile(self.table, (len(history), 1))


def test_evaluate_by_hand():
    from bert4rec_tf.evaluation.evaluator import evaluate
    from tests.data.test_pipeline import sequences_of

    sequences = sequences_of([[1, 2, 3, 4], [4, 3, 6, 5]], num_items=6)
    # vocab: 0 pad, items 1..6, 7 [MASK]; item i scores i, the pad and [MASK] score highest
    model = FixedScores([9, 1, 2, 3, 4, 5, 6, 9])
    candidates = {"pop_test": np.array([[5, 6], [1, 2]]), "uniform_test": np.array([[6, 5], [6, 2]])}
    out = evaluate(model, sequences, "test", max_len=4, candidates=candidates)
    # user 1, target 4: pop others 5, 6 -> rank 2; user 2, target 5: others 1, 2 -> rank 0
    assert out["pop"]["HR@1"] == 0.5 and out["pop"]["MRR"] == pytest.approx((1 / 3 + 1) / 2)
    # uniform: user 1 rank 2 (6, 5 beat 4); user 2 rank 1 (6 beats 5)
    assert out["uniform"]["MRR"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    # full: user 1 history {1,2,3}: 5, 6 beat 4 -> rank 2; user 2 history {4,3,6}: items 1, 2 lower -> 0
    assert out["full"]["MRR"] == pytest.approx((1 / 3 + 1) / 2)
    assert set(out["full"]) == {"Recall@10", "Recall@20", "NDCG@10", "NDCG@20", "MRR"}


class ScoresByUser(StandIn):
    """A stand-in model that scores item i as (the history's first item * i) mod 7: the ranks tell
    whether each user was scored with their own history, whatever the batch order."""

    def score_next(self, history, training=False):
        first = np.asarray(history)[:, :1].astype(np.float32)  # [batch, 1]
        return (first * np.arange(12, dtype=np.float32)) % 7


# POP and a per-user scorer in the default run; the trained models are slow checks (each builds and
# evaluates a model).
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) for name, task in TASKS.items()
                                  if task.trains] + [REFERENCE_TASK, "by_user"])
def test_trimmed_length_sorted_batches_give_the_metrics_of_full_width_batches(name):
    from bert4rec_tf.data.candidates import sample_negatives
    from bert4rec_tf.evaluation.evaluator import evaluate
    from tests.data.test_pipeline import sequences_of
    from tests.models.test_padding import NUM_ITEMS, built

    rng = np.random.default_rng(2)
    num_items = 10 if name == "by_user" else NUM_ITEMS
    lists = [rng.choice(np.arange(1, num_items + 1), size=n, replace=False).tolist() for n in (3, 8, 4, 6, 5, 3, 7) * 5]
    sequences = sequences_of(lists, num_items)
    candidates = {f"{p}_test": sample_negatives(sequences, p, "test", 1 if name == "by_user" else 10, 3)
                  for p in ("pop", "uniform")}
    model = ScoresByUser() if name == "by_user" else built(name, num_users=len(lists))
    results = [evaluate(model, sequences, "test", 24, candidates, batch_size=4, trim=trim) for trim in (True, False)]
    assert results[0] == results[1]


class ChosenItemScores(FixedScores):
    """`FixedScores` that can also score chosen items; `sign` -1 negates those scores only, so a test
    can tell which path the evaluator took."""

    scores_chosen_items = True

    def __init__(self, table, sign=1.0):
        super().__init__(table)
        self.sign = sign
        self.asked = []

    def score_items(self, history, items, training=False):
        self.asked.append(np.asarray(items))
        return self.sign * self.table[np.asarray(items)]


def test_without_full_ranking_a_model_scores_only_targets_and_candidates():
    from bert4rec_tf.evaluation.evaluator import evaluate
    from tests.data.test_pipeline import sequences_of

    sequences = sequences_of([[1, 2, 3, 4], [4, 3, 6, 5]], num_items=6)
    candidates = {"pop_test": np.array([[5, 6], [1, 2]]), "uniform_test": np.array([[6, 5], [6, 2]])}
    table = [9, 1, 2, 3, 4, 5, 6, 9]
    expected = evaluate(FixedScores(table), sequences, "test", 4, candidates, protocols=("pop", "uniform"))
    model = ChosenItemScores(table)
    assert evaluate(model, sequences, "test", 4, candidates, protocols=("pop", "uniform")) == expected
    # Each user's target, then the pop and the uniform candidates: (4, 5, 6, 6, 5) and (5, 1, 2, 6, 2).
    np.testing.assert_array_equal(np.concatenate(model.asked), [[4, 5, 6, 6, 5], [5, 1, 2, 6, 2]])
    # With full ranking every item is scored (score_items is not asked); a wrong score_items would show.
    wrong = ChosenItemScores(table, sign=-1.0)
    assert evaluate(wrong, sequences, "test", 4, candidates, protocols=("pop", "uniform")) != expected
    asked = len(wrong.asked)
    assert evaluate(wrong, sequences, "test", 4, candidates)["pop"] == expected["pop"] and len(wrong.asked) == asked


class RecordedBatches(ScoresByUser):
    """`ScoresByUser` that records the rows of every batch it scores."""

    def __init__(self):
        self.rows = []

    def score_next(self, history, training=False):
        self.rows.append(len(history))
        return super().score_next(history, training)


def test_a_bounded_score_budget_shrinks_the_batches_and_keeps_the_metrics():
    from bert4rec_tf.data.candidates import sample_negatives
    from bert4rec_tf.evaluation.evaluator import evaluate
    from tests.data.test_pipeline import sequences_of

    rng = np.random.default_rng(3)
    lists = [rng.choice(np.arange(1, 11), size=n, replace=False).tolist() for n in (3, 8, 4, 6, 5) * 4]
    sequences = sequences_of(lists, 10)  # vocabulary of 12: padding, 10 items, [MASK]
    candidates = {f"{p}_test": sample_negatives(sequences, p, "test", 1, 3) for p in ("pop", "uniform")}
    wide, narrow = RecordedBatches(), RecordedBatches()
    results = [evaluate(model, sequences, "test", 8, candidates, batch_size=8, max_batch_scores=budget)
               for model, budget in ((wide, 10 ** 6), (narrow, 12 * 3 + 11))]
    assert results[0] == results[1]
    assert max(wide.rows) == 8 and max(narrow.rows) == 3  # 47 scores: 3 users of 12
    assert sum(narrow.rows) == len(lists)
    small = RecordedBatches()
    evaluate(small, sequences, "test", 8, candidates, batch_size=8, max_batch_scores=5)  # fewer than one user's
    assert set(small.rows) == {1}


def test_evaluation_users_are_a_fixed_sorted_sample_and_the_metrics_average_over_them():
    from bert4rec_tf.evaluation.evaluator import evaluate, evaluation_users
    from tests.data.test_pipeline import sequences_of

    assert evaluation_users(10, 0) is None and evaluation_users(10, 10) is None and evaluation_users(10, 12) is None
    sample = evaluation_users(1000, 7)
    assert len(set(sample)) == 7 and list(sample) == sorted(sample) and sample.max() < 1000
    np.testing.assert_array_equal(sample, evaluation_users(1000, 7))
    # The hand-made case of test_evaluate_by_hand: user 0 ranks its target 2nd (pop, full), user 1 first.
    sequences = sequences_of([[1, 2, 3, 4], [4, 3, 6, 5]], num_items=6)
    model = FixedScores([9, 1, 2, 3, 4, 5, 6, 9])
    candidates = {"pop_test": np.array([[5, 6], [1, 2]]), "uniform_test": np.array([[6, 5], [6, 2]])}
    first = evaluate(model, sequences, "test", max_len=4, candidates=candidates, users=np.array([0]))
    second = evaluate(model, sequences, "test", max_len=4, candidates=candidates, users=np.array([1]))
    assert first["pop"]["MRR"] == pytest.approx(1 / 3) and first["full"]["MRR"] == pytest.approx(1 / 3)
    assert second["pop"]["MRR"] == 1.0 and second["uniform"]["MRR"] == pytest.approx(1 / 2)


def test_the_full_ranking_rank_equals_the_rank_over_a_mask_of_competing_items():
    # The reference: a [batch, vocab] mask, False for the padding id, [MASK] and each user's history
    # and target; repeated history items, ties, NaN scores and a target inside its history included.
    from bert4rec_tf.evaluation.metrics import full_ranking_rank

    rng = np.random.default_rng(5)
    num_items, batch = 30, 40
    scores = rng.integers(0, 6, size=(batch, num_items + 2)).astype(np.float32)  # many ties
    scores[rng.random(scores.shape) < 0.05] = np.nan
    histories = [rng.integers(1, num_items + 1, size=rng.integers(1, 12)) for _ in range(batch)]
    targets = np.array([history[0] if row % 7 == 0 else rng.integers(1, num_items + 1)
                        for row, history in enumerate(histories)])
    valid = np.ones(scores.shape, dtype=bool)
    valid[:, 0] = False
    valid[:, num_items + 1:] = False
    rows = [np.unique(np.append(history, target)) for history, target in zip(histories, targets)]
    excluded = np.zeros((batch, max(len(row) for row in rows)), dtype=np.int64)
    for row, items in enumerate(rows):
        valid[row, items] = False
        excluded[row, :len(items)] = items
    target_scores = scores[np.arange(batch), targets]
    expected = np.asarray(target_rank(target_scores, scores, valid))
    assert len(set(expected.tolist())) > 5  # the case is not degenerate
    np.testing.assert_array_equal(np.asarray(full_ranking_rank(scores, target_scores, excluded, num_items)), expected)


def test_the_excluded_items_are_each_users_distinct_history_and_target():
    # The reference is the per-user set of the history and the target (`history_and_target`);
    # sequences with repeats, a target inside its history and a user of the shortest length.
    from bert4rec_tf.data.split import history_and_target
    from bert4rec_tf.evaluation.evaluator import _excluded_items
    from tests.data.test_pipeline import sequences_of

    sequences = sequences_of([[1, 2, 3], [4, 4, 2, 4, 5, 4], [3, 1, 3, 1], [5, 6, 7, 8, 9, 2, 2]], num_items=9)
    users = np.array([3, 0, 1, 2])
    for stage in ("valid", "test"):
        excluded = _excluded_items(sequences, stage, users)
        for row, user in zip(excluded, users):
            history, target = history_and_target(sequences, user, stage)
            real = row[row != 0]
            assert sorted(real.tolist()) == sorted(set(history.tolist()) | {target})  # each once
    with pytest.raises(ValueError, match="unknown evaluation stage 'train'"):
        _excluded_items(sequences, "train", users)


def test_a_second_evaluation_of_a_model_reuses_its_traced_scoring():
    # A run validates many times: its scoring graphs are traced in the first validation only, and
    # the model is not kept alive by them.
    import gc
    import weakref

    from bert4rec_tf.data.candidates import sample_negatives
    from bert4rec_tf.evaluation import evaluator
    from tests.data.test_pipeline import sequences_of
    from tests.models.test_padding import NUM_ITEMS, built

    rng = np.random.default_rng(4)
    lists = [rng.choice(np.arange(1, NUM_ITEMS + 1), size=n, replace=False).tolist() for n in (3, 8, 4, 6) * 6]
    sequences = sequences_of(lists, NUM_ITEMS)
    candidates = {"pop_test": sample_negatives(sequences, "pop", "test", 10, 3)}

    def evaluate_twice():
        model = built("sasrec")
        traced = []
        score_next = model.score_next

        def counted(*args, **kwargs):  # called once per trace, inside the traced function
            traced.append(1)
            return score_next(*args, **kwargs)

        model.score_next = counted
        results = []
        for _ in range(2):
            results.append(evaluator.evaluate(model, sequences, "test", 24, candidates, protocols=("pop", "full"),
                                              batch_size=4))
            results.append(len(traced))
        return results, weakref.ref(model)

    (first, first_traces, second, second_traces), reference = evaluate_twice()
    assert first_traces >= 1 and second_traces == first_traces and second == first
    gc.collect()
    assert reference() is None


def _validation_case(seed: int):
    """A generator, 25 users' sequences with their pop-100 validation candidates, and an untrained SASRec."""
    from bert4rec_tf.data.candidates import sample_negatives
    from tests.data.test_pipeline import sequences_of
    from tests.models.test_padding import NUM_ITEMS, built

    rng = np.random.default_rng(seed)
    lists = [rng.choice(np.arange(1, NUM_ITEMS + 1), size=n, replace=False).tolist() for n in (3, 8, 4, 6, 5) * 5]
    sequences = sequences_of(lists, NUM_ITEMS)
    return rng, sequences, {"pop_valid": sample_negatives(sequences, "pop", "valid", 10, 3)}, built("sasrec")


def test_the_inputs_kept_between_validations_give_the_metrics_of_inputs_made_anew(monkeypatch):
    # A run's validations score the same batches: their inputs are made in the first and kept. Once
    # the weights change, the kept inputs must still give what inputs made anew give.
    from bert4rec_tf.evaluation import evaluator

    rng, sequences, candidates, model = _validation_case(5)
    made = []
    batch_inputs = evaluator._batch_inputs
    monkeypatch.setattr(evaluator, "_batch_inputs", lambda *args, **kwargs: made.append(1) or batch_inputs(*args, **kwargs))
    kept = {}

    def both():
        return [evaluator.evaluate(model, sequences, "valid", 24, candidates, protocols=("pop", "full"), batch_size=4,
                                   users=np.arange(1, 25), inputs=inputs) for inputs in (kept, None)]

    first_kept, first_anew = both()
    assert first_kept == first_anew and len(kept) == 6 + 2 and len(made) == 12  # and its signature and size
    for weight in model.trainable_weights:  # another model: the same inputs, other scores
        weight.assign(rng.normal(size=weight.shape).astype(np.float32))
    second_kept, second_anew = both()
    assert second_kept == second_anew != first_kept and len(made) == 18  # only the uncached call made inputs


def test_kept_inputs_hold_for_their_arguments_only_and_up_to_their_byte_cap(monkeypatch):
    # One dict given with other users or protocols is emptied first, never read for them; beyond the
    # cap, batches are made anew at every call (and the metrics are the same either way).
    from bert4rec_tf.evaluation import evaluator

    _, sequences, candidates, model = _validation_case(6)
    kept = {}

    def run(users, protocols, inputs):
        return evaluator.evaluate(model, sequences, "valid", 24, candidates, protocols=protocols, batch_size=4,
                                  users=users, inputs=inputs)

    for users, protocols in ((np.arange(0, 12), ("pop", "full")), (np.arange(12, 24), ("pop", "full")),
                             (np.arange(12, 24), ("pop",)), (np.arange(0, 12), ("pop", "full"))):
        assert run(users, protocols, kept) == run(users, protocols, None)
        assert run(users, protocols, kept) == run(users, protocols, None)  # the second call reads the kept inputs
        assert len([key for key in kept if key not in ("signature", "bytes")]) == 3
    monkeypatch.setattr(evaluator, "MAX_KEPT_INPUT_BYTES", kept["bytes"] // 2)
    capped = {}
    assert run(np.arange(0, 12), ("pop", "full"), capped) == run(np.arange(0, 12), ("pop", "full"), None)
    assert 0 < capped["bytes"] <= kept["bytes"] // 2
    assert len([key for key in capped if key not in ("signature", "bytes")]) < 3
