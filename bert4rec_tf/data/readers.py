"""Readers for every raw and preprocessed interaction file the package accepts.

Each reader returns an `Interactions` table in file order; sorting, filtering and id mapping happen in
`bert4rec_tf.data.preprocess`. Formats:

- ``pairs``: ``user item`` a line (the original code's preprocessed files).
- ``sequences``: ``user item1 item2 ...`` a line, items in time order (S3-Rec's 5-core files).
- ``movielens-dat``: ``UserID::MovieID::Rating::Timestamp`` (ml-1m ``ratings.dat``).
- ``movielens-csv``: ``userId,movieId,rating,timestamp`` with that header (ml-20m ``ratings.csv``).
- ``amazon-ratings``: ``user,item,rating,timestamp`` without header (``ratings_Beauty.csv``).
- ``amazon-reviews``: one JSON object (or Python dict literal) a line with ``reviewerID``, ``asin``
  and ``unixReviewTime`` (McAuley's 5-core review files).
- ``steam-reviews``: one Python dict literal a line with ``username``, ``product_id``, ``date``.
- ``custom``: CSV or TSV with a header naming ``user``, ``item``, ``timestamp`` (and optionally
  ``rating``), ids arbitrary strings; fields may be quoted as in CSV (commas, quotes, tabs or line
  breaks inside an id, kept as they are: ``"x\ry"``, ``"x\ny"`` and ``"x\r\ny"`` are three ids).
  An id is stripped of surrounding ASCII spaces only.

Plain, ``.gz`` and ``.zip`` files are read alike (a zip is read through its ratings member), as UTF-8
with or without a byte-order mark unless another encoding is named. Bytes the encoding cannot decode
are an error naming the file, the line and the byte offset, never replaced: two ids that differ only
in such bytes would become one. ``user item`` and ``user item1 item2 ...`` lines are split at ASCII
spaces and tabs only, so an id may hold any other character. An empty user or item id (or one of
spaces only) is an error.

Lines are read without translating their ends (a file's line ends may be LF, CRLF or CR), so a line
break inside a quoted CSV field reaches the id as it is in the file.

Timestamps are kept exact: a whole number as an int, anything else (``1.25``, ``1e-3``) as a
`decimal.Decimal`, never rounded, so interactions are ordered by their exact value. A timestamp that
is not a finite number within +-2**63 (``nan``, ``inf``, ``1e30``) is an error naming the file, line
and field.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import datetime
import decimal
import itertools
import json
import os
import re
from typing import Callable, Iterator

import numpy as np
from tqdm.auto import tqdm

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.text_files import text_lines

FORMATS = (
    "pairs", "sequences", "movielens-dat", "movielens-csv", "amazon-ratings", "amazon-reviews",
    "steam-reviews", "custom",
)
_ASCII_SPACE = " \t\r\n\x0b\x0c"
_ASCII_SPACE_RUN = re.compile(f"[{re.escape(_ASCII_SPACE)}]+")
_TIMESTAMP_LIMIT = 2 ** 63
# The version of each format's reading rules, raised when a file of that format reads differently:
# part of the prepared data's key, so a file read under earlier rules is read again. custom 2: line
# breaks inside quoted fields are kept untranslated, and ids are stripped of ASCII spaces only.
READING_RULES = {"custom": 2}

Timestamp = int | decimal.Decimal | None
Record = tuple[int, str, str, Timestamp]  # line number, user, item, timestamp


@dataclasses.dataclass
class Interactions:
    """Interactions in file order.

    Attributes:
        users: raw user ids, [num_interactions] (str).
        items: raw item ids, [num_interactions] (str).
        timestamps: [num_interactions] exact timestamps as read: int64 when every one is a whole
            number, else an object array of int and `decimal.Decimal`; None where the file has none
            (then the file order is the time order within a user).
        path: the file read.
        format: one of `FORMATS`.
    """

    users: np.ndarray
    items: np.ndarray
    timestamps: np.ndarray | None
    path: str
    format: str

    def __len__(self) -> int:
        return len(self.users)


def detect_format(path: str | os.PathLike, encoding: str = "utf-8") -> str:
    """Guesses a file's format from its first non-empty line (the file in text `encoding`).

    Raises:
        DataError: for an empty file, a first line no reader understands, or text `encoding` cannot
            decode.
    """
    lines = text_lines(path, encoding)
    first = next((line.strip(_ASCII_SPACE) for line in lines if line.strip(_ASCII_SPACE)), None)
    lines.close()
    if first is None:
        raise DataError("file is empty", path)
    lowered = first.lower()
    if "::" in first:
        return "movielens-dat"
    if lowered.startswith("userid,movieid"):
        return "movielens-csv"
    if first.startswith("{"):
        return "steam-reviews" if "'username'" in first or '"username"' in first else "amazon-reviews"
    header = [h.strip().lower() for h in next(csv.reader([first.replace("\t", ",")]))]
    if {"user", "item"} <= set(header):
        return "custom"
    if first.count(",") == 3:
        return "amazon-ratings"
    fields = _split(first)
    if len(fields) == 2:
        return "pairs"
    if len(fields) > 2:
        return "sequences"
    raise DataError(f"cannot tell the format of the first line {first[:80]!r}", path, 1)


def reading_rules(path: str | os.PathLike | None, fmt: str | None = None, encoding: str = "utf-8") -> int:
    """The version of the reading rules (`READING_RULES`, 1 when unlisted) that `path` is read under in
    format `fmt` (detected when None); 1 for no local file (the official downloads are in formats whose
    rules are at version 1)."""
    if path is None:
        return 1
    return READING_RULES.get(fmt or detect_format(path, encoding), 1)


def read_interactions(path: str | os.PathLike, fmt: str | None = None, encoding: str = "utf-8") -> Interactions:
    """Reads `path` in format `fmt` (detected when None) and text `encoding` into an `Interactions` table.

    Raises:
        DataError: naming the file and line of the first malformed record (an empty id, a timestamp
            that is not a finite number, bytes `encoding` cannot decode, with their byte offset), a
            truncated compressed file, or an empty file.
    """
    path = os.fspath(path)
    fmt = fmt or detect_format(path, encoding)
    if fmt not in FORMATS:
        raise DataError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}", path)
    users: list[str] = []
    items: list[str] = []
    times: list[Timestamp] = []
    ids: dict[str, str] = {}  # one str object per distinct id: ids repeat, and each object costs ~50 bytes
    fractional = False
    with tqdm(text_lines(path, encoding), desc=f"reading {os.path.basename(path)}", unit=" lines", mininterval=1.0,
              leave=False) as lines:
        for number, user, item, stamp in _PARSERS[fmt](lines, path):
            if not user.strip() or not item.strip():
                raise DataError(f"empty {'item' if user.strip() else 'user'} id", path, number)
            users.append(ids.setdefault(user, user))
            items.append(ids.setdefault(item, item))
            times.append(stamp)
            fractional = fractional or isinstance(stamp, decimal.Decimal)
    if not users:
        raise DataError("file holds no interactions", path)
    timestamps = None
    if fmt not in ("pairs", "sequences"):
        timestamps = np.asarray(times, dtype=object if fractional else np.int64)
    return Interactions(
        users=np.asarray(users, dtype=object),
        items=np.asarray(items, dtype=object),
        timestamps=timestamps,
        path=path,
        format=fmt,
    )


def _numbered(lines: Iterator[str]) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(lines, start=1):
        line = line.strip(_ASCII_SPACE)
        if line:
            yield number, line


def _split(line: str) -> list[str]:
    """The fields of a stripped line, split at ASCII whitespace only (an id may hold any other space)."""
    return _ASCII_SPACE_RUN.split(line)


def _parse_pairs(lines: Iterator[str], path: str) -> Iterator[Record]:
    for number, line in _numbered(lines):
        fields = _split(line)
        if len(fields) != 2:
            raise DataError(f"expected 'user item', got {len(fields)} fields: {line[:80]!r}", path, number)
        yield number, fields[0], fields[1], None


def _parse_sequences(lines: Iterator[str], path: str) -> Iterator[Record]:
    for number, line in _numbered(lines):
        fields = _split(line)
        if len(fields) < 2:
            raise DataError(f"expected 'user item1 item2 ...', got {line[:80]!r}", path, number)
        for item in fields[1:]:
            yield number, fields[0], item, None


def _timestamp(text: str, path: str, number: int, field: str = "timestamp") -> int | decimal.Decimal:
    """The exact value of a timestamp field: an int when it is a whole number, else a Decimal.

    Raises:
        DataError: naming the file, line and field when the text is not a number, or not a finite
            one within +-2**63.
    """
    text = text.strip()
    try:
        value = int(text)
    except ValueError:
        try:
            value = decimal.Decimal(text)
        except decimal.InvalidOperation:
            raise DataError(f"field {field!r} is not a number: {text[:40]!r}", path, number) from None
    finite = isinstance(value, int) or value.is_finite()
    if not finite or not -_TIMESTAMP_LIMIT < value < _TIMESTAMP_LIMIT:
        raise DataError(f"field {field!r} is {text[:40]!r}, not a finite number within +-2**63", path, number)
    if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
        return int(value)
    return value


def _parse_movielens_dat(lines: Iterator[str], path: str) -> Iterator[Record]:
    for number, line in _numbered(lines):
        fields = line.split("::")
        if len(fields) != 4:
            raise DataError(f"expected 'UserID::MovieID::Rating::Timestamp', got {line[:80]!r}", path, number)
        yield number, fields[0], fields[1], _timestamp(fields[3], path, number)


def _parse_comma4(lines: Iterator[str], path: str, header: bool) -> Iterator[Record]:
    for number, line in _numbered(lines):
        if header and number == 1:
            continue
        fields = line.split(",")
        if len(fields) != 4:
            raise DataError(f"expected 4 comma-separated fields (user,item,rating,timestamp), got {line[:80]!r}",
                            path, number)
        yield number, fields[0], fields[1], _timestamp(fields[3], path, number)


def _literal(line: str, path: str, number: int) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        try:
            record = ast.literal_eval(line)
        except (ValueError, SyntaxError):
            raise DataError(f"not a JSON object or Python dict: {line[:80]!r}", path, number) from None
    if not isinstance(record, dict):
        raise DataError(f"not a JSON object or Python dict: {line[:80]!r}", path, number)
    return record


def _require(record: dict, fields: tuple[str, ...], path: str, number: int) -> list:
    missing = [f for f in fields if f not in record]
    if missing:
        raise DataError(f"record has no field {missing[0]!r}", path, number)
    return [record[f] for f in fields]


def _parse_amazon_reviews(lines: Iterator[str], path: str) -> Iterator[Record]:
    for number, line in _numbered(lines):
        user, item, stamp = _require(_literal(line, path, number), ("reviewerID", "asin", "unixReviewTime"),
                                     path, number)
        yield number, str(user), str(item), _timestamp(str(stamp), path, number, "unixReviewTime")


def _parse_steam(lines: Iterator[str], path: str) -> Iterator[Record]:
    for number, line in _numbered(lines):
        user, item, date = _require(_literal(line, path, number), ("username", "product_id", "date"),
                                    path, number)
        try:
            day = datetime.date.fromisoformat(str(date))
        except ValueError:
            raise DataError(f"field 'date' is not YYYY-MM-DD: {date!r}", path, number) from None
        stamp = int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc).timestamp())
        yield number, str(user), str(item), stamp


def csv_id(field: str) -> str:
    """An id as a CSV field holds it: without surrounding ASCII spaces, every other character kept (a
    tab, a line break, a non-breaking space). The custom format's ids and the feature files' are read so."""
    return field.strip(" ")


def _parse_custom(lines: Iterator[str], path: str) -> Iterator[Record]:
    lines = iter(lines)
    leading = 0  # blank lines before the header
    for first in lines:
        if first.strip(_ASCII_SPACE):
            break
        leading += 1
    else:
        raise DataError("file is empty", path)
    rows = csv.reader(itertools.chain([first], lines), delimiter="\t" if "\t" in first else ",")
    try:
        header = [h.strip().lower() for h in next(rows)]
        missing = [c for c in ("user", "item", "timestamp") if c not in header]
        if missing:
            raise DataError(f"header lacks column {missing[0]!r} (needs user, item, timestamp; has {header})",
                            path, leading + 1)
        columns = [header.index(c) for c in ("user", "item", "timestamp")]
        for fields in rows:
            number = leading + rows.line_num
            if not any(field.strip() for field in fields):
                continue
            if len(fields) != len(header):
                raise DataError(f"expected {len(header)} fields as in the header, got {len(fields)}", path, number)
            yield number, csv_id(fields[columns[0]]), csv_id(fields[columns[1]]), _timestamp(
                fields[columns[2]], path, number)
    except csv.Error as error:
        raise DataError(f"malformed CSV ({error})", path, leading + rows.line_num) from None


_PARSERS: dict[str, Callable[[Iterator[str], str], Iterator[Record]]] = {
    "pairs": _parse_pairs,
    "sequences": _parse_sequences,
    "movielens-dat": _parse_movielens_dat,
    "movielens-csv": lambda lines, path: _parse_comma4(lines, path, header=True),
    "amazon-ratings": lambda lines, path: _parse_comma4(lines, path, header=False),
    "amazon-reviews": _parse_amazon_reviews,
    "steam-reviews": _parse_steam,
    "custom": _parse_custom,
}
