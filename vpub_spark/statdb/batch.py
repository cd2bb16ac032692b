"""`vpub statdb batch` and `vpub statdb workload`: 004 §9's query workloads as files.

A workload file holds one query per line in the condition grammar (`utility/where.py`;
`#` comments and blank lines are skipped; a label with a line break cannot be written);
`write_workload` makes one with λ and ql (`workload.py`).
`answer_workload` checks every line against the store's attributes first (a bad line
fails the batch before any work, naming its line), then the engine spreads the queries
over `parts` tasks (Spark: mapInPandas); each Python worker opens the store once and
answers every query it is given with A-Count or G-Count. Answers come back in line
order and the driver appends them to the store's private log in one write.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..engines.base import Engine
from ..errors import SpecError
from ..release.stores.store import STORE_FILE, read_store
from ..release.stores.versions import version_number
from .db import METHODS, Interval, StatDB, parse_query, where_text
from .workload import workload

ANSWERS = pa.schema(
    [("line", pa.int64()), ("low", pa.int64()), ("high", pa.int64()), ("ms", pa.float64())]
)
_OPEN: dict[str, StatDB] = {}  # per Python worker: the stores it has opened


def write_workload(
    store: str | Path, lam: int, ql: float, count: int, seed: int, out: str | Path
) -> int:
    """`count` queries (004 §9: lambda QI attributes and the sensitive one, ranges of ql
    of their domains) on the store's attributes, written to `out`; returns the count."""
    meta = read_store(Path(store))
    sizes = {a: len(v) for a, v in meta["domains"].items()}
    queries = workload(sizes, list(meta["qi"]), str(meta["sensitive"]), lam, ql, count, seed)
    broken = [
        a for a, labels in meta["domains"].items() if any("\n" in v or "\r" in v for v in labels)
    ]
    if broken:
        raise SpecError(
            f"{broken[0]} has a label with a line break; a workload file holds one query per line"
        )
    head = f"# {count} queries, lambda = {lam}, ql = {ql}, seed {seed} (004 §9)\n"
    Path(out).write_text(head + "".join(where_text(meta, q) + "\n" for q in queries))
    return len(queries)


def read_workload(path: str | Path, meta: dict) -> pd.DataFrame:
    """(line, where) of every query in the file, each checked against the store."""
    rows = []
    lines = Path(path).read_text().split("\n")  # as written: not at \x85, \u2028, ... in a label
    for number, text in enumerate(lines, start=1):
        if text.strip() and not text.lstrip().startswith("#"):
            try:
                parse_query(meta, text)
            except SpecError as e:
                raise SpecError(f"{Path(path).name} line {number}: {e}") from None
            rows.append((number, text.strip()))
    if not rows:
        raise SpecError(f"{Path(path).name}: no queries (one --where text per line)")
    return pd.DataFrame(rows, columns=["line", "where"])


def _opened(store: str) -> StatDB:
    """The worker's open store (a module function, so a task's closure refers to it by
    name instead of carrying the driver's open stores along), opened again once its
    store.json changed (a new version)."""
    seal = (Path(store) / STORE_FILE).stat().st_mtime_ns
    key = f"{store}@{seal}"
    return _OPEN.get(key) or _OPEN.setdefault(key, StatDB.open(store))


def _answerer(store: str, method: str, version: int) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def run(frame: pd.DataFrame) -> pd.DataFrame:
        db = _opened(store)
        out = []
        for line, where in zip(frame["line"], frame["where"], strict=True):
            t0 = time.perf_counter()
            a = db.count(where, method, log=False, version=version)
            out.append((int(line), a.low, a.high, 1000 * (time.perf_counter() - t0)))
        return pd.DataFrame(out, columns=ANSWERS.names)

    return run


@dataclass(frozen=True)
class Batch:
    answers: pd.DataFrame  # line, where, method, low, high, ms (line order)
    seconds: float


def answer_workload(
    store: str | Path,
    path: str | Path,
    method: str,
    engine: Engine,
    parts: int = 0,
    version: int | str | None = None,
) -> Batch:
    """Every query of the workload file answered (see the module docstring) in `parts`
    tasks (0: the engine's default parallelism), on the store's `version` (default: the
    latest)."""
    if method not in METHODS:
        raise SpecError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    t0 = time.perf_counter()
    db = StatDB.open(store)  # refuses an exposed or damaged store before any task runs
    queries = read_workload(path, db.meta)
    n = version_number(db.meta, version)
    got = engine.map_rows(queries, _answerer(str(store), method, n), ANSWERS, parts)
    answers = queries.merge(got, on="line").sort_values("line").reset_index(drop=True)
    answers.insert(2, "method", method)
    db.log(
        [
            (w, Interval(int(lo), int(hi), method, n))
            for w, lo, hi in zip(answers["where"], answers["low"], answers["high"], strict=True)
        ]
    )
    return Batch(answers, time.perf_counter() - t0)


def summary(batch: Batch) -> str:
    a = batch.answers
    length = (a["high"] - a["low"]).to_numpy()
    return (
        f"{len(a):,} queries answered in {batch.seconds:.1f} s; per query p50 {np.median(a['ms']):.2f} ms, "
        f"p99 {np.percentile(a['ms'], 99):.2f} ms; mean interval length {length.mean():,.1f}"
    )
