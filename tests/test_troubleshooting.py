"""docs/troubleshooting.md quotes the messages the code prints, and no other.

Each line of a ```text block in the page is one message as a command prints it, with `<...>` where
the message names something of the case at hand (a file, a number). This test triggers every case
the page covers through the code that prints it (no GPU: with the GPU check answered "none" and
"one"; offline: a download from a closed local port; the rest on small files in a temporary
folder) and requires that every message printed matches a quoted line and every quoted line
matches a printed message. Errors are printed through `cli.guarded`, as the commands print them.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import types
from pathlib import Path
from unittest import mock

import pytest

from bert4rec_tf import cli

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "troubleshooting.md"


def quoted_messages(text: str) -> list[str]:
    """The lines of the page's ```text blocks."""
    return [line.strip() for block in re.findall(r"```text\n(.*?)```", text, flags=re.S)
            for line in block.split("\n") if line.strip()]


def message_pattern(quoted: str) -> re.Pattern:
    """A quoted message as a pattern: its text as written, each `<...>` any text."""
    parts = re.split(r"<[a-z][a-z0-9 _-]*>", quoted)
    return re.compile(".+?".join(re.escape(part) for part in parts) + r"\Z", flags=re.S)


def printed_error(action) -> str:
    """The one line a command prints when `action` fails (`cli.guarded`)."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        status = cli.guarded(action)
    assert status == 1, "the action did not fail"
    return stderr.getvalue().strip().splitlines()[-1]


def _raise(error: BaseException):
    def action():
        raise error
    return action


def _latin1_file(path: Path) -> str:
    rows = ["user,item,timestamp"] + [f"u{user},{item},{step}" for user in range(3)
                                      for step, item in enumerate(["a", "caf\u00e9", "b", "c", "d"])]
    path.write_bytes(("\n".join(rows) + "\n").encode("latin-1"))
    return str(path)


def _run_folder(folder: Path, config, source: str, data_key: str, **record) -> None:
    """A trained run's config.json and run.json (with `record`'s entries too), as the trainer writes them."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config.to_dict()), encoding="utf-8")
    (folder / "run.json").write_text(json.dumps({"source": source, "data_key": data_key, **record}), encoding="utf-8")


def trigger_messages(tmp: Path) -> dict[str, str]:
    """{case: the message the code prints} for every case of docs/troubleshooting.md."""
    from bert4rec_tf.data.candidates import check_enough_items, trivial_protocols_warning
    from bert4rec_tf.data.download import download
    from bert4rec_tf.data.features import check_coverage, read_features
    from bert4rec_tf.data.preprocess import preprocess
    from bert4rec_tf.data.readers import read_interactions
    from bert4rec_tf.training.run_folder import RunFolder

    messages = {}
    # No GPU, and a GPU: the first line of a training command without --recipe.
    for case, seen in (("no GPU", False), ("a GPU", True)):
        with mock.patch.object(cli, "gpu_available", lambda seen=seen: seen):
            recipe, reason = cli.default_recipe("beauty", "bert4rec", str(tmp / "runs" / "beauty"))
        config = cli.experiment_config("beauty", [], None, "bert4rec", recipe)
        messages[case] = cli.recipe_notice(config, "bert4rec", reason)
    messages["no TensorFlow"] = printed_error(_raise(ModuleNotFoundError("No module named 'tensorflow'",
                                                                        name="tensorflow")))
    # Offline: nothing listens on the discard port.
    messages["offline"] = printed_error(lambda: download("http://127.0.0.1:9/ml-1m.zip", str(tmp / "downloads"),
                                                         "ml-1m.zip", timeout=5))
    # A cached download that changed since its digest was recorded.
    cache = tmp / "cache"
    cache.mkdir()
    (cache / "ratings_Beauty.csv").write_text("u,i,5,1\n", encoding="utf-8")
    (cache / "ratings_Beauty.csv.sha256").write_text("0" * 64 + "\n", encoding="utf-8")
    messages["changed download"] = printed_error(lambda: download("https://example.org/ratings_Beauty.csv",
                                                                  str(cache), "ratings_Beauty.csv"))
    # The README's 9-item example with the default 100 negatives, and with 3.
    sequences, _ = preprocess(read_interactions(ROOT / "docs" / "examples" / "interactions.csv"))
    messages["small catalogue"] = printed_error(lambda: check_enough_items(sequences, 100))
    messages["few negatives"] = trivial_protocols_warning(3, sequences.num_items)
    messages["not UTF-8"] = printed_error(lambda: read_interactions(_latin1_file(tmp / "latin1.csv")))
    (tmp / "items-latin1.csv").write_bytes("item,title\n1,Amélie\n".encode("latin-1"))
    messages["attributes not UTF-8"] = printed_error(lambda: read_features(tmp / "items-latin1.csv", key="item"))
    # An attribute file of items 1..4 against the data's i1..i4 and against 1..9; one of i1 and 5 against i1..i4.
    (tmp / "items.csv").write_text("item,brand\n1,a\n2,a\n3,b\n4,b\n", encoding="utf-8")
    (tmp / "some-items.csv").write_text("item,brand\ni1,a\n5,b\n", encoding="utf-8")
    data_items = ["i1", "i2", "i3", "i4"]
    messages["attributes matching nothing"] = printed_error(
        lambda: check_coverage(read_features(tmp / "items.csv", key="item"), data_items))
    messages["attributes matching few"] = check_coverage(read_features(tmp / "items.csv", key="item"),
                                                         [str(item) for item in range(1, 10)])
    messages["attributes matching few, others"] = check_coverage(read_features(tmp / "some-items.csv"), data_items)
    # A run folder that trained 50 steps on source file-aaaa, data 5f3c; commands that differ from it.
    config = cli.experiment_config("custom", ["train_steps=100"], None, "bert4rec", "cpu-30m")
    config.model.vocab_size, config.model.num_users = 11, 4
    folder = tmp / "runs" / "mine"
    _run_folder(folder, config, "file-aaaa", "5f3c")
    trained = {"step": 50}

    def prepared(source):
        return types.SimpleNamespace(directory=str(tmp / "data" / "custom" / "5f3c"),
                                     metadata={"source": {"identity": source}, "vocab_size": 11, "num_users": 4},
                                     features=lambda key: None)

    other = cli.experiment_config("custom", ["train_steps=100", "learning_rate=0.001"], None, "bert4rec", "cpu-30m")
    messages["other configuration"] = printed_error(lambda: RunFolder(str(folder)).check_config(other, trained))
    messages["other source"] = printed_error(lambda: RunFolder(str(folder)).check(
        cli.experiment_config("custom", ["train_steps=100"], None, "bert4rec", "cpu-30m"), prepared("file-bbbb"),
        trained))
    messages["fewer steps"] = printed_error(lambda: RunFolder(str(folder)).check(
        cli.experiment_config("custom", ["train_steps=20"], None, "bert4rec", "cpu-30m"), prepared("file-aaaa"),
        trained))
    # A run with an attribute file, edited since: this command's data have another key.
    with_items = cli.experiment_config("custom", ["train_steps=100", f"item_features={tmp / 'items.csv'}",
                                                  "attributes_at_output=true"], None, "sasrec", "cpu-30m")
    with_items.model.vocab_size, with_items.model.num_users = 11, 4
    _run_folder(tmp / "runs" / "attributes", with_items, "file-aaaa", "7d1e",
                attribute_files={"item_features": "file-0000000000000000"})
    messages["attribute file changed"] = printed_error(lambda: RunFolder(str(tmp / "runs" / "attributes")).check(
        with_items, prepared("file-aaaa"), trained))

    def second_start():
        with RunFolder(str(folder)).lock(), RunFolder(str(folder)).lock():
            pass
    messages["folder in use"] = printed_error(second_start)
    # A study made with --storage on source file-aaaa with an attribute file; commands that differ from it.
    from bert4rec_tf.tuning.binding import bind
    from bert4rec_tf.tuning.settings import new_settings

    study, storage = str(tmp / "studies" / "mine"), f"sqlite:///{tmp / 'trials.db'}"
    settings = new_settings("beauty", "bpr_mf", None, "cpu-30m", 3600.0, 600.0, [])
    items = {"item_features": {"path": str(tmp / "items.csv"), "contents": "file-0000000000000000"}}
    data = {"source": "file-aaaa", "data_key": "5f3c", "files": items}
    bind(study, settings, storage, data)
    messages["study, other storage"] = printed_error(lambda: bind(study, settings, None, data))
    messages["study, other source"] = printed_error(lambda: bind(study, settings, storage,
                                                                        {**data, "source": "file-bbbb"}))
    edited = {"item_features": {**items["item_features"], "contents": "file-1111111111111111"}}
    messages["study, attribute file edited"] = printed_error(lambda: bind(study, settings, storage,
                                                                                 {**data, "files": edited}))
    longer = new_settings("beauty", "bpr_mf", None, "cpu-30m", 3600.0, 1200.0, [])
    messages["study, other settings"] = printed_error(lambda: bind(study, longer, storage, data))
    # A diverging run (this imports TensorFlow), and one that learned only popularity.
    from bert4rec_tf.training.callbacks import StopOnDivergence
    from bert4rec_tf.training.schedule import warmup_warning
    from bert4rec_tf.training.trainer import pop_warning

    watch = StopOnDivergence()
    watch.set_model(types.SimpleNamespace(optimizer=types.SimpleNamespace(iterations=types.SimpleNamespace(
        numpy=lambda: 1234))))
    messages["diverged"] = printed_error(lambda: watch.on_train_batch_end(
        0, {"loss": float("nan"), "grad_norm": float("inf"), "learning_rate": 0.003}))
    messages["popularity"] = pop_warning({"step": 300, "pop/NDCG@10": 0.0512}, {"pop": {"NDCG@10": 0.0498}})
    messages["popularity, 3 negatives"] = pop_warning({"step": 20, "pop/NDCG@10": 0.5655},
                                                      {"pop": {"NDCG@10": 0.5308}}, num_negatives=3)
    messages["short warm-up"] = warmup_warning(20, 500, 1800.0)
    messages["short warm-up, step cap"] = warmup_warning(20, 500, 1800.0, cap=20)
    messages["unknown setting"] = printed_error(lambda: cli.experiment_config("beauty", ["l2=0.01"], None, "bert4rec"))
    messages["setting of another loss"] = printed_error(
        lambda: cli.experiment_config("beauty", ["sampled_negatives=512"], None, "bert4rec"))
    return messages


@pytest.fixture(scope="module")
def triggered(tmp_path_factory) -> dict[str, str]:
    return trigger_messages(tmp_path_factory.mktemp("troubleshooting"))


def test_the_page_quotes_the_messages_the_code_prints(triggered):
    quoted = quoted_messages(PAGE.read_text(encoding="utf-8"))
    assert quoted, f"{PAGE.name} quotes no message (```text blocks)"
    unquoted = [f"{case}: {message}" for case, message in triggered.items()
                if not any(message_pattern(line).match(message) for line in quoted)]
    assert not unquoted, "printed, but quoted nowhere (or quoted differently):\n" + "\n".join(unquoted)
    stale = [line for line in quoted if not any(message_pattern(line).match(message) for message in triggered.values())]
    assert not stale, "quoted, but no case prints it:\n" + "\n".join(stale)


def test_a_changed_message_is_caught(triggered):
    """The check itself: a quoted line that differs from the printed message by one word fails."""
    quoted = quoted_messages(PAGE.read_text(encoding="utf-8"))
    line = next(line for line in quoted if "download failed" in line)
    assert message_pattern(line).match(triggered["offline"])
    assert not message_pattern(line.replace("run again", "try again")).match(triggered["offline"])
