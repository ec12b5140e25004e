"""Scores every user's history with the model's `score_next` and ranks the target under each protocol."""

from __future__ import annotations

import weakref

import keras
import numpy as np
import tensorflow as tf
from keras import ops
from tqdm.auto import tqdm

from bert4rec_tf.constants import EVAL_SEED, MAX_BATCH_SCORES, PAD_ID, VALID_SEED, vocab_size
from bert4rec_tf.data.pipeline import evaluation_histories, padded_width
from bert4rec_tf.data.preprocess import UserSequences
from bert4rec_tf.data.split import target_from_end
from bert4rec_tf.evaluation.metrics import (FULL_METRICS, SAMPLED_METRICS, full_ranking_rank, metrics_from_ranks,
                                               target_rank)

PROTOCOLS = ("pop", "uniform", "full")
# The most bytes of batch inputs `evaluate` keeps between calls (`inputs`); the batches beyond are made
# anew at every call (a catalogue of long histories, ML-20m's, would otherwise keep gigabytes).
MAX_KEPT_INPUT_BYTES = 2 ** 29
# model -> (its number of items, its traced scoring functions) (`_scorers`)
_SCORERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def evaluation_users(num_users: int, count: int) -> np.ndarray | None:
    """The users (0-based, sorted) that `--config train.eval_users=count` evaluates: None (every
    user) when `count` is 0 or covers them all, else `count` of them drawn without replacement with
    the evaluation seed, the same for validation and test and for every run on the data."""
    if count <= 0 or count >= num_users:
        return None
    return np.sort(np.random.default_rng(EVAL_SEED).choice(num_users, size=count, replace=False))


def validation_users(num_users: int, eval_users: int, valid_users: int) -> np.ndarray | None:
    """The users (0-based, sorted) validated during training: `valid_users` of the users tested
    (`evaluation_users(num_users, eval_users)`), drawn without replacement with their own seed, the
    same for every run on the data; the users tested when `valid_users` is 0 or covers them all."""
    tested = evaluation_users(num_users, eval_users)
    pool = np.arange(num_users) if tested is None else tested
    if valid_users <= 0 or valid_users >= len(pool):
        return tested
    return np.sort(np.random.default_rng(VALID_SEED).choice(pool, size=valid_users, replace=False))


def evaluate(model, sequences: UserSequences, stage: str, max_len: int,
             candidates: dict[str, np.ndarray] | None = None, protocols: tuple[str, ...] = PROTOCOLS,
             batch_size: int = 256, progress: bool = False, trim: bool = True,
             max_batch_scores: int = MAX_BATCH_SCORES, users: np.ndarray | None = None,
             inputs: dict | None = None, ranks_out: dict | None = None) -> dict[str, dict[str, float]]:
    """Metrics of `model` on every user (or on `users`) for `stage` ("valid" or "test").

    Users are scored in batches of similar history length, each batch trimmed to its longest
    history (`trim`): the metrics are those of full-width batches (a model's output at real
    positions does not depend on the padding), computed with less work on short histories.

    Args:
        model: a model with `score_next(history) -> [batch, vocab_size]` (see
            `bert4rec_tf.models.base.SequentialRecommender`; with `reads_users`, also `users=`, the
            model user ids: user u of `sequences` is u + 1). A model with `score_items(history,
            items) -> [batch, n]` (the scores of chosen items) is asked only for each user's target
            and candidates when `protocols` has no full ranking.
        sequences: all users' sequences.
        stage: "valid" or "test".
        max_len: history items given to the model (its sequence length is enough for every model).
        candidates: negatives [num_users, C] keyed "pop_<stage>", "uniform_<stage>" (from the
            prepared data) for the sampled protocols.
        protocols: any of "pop" (the paper's pop-100), "uniform" and "full" (all items, the
            user's history excluded).
        batch_size: users per forward pass, at most `max_batch_scores // vocab_size` when the model
            scores the whole vocabulary (at least one).
        progress: show a progress bar.
        trim: batch users by history length and trim each batch's padding; False: users in order,
            every batch max_len wide.
        max_batch_scores: the most scores (users x vocabulary) of one batch: a batch of
            `batch_size` users shrinks below it on a large catalogue (16 users at a million items),
            so that its scores and their comparisons with the target stay bounded whatever the
            catalogue. Only each user's chosen scores and full-ranking rank leave the traced graph.
        users: the users (0-based indices of `sequences`) to evaluate (`evaluation_users`); None:
            every user.
        inputs: a dict the caller keeps between calls (a run's validations): each batch's inputs (its
            histories, users, target and candidates, excluded items), made once and kept in it, up to
            `MAX_KEPT_INPUT_BYTES`, so that later calls with the same arguments only score; a call
            with other arguments empties it first. None: made every call.
        ranks_out: a dict given to receive each protocol's per-user target ranks (0-based), in the
            order of "users" (also set), e.g. for `bert4rec_tf.evaluation.slices.sliced_metrics`.

    Returns:
        {protocol: {metric: value}}: HR@1/5/10, NDCG@5/10, MRR for the sampled protocols;
        Recall@10/20, NDCG@10/20, MRR for full ranking; averages over `users`.
    """
    unknown = set(protocols) - set(PROTOCOLS)
    if unknown:
        raise ValueError(f"unknown protocol(s) {sorted(unknown)}; known: {', '.join(PROTOCOLS)}")
    histories, targets = evaluation_histories(sequences, stage, max_len)

    # Without full ranking, a model that scores chosen items cheaply (`scores_chosen_items`) scores
    # only each user's target and candidates: for a model whose every (user, item) score is costly (NCF).
    sampled_only = "full" not in protocols and model.scores_chosen_items
    score_all, score_chosen = _scorers(model, sequences.num_items)
    if not sampled_only:
        batch_size = max(1, min(batch_size, max_batch_scores // vocab_size(sequences.num_items)))
    evaluated = np.arange(sequences.num_users) if users is None else np.asarray(users, dtype=np.int64)
    lengths = np.count_nonzero(histories, axis=1)  # [U]
    order = evaluated[np.argsort(lengths[evaluated], kind="stable")] if trim else evaluated
    ranks = {p: np.zeros(sequences.num_users, dtype=np.int64) for p in protocols}
    sampled = [protocol for protocol in protocols if protocol != "full"]
    bounds = np.cumsum([1] + [_candidates(candidates, protocol, stage).shape[1] for protocol in sampled])
    if inputs is not None:
        # The kept inputs hold for these arguments only: other arguments start the dict afresh.
        signature = (id(sequences), stage, max_len, trim, batch_size, tuple(protocols), sampled_only,
                     tuple(id(_candidates(candidates, protocol, stage)) for protocol in sampled), order.tobytes())
        if inputs.get("signature") != signature:
            inputs.clear()
            inputs["signature"] = signature
    tensors = isinstance(model, keras.Model)  # another scorer (a test's stand-in) gets NumPy arrays
    for begin in tqdm(range(0, len(order), batch_size), desc=f"evaluating {stage}", disable=not progress):
        batch = order[begin:begin + batch_size]
        key = (begin, batch.tobytes())
        made = None if inputs is None else inputs.get(key)
        if made is None:
            made = _batch_inputs(sequences, stage, batch, histories, targets, lengths, max_len, trim, candidates,
                                 sampled, full="full" in protocols and not sampled_only, tensors=tensors)
            if inputs is not None:
                size = sum(int(np.prod(part.shape)) * np.dtype(part.dtype.name).itemsize for part in made
                           if part is not None)
                if inputs.get("bytes", 0) + size <= MAX_KEPT_INPUT_BYTES:
                    inputs[key] = made
                    inputs["bytes"] = inputs.get("bytes", 0) + size
        history, model_users, items, excluded = made
        if sampled_only:
            chosen = ops.convert_to_numpy(score_chosen(history, model_users, items))
        else:
            chosen, full = score_all(history, model_users, items, excluded)
            chosen = ops.convert_to_numpy(chosen)
            if full is not None:
                ranks["full"][batch] = ops.convert_to_numpy(full)
        target_scores = chosen[:, 0]
        for index, protocol in enumerate(sampled):
            others = chosen[:, bounds[index]:bounds[index + 1]]  # [b, C]
            ranks[protocol][batch] = ops.convert_to_numpy(target_rank(target_scores, others))
    if ranks_out is not None:
        ranks_out.update({protocol: ranks[protocol][evaluated] for protocol in protocols}, users=evaluated)
    return {protocol: metrics_from_ranks(ranks[protocol][evaluated], FULL_METRICS if protocol == "full" else SAMPLED_METRICS)
            for protocol in protocols}


def _batch_inputs(sequences: UserSequences, stage: str, batch: np.ndarray, histories: np.ndarray, targets: np.ndarray,
                  lengths: np.ndarray, max_len: int, trim: bool, candidates, sampled: list[str], full: bool,
                  tensors: bool) -> tuple:
    """What the scoring functions read of the users `batch`: their histories (trimmed to the longest,
    `trim`), model user ids (user u is u + 1), each user's target then each sampled protocol's
    candidates [b, 1 + sum C], and the excluded items of full ranking (None without it); as tensors
    when `tensors`, else NumPy arrays."""
    width = padded_width(int(lengths[batch].max()), max_len) if trim else max_len
    negatives = [_candidates(candidates, protocol, stage)[batch].astype(np.int64) for protocol in sampled]
    items = np.concatenate([targets[batch, None].astype(np.int64)] + negatives, axis=1)
    excluded = _excluded_items(sequences, stage, batch) if full else None
    made = (histories[batch, :width], batch + 1, items, excluded)
    return tuple(None if part is None else tf.constant(part) for part in made) if tensors else made


def _candidates(candidates: dict[str, np.ndarray] | None, protocol: str, stage: str) -> np.ndarray:
    key = f"{protocol}_{stage}"
    if not candidates or key not in candidates:
        raise ValueError(f"no {protocol}-sampled candidates for stage {stage!r} in the prepared data")
    return candidates[key]


def _excluded_items(sequences: UserSequences, stage: str, users: np.ndarray) -> np.ndarray:
    """[len(users), W] int64: each user's distinct history items and its target, with PAD_ID (0) in
    place of every repeat and of the items a shorter row lacks (each row sorted before its repeats
    are blanked): the items that do not compete with the target under full ranking
    (`full_ranking_rank`, which skips PAD_ID)."""
    # History and target together: the sequence without its last item for "valid", whole for "test".
    starts = sequences.offsets[users]
    lengths = sequences.offsets[users + 1] - starts - (target_from_end(stage) - 1)
    positions = np.arange(max(1, int(lengths.max())))
    real = positions[None, :] < lengths[:, None]
    index = np.where(real, starts[:, None] + positions[None, :], 0)
    excluded = np.where(real, sequences.items[index], PAD_ID).astype(np.int64)
    excluded.sort(axis=1)
    repeats = np.zeros_like(real)
    repeats[:, 1:] = excluded[:, 1:] == excluded[:, :-1]
    excluded[repeats] = PAD_ID
    return excluded


def _scorers(model, num_items: int):
    """`model`'s two scoring functions for a batch of users, traced once per model and catalogue and
    kept with the model, so that a run's every validation reuses the graphs of its first:

    - score_all(history, users, items, excluded): each user's scores of `items` (target and
      candidates) and, unless `excluded` is None, the target's full-ranking rank among the items
      outside `excluded`; only these leave the graph, not the [batch, vocab] scores;
    - score_chosen(history, users, items): the scores of `items` alone (`score_items`).

    `users` are model user ids, passed on only to a model that `reads_users`.
    """
    kept = _SCORERS.get(model)
    if kept is not None and kept[0] == num_items:
        return kept[1]
    reads_users = model.reads_users
    # The functions reach the model through a weak reference: kept with it, they must not keep it alive.
    reference = weakref.ref(model) if isinstance(model, keras.Model) else (lambda: model)

    def options(users):  # (two lambdas on one line would stop AutoGraph from reading either)
        return {"users": users} if reads_users else {}

    def score_all(history, users, items, excluded):
        scores = reference().score_next(history, training=False, **options(users))
        chosen = ops.take_along_axis(scores, items, axis=1)  # [b, 1 + sum C]
        if excluded is None:
            return chosen, None
        return chosen, full_ranking_rank(scores, chosen[:, 0], excluded, num_items)

    def score_chosen(history, users, items):
        return reference().score_items(history, items, training=False, **options(users))

    if isinstance(model, keras.Model):
        # One traced graph for every batch (the last, smaller batch reuses it): eager execution
        # would dispatch every operation from Python.
        score_all = tf.function(score_all, reduce_retracing=True)
        score_chosen = tf.function(score_chosen, reduce_retracing=True)
        _SCORERS[model] = (num_items, (score_all, score_chosen))
    return score_all, score_chosen


def format_table(results: dict[str, dict[str, float]]) -> str:
    """The metrics as a plain-text table, one row per protocol, in the order of `PROTOCOLS` and of
    the metrics' lists (whatever the order of `results`, e.g. read back from a sorted JSON file)."""
    lines = []
    for protocol in sorted(results, key=lambda name: _position(PROTOCOLS, name)):
        values, names = results[protocol], FULL_METRICS if protocol == "full" else SAMPLED_METRICS
        cells = "  ".join(f"{name} {values[name]:.4f}" for name in sorted(values, key=lambda n: _position(names, n)))
        lines.append(f"{protocol:>8}: {cells}")
    return "\n".join(lines)


def _position(names: tuple[str, ...], name: str) -> int:
    """Where `name` stands in `names`; after them all when it is not one."""
    return names.index(name) if name in names else len(names)
