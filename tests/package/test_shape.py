"""The package's shape (DESIGN.md §2): every module imports, the import graph has no
cycle, and imports point downward."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import networkx as nx
import pytest

import vpub_spark

ROOT = Path(vpub_spark.__file__).parent
STDLIB = set(sys.stdlib_module_names)


def _modules() -> dict[str, Path]:
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        out[".".join(parts[:-1] if f.name == "__init__.py" else parts)] = f
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module of the package (or external top-level package) `name` imports,
    at module level or inside functions."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else [])) if node.level else (node.module or "")  # fmt: skip
            targets = [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in modules]
            found.update(targets or [mod])
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {t for t in found if t != name}


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    modules = _modules()
    g = nx.DiGraph()
    for name, path in modules.items():
        g.add_node(name)
        for target in _imports(name, path, modules):
            g.add_edge(name, target)
    return g


def test_every_module_imports():
    for m in pkgutil.walk_packages(vpub_spark.__path__, "vpub_spark."):
        if not m.name.endswith("__main__"):
            importlib.import_module(m.name)


def test_no_import_cycle(graph):
    internal = graph.subgraph([n for n in graph if n.startswith("vpub_spark")])
    cycles = list(nx.simple_cycles(internal))
    assert cycles == [], f"import cycles: {cycles[:3]}"


def _edges_from(graph, package: str) -> list[tuple[str, str]]:
    return [
        (a, b)
        for a, b in graph.edges
        if a.startswith(f"vpub_spark.{package}.") or a == f"vpub_spark.{package}"
    ]


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("release", ("publish", "experiments", "cli", "statdb", "serve")),
        ("statdb", ("experiments", "cli", "serve")),
        ("serve", ("publish", "experiments", "cli")),
        ("utility", ("publish", "experiments", "cli")),
        ("engines", ("release", "publish", "utility", "experiments", "cli", "config")),
        ("publish", ("experiments", "cli")),
        ("experiments", ("cli",)),
        ("decompose", ("release", "publish", "engines", "experiments", "cli")),
    ],
)
def test_imports_point_downward(graph, package, forbidden):
    up = [
        (a, b)
        for a, b in _edges_from(graph, package)
        if any(b.startswith(f"vpub_spark.{f}") for f in forbidden)
    ]
    assert up == [], f"{package} imports from above it: {up}"


def test_kernels_import_only_numeric_libraries_and_errors(graph):
    allowed = {"numpy", "pandas", "pyarrow", "pulp", "highspy", "scipy", "vpub_spark.errors"}
    for a, b in _edges_from(graph, "kernels"):
        top = b.split(".")[0]
        ok = (
            top in STDLIB
            or b.split(".")[0] in allowed
            or b in allowed
            or b.startswith("vpub_spark.kernels")
        )
        assert ok, f"{a} imports {b}"


@pytest.mark.parametrize("package", ["publish", "release", "cli"])
def test_functions_stay_short(package):
    """DESIGN.md §2: no function over 60 lines in publish/, release/, cli/."""
    long = []
    for f in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 60:
                    long.append(f"{f.name}:{node.name} ({lines})")
    assert long == []


def test_the_pipeline_never_asks_which_method_it_runs():
    """A registry maps methods to strategies: no `method ==` / `kind ==` in the pipeline."""
    text = (ROOT / "publish" / "pipeline.py").read_text()
    assert "method ==" not in text and "kind ==" not in text and ".method ==" not in text
