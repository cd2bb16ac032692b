"""`vpub bench report`: how long a user waits for `vpub report` and `vpub explore`, each
run as a command in a fresh process (start-up included, as the user runs it), a job
that prints numbers.

Adult (the raw UCI files) published with conf/adult_uad.yaml in process, then its report
with the source (the owner's view) and without (the reader's view), `repeat` times
each; `vpub explore` over l = 2, 3, 5, 8, 10 on the same config; and, with `--rows`, a
generated `sal` table of that many rows published with UAD in process and its report
with the source, `repeat` times too. Both releases are published with the explicit seed `seed`, so
that each run measures the same releases (UAD's decomposition, and so the report's
work, depends on the run's seed); the results name the large release's tables.
Medians are reported.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .bench import generated
from .common import BenchTable, write_results

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class BenchReport:
    adult: str = "data/adult"
    rows: int = 0
    repeat: int = 3
    vary: str = "l=2,3,5,8,10"
    seed: int = 7
    out: str = "out/bench-report"


def _vpub(*args: object) -> float:
    """Run `vpub ARGS` in a fresh process; its wall time (it must succeed)."""
    import time

    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "vpub_spark.cli", *map(str, args)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def bench_report(bench: BenchReport) -> dict:
    out = Path(bench.out)
    conf = ROOT / "conf" / "adult_uad.yaml"
    rel = out / "releases" / "adult-uad-l2"
    publish = ("--out", rel.parent, "--seed", bench.seed, "--overwrite")  # the same release
    _vpub("publish", "--config", conf, "--input", bench.adult, *publish)
    runs: dict[str, list[float]] = {"owner": [], "reader": [], "explore": []}
    for _ in range(bench.repeat):
        runs["owner"].append(_vpub("report", rel, "--source", bench.adult, "--out", out / "a.html"))
        runs["reader"].append(_vpub("report", rel, "--out", out / "b.html"))
    runs["explore"].append(
        _vpub(
            "explore",
            "--config",
            conf,
            "--input",
            bench.adult,
            "--vary",
            bench.vary,
            "--engine",
            "inprocess",
            "--out",
            out / "explore.html",
        )
    )
    results: dict = {"adult": {k: v for k, v in runs.items()}, "vary": bench.vary}
    if bench.rows:
        seconds, tables = _large(bench, out)
        results["sal"] = {"rows": bench.rows, "owner": seconds, "tables": tables}
    return write_results(results, out / "report.json", [_table(results), *_tables(results)])


def _large(bench: BenchReport, out: Path) -> tuple[list[float], list[str]]:
    """The report, with its source, of a UAD release of `rows` generated `sal` rows."""
    data = generated("sal", bench.rows, bench.seed, out)
    conf = ROOT / "conf" / "quickstart.yaml"
    rel = out / "releases" / "sal-uad-l5"
    _vpub(
        "publish",
        "--config",
        conf,
        "--input",
        data,
        "--out",
        rel.parent,
        "--seed",
        bench.seed,
        "--engine",
        "inprocess",
        "--overwrite",
    )
    seconds = [
        _vpub("report", rel, "--source", data, "--out", out / "sal.html")
        for _ in range(bench.repeat)
    ]
    tables = json.loads((rel / "manifest.json").read_text())["tables"]
    return seconds, [_described(t) for t in tables]


def _described(table: dict) -> str:
    """`t1: anatomy of a, b, c -> s` (a projection: `t2: projection of a, b`)."""
    qi = [a for a in table["attributes"] if a != table.get("sensitive")]
    arrow = f" -> {table['sensitive']}" if table.get("sensitive") else ""
    return f"{table['name']}: {table['kind']} of {', '.join(qi)}{arrow}"


def _table(r: dict) -> BenchTable:
    t = BenchTable(
        "vpub report and vpub explore, each a fresh process (start-up included)",
        ["command", "data", "median seconds", "runs"],
        ["command", "data"],
    )
    adult = r["adult"]
    t.add_row(
        "vpub report --source (owner's view)",
        "Adult, 45,223 rows",
        _median(adult["owner"]),
        len(adult["owner"]),
    )
    t.add_row(
        "vpub report (reader's view)", "Adult", _median(adult["reader"]), len(adult["reader"])
    )
    t.add_row(f"vpub explore --vary {r['vary']}", "Adult", _median(adult["explore"]), 1)
    if "sal" in r:
        t.add_row(
            "vpub report --source (owner's view)",
            f"sal, {r['sal']['rows']:,} rows",
            _median(r["sal"]["owner"]),
            len(r["sal"]["owner"]),
        )
    return t


def _tables(r: dict) -> list[BenchTable]:
    """The large release's tables (they set the report's work), when it was made."""
    if "sal" not in r:
        return []
    t = BenchTable(f"the {r['sal']['rows']:,}-row release's tables", ["table"], ["table"])
    for line in r["sal"].get("tables", []):
        t.add_row(line)
    return [t]


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}"
