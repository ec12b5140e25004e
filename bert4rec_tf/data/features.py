"""Item and user attributes: a feature file read, checked and encoded against a vocabulary of raw ids.

A feature file is CSV (comma- or tab-separated, plain, .gz or .zip, UTF-8 unless told otherwise) with
a header. Its first column holds the ids, named `item` or `user`, read as the interaction files' CSV
ids are (`readers.csv_id`: surrounding spaces dropped); every other column is one attribute, named
`name` or `name:kind`, with the kinds

- `categorical` (the default): one value per id, e.g. an occupation or a brand;
- `multi`: several values separated by `|`, e.g. a movie's genres `Animation|Comedy`;
- `numeric`: a number, e.g. a year or a price, within float32's range (+-3.4e38).

    item,genres:multi,year:numeric,brand
    B0001,Animation|Comedy,1995,acme

An empty categorical cell is the value "missing" (index 0 of its vocabulary), an empty multi cell no
values; an empty numeric cell is an error, as is a kind left empty after its colon, a row with
another number of fields than the header, an id twice, an empty id, a number that does not parse or
lies outside float32's range and text the encoding cannot decode: each a `DataError` of one line
naming the file, the line and the column. A file that matches none of the data's ids is refused, one
that matches few of them is warned about (`check_coverage`).

`encode` turns a `FeatureTable` into arrays in the order of a vocabulary (model id i on row i), so a
model reads them as embedding inputs: categorical values as int32 indices (0: missing or padding),
multi values as an int32 matrix padded with 0, numbers standardised over the ids that have them.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import re
from typing import Sequence

import numpy as np

from bert4rec_tf.data.errors import DataError
from bert4rec_tf.data.readers import csv_id
from bert4rec_tf.data.text_files import text_lines

KINDS = ("categorical", "multi", "numeric")
KEYS = ("item", "user")
MULTI_SEPARATOR = "|"
MISSING = "<missing>"  # index 0 of every categorical and multi vocabulary
# The largest number a numeric column holds: the model reads the standardised values as float32.
NUMERIC_LIMIT = float(np.finfo(np.float32).max)
# A file matching fewer than this share of the data's ids is warned about (`check_coverage`).
FEW_COVERED = 0.5
EXAMPLES = 3  # the ids a message shows of a list


@dataclasses.dataclass
class FeatureTable:
    """The rows of a feature file: `key` ("item" or "user"), the raw `ids` in file order, and per
    attribute (in the header's order) its kind and its values, one per id (str, list of str or float)."""

    path: str
    key: str
    ids: list[str]
    kinds: dict[str, str]
    values: dict[str, list]

    def row_of(self) -> dict[str, int]:
        return {raw: index for index, raw in enumerate(self.ids)}


def _header(fields: list[str], path: str) -> tuple[str, dict[str, str]]:
    if not fields or fields[0].strip().lower() not in KEYS:
        raise DataError(f"the first column must be named item or user, got {fields[0] if fields else ''!r}", path, 1)
    kinds: dict[str, str] = {}
    for field in fields[1:]:
        name, colon, kind = field.strip().partition(":")
        if not name:
            raise DataError(f"column {len(kinds) + 2} has no name", path, 1)
        if colon and not kind.strip():
            raise DataError(f"column {name!r} has an empty kind after its ':'; the kinds are {', '.join(KINDS)} "
                            f"(a column named without ':' is categorical)", path, 1)
        kind = kind.strip().lower() or "categorical"
        if kind not in KINDS:
            raise DataError(f"column {name!r} has kind {kind!r}; the kinds are {', '.join(KINDS)}", path, 1)
        if name in kinds:
            raise DataError(f"column {name!r} appears twice", path, 1)
        kinds[name] = kind
    if not kinds:
        raise DataError("the header names no attribute column after the id column", path, 1)
    return fields[0].strip().lower(), kinds


def read_features(path: str | os.PathLike, encoding: str = "utf-8", key: str | None = None) -> FeatureTable:
    """Reads and checks a feature file (see the module doc).

    Args:
        path: the file.
        encoding: its text encoding.
        key: "item" or "user" when the caller needs that kind of file (a user file given for items is
            an error); a decoding error then advises that file's own encoding setting
            (`--config item_features_encoding=...`), else `--encoding`.

    Raises:
        DataError: one line naming the file, line and column of the first problem.
    """
    path = os.fspath(path)
    lines = text_lines(path, encoding, f"{key}_features_encoding" if key else "encoding")
    first = next(lines, None)
    if first is None:
        raise DataError("is empty: a feature file starts with a header such as item,genres:multi,year:numeric", path)
    delimiter = "\t" if "\t" in first and "," not in first else ","
    rows = csv.reader([first, *lines], delimiter=delimiter)
    try:
        found_key, kinds = _header(next(rows), path)
        if key is not None and found_key != key:
            raise DataError(f"is a {found_key} feature file; {key} attributes were asked for", path, 1)
        table = FeatureTable(path, found_key, [], kinds, {name: [] for name in kinds})
        seen: dict[str, int] = {}
        for fields in rows:
            if not fields or fields == [""]:
                continue
            if len(fields) != len(kinds) + 1:
                raise DataError(f"{len(fields)} fields, the header has {len(kinds) + 1}", path, rows.line_num)
            raw = csv_id(fields[0])
            if not raw.strip():
                raise DataError(f"empty {found_key} id", path, rows.line_num)
            if raw in seen:
                raise DataError(f"{found_key} {raw!r} appears twice (first on line {seen[raw]})", path, rows.line_num)
            seen[raw] = rows.line_num
            table.ids.append(raw)
            for (name, kind), cell in zip(kinds.items(), fields[1:]):
                table.values[name].append(_cell(cell, kind, name, path, rows.line_num))
    except csv.Error as error:
        raise DataError(f"not readable as CSV ({error})", path, rows.line_num) from None
    if not table.ids:
        raise DataError(f"has a header but no {table.key} rows", path)
    return table


def _cell(cell: str, kind: str, name: str, path: str, line: int):
    text = cell.strip()
    if kind == "categorical":
        return text
    if kind == "multi":
        return [value.strip() for value in text.split(MULTI_SEPARATOR) if value.strip()]
    if not text:
        raise DataError(f"column {name!r} is numeric and empty: give a number (or leave the column out)", path, line)
    try:
        number = float(text)
    except ValueError:
        raise DataError(f"column {name!r} is numeric, got {cell!r}", path, line) from None
    if not math.isfinite(number):
        raise DataError(f"column {name!r} is numeric and must be finite, got {cell!r}", path, line)
    if abs(number) > NUMERIC_LIMIT:
        raise DataError(f"column {name!r} is numeric and must lie within float32's range (+-3.4e38), got {cell!r}: "
                        "rescale the column", path, line)
    return number


def check_coverage(table: FeatureTable, ids: Sequence[str]) -> str | None:
    """Refuses a feature file that matches none of the data's ids, and words a warning for one that
    matches fewer than `FEW_COVERED` of them, since those ids would have every attribute missing.

    Args:
        table: the file, read.
        ids: the data's raw ids of `table.key` (the items with interactions, or the users).

    Returns:
        the warning (naming the file, the share matched and examples of the ids left unmatched), or
        None when the file matches at least `FEW_COVERED` of `ids`.

    Raises:
        DataError: naming the file, with examples of its ids and of the data's, when it matches none.
    """
    rows = set(table.ids)
    covered = sum(raw in rows for raw in ids)
    if covered >= FEW_COVERED * len(ids):
        return None
    known = set(ids)
    unmatched = [raw for raw in table.ids if raw not in known]
    if not covered:
        raise DataError(f"matches none of the data's {len(ids):,} {table.key}s: its ids ({_examples(unmatched)}) "
                        f"are not written as the data's ({_examples(ids)}); write them as the interaction file "
                        "does", table.path)
    lacking = [raw for raw in ids if raw not in rows]
    return (f"{table.path}: matches {covered:,} of the data's {len(ids):,} {table.key}s ({covered / len(ids):.0%}); "
            f"the other {len(lacking):,} ({_examples(lacking)}) have every attribute missing"
            + (f", and {len(unmatched):,} id(s) of the file are not the data's ({_examples(unmatched)})"
               if unmatched else ""))


def _examples(ids: Sequence[str]) -> str:
    """The first `EXAMPLES` of `ids`, quoted, e.g. "'i1', 'i2', 'i3', ..."."""
    return ", ".join([*(repr(raw) for raw in list(ids[:EXAMPLES])), *(["..."] if len(ids) > EXAMPLES else [])])


@dataclasses.dataclass
class EncodedFeatures:
    """A feature table in the order of a vocabulary.

    Attributes:
        key: "item" or "user".
        arrays: per attribute, int32 [rows] (categorical), int32 [rows, most values] (multi) or
            float32 [rows] (numeric, standardised); row i is the vocabulary's id i.
        vocabularies: per categorical or multi attribute, its values (index 0: `MISSING`).
        scales: per numeric attribute, the (mean, standard deviation) it was standardised with.
        covered: how many of the vocabulary's ids have a row in the file.
    """

    key: str
    arrays: dict[str, np.ndarray]
    vocabularies: dict[str, list[str]]
    scales: dict[str, tuple[float, float]]
    covered: int
    unseen: int = 0
    kinds: dict[str, str] = dataclasses.field(default_factory=dict)

    def description(self) -> dict:
        """Everything but the arrays, as JSON (`from_description` reads it back)."""
        return {"key": self.key, "kinds": self.kinds, "vocabularies": self.vocabularies,
                "scales": {name: list(scale) for name, scale in self.scales.items()}, "covered": self.covered,
                "unseen": self.unseen}

    @classmethod
    def from_description(cls, arrays: dict[str, np.ndarray], description: dict) -> "EncodedFeatures":
        return cls(description["key"], {name: arrays[name] for name in description["kinds"]},
                   description["vocabularies"], {name: tuple(scale) for name, scale in description["scales"].items()},
                   description["covered"], description["unseen"], description["kinds"])

    def attributes(self) -> list[dict]:
        """The attributes as `bert4rec_tf.layers.FeatureEmbedding` takes them: per attribute its
        "name" and "kind", with "size" (values, index 0 included) for categorical and multi ones and
        "width" (most values of one id) for multi ones; in the file's column order."""
        found = []
        for name, array in self.arrays.items():
            if name in self.scales:
                found.append({"name": name, "kind": "numeric"})
            elif array.ndim == 2:
                found.append({"name": name, "kind": "multi", "size": len(self.vocabularies[name]),
                              "width": int(array.shape[1])})
            else:
                found.append({"name": name, "kind": "categorical", "size": len(self.vocabularies[name])})
        return found


def encode(table: FeatureTable, vocabulary: Sequence[str | None], unknown: str = "error") -> EncodedFeatures:
    """`table` in the order of `vocabulary` (raw id of model id i at position i; None for ids with no
    raw id, as the padding and special tokens). An id of the vocabulary without a row has every
    attribute missing (index 0, numbers at the mean).

    Args:
        unknown: what an id of the file that the vocabulary lacks is: "error", or "ignore".

    Raises:
        DataError: naming the first id of the file not in the vocabulary, when `unknown` is "error".
    """
    if unknown not in ("error", "ignore"):
        raise ValueError(f"unknown must be 'error' or 'ignore', got {unknown!r}")
    rows = table.row_of()
    known = set(raw for raw in vocabulary if raw is not None)
    extra = [raw for raw in table.ids if raw not in known]
    if unknown == "error":
        if extra:
            raise DataError(f"{len(extra)} {table.key} id(s) of the file are not in the data, e.g. {extra[0]!r}",
                            table.path)
    order = [rows.get(raw) if raw is not None else None for raw in vocabulary]
    arrays, vocabularies, scales = {}, {}, {}
    for name, kind in table.kinds.items():
        column = table.values[name]
        if kind == "numeric":
            present = np.asarray(column, dtype=np.float64)
            mean = float(present.mean())
            std = float(present.std()) or 1.0
            arrays[name] = np.asarray([(column[row] - mean) / std if row is not None else 0.0 for row in order],
                                      dtype=np.float32)
            scales[name] = (mean, std)
            continue
        cells = column if kind == "multi" else [[value] if value else [] for value in column]
        values = sorted({value for cell in cells for value in cell})
        index = {value: position for position, value in enumerate(values, start=1)}
        vocabularies[name] = [MISSING, *values]
        if kind == "categorical":
            arrays[name] = np.asarray([index[cells[row][0]] if row is not None and cells[row] else 0 for row in order],
                                      dtype=np.int32)
        else:
            width = max(1, max((len(cell) for cell in cells), default=1))
            matrix = np.zeros((len(order), width), dtype=np.int32)
            for position, row in enumerate(order):
                if row is not None:
                    matrix[position, :len(cells[row])] = [index[value] for value in cells[row]]
            arrays[name] = matrix
    return EncodedFeatures(table.key, arrays, vocabularies, scales, sum(row is not None for row in order), len(extra),
                           dict(table.kinds))


_YEAR = re.compile(r"\((\d{4})\)\s*$")


def write_movielens_features(movies: str, users: str, item_map: str, user_map: str, folder: str) -> tuple[str, str]:
    """Writes ML-1m's attributes as feature files in the id space of its interaction file:
    `item_features.csv` (genres, multi; year, numeric, from the title) from movies.dat and
    `user_features.csv` (gender, age group, occupation, zip code's first digit) from users.dat, through
    the `sas_id movielens_id` maps. Each file is complete or absent.

    Raises:
        DataError: for a mapped id movies.dat or users.dat lacks, or a title without its year.
    """
    from bert4rec_tf.data.titles import read_id_map
    from bert4rec_tf.files import atomic_path

    def fields_of(path: str, count: int) -> dict[str, list[str]]:
        found = {}
        for number, line in enumerate(text_lines(path, "iso-8859-1"), start=1):
            fields = line.rstrip("\r\n").split("::")
            if fields != [""]:
                if len(fields) != count:
                    raise DataError(f"expected {count} '::'-separated fields, got {len(fields)}", path, number)
                found[fields[0]] = fields[1:]
        return found

    movie_rows, user_rows = fields_of(movies, 3), fields_of(users, 5)
    items = []
    for sas, movie in read_id_map(item_map).items():
        if movie not in movie_rows:
            raise DataError(f"movie {movie} (item {sas}) is not in {movies}", item_map)
        title, genres = movie_rows[movie]
        year = _YEAR.search(title)
        if year is None:
            raise DataError(f"movie {movie}'s title {title!r} ends without its year", movies)
        items.append((sas, genres, year.group(1)))
    people = []
    for sas, person in read_id_map(user_map).items():
        if person not in user_rows:
            raise DataError(f"user {person} (user {sas}) is not in {users}", user_map)
        gender, age, occupation, zip_code = user_rows[person]
        people.append((sas, gender, age, occupation, zip_code[:1]))
    os.makedirs(folder, exist_ok=True)
    written = []
    for name, header, rows in (("item_features.csv", ["item", "genres:multi", "year:numeric"], items),
                               ("user_features.csv", ["user", "gender", "age", "occupation", "zip_region"], people)):
        path = os.path.join(folder, name)
        with atomic_path(path) as temporary, open(temporary, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(sorted(rows, key=lambda row: int(row[0])))
        written.append(path)
    return written[0], written[1]
