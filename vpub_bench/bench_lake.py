"""`vpub bench lake`: what a release costs its readers on the lake, a job that prints
numbers.

A generated `sal` table of `rows` rows is published in process twice (UAD, `c` random
rules, l; seeds `seed` and `seed` + 1) as two releases of one family. Timed:
- each publish, end to end;
- `register_iceberg` of the first release (new Iceberg tables) and of the second (one
  overwrite snapshot per table): metadata only, the data stay the release's files;
  pyiceberg's import, once per process, is timed apart before them;
- one count on the first release's largest anatomy table, `A = a AND S = s` for its
  most frequent QI value and sensitive value: as `vpub query` answers it (open the
  release, build its models, estimate) and as `vpub query --reader duckdb` answers it
  (open the release, DuckDB SQL over that table's Parquet files), each from a cold
  start, median of `repeat`; the two estimates must agree.
"""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path

from vpub_spark.release.layout import table_dir

from .bench import generated
from .common import BenchTable, timed, write_results


@dataclass(frozen=True)
class BenchLake:
    rows: int = 10_000_000
    l: int = 10
    c: int = 5
    lhs: int = 3
    repeat: int = 3
    seed: int = 7
    out: str = "out/bench-lake"


def _publish(bench: BenchLake, data: Path, releases: Path, seed: int) -> tuple[Path, float]:
    from vpub_spark.config import PublishConfig, RandomRules
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.model import PrivacySpec
    from vpub_spark.publishing.pipeline import publish

    cfg = PublishConfig(
        input_path=str(data),
        privacy=PrivacySpec("l-diversity", bench.l),
        rules=RandomRules(bench.c, bench.lhs, bench.seed),
        method="uad",
        output_path=str(releases),
        release_id=f"r{seed}",
        family="bench",
        seed=seed,
    )
    done, seconds = timed(lambda: publish(cfg, InProcessEngine()))
    return Path(done.path), seconds


def _query(rel_path: Path) -> tuple[str, str, str, str]:
    """The largest anatomy table's first QI attribute and sensitive attribute, and their
    most frequent values (labels)."""
    import pandas as pd

    from vpub_spark.release.reader import open_release

    rel = open_release(rel_path)
    entry = max(
        (t for t in rel.tables if t["kind"] == "anatomy"), key=lambda t: len(t["attributes"])
    )
    s = entry["sensitive"]
    a = next(x for x in entry["attributes"] if x != s)
    qit, st = (table_dir(rel_path, entry["name"], part) for part in ("qit", "st"))
    qi = pd.read_parquet(qit, columns=[a])[a].value_counts().index[0]
    sv = pd.read_parquet(st, columns=[s])[s].value_counts().index[0]
    return a, s, str(qi), str(sv)


def _vpub_query(rel_path: Path, where: str) -> float:
    """What `vpub query` does: open the release, build its models, estimate."""
    from vpub_spark.release.reader import open_release
    from vpub_spark.utility.queries import estimate_count
    from vpub_spark.utility.release_models import release_models
    from vpub_spark.utility.where import parse_where

    rel = open_release(rel_path)
    models, domains = release_models(rel)
    n = int(rel.manifest["source"]["rows"])
    return float(estimate_count(models, parse_where(where, domains), n, domains))


def _duckdb_query(rel_path: Path, where: str) -> float:
    """What `vpub query --reader duckdb` does: open the release, DuckDB SQL on the tables
    the query needs (here one)."""
    from vpub_spark.release.reader import open_release
    from vpub_spark.utility.queries import duckdb_estimate

    return duckdb_estimate(open_release(rel_path), where)[0]


def _medians(bench: BenchLake, first: Path) -> dict:
    a, s, qi, sv = _query(first)
    where = f"{a} = '{qi}' and {s} = '{sv}'"
    ours = [timed(lambda: _vpub_query(first, where)) for _ in range(bench.repeat)]
    theirs = [timed(lambda: _duckdb_query(first, where)) for _ in range(bench.repeat)]
    if abs(ours[0][0] - theirs[0][0]) > 1e-6 * max(1.0, ours[0][0]):
        raise AssertionError(f"DuckDB says {theirs[0][0]}, vpub query {ours[0][0]}")
    return {
        "query": where,
        "estimate": ours[0][0],
        "vpub_query_s": statistics.median(x for _, x in ours),
        "duckdb_s": statistics.median(x for _, x in theirs),
    }


def _import_pyiceberg() -> None:
    """pyiceberg's modules, imported once per process (timed on their own)."""
    import pyiceberg.catalog.sql
    import pyiceberg.io.pyarrow  # noqa: F401


def bench_lake(bench: BenchLake) -> dict:
    from vpub_spark.lake.iceberg import register_iceberg
    from vpub_spark.release.reader import open_release

    out = Path(bench.out)
    data = generated("sal", bench.rows, bench.seed, out)
    releases = out / "releases"
    shutil.rmtree(releases, ignore_errors=True)
    first, publish_1 = _publish(bench, data, releases, bench.seed)
    second, publish_2 = _publish(bench, data, releases, bench.seed + 1)
    catalog, warehouse = f"sqlite:///{(releases / 'catalog.db').resolve()}", str(releases / "wh")
    _, imports = timed(_import_pyiceberg)
    made, register_1 = timed(lambda: register_iceberg(open_release(first), catalog, warehouse))
    _, register_2 = timed(lambda: register_iceberg(open_release(second), catalog, warehouse))
    results = {
        "rows": bench.rows,
        "iceberg_tables": len(made.tables),
        "publish_s": [publish_1, publish_2],
        "register_s": [register_1, register_2],
        "import_s": imports,
        **_medians(bench, first),
    }
    return write_results(results, out / "lake.json", [_table(results)])


def _table(r: dict) -> BenchTable:
    t = BenchTable(
        f"{r['rows']:,} sal rows, UAD, in process", ["step", "seconds", "share"], ["step"]
    )
    p1, p2 = r["publish_s"]
    g1, g2 = r["register_s"]
    t.add_row("publish (release 1)", f"{p1:.2f}", "")
    t.add_row("importing pyiceberg (once per process)", f"{r['import_s']:.2f}", "")
    t.add_row(
        f"register as Iceberg ({r['iceberg_tables']} tables, new)",
        f"{g1:.2f}",
        f"{g1 / p1:.1%} of publish",
    )
    t.add_row("publish (release 2, same family)", f"{p2:.2f}", "")
    t.add_row("register release 2 (one snapshot each)", f"{g2:.2f}", f"{g2 / p2:.1%} of publish")
    q, d = r["vpub_query_s"], r["duckdb_s"]
    t.add_row(f"vpub query, cold ({r['query']})", f"{q:.3f}", "")
    t.add_row(
        "vpub query --reader duckdb, cold (SQL on one table)",
        f"{d:.3f}",
        f"{d / q:.2f}x vpub query",
    )
    return t
