"""Files the package writes and reads back: always valid JSON, complete or absent, named on error."""

from __future__ import annotations

import json
import math
import os
from typing import Any


def _finite_or_null(value: Any) -> Any:
    """`value` with every non-finite float replaced by None, so that it is valid JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(item) for item in value]
    return value


def write_json_atomic(path: str | os.PathLike, value: Any) -> None:
    """Writes `value` as JSON under a temporary name, then renames it into place.

    NaN and infinities become `null`: strict JSON has no such numbers.
    """
    text = json.dumps(_finite_or_null(value), indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False)
    write_text_atomic(path, text + "\n")


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Writes `text` (UTF-8) under a temporary name, then renames it into place."""
    path = os.fspath(path)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def read_json(path: str | os.PathLike, what: str = "file") -> Any:
    """The JSON value in `path`.

    Args:
        path: the file.
        what: what the file is, for the error message ("run configuration", ...).

    Raises:
        ValueError: naming the file when it is not valid JSON (a damaged or truncated file).
        FileNotFoundError: when it is missing.
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: the {what} is damaged, not valid JSON ({error})") from None
