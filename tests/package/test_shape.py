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
from vpub_spark.publishing.registry import METHODS
from vpub_spark.statdb.db import METHODS as STATDB_METHODS

ROOT = Path(vpub_spark.__file__).parent
STDLIB = set(sys.stdlib_module_names)


ORDER = [
    "version",  # the package's version string
    "errors",  # exceptions with exit codes
    "options",  # config options declared once (`option`) and read by their declaration
    "privacy",  # the privacy criteria besides l-diversity: validation, measures, refusals
    "model",  # frozen value types: attributes, rules, privacy, tables
    "tablespec",  # table specs from YAML
    "rules",  # privacy rules: parsing, reduction, eligibility
    "gnf",  # Guardian Normal Form on schemas (no data)
    "storage",  # object-store I/O
    "encoding",  # dictionary encoding
    "frames",  # tables given as data frames: their specs inferred from the schema
    "kernels",  # pure NumPy/pandas on one encoded chunk
    "decompose",  # schema design: which tables to publish
    "engines",  # where the rows live: Spark or in process
    "estimate",  # a published table's estimate model, in code space
    "release",  # the release format: layout, manifest, kinds, read, audit, private store
    "lake",  # publishing into a data lake: commit protocol, catalog of releases, SQL tables
    "sources",  # tables as input: a catalog's, Delta's, Iceberg's
    "datasets",  # the Adult preset and synthetic data sets, written through an engine
    "settings",  # the methods' config sections (multi-SA, marginals, streamliner)
    "config",  # job configs, parsed once
    "utility",  # estimates over whole releases: KL, queries, risk; `vpub check`
    "reporting",  # a release's report and a sweep's page: facts, plots, HTML
    "publishing",  # the pipeline and its methods
    "statdb",  # the statistical database
    "serve",  # HTTP over the statistical database and the releases
    "report",  # the terminal reports of the commands
    "demo",  # `vpub demo`: a generated table published and audited end to end
    "explore",  # `vpub explore`: a config published at several l (or m), measured
    "api",  # the public API (`vpub_spark.publish`, `open_release`, `Release`)
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
            mod = (
                ".".join(
                    base[: len(base) - node.level + 1] + ([node.module] if node.module else [])
                )
                if node.level
                else (node.module or "")
            )
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
    """The area of a module of the package (None: the package itself, whose face is the
    public API, re-exported from `api` on first use, and its version)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _rank(module: str) -> int:
    """An area's place in `ORDER`; the package itself sits on top of them all (nothing
    inside imports it: `version` holds the version every module may name)."""
    area = _area(module)
    return len(ORDER) if area is None else ORDER.index(area)


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
        "        from .queries import cubes\n"
    )
    found = _imports("vpub_spark.utility.probe", source, _modules())
    assert found == {
        "numpy",
        "vpub_spark.release.reader",
        "vpub_spark.cli",
        "vpub_spark.errors",
        "vpub_spark.utility.queries",
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


def _functions(root: Path):
    for f in root.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f, node


def test_functions_stay_short():
    """No function of the package over 60 lines."""
    long = [
        f"{f.relative_to(ROOT)}:{node.name} ({lines})"
        for f, node in _functions(ROOT)
        if (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > 60
    ]
    assert long == []


def test_formatting_is_rarely_skipped():
    """`ruff format` lays out the package: at most 20 lines opt out with `fmt: skip`."""
    skipped = [
        f"{f.relative_to(ROOT)}:{i}"
        for f in ROOT.rglob("*.py")
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    ]
    assert len(skipped) <= 20, skipped


METHOD_NAMES = set(METHODS) | {"uad_plain"} | set(STATDB_METHODS)
METHOD_CLASSES = {type(m).__name__ for m in METHODS.values()}
REGISTRIES = {"publishing/registry.py", "decompose/methods.py", "statdb/db.py"}
"""Where a method's name may be spelled: the registries that map names to methods."""


def _asks_by_name(node: ast.AST) -> str | None:
    """A comparison with a method's name, or an isinstance against a method class."""
    if isinstance(node, ast.Compare):
        named = [
            c.value
            for c in ast.walk(node)
            if isinstance(c, ast.Constant) and c.value in METHOD_NAMES
        ]
        return f"compares with {named[0]!r}" if named else None
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
        kinds = {getattr(n, "id", getattr(n, "attr", "")) for n in ast.walk(node.args[1])}
        found = kinds & METHOD_CLASSES
        return f"isinstance against {sorted(found)[0]}" if found else None
    return None


def test_methods_are_asked_what_they_do_not_which_they_are():
    """Outside the registries, no code compares a method's name or checks a method's
    class: methods declare capabilities (`generalizes`, `suppresses`, ...) and are asked.
    The comparison runs of vpub_bench/ name the baselines they compare."""
    found = [
        f"{f.relative_to(ROOT)}:{node.lineno} {why}"
        for f in ROOT.rglob("*.py")
        if str(f.relative_to(ROOT)) not in REGISTRIES
        for node in ast.walk(ast.parse(f.read_text()))
        if (why := _asks_by_name(node))
    ]
    assert found == []


def test_the_shape_check_sees_a_method_asked_by_name():
    probe = ast.parse(
        "if cfg.method == 'gd': pass\n"
        "x = isinstance(m, AnatomyMethod)\n"
        "y = m in ('dyn-gen', 'sta-ana')\n"
        "z = cfg.anonymizer == 'anatomy'\n"
    )
    found = [why for node in ast.walk(probe) if (why := _asks_by_name(node))]
    assert found == [
        "compares with 'gd'",
        "isinstance against AnatomyMethod",
        "compares with 'dyn-gen'",
    ]


def _engine_names(f: Path) -> list[str]:
    return [
        f"{f.relative_to(ROOT)}:{node.lineno}"
        for node in ast.walk(ast.parse(f.read_text()))
        if isinstance(node, ast.Compare)
        and any(
            isinstance(n, ast.Attribute) and n.attr == "name" and "engine" in ast.unparse(n.value)
            for n in ast.walk(node)
        )
    ]


def test_no_code_outside_the_engines_asks_which_engine_it_has():
    """The engine protocol is the only door: no `engine.name` comparison outside engines/."""
    found = [
        hit for f in ROOT.rglob("*.py") if "engines" not in f.parts for hit in _engine_names(f)
    ]
    assert found == []


def test_spark_is_imported_only_by_the_engines(graph):
    """pyspark and engines.spark are imported by engines/ alone (the other areas reach
    Spark through the Engine protocol)."""
    found = sorted(
        f"{a} imports {b}"
        for a, b in graph.edges
        if (b.split(".")[0] == "pyspark" or b.startswith("vpub_spark.engines.spark"))
        and _area(a) != "engines"
    )
    assert found == []


def test_the_library_never_imports_its_benchmarks(graph):
    """vpub_bench uses the library as any program would; the library does not know it
    (its commands join `vpub` through an entry point), and every vpub_bench module
    imports without the library importing it back."""
    assert [(a, b) for a, b in graph.edges if b.split(".")[0] == "vpub_bench"] == []
    bench = Path(vpub_spark.__file__).parents[1] / "vpub_bench"
    for f in sorted(bench.glob("*.py")):
        importlib.import_module(f"vpub_bench.{f.stem}" if f.stem != "__init__" else "vpub_bench")
