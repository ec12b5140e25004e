"""Every reader on small hand-made files, and each bad input's error message."""

from __future__ import annotations

import gzip
import json
import os
import zipfile
from decimal import Decimal

import numpy as np
import pytest

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.readers import detect_format, read_interactions


def write(tmp_path, name: str, text: str) -> str:
    path = os.path.join(tmp_path, name)
    with open(path, "w") as handle:
        handle.write(text)
    return path


@pytest.mark.parametrize("name, text, fmt, users, items, stamps", [
    ("pairs.txt", "1 10\n1 11\n\n2 10\n", "pairs", ["1", "1", "2"], ["10", "11", "10"], None),
    ("seq.txt", "7 3 4 5\n8 5\n", "sequences", ["7", "7", "7", "8"], ["3", "4", "5", "5"], None),
    ("ratings.dat", "1::1193::5::978300760\n1::661::3::978302109\n", "movielens-dat", ["1", "1"],
     ["1193", "661"], [978300760, 978302109]),
    ("ratings.csv", "userId,movieId,rating,timestamp\n1,2,3.5,1112486027\n", "movielens-csv", ["1"], ["2"],
     [1112486027]),
    ("ratings_Beauty.csv", "A39HTATAQ9V7YF,0205616461,5.0,1369699200\n", "amazon-ratings", ["A39HTATAQ9V7YF"],
     ["0205616461"], [1369699200]),
    ("reviews.json", json.dumps({"reviewerID": "U1", "asin": "B1", "unixReviewTime": 5, "overall": 4.0}) + "\n",
     "amazon-reviews", ["U1"], ["B1"], [5]),
    ("steam.json", "{'username': 'ann', 'product_id': '725280', 'date': '2017-12-17', 'text': \"x\"}\n",
     "steam-reviews", ["ann"], ["725280"], [1513468800]),
    ("custom.csv", "item,user,timestamp,rating\nb,u1,20,1\na,u1,10,5\n", "custom", ["u1", "u1"], ["b", "a"],
     [20, 10]),
    ("custom.tsv", "user\titem\ttimestamp\nu\tx,y\t3\n", "custom", ["u"], ["x,y"], [3]),
])
def test_each_format_is_detected_and_read(tmp_path, name, text, fmt, users, items, stamps):
    path = write(tmp_path, name, text)
    assert detect_format(path) == fmt
    table = read_interactions(path)
    assert table.format == fmt
    assert list(table.users) == users
    assert list(table.items) == items
    assert (None if table.timestamps is None else list(table.timestamps)) == stamps


def test_gzip_and_zip_are_read_alike(tmp_path):
    text = "1::5::3::100\n1::6::3::90\n"
    gz = os.path.join(tmp_path, "ratings.dat.gz")
    with gzip.open(gz, "wt") as handle:
        handle.write(text)
    archive = os.path.join(tmp_path, "ml-1m.zip")
    with zipfile.ZipFile(archive, "w") as handle:
        handle.writestr("ml-1m/movies.dat", "1::Toy Story (1995)::Animation\n")
        handle.writestr("ml-1m/ratings.dat", text)
    for path in (gz, archive):
        table = read_interactions(path)
        assert list(table.items) == ["5", "6"] and list(table.timestamps) == [100, 90]


@pytest.mark.parametrize("name, text, fmt, needle", [
    ("pairs.txt", "1 2\n1 2 3 4\n", "pairs", "line 2"),
    ("pairs.txt", "1 2\n1\n", "pairs", "line 2"),
    ("ratings.dat", "1::2::3::4\n1::2::3\n", None, "line 2"),
    ("ratings.dat", "1::2::3::4\n\n1::2::3::soon\n", None, "line 3: field 'timestamp'"),
    ("reviews.json", '{"reviewerID": "u", "asin": "a", "unixReviewTime": 1}\n{"reviewerID": "u"}\n', None,
     "line 2: record has no field 'asin'"),
    ("reviews.json", '{"reviewerID": "u", "asin": "a", "unixReviewTime": 1}\n{broken\n', None, "line 2"),
    ("steam.json", "{'username': 'a', 'product_id': '1', 'date': 'May 2017'}\n", None, "field 'date'"),
    ("c.csv", "user,item,timestamp\nu,i,1\nu,i\n", "custom", "line 3"),
    ("c.csv", "user,item\nu,i\n", "custom", "lacks column 'timestamp'"),
    ("c.csv", "user,product,timestamp\nu,i,1\n", "custom", "lacks column 'item'"),
    ("c.csv", "user,item,timestamp\nu,,1\n", "custom", "line 2: empty item"),
    ("c.csv", "user,item,timestamp\n\n u ,  ,1\n", "custom", "line 3: empty item id"),
    ("c.csv", "user,item,timestamp\n,i,1\n", "custom", "line 2: empty user id"),
    ("ratings.dat", "1::2::3::4\n1::::3::5\n", None, "line 2: empty item id"),
    ("ratings_Beauty.csv", "u,i,5.0,1\n,i,5.0,2\n", "amazon-ratings", "line 2: empty user id"),
    ("reviews.json", '{"reviewerID": "u", "asin": " ", "unixReviewTime": 1}\n', None, "line 1: empty item id"),
    ("ratings.dat", "1::2::3::4\n1::2::3::inf\n", None, "line 2: field 'timestamp' is 'inf', not a finite"),
    ("ratings.dat", "1::2::3::-Infinity\n", None, "line 1: field 'timestamp' is '-Infinity', not a finite"),
    ("ratings.dat", "1::2::3::nan\n", None, "line 1: field 'timestamp' is 'nan', not a finite"),
    ("ratings.dat", "1::2::3::1e30\n", None, "line 1: field 'timestamp' is '1e30', not a finite"),
    ("ratings.dat", "1::2::3::9223372036854775808\n", None, "within +-2**63"),
    ("ratings.dat", "1::2::3::12:30\n", None, "line 1: field 'timestamp' is not a number"),
    ("reviews.json", '{"reviewerID": "u", "asin": "a", "unixReviewTime": Infinity}\n', None,
     "line 1: field 'unixReviewTime' is 'inf'"),
    ("c.csv", 'user,item,timestamp\nu,i,1\nu,i,"1e999"\n', "custom", "line 3: field 'timestamp' is '1e999'"),
])
def test_bad_input_names_file_and_line(tmp_path, name, text, fmt, needle):
    path = write(tmp_path, name, text)
    with pytest.raises(DataError) as raised:
        read_interactions(path, fmt)
    assert path in str(raised.value)
    assert needle in str(raised.value)


def test_empty_and_missing_files(tmp_path):
    empty = write(tmp_path, "empty.txt", "\n\n")
    with pytest.raises(DataError, match="empty.txt: file is empty"):
        read_interactions(empty)
    with pytest.raises(DataError, match="no such file"):
        read_interactions(os.path.join(tmp_path, "absent.txt"))
    with pytest.raises(DataError, match="file is empty"):
        read_interactions(write(tmp_path, "e.csv", ""), "custom")


@pytest.mark.parametrize("name, text, fmt, users, items", [
    ("bom.csv", "\ufeffuser,item,timestamp\nu,i,1\n", "custom", ["u"], ["i"]),
    ("bom.txt", "\ufeff1 2\n1 3\n", "pairs", ["1", "1"], ["2", "3"]),
    ("quoted.csv", '"user","item","timestamp"\n"u","Smith, John",1\n', "custom", ["u"], ["Smith, John"]),
    ("lines.csv", 'user,item,timestamp\nu,"two\nlines",1\nu,"tab\there",2\n', "custom", ["u", "u"],
     ["two\nlines", "tab\there"]),
    ("crlf.csv", "user,item,timestamp\r\n\r\nu,a,1\r\nu,b,2\r\n", "custom", ["u", "u"], ["a", "b"]),
    ("nbsp.txt", "u\u00a0one caf\u00e9\u3000bar\nu\u00a0one \U0001f3ac\n", "pairs", ["u\u00a0one"] * 2,
     ["caf\u00e9\u3000bar", "\U0001f3ac"]),
    ("seq.txt", "7\t3  4\n", "sequences", ["7", "7"], ["3", "4"]),
])
def test_awkward_but_valid_files_are_read_exactly(tmp_path, name, text, fmt, users, items):
    path = os.path.join(tmp_path, name)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    assert detect_format(path) == fmt
    table = read_interactions(path)
    assert list(table.users) == users and list(table.items) == items


@pytest.mark.parametrize("stamps, expected, dtype", [
    (["978300760", "1e3", "-5", "7.0"], [978300760, 1000, -5, 7], np.int64),
    (["1.7", "1.2", "2"], [Decimal("1.7"), Decimal("1.2"), 2], object),
    (["1.00000000000000000002", "1.00000000000000000001"],   # equal as float64
     [Decimal("1.00000000000000000002"), Decimal("1.00000000000000000001")], object),
    (["9223372036854775807", "9223372036854775806"], [2 ** 63 - 1, 2 ** 63 - 2], np.int64),
])
def test_timestamps_are_kept_exact(tmp_path, stamps, expected, dtype):
    path = write(tmp_path, "t.csv", "user,item,timestamp\n" + "".join(f"u,i{n},{t}\n" for n, t in enumerate(stamps)))
    table = read_interactions(path)
    assert table.timestamps.dtype == dtype
    assert list(table.timestamps) == expected


@pytest.mark.parametrize("damage", ["truncate", "corrupt"])
def test_a_truncated_or_damaged_gzip_is_a_one_line_error_naming_the_file(tmp_path, damage):
    data = gzip.compress("".join(f"{u} {i}\n" for u in range(50) for i in range(50)).encode())
    if damage == "truncate":
        data = data[:len(data) // 2]
    else:
        data = data[:-8] + bytes(8)                        # CRC and length of the gzip trailer zeroed
    path = os.path.join(tmp_path, "source.txt.gz")
    with open(path, "wb") as handle:
        handle.write(data)
    with pytest.raises(DataError) as raised:
        read_interactions(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: unreadable after line ") and "\n" not in message


def tricky_ids(count: int, seed: int) -> list[str]:
    """`count` distinct ids built from the characters that line-based and CSV files mangle (CR, LF,
    CRLF, tabs, quotes, commas, backslashes, spaces inside, non-ASCII), none of them blank, none
    with a surrounding space (the custom reader strips those)."""
    rng = np.random.default_rng(seed)
    pieces = ["\r", "\n", "\r\n", "\t", '"', "'", ",", "\\", " ", "x", "y", "é", "🙂", "\u00a0", "\u3000"]
    ids: set[str] = set()
    while len(ids) < count:
        middle = "".join(pieces[k] for k in rng.integers(len(pieces), size=rng.integers(0, 5)))
        ends = [pieces[k] for k in rng.integers(len(pieces), size=2)]
        ids.add((ends[0] + middle + "z" + ends[1]).strip(" "))
    return sorted(ids)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("delimiter", [",", "\t"])
def test_ids_that_differ_only_in_line_breaks_tabs_or_quotes_stay_distinct(tmp_path, seed, delimiter):
    import csv
    ids = tricky_ids(60, seed) + ["x\ry", "x\ny", "x\r\ny"]
    path = os.path.join(tmp_path, "tricky.csv")
    with open(path, "w", encoding="utf-8", newline="") as handle:
        # csv quotes a field holding a line break only when it holds a character of the line end:
        # a lone CR needs CRLF line ends or every field quoted.
        writer = csv.writer(handle, delimiter=delimiter, lineterminator="\r\n" if seed % 2 else "\n",
                            quoting=csv.QUOTE_MINIMAL if seed % 2 else csv.QUOTE_ALL)
        writer.writerow(["user", "item", "timestamp"])
        writer.writerows([(f"user {item}", item, n) for n, item in enumerate(ids)])
    table = read_interactions(path)
    assert list(table.items) == ids
    assert list(table.users) == [f"user {item}" for item in ids]


def test_a_line_break_inside_a_quoted_id_is_kept_as_written(tmp_path):
    path = os.path.join(tmp_path, "breaks.csv")
    with open(path, "wb") as handle:  # bytes as written: no newline translation on the way in
        handle.write(b'user,item,timestamp\r\nu,"x\ry",1\r\nu,"x\ny",2\r\nu,"x\r\ny",3\r\nu," \tpad\t ",4\r\n')
    assert list(read_interactions(path).items) == ["x\ry", "x\ny", "x\r\ny", "\tpad\t"]
