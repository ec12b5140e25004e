"""Files of raw ids (item and user vocabularies) that round-trip any Unicode id.

One id a line, UTF-8 without byte-order mark. The four characters that would break a line-based or
tab-separated file are escaped with a backslash: backslash itself (``\\\\``), tab (``\\t``), line feed
(``\\n``) and carriage return (``\\r``). Every other character, including non-ASCII, is written as it
is, so ordinary ids read as they look. The same escaping serves the tab-separated ``raw<TAB>id``
vocabulary of the serving export.
"""

from __future__ import annotations

import os
from typing import Iterable

from bert4rec_tf.data.errors import DataError

_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def escape_id(value: str) -> str:
    """`value` with backslash, tab, line feed and carriage return escaped (see the module doc)."""
    if not any(character in value for character in _ESCAPES):
        return value
    return "".join(_ESCAPES.get(character, character) for character in value)


def unescape_id(text: str, path: str | None = None, line: int | None = None) -> str:
    """The inverse of `escape_id`.

    Raises:
        DataError: for a backslash not followed by one of ``\\ t n r``, naming `path` and `line`.
    """
    if "\\" not in text:
        return text
    out = []
    characters = iter(text)
    for character in characters:
        if character != "\\":
            out.append(character)
            continue
        following = next(characters, "")
        if following not in _UNESCAPES:
            raise DataError(f"bad escape '\\{following}' in id {text!r}", path, line)
        out.append(_UNESCAPES[following])
    return "".join(out)


def write_ids(path: str | os.PathLike, ids: Iterable[str]) -> None:
    """Writes one escaped id a line (UTF-8, ``\\n`` line ends)."""
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for value in ids:
            handle.write(escape_id(str(value)) + "\n")


def read_ids(path: str | os.PathLike) -> list[str]:
    """Reads a file written by `write_ids`.

    Raises:
        DataError: for a malformed escape or text that is not UTF-8, naming the file (and line).
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8", newline="\n") as handle:
            return [unescape_id(line[:-1] if line.endswith("\n") else line, path, number)
                    for number, line in enumerate(handle, start=1)]
    except UnicodeDecodeError as error:
        raise DataError(f"not UTF-8 text ({error.reason} at byte {error.start})", path) from None
