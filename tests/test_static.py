"""Names the code uses are defined: pyflakes over the package, the tests and the scripts (an
undefined name fails only when its line runs, which a test may never reach)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def undefined_names(paths: list[Path]) -> list[str]:
    from pyflakes import api, messages, reporter

    class Collect(reporter.Reporter):
        def __init__(self):
            super().__init__(None, None)
            self.found = []

        def flake(self, message):
            if isinstance(message, (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)):
                self.found.append(str(message))

        def syntaxError(self, filename, msg, lineno, offset, text):
            self.found.append(f"{filename}:{lineno}: {msg}")

        def unexpectedError(self, filename, msg):
            self.found.append(f"{filename}: {msg}")

    collect = Collect()
    for path in paths:
        api.checkPath(str(path), collect)
    return collect.found


def test_no_name_is_used_undefined():
    pytest.importorskip("pyflakes")
    paths = [path for folder in ("bert4rec_tf", "tests", "run_scripts") for path in sorted((ROOT / folder).rglob("*.py"))]
    assert not undefined_names(paths)


def test_an_undefined_name_is_found(tmp_path):
    pytest.importorskip("pyflakes")
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    return evaluation_users(3)\n")
    assert any("undefined name 'evaluation_users'" in line for line in undefined_names([planted]))
