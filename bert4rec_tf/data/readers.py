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
  ``rating``), ids arbitrary strings.

Plain, ``.gz`` and ``.zip`` files are read alike (a zip is read through its ratings member).
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import datetime
import gzip
import io
import json
import os
import zipfile
from typing import Callable, Iterator, TextIO

import numpy as np
from tqdm.auto import tqdm

from bert4rec_tf.data.errors import DataError

FORMATS = (
    "pairs", "sequences", "movielens-dat", "movielens-csv", "amazon-ratings", "amazon-reviews",
    "steam-reviews", "custom",
)
_ZIP_MEMBERS = ("ratings.dat", "ratings.csv")


@dataclasses.dataclass
class Interactions:
    """Interactions in file order.

    Attributes:
        users: raw user ids, [num_interactions] (str).
        items: raw item ids, [num_interactions] (str).
        timestamps: seconds, [num_interactions] int64, or None where the file has none (then the
            file order is the time order within a user).
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


def open_text(path: str | os.PathLike) -> TextIO:
    """Opens a plain, gzip or zip file as text (a zip through its ``ratings.*`` member).

    Raises:
        DataError: when the file is missing or a zip has no ratings member.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError("no such file", path)
    if zipfile.is_zipfile(path):
        archive = zipfile.ZipFile(path)
        names = [n for n in archive.namelist() if os.path.basename(n) in _ZIP_MEMBERS]
        if not names:
            raise DataError(f"zip archive has no member named {' or '.join(_ZIP_MEMBERS)}", path)
        return io.TextIOWrapper(archive.open(names[0]), encoding="utf-8", errors="replace")
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, "rt", encoding="utf-8", errors="replace")


def detect_format(path: str | os.PathLike) -> str:
    """Guesses a file's format from its first non-empty line.

    Raises:
        DataError: for an empty file or a first line no reader understands.
    """
    with open_text(path) as handle:
        first = next((line.strip() for line in handle if line.strip()), None)
    if first is None:
        raise DataError("file is empty", path)
    lowered = first.lower()
    if "::" in first:
        return "movielens-dat"
    if lowered.startswith("userid,movieid"):
        return "movielens-csv"
    if first.startswith("{"):
        return "steam-reviews" if "'username'" in first or '"username"' in first else "amazon-reviews"
    header = [h.strip() for h in first.replace("\t", ",").lower().split(",")]
    if {"user", "item"} <= set(header):
        return "custom"
    if first.count(",") == 3:
        return "amazon-ratings"
    fields = first.split()
    if len(fields) == 2:
        return "pairs"
    if len(fields) > 2:
        return "sequences"
    raise DataError(f"cannot tell the format of the first line {first[:80]!r}", path, 1)


def read_interactions(path: str | os.PathLike, fmt: str | None = None) -> Interactions:
    """Reads `path` in format `fmt` (detected when None) into an `Interactions` table.

    Raises:
        DataError: naming the file and line of the first malformed record, or an empty file.
    """
    path = os.fspath(path)
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise DataError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}", path)
    users: list[str] = []
    items: list[str] = []
    times: list[int] = []
    with open_text(path) as handle, tqdm(handle, desc=f"reading {os.path.basename(path)}", unit=" lines",
                                         mininterval=1.0, leave=False) as lines:
        for user, item, stamp in _PARSERS[fmt](lines, path):
            users.append(user)
            items.append(item)
            times.append(stamp)
    if not users:
        raise DataError("file holds no interactions", path)
    has_time = fmt not in ("pairs", "sequences")
    return Interactions(
        users=np.asarray(users, dtype=object),
        items=np.asarray(items, dtype=object),
        timestamps=np.asarray(times, dtype=np.int64) if has_time else None,
        path=path,
        format=fmt,
    )


Record = tuple[str, str, int]


def _numbered(lines: Iterator[str]) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if line:
            yield number, line


def _parse_pairs(lines: Iterator[str], path: str) -> Iterator[Record]:
    for number, line in _numbered(lines):
        fields = line.split()
        if len(fields) != 2:
            raise DataError(f"expected 'user item', got {len(fields)} fields: {line[:80]!r}", path, number)
        yield fields[0], fields[1], 0


def _parse_sequences(lines: Iterator[str], path: str) -> Iterator[Record]:
    for number, line in _numbered(lines):
        fields = line.split()
        if len(fields) < 2:
            raise DataError(f"expected 'user item1 item2 ...', got {line[:80]!r}", path, number)
        for item in fields[1:]:
            yield fields[0], item, 0


def _timestamp(text: str, path: str, number: int, field: str = "timestamp") -> int:
    try:
        return int(float(text))
    except ValueError:
        raise DataError(f"field {field!r} is not a number: {text[:40]!r}", path, number) from None


def _parse_movielens_dat(lines: Iterator[str], path: str) -> Iterator[Record]:
    for number, line in _numbered(lines):
        fields = line.split("::")
        if len(fields) != 4:
            raise DataError(f"expected 'UserID::MovieID::Rating::Timestamp', got {line[:80]!r}", path, number)
        yield fields[0], fields[1], _timestamp(fields[3], path, number)


def _parse_comma4(lines: Iterator[str], path: str, header: bool) -> Iterator[Record]:
    for number, line in _numbered(lines):
        if header and number == 1:
            continue
        fields = line.split(",")
        if len(fields) != 4:
            raise DataError(f"expected 4 comma-separated fields (user,item,rating,timestamp), got {line[:80]!r}",
                            path, number)
        yield fields[0], fields[1], _timestamp(fields[3], path, number)


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
        yield str(user), str(item), _timestamp(str(stamp), path, number, "unixReviewTime")


def _parse_steam(lines: Iterator[str], path: str) -> Iterator[Record]:
    for number, line in _numbered(lines):
        user, item, date = _require(_literal(line, path, number), ("username", "product_id", "date"),
                                    path, number)
        try:
            day = datetime.date.fromisoformat(str(date))
        except ValueError:
            raise DataError(f"field 'date' is not YYYY-MM-DD: {date!r}", path, number) from None
        stamp = int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.timezone.utc).timestamp())
        yield str(user), str(item), stamp


def _parse_custom(lines: Iterator[str], path: str) -> Iterator[Record]:
    numbered = _numbered(lines)
    first = next(numbered, None)
    if first is None:
        raise DataError("file is empty", path)
    delimiter = "\t" if "\t" in first[1] else ","
    header = [h.strip().lower() for h in first[1].split(delimiter)]
    missing = [c for c in ("user", "item", "timestamp") if c not in header]
    if missing:
        raise DataError(f"header lacks column {missing[0]!r} (needs user, item, timestamp; has {header})",
                        path, first[0])
    columns = [header.index(c) for c in ("user", "item", "timestamp")]
    for number, line in numbered:
        fields = next(csv.reader([line], delimiter=delimiter))
        if len(fields) != len(header):
            raise DataError(f"expected {len(header)} fields as in the header, got {len(fields)}", path, number)
        user, item, stamp = (fields[c].strip() for c in columns)
        if not user or not item:
            raise DataError(f"empty {'user' if not user else 'item'} field", path, number)
        yield user, item, _timestamp(stamp, path, number)


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
