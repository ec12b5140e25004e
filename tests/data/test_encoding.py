"""Text that is not UTF-8: refused naming the file, line and byte offset, or read in the encoding the
user names (--encoding); never decoded with replacement characters, so no two ids are merged."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest

from bert4rec_tf import cli
from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.prepare import output_directory, source_identity
from bert4rec_tf.data.readers import read_interactions
from tests.conftest import REPO

# Two ids that differ only in a byte that is not UTF-8: Latin-1 "café" and "cafè".
CAFE_E_ACUTE, CAFE_E_GRAVE = "caf\u00e9", "caf\u00e8"
# Where the first of them is in the file `latin1_csv` writes: byte 0xe9 of café on line 3.
OFFSET = len("user,item,timestamp\nu0,a,0\nu0,caf")


def latin1_csv(path: str, compress: bool = False) -> str:
    """A custom CSV in Latin-1: 3 users, each with 5 items, two of them café and cafè."""
    rows = ["user,item,timestamp"] + [f"u{user},{item},{step}" for user in range(3)
                                      for step, item in enumerate(["a", CAFE_E_ACUTE, "b", CAFE_E_GRAVE, "c"])]
    data = ("\n".join(rows) + "\n").encode("latin-1")
    with (gzip.open if compress else open)(path, "wb") as handle:
        handle.write(data)
    return path


@pytest.mark.parametrize("compress", [False, True])
def test_latin1_is_refused_naming_file_line_and_byte_offset(tmp_path, compress):
    path = latin1_csv(str(tmp_path / ("data.csv.gz" if compress else "data.csv")), compress)
    with pytest.raises(DataError) as raised:
        read_interactions(path)
    assert str(raised.value) == (f"{path}, line 3: byte 0xe9 at byte offset {OFFSET} is not utf-8 text (invalid "
                                 "continuation byte); name the file's encoding, e.g. --encoding latin-1")


def test_the_named_encoding_keeps_the_two_ids_apart(tmp_path):
    table = read_interactions(latin1_csv(str(tmp_path / "data.csv")), encoding="latin-1")
    assert sorted(set(table.items)) == sorted(["a", "b", "c", CAFE_E_ACUTE, CAFE_E_GRAVE])


def test_a_byte_order_mark_is_still_dropped_from_utf8(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffuser,item,timestamp\nu,caf\u00e9,1\n".encode("utf-8"))
    assert list(read_interactions(str(path)).items) == [CAFE_E_ACUTE]


def test_the_encoding_is_part_of_the_source_identity(tmp_path):
    path = latin1_csv(str(tmp_path / "data.csv"))
    utf8 = cli.experiment_config("custom", [])
    latin1 = cli.experiment_config("custom", [], encoding="latin-1")
    assert (utf8.data.encoding, latin1.data.encoding) == ("utf-8", "iso8859-1")  # Python's own name
    assert cli.experiment_config("custom", [], encoding="latin1").data.encoding == "iso8859-1"
    assert source_identity(path, latin1.data.encoding) == source_identity(path) + "-iso8859-1"
    assert (output_directory(utf8.data, "d", source_identity(path))
            != output_directory(latin1.data, "d", source_identity(path, latin1.data.encoding)))
    with pytest.raises(ValueError, match="--encoding must be a text encoding Python knows"):
        cli.experiment_config("custom", [], encoding="klingon")


def prepare_data(*args):
    return subprocess.run([sys.executable, os.path.join(REPO, "run_scripts", "prepare_data.py"), "--dataset",
                           "custom", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_prepare_data_refuses_latin1_in_one_line_and_reads_it_with_encoding(tmp_path):
    source = latin1_csv(str(tmp_path / "data.csv"))
    data_dir = str(tmp_path / "data")
    refused = prepare_data("--source_file", source, "--data_dir", data_dir, "--stats")
    assert refused.returncode == 1
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {source}, line 3: byte 0xe9 at byte offset {OFFSET} is not utf-8 text (invalid "
                      "continuation byte); name the file's encoding, e.g. --encoding latin-1"], refused.stderr[-2000:]
    read = prepare_data("--source_file", source, "--data_dir", data_dir, "--stats", "--encoding", "latin-1")
    assert read.returncode == 0, read.stderr[-2000:]
    assert "custom: users 3 | items 5 | actions 15 |" in read.stdout
