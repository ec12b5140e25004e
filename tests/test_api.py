"""bert4rec_tf.api: bad arguments fail at once with one line; the example CSV trains, reloads and recommends."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bert4rec_tf import api
from tests.conftest import REPO

EXAMPLE = os.path.join(REPO, "docs", "examples", "interactions.csv")
# The README's toy command: a few steps of batch 8, 3 negatives since each user leaves only a few unseen items.
TOY = {"train_steps": 20, "batch_size": 8, "num_negatives": 3}


def catalogue() -> set[str]:
    import csv

    with open(EXAMPLE, encoding="utf-8", newline="") as handle:
        return {row["item"] for row in csv.DictReader(handle)}


def test_importing_the_api_loads_no_tensorflow():
    code = "import sys\nfrom bert4rec_tf import api\nprint('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


# Each fails before TensorFlow is imported (the recipe given: no look for a GPU).
@pytest.mark.parametrize("arguments, message", [
    ({"dataset": "nope"}, "unknown dataset 'nope'; known: "),
    ({"dataset": "custom", "model": "nope"}, "unknown model 'nope'; known: "),
    ({"dataset": "custom", "recipe": "nope"}, "unknown --recipe 'nope'; known: "),
    ({"dataset": "custom", "recipe": "paper", "overrides": ["train_steps"]}, "override 'train_steps' is not key=value"),
    ({"dataset": "custom", "recipe": "paper", "overrides": {"no_such_key": 1}},
     "bert4rec has no setting 'no_such_key'"),
    ({"dataset": "custom", "overrides": "train_steps=20"}, "overrides is a dict or a list of 'key=value' strings"),
])
def test_bad_arguments_are_one_line_value_errors(tmp_path, arguments, message):
    with pytest.raises(ValueError) as error:
        api.train(model_dir=str(tmp_path / "run"), verbose=0, **arguments)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_missing_source_file_is_named_and_leaves_no_run(tmp_path):
    missing = str(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match=f"^{missing}: no such file$"):
        api.train("custom", str(tmp_path / "run"), source_file=missing, data_dir=str(tmp_path / "data"),
                  overrides=TOY, eval_every=10, verbose=0)
    assert not os.path.exists(tmp_path / "run")


def test_loading_a_folder_without_a_finished_run_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no finished run"):
        api.Run.load(str(tmp_path))


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """The example CSV trained through the API, as the README's toy command."""
    folder = tmp_path_factory.mktemp("api")
    return api.train("custom", str(folder / "run"), source_file=EXAMPLE, data_dir=str(folder / "data"),
                     overrides=TOY, eval_every=10, verbose=0)


@pytest.mark.slow
def test_train_returns_the_finished_run_with_its_test_metrics(toy_run):
    assert toy_run.steps == 20 and toy_run.best_step in (10, 20)
    assert toy_run.config.data.dataset == "custom" and toy_run.config.train.batch_size == 8
    assert toy_run.config.data.num_negatives == 3
    assert set(toy_run.metrics) == {"pop", "uniform", "full"}
    assert {"HR@10", "NDCG@10", "MRR"} <= set(toy_run.metrics["pop"])
    assert {"Recall@10", "NDCG@10", "MRR"} <= set(toy_run.metrics["full"])
    for values in toy_run.metrics.values():
        assert all(0.0 <= value <= 1.0 for value in values.values()), values
    assert os.path.isfile(os.path.join(toy_run.export_dir, "saved_model.pb"))


@pytest.mark.slow
def test_a_loaded_run_has_the_same_metrics_and_evaluates_to_them(toy_run):
    loaded = api.Run.load(toy_run.model_dir)
    assert loaded.metrics == toy_run.metrics and loaded.config == toy_run.config
    again = loaded.evaluate("test")
    assert set(again) == set(toy_run.metrics)
    for protocol, values in toy_run.metrics.items():
        assert again[protocol] == pytest.approx(values), protocol


@pytest.mark.slow
def test_recommend_gives_unseen_catalogue_items_best_first(toy_run):
    history = ["sku-104", "sku-221"]
    [top] = toy_run.recommend([history], k=5)
    ids = [item for item, _ in top]
    assert len(ids) == len(set(ids)) == 5
    assert set(ids) <= catalogue() - set(history)
    scores = [score for _, score in top]
    assert scores == sorted(scores, reverse=True)
    # Only 7 of the 9 items are unseen; a shorter history in the same batch gets its own answer (the
    # scores of a batch differ from those of one history by float32 round-off).
    both = toy_run.recommend([history, ["sku-330"]], k=10)
    assert [item for item, _ in both[0]][:5] == ids and len(both[0]) == 7 and len(both[1]) == 8
    alone = toy_run.recommend([["sku-330"]], k=10)[0]
    assert [item for item, _ in both[1]] == [item for item, _ in alone]
    assert [score for _, score in both[1]] == pytest.approx([score for _, score in alone], abs=1e-5)


@pytest.mark.slow
def test_recommend_ignores_unknown_ids_with_a_warning_and_refuses_bad_histories(toy_run):
    with pytest.warns(UserWarning, match="history 0: unknown ids \\(ignored\\): 'nope'"):
        [top] = toy_run.recommend([["sku-104", "nope", "sku-221"]], k=5)
    assert [item for item, _ in top] == [item for item, _ in toy_run.recommend([["sku-104", "sku-221"]], k=5)[0]]
    with pytest.raises(ValueError, match="^no id of history 1 is in .*vocab.txt: 'nope'$"):
        toy_run.recommend([["sku-104"], ["nope"]])
    with pytest.raises(ValueError, match="^history 0 holds no ids$"):
        toy_run.recommend([[]])
    with pytest.raises(ValueError, match="for one history pass \\[history\\]"):
        toy_run.recommend(["sku-104", "sku-221"])
    with pytest.raises(ValueError, match="k must be a whole number between 1 and 10"):
        toy_run.recommend([["sku-104"]], k=11)


@pytest.mark.slow
def test_a_run_on_a_sample_of_users_says_so_and_evaluates_every_user_on_request(tmp_path):
    import json

    run = api.train("custom", str(tmp_path / "run"), source_file=EXAMPLE, data_dir=str(tmp_path / "data"),
                    overrides={**TOY, "train_steps": 10, "eval_users": 3}, eval_every=10, verbose=0)
    with open(os.path.join(run.model_dir, "results.json")) as handle:
        results = json.load(handle)
    assert results["evaluated_users"] == 3 and results["users"] > 3
    everyone = run.evaluate("test", eval_users=0)
    with open(os.path.join(run.model_dir, "evaluation.json")) as handle:
        assert "evaluated_users" not in json.load(handle)
    assert set(everyone) == set(run.metrics)
    again = run.evaluate("test")  # the run's own sample again
    for protocol, values in run.metrics.items():
        assert again[protocol] == pytest.approx(values), protocol
