"""The notebooks' code cells are valid Python (CI runs them; this catches a broken cell in a second)."""

import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_cells_compile(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert cells, f"{path.name} has no code cells"
    for number, cell in enumerate(cells, start=1):
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
        try:
            compile("\n".join(lines), f"{path.name}, code cell {number}", "exec")
        except SyntaxError as error:
            pytest.fail(f"{path.name}, code cell {number}: {error}")


def test_there_is_a_notebook():
    assert NOTEBOOKS, "notebooks/ holds no notebook"
