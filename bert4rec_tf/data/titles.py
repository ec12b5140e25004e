"""Item titles for printed recommendations: MovieLens movies.dat, and id maps between id schemes.

`ml-1m.txt.gz` (BERT4Rec's and SASRec's file) numbers the movies 1..3416 in its own order;
`sas_to_original_items.txt.gz` maps those ids to MovieLens movie ids, which movies.dat titles.
"""

from __future__ import annotations

import gzip


def _open_text(path: str, encoding: str):
    return gzip.open(path, "rt", encoding=encoding) if path.endswith(".gz") else open(path, encoding=encoding)


def read_titles(path: str) -> dict[str, str]:
    """Raw id -> title from an `id::title::...` file (plain or .gz, ISO-8859-1, as MovieLens ships it)."""
    with _open_text(path, "iso-8859-1") as handle:
        return {fields[0]: fields[1] for fields in (line.rstrip("\n").split("::") for line in handle)
                if len(fields) >= 2}


def read_id_map(path: str) -> dict[str, str]:
    """`from_id to_id` lines (whitespace-separated, plain or .gz) as a dict.

    Raises:
        ValueError: naming the file and line when a line does not hold exactly two ids.
    """
    mapping = {}
    with _open_text(path, "utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 2:
                raise ValueError(f"{path}, line {number}: expected 'from_id to_id', got {line.strip()!r}")
            mapping[fields[0]] = fields[1]
    return mapping


def title_of(item: str, titles: dict[str, str], id_map: dict[str, str] | None = None) -> str:
    """The title of raw item id `item` ('' when unknown), through `id_map` when given."""
    return titles.get(id_map.get(item, "") if id_map is not None else item, "")
