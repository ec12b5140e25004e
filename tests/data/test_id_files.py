"""Id files round-trip any Unicode id, one id a line, and name the file and line of a bad one."""

from __future__ import annotations

import pytest

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.id_files import escape_id, read_ids, unescape_id, write_ids

TRICKY_IDS = [
    "tab\there", "line\nfeed", "carriage\rreturn", "crlf\r\n", "back\\slash", "\\t", "\\", "\\\\n", "\t",
    "\U0001f3ac", "\u65e5\u672c\u8a9e", " leading", "trailing ", "  ", "", "a\u00a0b", "line\u2028separator",
    "next\x85line", "form\x0cfeed", "nul\x00", "\ufeffbom first", "plain",
]


@pytest.mark.parametrize("value", TRICKY_IDS)
def test_escape_round_trips_and_leaves_no_tab_or_line_break(value):
    escaped = escape_id(value)
    assert unescape_id(escaped) == value
    assert not set("\t\n\r") & set(escaped)


def test_a_file_of_tricky_ids_reads_back_exactly_one_id_a_line(tmp_path):
    path = tmp_path / "ids.txt"
    write_ids(path, TRICKY_IDS)
    assert read_ids(path) == TRICKY_IDS
    assert path.read_bytes().count(b"\n") == len(TRICKY_IDS)
    assert path.read_bytes().startswith(b"tab\\there\n")           # ordinary characters as they are
    assert "\u65e5\u672c\u8a9e\n".encode() in path.read_bytes()


def test_ordinary_ids_are_written_as_they_look(tmp_path):
    path = tmp_path / "vocab.txt"
    write_ids(path, ["1", "B00012", "caf\u00e9"])
    assert path.read_text(encoding="utf-8") == "1\nB00012\ncaf\u00e9\n"


@pytest.mark.parametrize("content, needle", [
    (b"ok\nbad\\x\n", "ids.txt, line 2: bad escape '\\x'"),
    (b"ok\ntrailing\\\n", "ids.txt, line 2: bad escape '\\'"),
    (b"ok\n\xff\xfe\n", "ids.txt: not UTF-8 text"),
])
def test_a_malformed_id_file_is_an_error_naming_file_and_line(tmp_path, content, needle):
    path = tmp_path / "ids.txt"
    path.write_bytes(content)
    with pytest.raises(DataError) as raised:
        read_ids(path)
    assert needle in str(raised.value)
