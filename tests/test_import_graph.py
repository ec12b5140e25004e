"""The package's import graph, read from the source with `ast` (nothing is imported): no cycles, among
the imports a module runs when it loads nor among all of them, and nothing outside the experiments and
the command-line tools imports the experiments, not even inside a function.

An import of `bert4rec_tf.x` counts whether it is written `import bert4rec_tf.x`, `from bert4rec_tf
import x` or relatively; `from bert4rec_tf.x import y` is an import of the module `bert4rec_tf.x.y`
when that is a module, else of `bert4rec_tf.x`. A package's `__init__.py` is the package's module, so
its re-exports are its imports.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Iterator

import pytest

PACKAGE = "bert4rec_tf"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
EXPERIMENTS = f"{PACKAGE}.experiments"
# The only modules that may import the experiments: the experiments themselves and the commands.
ABOVE_EXPERIMENTS = (EXPERIMENTS, f"{PACKAGE}.scripts")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file of every module under `root`, packages by their `__init__.py`."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def package_names(modules) -> set[str]:
    """Every module name and every package above one (a folder without `__init__.py` included)."""
    names = set()
    for name in modules:
        parts = name.split(".")
        names.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return names


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _import_statements(statements: list[ast.stmt], in_function: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Each import statement among `statements` and the statements nested in them, with whether it is
    inside a function (a class body runs at import, so its imports are module-level). Expressions are
    not searched: an import statement is never inside one."""
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
            continue
        nested = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):  # handlers, cases: their bodies
            yield from _import_statements(getattr(node, field, []), nested)


def imports_of(name: str, source: str, is_package: bool, names: set[str]) -> tuple[set[str], set[str]]:
    """(imported at module level, imported anywhere) among the package's `names`, for the module `name`.

    Args:
        name: the module's dotted name (a package's name for its `__init__.py`).
        source: its Python source.
        is_package: whether it is a package's `__init__.py` (relative imports start there).
        names: the package's modules and packages (`package_names`).
    """
    here = name if is_package else name.rpartition(".")[0]
    module_level, anywhere = set(), set()
    for node, in_function in _import_statements(ast.parse(source).body):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[:len(here.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in names else base for alias in node.names]
        targets = {target for target in targets if _within(target, PACKAGE) and target != name}
        anywhere |= targets
        if not in_function:
            module_level |= targets
    return module_level, anywhere


@functools.lru_cache(maxsize=None)
def import_graphs(root: Path = ROOT) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level imports, all imports) of every module under `root`: module -> the modules it imports."""
    files = module_files(root)
    names = package_names(files)
    module_level, anywhere = {}, {}
    for name, path in files.items():
        module_level[name], anywhere[name] = imports_of(name, path.read_text(encoding="utf-8"),
                                                        path.name == "__init__.py", names)
    return module_level, anywhere


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as its modules in import order, the first repeated at the end
    ([a, b, a]: a imports b, b imports a); None when the graph has none."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" once all below it are searched
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for child in sorted(graph.get(node, ())):
            if state.get(child) == "open":
                return path[path.index(child):] + [child]
            if child not in state:
                cycle = visit(child)
                if cycle:
                    return cycle
        path.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"x": {"y"}, "y": {"z"}, "z": set(), "a": {"b", "x"}, "b": {"z"}}) is None
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None  # a diamond is no cycle


def test_imports_are_resolved_to_modules_and_told_apart_by_where_they_run():
    names = {"bert4rec_tf", "bert4rec_tf.files", "bert4rec_tf.experiments", "bert4rec_tf.experiments.figures",
             "bert4rec_tf.training", "bert4rec_tf.training.callbacks", "bert4rec_tf.training.trainer"}
    source = """
import os
import bert4rec_tf.files
from bert4rec_tf.training import trainer, TrainingDiverged
from . import trainer as again
from ..experiments.figures import runs_figure

class Late:
    from bert4rec_tf import files

def draw():
    from bert4rec_tf.experiments import figures
"""
    module_level, anywhere = imports_of("bert4rec_tf.training.callbacks", source, False, names)
    assert module_level == {"bert4rec_tf.files", "bert4rec_tf.training.trainer", "bert4rec_tf.training",
                            "bert4rec_tf.experiments.figures"}
    assert anywhere == module_level  # the lazy import names a module already imported
    _, anywhere = imports_of("bert4rec_tf.training", "def f():\n    import bert4rec_tf.experiments\n", True, names)
    assert anywhere == {"bert4rec_tf.experiments"}


@pytest.mark.parametrize("where", ["module level", "anywhere"])
def test_the_package_has_no_import_cycle(where):
    """No cycle among the imports that run when the modules load, nor among all imports (a cycle closed
    by an import inside a function, as the report's figures -> trainer -> callbacks -> figures once
    was, still ties the modules into one)."""
    module_level, anywhere = import_graphs()
    graph = module_level if where == "module level" else anywhere
    assert "bert4rec_tf.evaluation.attention_plot" in graph["bert4rec_tf.training.callbacks"]  # the graph is read
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle ({where}): " + " -> ".join(cycle)


def test_nothing_below_the_experiments_imports_them():
    _, anywhere = import_graphs()
    assert any(_within(target, EXPERIMENTS) for target in anywhere["bert4rec_tf.scripts.reproduce"])  # read
    leaks = sorted(f"{name} imports {target}" for name, targets in anywhere.items()
                   if not any(_within(name, top) for top in ABOVE_EXPERIMENTS)
                   for target in targets if _within(target, EXPERIMENTS))
    assert not leaks, "; ".join(leaks)


def documented_layers() -> list[list[str]]:
    """The rows of docs/architecture.md's table of layers, top first, each the modules and packages it
    names (`data/` is `bert4rec_tf.data`, `api.py` `bert4rec_tf.api`)."""
    import re

    text = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## The layers\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ((?:`[^`|]+`(?:, )?)+) \|", section, flags=re.M)
    return [[f"{PACKAGE}.{name.rstrip('/').removesuffix('.py')}" for name in re.findall(r"`([^`]+)`", row)]
            for row in rows]


def test_every_import_runs_up_the_documented_layers():
    """A module imports only modules of its own row of the table or of the rows above it, wherever the
    import is written; every module lies in a row, and the package's face imports nothing of it."""
    layers = documented_layers()
    assert layers[0][:2] == [f"{PACKAGE}.constants", f"{PACKAGE}.config"] and layers[-1] == [f"{PACKAGE}.scripts"]

    def row(name: str) -> int | None:
        return next((index for index, modules in enumerate(layers) if any(_within(name, m) for m in modules)), None)

    _, anywhere = import_graphs()
    assert not anywhere[PACKAGE], f"the package's face imports {sorted(anywhere[PACKAGE])}"
    outside = sorted(name for name in anywhere if name != PACKAGE and row(name) is None)
    assert not outside, f"modules in no row of docs/architecture.md: {outside}"
    upward = sorted(f"{name} imports {target}" for name, targets in anywhere.items() if name != PACKAGE
                    for target in targets if target != PACKAGE and row(target) > row(name))
    assert not upward, "; ".join(upward)
