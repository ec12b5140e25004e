"""The one exception data preparation raises for bad input."""

from __future__ import annotations


class DataError(ValueError):
    """Bad input data: the message names the file, the line (1-based) and the field where known."""

    def __init__(self, message: str, path: object = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f", line {line}"
            where += ": "
        super().__init__(where + message)
        self.path = path
        self.line = line
