"""prepare() and run_scripts/prepare_data.py end to end on small files made here."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bert4rec_tf import cli
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data import readers
from bert4rec_tf.data.prepare import FORMAT_VERSION, load_prepared, output_directory, prepare
from bert4rec_tf.tasks import preset
from tests.conftest import REPO, toy_sequences, write_pairs


def small_data_config(**overrides):
    config = preset("beauty")
    for key, value in {"max_len": 10, "dupe_factor": 2, "num_shards": 2, "max_predictions_per_seq": 4,
                       **overrides}.items():
        config.override(key, value)
    return config.data


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return write_pairs(str(tmp_path_factory.mktemp("src") / "toy.txt"), toy_sequences())


def test_prepare_writes_complete_consistent_outputs(toy_file, tmp_path):
    config = small_data_config()
    prepared = prepare(config, str(tmp_path), toy_file, progress=False)
    meta = prepared.metadata
    assert meta["num_users"] == 12 and meta["vocab_size"] == meta["num_items"] + 2
    assert meta["mask_id"] == meta["num_items"] + 1 and meta["pad_id"] == 0
    assert meta["seed"] == config.seed and meta["config"]["max_len"] == 10
    assert sorted(os.listdir(prepared.directory)) == sorted([*meta["files"], "metadata.json"])
    assert meta["num_instances"] == meta["num_windows"] * 3 == sum(meta["shards"].values())
    assert meta["feature_spec"]["masked_lm_weights"] == {"shape": [4], "dtype": "float32"}
    sequences = prepared.sequences()
    source = toy_sequences()
    assert [list(sequences.item_ids[sequences.sequence(u) - 1]) for u in range(12)] == list(source.values())
    candidates = prepared.candidates()
    assert set(candidates) == {"pop_valid", "pop_test", "uniform_valid", "uniform_test"}
    assert candidates["pop_test"].shape == (12, 100)
    with open(os.path.join(prepared.directory, "vocab.txt")) as handle:
        assert [line.strip() for line in handle] == list(sequences.item_ids)
    assert not [d for d in os.listdir(os.path.dirname(prepared.directory)) if d.startswith(".tmp-")]


@pytest.mark.slow
def test_same_seed_same_files_other_seed_other_files(toy_file, tmp_path):
    first = prepare(small_data_config(), str(tmp_path / "a"), toy_file, progress=False).metadata["files"]
    second = prepare(small_data_config(), str(tmp_path / "b"), toy_file, progress=False).metadata["files"]
    other = prepare(small_data_config(seed=99), str(tmp_path / "c"), toy_file, progress=False).metadata["files"]
    assert first == second
    assert other["train-00000-of-00002.tfrecord"] != first["train-00000-of-00002.tfrecord"]
    assert other["candidates.npz"] != first["candidates.npz"]


@pytest.mark.slow
def test_two_processes_with_one_seed_write_identical_bytes(toy_file, tmp_path):
    # Each process has its own hash seed and memory layout; the files must not depend on either.
    digests = []
    for name in ("first", "second"):
        result = run_command(["--dataset", "beauty", "--source_file", toy_file, "--data_dir", str(tmp_path / name),
                              "--seed", "5", "--config", "max_len=10", "--config", "dupe_factor=2",
                              "--config", "num_shards=2", "--config", "max_predictions_per_seq=4"],
                             cwd=tmp_path, env_extra={"PYTHONHASHSEED": "random"})
        assert result.returncode == 0, result.stderr[-2000:]
        directory = result.stdout.strip().splitlines()[-1].split(": ", 1)[1]
        with open(os.path.join(directory, "metadata.json")) as handle:
            digests.append({name: entry["sha256"] for name, entry in json.load(handle)["files"].items()})
    here = prepare(small_data_config(seed=5), str(tmp_path / "here"), toy_file, progress=False).metadata["files"]
    other = prepare(small_data_config(seed=6), str(tmp_path / "other"), toy_file, progress=False).metadata["files"]
    assert digests[0] == digests[1] == {name: entry["sha256"] for name, entry in here.items()}
    assert all(other[name]["sha256"] != here[name]["sha256"] for name in here if name.startswith("train-"))


@pytest.mark.slow
def test_a_complete_preparation_is_reused_and_a_damaged_one_is_prepared_again(toy_file, tmp_path, caplog):
    prepared = prepare(small_data_config(), str(tmp_path), toy_file, progress=False)
    marker = os.path.getmtime(os.path.join(prepared.directory, "metadata.json"))
    assert prepare(small_data_config(), str(tmp_path), toy_file, progress=False).directory == prepared.directory
    assert os.path.getmtime(os.path.join(prepared.directory, "metadata.json")) == marker
    shard = os.path.join(prepared.directory, "train-00001-of-00002.tfrecord")
    with open(shard, "r+b") as handle:
        handle.truncate(10)                              # as if cut short
    with pytest.raises(DataError, match=r"train-00001-of-00002.tfrecord: damaged"):
        load_prepared(prepared.directory)
    again = prepare(small_data_config(), str(tmp_path), toy_file, progress=False)
    assert "train-00001-of-00002.tfrecord: damaged" in caplog.text
    assert load_prepared(again.directory).metadata["files"] == prepared.metadata["files"]
    assert load_prepared(str(tmp_path / "absent")) is None


@pytest.mark.slow
def test_original_split_has_no_validation_candidates(toy_file, tmp_path):
    prepared = prepare(small_data_config(split="original"), str(tmp_path), toy_file, progress=False)
    assert set(prepared.candidates()) == {"pop_test", "uniform_test"}
    valid = prepare(small_data_config(), str(tmp_path), toy_file, progress=False)
    assert prepared.metadata["num_windows"] >= valid.metadata["num_windows"]


def test_custom_csv_with_string_ids(tmp_path):
    rows = ["user,item,timestamp,rating"]
    rng = np.random.default_rng(3)
    for user in ("ann", "bob", "cy"):
        for stamp, item in enumerate(rng.choice(200, 8, replace=False)):
            rows.append(f"{user},sku-{item},{100 - stamp},5")
    path = tmp_path / "mine.csv"
    path.write_text("\n".join(rows) + "\n")
    config = small_data_config(dataset="custom", num_negatives=10)
    prepared = prepare(config, str(tmp_path / "data"), str(path), progress=False)
    sequences = prepared.sequences()
    assert list(sequences.user_ids) == ["ann", "bob", "cy"]
    first = [r.split(",")[1] for r in rows[1:9]][::-1]      # timestamps descend in the file
    assert list(sequences.item_ids[sequences.sequence(0) - 1]) == first


def test_a_file_read_under_earlier_rules_is_prepared_again(tmp_path, monkeypatch, toy_file):
    path = tmp_path / "mine.csv"
    path.write_text("user,item,timestamp\n" + "".join(f"u{u},\"x\ry{i}\",{i}\n" for u in range(3)
                                                      for i in range(4 * u, 4 * u + 8)))
    config = small_data_config(dataset="custom", num_negatives=3)
    monkeypatch.setitem(readers.READING_RULES, "custom", 1)  # as before the custom reader kept line breaks
    before = prepare(config, str(tmp_path / "data"), str(path), progress=False)
    monkeypatch.undo()
    after = prepare(config, str(tmp_path / "data"), str(path), progress=False)
    assert after.directory != before.directory
    assert after.metadata["source"]["tfds_dir"] != before.metadata["source"]["tfds_dir"]
    assert sorted(after.sequences().item_ids) == sorted(f"x\ry{i}" for i in range(16))
    # Other formats keep the key they had before reading rules had versions.
    key = json.dumps({"config": small_data_config().key_settings(), "source": "file-0", "format": FORMAT_VERSION}, sort_keys=True)
    assert readers.reading_rules(toy_file) == 1
    assert output_directory(small_data_config(), "d", "file-0") == os.path.join(
        "d", "beauty", hashlib.sha256(key.encode()).hexdigest()[:12])


@pytest.mark.parametrize("dataset, overrides, source, needle", [
    ("nope", [], None, "unknown dataset 'nope'"),
    ("beauty", ["max_len"], None, "is not key=value"),
    ("beauty", ["max_len=ten"], None, "needs a int"),
    ("beauty", ["hidden=3"], None, "bert4rec has no setting 'hidden'"),
    ("beauty", [], "absent.txt", "absent.txt: no such file"),
    ("custom", [], None, "needs --source_file"),
])
def test_bad_requests_give_one_line_errors(tmp_path, capsys, dataset, overrides, source, needle):
    def run():
        config = cli.experiment_config(dataset, overrides)
        prepare(config.data, str(tmp_path), str(tmp_path / source) if source else None, progress=False)

    assert cli.guarded(run) == 1
    error = capsys.readouterr().err
    assert needle in error and error.count("\n") == 1


def test_malformed_source_line_is_reported_with_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("1 1\n1 2\n1 2 3\n")
    with pytest.raises(DataError, match=r"bad.txt, line 3: expected 'user item'"):
        prepare(small_data_config(), str(tmp_path / "data"), str(path), progress=False)


def run_command(args, cwd, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, os.path.join(REPO, "run_scripts", "prepare_data.py"), *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_command_works_from_any_directory_beside_an_unrelated_datasets_package(toy_file, tmp_path):
    fake = tmp_path / "site" / "datasets"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('the unrelated datasets package was imported')\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_command(["--dataset", "beauty", "--source_file", toy_file, "--data_dir", str(tmp_path / "d"),
                          "--config", "max_len=10", "--config", "dupe_factor=1", "--seed", "4"],
                         cwd=elsewhere, env_extra={"PYTHONPATH": str(tmp_path / "site")})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "beauty: users 12 | items" in result.stdout
    directory = result.stdout.strip().splitlines()[-1].split(": ", 1)[1]
    with open(os.path.join(directory, "metadata.json")) as handle:
        assert json.load(handle)["seed"] == 4


@pytest.mark.slow
def test_command_bad_input_exits_non_zero_with_one_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("user,product,timestamp\nu,i,1\n")
    result = run_command(["--dataset", "custom", "--source_file", str(bad), "--data_dir", str(tmp_path)],
                         cwd=tmp_path)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "bad.csv, line 1: header lacks column 'item'" in errors[0]
    assert "Traceback" not in result.stderr


def test_command_prepares_a_family_without_masked_instances(tmp_path):
    """SASRec's preparation has no TFRecords of masked instances: the command prints what it prepared
    and nothing of instances it did not write."""
    example = os.path.join(REPO, "docs", "examples", "interactions.csv")
    argv = ["prepare_data.py", "--dataset", "custom", "--source_file", example, "--model", "sasrec",
            "--config", "num_negatives=3", "--data_dir", str(tmp_path / "data")]
    result = subprocess.run([sys.executable, os.path.join(REPO, "run_scripts", "prepare_data.py"), *argv[1:]], cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1].startswith("prepared data: ")
    assert "training:" not in result.stdout  # nothing about TFRecords it did not write
