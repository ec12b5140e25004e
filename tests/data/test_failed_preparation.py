"""Preparations that fail or cannot measure anything: a folder or a wrong encoding named as such, nothing
left behind in the data folder, an unusable source refused before it is built, and a catalogue too small
for the sampled protocols named at preparation."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bert4rec_tf.data.candidates import trivial_protocols_warning
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.prepare import prepare, source_identity
from bert4rec_tf.data.readers import read_interactions
from bert4rec_tf.data.tfds_builders import load_user_sequences, source_config
from tests.conftest import REPO, toy_sequences, write_pairs
from tests.data.test_prepare import small_data_config


def tree(folder) -> list[str]:
    """Every file and folder under `folder`, relative to it, sorted."""
    return sorted(os.path.relpath(os.path.join(parent, name), folder)
                  for parent, folders, files in os.walk(folder) for name in folders + files)


@pytest.mark.parametrize("read", [source_identity, source_config, read_interactions],
                         ids=["prepare", "tfds-build", "reader"])
def test_a_folder_given_as_the_source_is_named_a_folder(tmp_path, read):
    with pytest.raises(DataError) as raised:
        read(str(tmp_path))
    assert str(raised.value) == f"{tmp_path}: is a folder, not a file: give the data file itself"


def test_a_file_that_does_not_decode_as_the_named_encoding_is_named(tmp_path):
    """UTF-16 refuses a file without a byte-order mark with its own error, not a UnicodeDecodeError."""
    path = write_pairs(str(tmp_path / "utf8.txt"), {"1": ["a", "b"]})
    with pytest.raises(DataError) as raised:
        read_interactions(path, "pairs", encoding="utf-16")
    assert str(raised.value) == (f"{path}, line 1: does not decode as utf-16 text (UTF-16 stream does not start "
                                 "with BOM); name the file's encoding with --encoding")


def malformed_source(tmp_path) -> str:
    """A `user item` file whose last line has three fields: its build fails after reading it."""
    path = write_pairs(str(tmp_path / "malformed.txt"), toy_sequences())
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("1 2 3\n")
    return path


def test_a_failed_preparation_leaves_nothing_in_a_new_data_folder(tmp_path):
    data_dir = tmp_path / "data"
    with pytest.raises(DataError, match="expected 'user item', got 3 fields"):
        prepare(small_data_config(), str(data_dir), malformed_source(tmp_path), progress=False)
    assert tree(data_dir) == [".prepare.lock"]  # the lock stays: a waiting process may hold it open


def test_a_failed_build_removes_only_what_it_created(tmp_path):
    data_dir = str(tmp_path / "data")
    load_user_sequences("beauty", data_dir, write_pairs(str(tmp_path / "earlier.txt"), toy_sequences()))
    before = tree(data_dir)
    with pytest.raises(DataError, match="expected 'user item', got 3 fields"):
        load_user_sequences("beauty", data_dir, malformed_source(tmp_path))
    assert tree(data_dir) == before


def single_user_file(path, rows: int) -> str:
    """A custom CSV of one user who had `rows` distinct items: a catalogue with nothing to sample."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("user,item,timestamp\n")
        handle.writelines(f"someone,item-{row},{1_600_000_000 + row}\n" for row in range(rows))
    return str(path)


def test_a_source_with_nothing_to_sample_is_refused_before_it_is_built(tmp_path):
    source = single_user_file(tmp_path / "one.csv", 50)
    with pytest.raises(DataError) as raised:
        prepare(small_data_config(dataset="custom"), str(tmp_path / "data"), source, progress=False)
    assert str(raised.value) == ("too few items for 100 negatives per user (50 items, 1 users): user 'someone' has "
                                 "fewer than 100 items left to sample (only 0); use more data")
    assert tree(tmp_path / "data") == [".prepare.lock"]  # no TFDS build either


def peak_memory_mb(args: list[str], cwd) -> tuple[float, subprocess.CompletedProcess]:
    """Runs `args` in a new process; its peak resident memory (MB, Linux) and its result."""
    measure = ("import resource, subprocess, sys\n"
               "result = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "sys.stderr.write(result.stderr)\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "sys.exit(result.returncode)\n")
    result = subprocess.run([sys.executable, "-c", measure, *args], cwd=cwd, capture_output=True, text=True,
                            timeout=900)
    return int(result.stdout.split()[-1]) / 1024, result


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in kilobytes on Linux only")
def test_refusing_a_large_single_user_file_takes_memory_in_proportion_to_it(tmp_path):
    """Before the refusal came ahead of the build, 20 MB of one user took 600 MB above the command's
    own (30 times the file); now under 10 times. Measured against the same refusal on a small file."""
    command = [sys.executable, os.path.join(REPO, "run_scripts", "prepare_data.py"), "--dataset", "custom"]
    small = single_user_file(tmp_path / "small.csv", 20)
    large = single_user_file(tmp_path / "large.csv", 320_000)  # 10 MB
    size_mb = os.path.getsize(large) / 2 ** 20
    baseline, _ = peak_memory_mb([*command, "--source_file", small, "--data_dir", str(tmp_path / "a")], tmp_path)
    peak, result = peak_memory_mb([*command, "--source_file", large, "--data_dir", str(tmp_path / "b")], tmp_path)
    assert result.returncode == 1
    assert [line for line in result.stderr.splitlines() if line.startswith("error: ")] == [
        "error: too few items for 100 negatives per user (320000 items, 1 users): user 'someone' has fewer than "
        "100 items left to sample (only 0); use more data"]
    assert peak - baseline < 12 * size_mb, f"{peak - baseline:.0f} MB above the command's own for {size_mb:.0f} MB"


def test_fewer_negatives_than_the_cutoff_are_named_meaningless():
    assert trivial_protocols_warning(10, 11) is None and trivial_protocols_warning(100, 54_542) is None
    assert trivial_protocols_warning(1, 6) == (
        "1 negative sampled per user (num_negatives=1, catalogue of 6 items), not 100: each target ranks among 2 "
        "items, so the sampled protocols (pop, uniform) give HR@10 1.0 by construction and are meaningless here; "
        "judge the model by full ranking (with 6 items its Recall@10 is 1.0 too: only its MRR and NDCG tell "
        "models apart)")
    assert trivial_protocols_warning(9, 400).endswith("are meaningless here; judge the model by full ranking")


def test_preparing_a_six_item_catalogue_warns_that_the_sampled_protocols_are_meaningless(tmp_path, caplog):
    """Users with 5 of 6 items leave 1 negative: HR@10 is 1.0 for any model."""
    source = write_pairs(str(tmp_path / "six.txt"),
                         {str(user): [str((user + step) % 6 + 1) for step in range(5)] for user in range(1, 13)})
    data_dir = str(tmp_path / "data")
    prepared = prepare(small_data_config(num_negatives=1), data_dir, source, progress=False)
    assert prepared.candidates()["pop_test"].shape == (12, 1)
    warnings = [record.getMessage() for record in caplog.records
                if record.name == "bert4rec_tf" and record.levelname == "WARNING"]
    assert warnings == [trivial_protocols_warning(1, 6)]
    caplog.clear()
    prepare(small_data_config(num_negatives=1), data_dir, source, progress=False)  # reused: warned again
    assert trivial_protocols_warning(1, 6) in caplog.text


def prepare_command(source: str, data_dir: str) -> list[str]:
    return [sys.executable, os.path.join(REPO, "run_scripts", "prepare_data.py"), "--dataset", "beauty",
            "--source_file", source, "--data_dir", data_dir, "--config", "max_len=10", "--config", "num_negatives=20"]


def prepared_files(data_dir: str) -> dict:
    """{file: {"bytes", "sha256"}} of the one prepared folder under `data_dir`."""
    import json

    [folder] = [os.path.join(data_dir, "beauty", name) for name in os.listdir(os.path.join(data_dir, "beauty"))
                if not name.startswith(".")]
    with open(os.path.join(folder, "metadata.json")) as handle:
        return json.load(handle)["files"]


@pytest.mark.slow
@pytest.mark.parametrize("limit, where", [(4_000, "tfds/bert4rec_beauty/file-"), (100_000, "beauty/")],
                         ids=["tfds-build", "masked-instances"])
def test_a_file_size_limit_is_one_line_and_the_same_command_then_prepares_the_same_files(tmp_path, limit, where):
    import resource

    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences(num_users=30, num_items=120))
    data_dir = str(tmp_path / "data")
    failed = subprocess.run(prepare_command(source, data_dir), capture_output=True, text=True, timeout=600,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr, failed.stderr[-3000:]
    last = failed.stderr.strip().splitlines()[-1].split("\r")[-1]
    assert last.startswith(f"error: {data_dir}/{where}") and last.endswith(
        ": cannot be written: file too large for the disk or the file-size limit (ulimit -f)"), last
    again = subprocess.run(prepare_command(source, data_dir), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    whole = subprocess.run(prepare_command(source, str(tmp_path / "whole")), capture_output=True, text=True,
                           timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert prepared_files(data_dir) == prepared_files(str(tmp_path / "whole"))


def test_an_unfinished_build_a_killed_process_left_is_removed_by_the_next(tmp_path):
    source = write_pairs(str(tmp_path / "toy.txt"), toy_sequences())
    config_folder = tmp_path / "data" / "tfds" / "bert4rec_beauty" / source_config(source).name
    abandoned = config_folder / "incomplete.K1LLED_2.0.0"
    abandoned.mkdir(parents=True)
    (abandoned / "bert4rec_beauty-train.tfrecord-00000-of-00001").write_bytes(b"half")
    load_user_sequences("beauty", str(tmp_path / "data"), source)
    assert sorted(os.listdir(config_folder)) == ["2.0.0"]
