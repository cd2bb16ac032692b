"""The package's shape: every module imports, the import graph has no cycle, and every
import points down the order of areas (`ORDER`), at module level or inside a function."""

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


ORDER = [
    "errors",  # exceptions with exit codes
    "model",  # frozen value types: attributes, rules, privacy, tables
    "tablespec",  # table specs from YAML
    "rules",  # privacy rules: parsing, reduction, eligibility
    "gnf",  # Guardian Normal Form on schemas (no data)
    "storage",  # object-store I/O
    "encoding",  # dictionary encoding
    "kernels",  # pure NumPy/pandas on one encoded chunk
    "decompose",  # schema design: which tables to publish
    "engines",  # where the rows live: Spark or in process
    "estimate",  # a published table's estimate model, in code space
    "release",  # the release format: write, commit, read, audit; the table kinds
    "datasets",  # the Adult preset and synthetic data sets, written through an engine
    "config",  # job configs, parsed once
    "utility",  # estimates over whole releases: KL, queries, risk; `vpub check`
    "publish",  # the pipeline and its methods
    "statdb",  # the statistical database
    "serve",  # HTTP over the statistical database and the releases
    "report",  # the terminal reports of the commands
    "experiments",  # comparisons and benchmarks
    "cli",  # `vpub`
]
"""The areas, lowest first: a subpackage or a top-level module of `vpub_spark`. A
module may import from its own area and from the areas below it, never from one above."""


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


def _area(module: str) -> str | None:
    """The area of a module of the package (None: the package itself, which holds only
    its version and may import nothing)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _rank(module: str) -> int:
    area = _area(module)
    return -1 if area is None else ORDER.index(area)


def test_every_area_is_placed():
    areas = {_area(m) for m in _modules()} - {None}
    assert sorted(areas - set(ORDER)) == [], "areas missing from ORDER"
    assert sorted(set(ORDER) - areas) == [], "ORDER names areas that do not exist"
    assert len(ORDER) == len(set(ORDER))


def test_imports_point_downward(graph):
    up = sorted(
        f"{a} ({_area(a)}) imports {b} ({_area(b)})"
        for a, b in graph.edges
        if b.startswith("vpub_spark") and _area(a) != _area(b) and _rank(b) >= _rank(a)
    )
    assert up == [], "imports from an area above:\n" + "\n".join(up)


def test_the_graph_sees_every_import(tmp_path):
    """Function-local, conditional and relative imports are edges too."""
    source = tmp_path / "probe.py"
    source.write_text(
        "import numpy\n"
        "def f():\n"
        "    from ..release import reader\n"
        "    if f:\n"
        "        import vpub_spark.cli\n"
        "class C:\n"
        "    def g(self):\n"
        "        from ..errors import DataError\n"
        "        from .spark_kl import KEY\n"
    )
    found = _imports("vpub_spark.utility.probe", source, _modules())
    assert found == {
        "numpy",
        "vpub_spark.release.reader",
        "vpub_spark.cli",
        "vpub_spark.errors",
        "vpub_spark.utility.spark_kl",
    }


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
    """No function over 60 lines in publish/, release/, cli/."""
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
