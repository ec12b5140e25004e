"""Bad inputs and faults, each made here on tiny data: damaged caches, abandoned folders, awkward ids,
catalogues too small, and the one-line errors of the command."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from bert4rec_tf.data.candidates import sample_negatives
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.id_files import read_ids
from bert4rec_tf.data.prepare import load_prepared, prepare
from bert4rec_tf.data.preprocess import UserSequences
from bert4rec_tf.data.tfds_builders import load_user_sequences
from tests.conftest import REPO, toy_sequences, write_pairs
from tests.data.test_prepare import run_command, small_data_config


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory):
    return write_pairs(str(tmp_path_factory.mktemp("src") / "toy.txt"), toy_sequences())


@pytest.fixture(scope="module")
def prepared_cache(toy_file, tmp_path_factory):
    """A data folder holding one complete preparation of the toy file, to copy and damage."""
    data_dir = str(tmp_path_factory.mktemp("cache"))
    return data_dir, prepare(small_data_config(), data_dir, toy_file, progress=False)


def flip_middle_byte(path: str) -> None:
    with open(path, "r+b") as handle:
        handle.seek(os.path.getsize(path) // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))


def edit_first_character(path: str) -> None:
    """Changes the first character of a text file in place, keeping its size."""
    with open(path, "r+b") as handle:
        first = handle.read(1)
        handle.seek(0)
        handle.write(b"9" if first != b"9" else b"8")


@pytest.mark.slow
@pytest.mark.parametrize("name, damage, problem", [
    ("vocab.txt", edit_first_character, "damaged"),
    ("users.txt", lambda path: os.truncate(path, 0), "damaged"),
    ("train-00000-of-00002.tfrecord", flip_middle_byte, "damaged"),
    ("candidates.npz", os.remove, "missing"),
    ("metadata.json", lambda path: pathlib.Path(path).write_text("{broken"), "damaged"),
], ids=["vocab-edited", "users-emptied", "shard-flipped-byte", "candidates-gone", "metadata-broken"])
def test_a_damaged_prepared_file_is_named_and_prepared_again(prepared_cache, toy_file, tmp_path, caplog, name,
                                                               damage, problem):
    data_dir, original = prepared_cache
    shutil.copytree(data_dir, tmp_path / "data")
    directory = str(tmp_path / "data" / os.path.relpath(original.directory, data_dir))
    damage(os.path.join(directory, name))
    with pytest.raises(DataError) as raised:
        load_prepared(directory)
    assert str(raised.value).startswith(f"{os.path.join(directory, name)}: {problem}")
    again = prepare(small_data_config(), str(tmp_path / "data"), toy_file, progress=False)
    assert f"{os.path.join(directory, name)}: {problem}" in caplog.text
    assert again.directory == directory
    assert load_prepared(directory).metadata["files"] == original.metadata["files"]


def tfds_build_folder(data_dir: str) -> str:
    parent = os.path.join(data_dir, "tfds", "bert4rec_beauty")
    [config] = [name for name in os.listdir(parent) if name.startswith("file-")]
    [version] = os.listdir(os.path.join(parent, config))
    return os.path.join(parent, config, version)


def the_record_file(folder: str) -> str:
    [name] = [name for name in os.listdir(folder) if ".tfrecord" in name]
    return os.path.join(folder, name)


@pytest.mark.slow
@pytest.mark.parametrize("damage", [
    lambda folder: flip_middle_byte(the_record_file(folder)),
    lambda folder: os.truncate(the_record_file(folder), 30),
    lambda folder: os.remove(the_record_file(folder)),
    lambda folder: pathlib.Path(folder, "dataset_info.json").write_text("{broken"),
    lambda folder: [os.remove(os.path.join(folder, name)) for name in os.listdir(folder)],
], ids=["flipped-byte", "truncated", "record-file-gone", "info-damaged", "empty"])
def test_a_damaged_tfds_build_is_removed_and_built_again(prepared_cache, toy_file, tmp_path, caplog, damage):
    data_dir, _ = prepared_cache
    shutil.copytree(data_dir, tmp_path / "data")
    folder = tfds_build_folder(str(tmp_path / "data"))
    expected, _ = load_user_sequences("beauty", str(tmp_path / "data"), toy_file)
    damage(folder)
    sequences, _ = load_user_sequences("beauty", str(tmp_path / "data"), toy_file)
    assert f"{folder}: the TFDS build cannot be read" in caplog.text
    assert np.array_equal(sequences.items, expected.items) and np.array_equal(sequences.offsets, expected.offsets)
    assert list(sequences.item_ids) == list(expected.item_ids)
    assert list(sequences.user_ids) == list(expected.user_ids)


def finished_process_id() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_folders_left_by_dead_processes_are_removed_and_those_of_running_ones_kept(toy_file, tmp_path, caplog):
    parent = tmp_path / "beauty"
    dead = parent / f".tmp-{finished_process_id()}-00ff00ff-0123456789ab"
    running = parent / f".tmp-{os.getpid()}-ff00ff00-ba9876543210"
    for folder in (dead, running):
        (folder / "part").mkdir(parents=True)
    prepared = prepare(small_data_config(), str(tmp_path), toy_file, progress=False)
    assert not dead.exists() and running.exists()
    assert f"removing {dead}, left incomplete by process" in caplog.text
    assert sorted(os.listdir(parent)) == sorted([running.name, os.path.basename(prepared.directory)])


def write_csv(path, rows: list[str]) -> str:
    path.write_text("user,item,timestamp\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


def test_a_catalogue_too_small_for_the_negatives_fails_before_anything_is_written(tmp_path):
    rows = [f"u{user},i{(user + step) % 8},{step}" for user in range(3) for step in range(6)]
    source = write_csv(tmp_path / "tiny.csv", rows)
    with pytest.raises(DataError) as raised:
        prepare(small_data_config(dataset="custom"), str(tmp_path / "data"), source, progress=False)
    message = str(raised.value)
    assert message.startswith("too few items for 100 negatives per user (8 items, 3 users): user 'u0' has")
    assert "set --config num_negatives=2 or less" in message
    assert not os.path.exists(tmp_path / "data" / "custom")          # no TFRecords, no temporary folder
    prepared = prepare(small_data_config(dataset="custom", num_negatives=2), str(tmp_path / "data"), source,
                       progress=False)
    assert prepared.candidates()["pop_test"].shape == (3, 2)


def sequences_of(lists: list[list[int]], num_items: int) -> UserSequences:
    return UserSequences(user_ids=np.asarray([f"u{n}" for n in range(len(lists))], dtype=object),
                         item_ids=np.asarray([f"i{n}" for n in range(1, num_items + 1)], dtype=object),
                         offsets=np.concatenate([[0], np.cumsum([len(items) for items in lists])]),
                         items=np.concatenate(lists).astype(np.int32))


@pytest.fixture
def deadline():
    """Turns a hang into a failure after 20 s."""
    def expire(*_):
        raise TimeoutError("still sampling after 20 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_items_no_one_had_are_not_counted_so_sampling_cannot_loop(deadline):
    # Items 4..6 are in the vocabulary but in no sequence: their popularity weight is 0, so user u0
    # (items 1, 2) has one item to draw by popularity, item 3, however many ids are unseen.
    sequences = sequences_of([[1, 2], [1, 3]], num_items=6)
    with pytest.raises(DataError, match=r"\(6 items, 2 users\): user 'u0' has fewer than 2 items left to sample "
                                        r"\(only 1\)"):
        sample_negatives(sequences, "pop", "test", 2, seed=0)
    assert sample_negatives(sequences, "uniform", "test", 2, seed=0).shape == (2, 2)


UNICODE_ITEMS = ["caf\u00e9", "\u65e5\u672c", "\U0001f3ac", "tab\there", "two\nlines", "comma, quoted",
                 "back\\slash", "\\t", "a\u00a0b", 'say "hi"', "x\u2028y", "\u0663"]


def csv_field(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def unicode_source(tmp_path) -> tuple[str, dict[str, list[str]]]:
    """A custom CSV whose ids need quoting, escaping or more than ASCII, and each user's items."""
    users = {"\u00e9l\u00e8ve": UNICODE_ITEMS[:6], "\u0443\u0447\u0435\u043d\u0438\u043a": UNICODE_ITEMS[3:9],
             "user\tthree": UNICODE_ITEMS[6:]}
    rows = [f"{csv_field(user)},{csv_field(item)},{step}" for user, items in users.items()
            for step, item in enumerate(items)]
    return write_csv(tmp_path / "unicode.csv", rows), users


@pytest.mark.slow
def test_any_unicode_id_survives_preparation(tmp_path):
    source, users = unicode_source(tmp_path)
    prepared = prepare(small_data_config(dataset="custom", num_negatives=3), str(tmp_path / "data"), source,
                       progress=False)
    sequences = prepared.sequences()
    assert list(sequences.user_ids) == list(users)
    assert [[sequences.item_ids[i - 1] for i in sequences.sequence(u)] for u in range(3)] == list(users.values())
    assert sorted(read_ids(os.path.join(prepared.directory, "vocab.txt"))) == sorted(UNICODE_ITEMS)


def test_json_ids_keep_their_spaces_and_line_breaks(tmp_path):
    items = [" lead", "trail ", "new\nline", "cr\rlf", "plain", "\u00fcml"]
    records = [{"reviewerID": f"u{user}", "asin": item, "unixReviewTime": step}
               for user in range(2) for step, item in enumerate(items[user:user + 5])]
    source = tmp_path / "reviews.json"
    source.write_text("\n".join(json.dumps(record) for record in records) + "\n")
    prepared = prepare(small_data_config(num_negatives=1), str(tmp_path / "data"), str(source), progress=False)
    sequences = prepared.sequences()
    assert [[sequences.item_ids[i - 1] for i in sequences.sequence(u)] for u in range(2)] == [items[:5], items[1:]]


@pytest.mark.slow
def test_the_command_handles_unicode_ids_under_the_c_locale(tmp_path):
    source, _ = unicode_source(tmp_path)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONIOENCODING", "PYTHONUTF8")}
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "run_scripts", "prepare_data.py"), "--dataset", "custom", "--source_file",
         source, "--data_dir", str(tmp_path / "data"), "--config", "max_len=10", "--config", "dupe_factor=1",
         "--config", "num_negatives=3"],
        cwd=tmp_path, env={**env, "LC_ALL": "C", "LANG": "C"}, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    directory = result.stdout.strip().splitlines()[-1].split(": ", 1)[1]
    assert sorted(read_ids(os.path.join(directory, "vocab.txt"))) == sorted(UNICODE_ITEMS)


def truncated_gzip(tmp_path) -> tuple[str, str]:
    data = gzip.compress("".join(f"{u} {i}\n" for u in range(1, 40) for i in range(1, 40)).encode())
    path = tmp_path / "source.txt.gz"
    path.write_bytes(data[:len(data) // 2])
    return str(path), "unreadable after line"


def huge_timestamp(tmp_path) -> tuple[str, str]:
    path = write_csv(tmp_path / "huge.csv", ["u,a,1", "u,b,1e30", "u,c,3"])
    return path, "line 3: field 'timestamp' is '1e30', not a finite number within +-2**63"


@pytest.mark.slow
@pytest.mark.parametrize("dataset, make", [("beauty", truncated_gzip), ("custom", huge_timestamp)],
                         ids=["truncated-gzip", "huge-timestamp"])
def test_the_command_reports_a_bad_source_in_one_line_naming_it(tmp_path, dataset, make):
    path, needle = make(tmp_path)
    result = run_command(["--dataset", dataset, "--source_file", path, "--data_dir", str(tmp_path / "data"),
                          "--stats"], cwd=tmp_path)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert errors[0].split("error: ", 1)[1].startswith(f"{path}") and needle in errors[0]
