"""`vpub bench peers`: vpub against ANJANA on the same work, one rule QI -> S with
l-diversity, side by side: wall time, peak memory and query error, each tool in a fresh
process.

Decisions (ANJANA's hierarchies, how its output is estimated, why it is an optional
extra): docs/explanation/privacy-models.md, "Side by side with ANJANA".
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from vpub_spark.errors import VpubError

from .common import BenchTable, write_results

LEVELS = 4  # level 1 groups consecutive values into runs of ceil(d / LEVELS)


@dataclass(frozen=True)
class BenchPeers:
    data: str  # a data-set directory (table.yaml + data/)
    qi: tuple[str, ...]
    sensitive: str
    l: int = 3
    rows: int | None = None  # a seeded sample of this many rows
    suppression: float = 5.0  # ANJANA's suppression limit, percent
    queries: int = 1000
    qd: int = 3
    p: float = 0.4
    seed: int = 0
    out: str = "out/bench-peers"


def hierarchies(frame: pd.DataFrame, qi: tuple[str, ...]) -> dict:
    """ANJANA's hierarchies (docs/explanation/privacy-models.md), per QI in its values' order."""
    out = {}
    for a in qi:
        values = sorted(frame[a].unique(), key=_order)
        run = -(-len(values) // LEVELS)
        level1 = [
            f"{values[i - i % run]}~{values[min(i - i % run + run, len(values)) - 1]}"
            for i in range(len(values))
        ]
        out[a] = {
            0: np.array(values, dtype=object),
            1: np.array(level1, dtype=object),
            2: np.array(["*"] * len(values), dtype=object),
        }
    return out


def _order(v: str):
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, str(v))


def _run_anjana(frame: pd.DataFrame, bench: BenchPeers, queue) -> None:
    from anjana.anonymity import l_diversity

    t0 = time.perf_counter()
    out = l_diversity(
        frame,
        [],
        list(bench.qi),
        bench.sensitive,
        1,
        bench.l,
        bench.suppression,
        hierarchies(frame, bench.qi),
    )
    queue.put(
        {
            "wall_s": time.perf_counter() - t0,
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "table": out,
        }
    )


def _run_vpub(data: str, bench: BenchPeers, out: str, queue) -> None:
    from vpub_spark.config import config_from_dict
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.publishing.pipeline import publish

    cfg = config_from_dict(
        {
            "input": {"path": data},
            "privacy": {"l": bench.l},
            "rules": [f"{', '.join(bench.qi)} -> {bench.sensitive}"],
            "method": "uad",
            "output": {"path": out, "release_id": "vpub"},
            "engine": "inprocess",
            "seed": bench.seed,
        }
    )
    t0 = time.perf_counter()
    r = publish(replace(cfg, overwrite=True), InProcessEngine())
    queue.put(
        {
            "wall_s": time.perf_counter() - t0,
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "path": str(r.path),
        }
    )


def _guarded(target, args, queue) -> None:
    """Run `target` in the child; an exception goes back as its text, not lost."""
    try:
        target(*args, queue)
    except Exception as e:  # reported by the parent as a VpubError
        queue.put({"error": f"{type(e).__name__}: {e}"})


def _in_child(target, *args) -> dict:
    """`target(*args, queue)` in a fresh process: what it reports."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_guarded, args=(target, args, queue))
    proc.start()
    got = queue.get(timeout=3600)
    proc.join()
    if "error" in got:
        raise VpubError(f"{target.__name__}: {got['error']}")
    return got


class Generalized:
    """A generalized table (ANJANA's output) read with the uniform-spread estimate (see
    docs/explanation/privacy-models.md): each column's labels coded once, a query a few gathers."""

    def __init__(self, table: pd.DataFrame, covers: dict[str, dict[str, set]]):
        self.covers, self.rows = covers, len(table)
        self.columns = {a: pd.Categorical(table[a].astype(str)) for a in table.columns}

    def count(self, query: dict[str, set]) -> float:
        share = np.ones(self.rows)
        for a, wanted in query.items():
            col = self.columns[a]
            cover = self.covers.get(a)  # None: not generalized (the sensitive attribute)
            frac = np.array(
                [
                    len(cover.get(g, set()) & wanted) / max(len(cover.get(g, set())), 1)
                    if cover
                    else float(g in wanted)
                    for g in col.categories
                ]
            )
            share *= np.append(frac, 0.0)[col.codes]  # code -1 (missing): nothing
        return float(share.sum())


def generalized_estimate(
    table: pd.DataFrame, query: dict[str, set], covers: dict[str, dict[str, set]]
) -> float:
    """One query on a generalized table (`Generalized`)."""
    return Generalized(table, covers).count(query)


def _covers(h: dict) -> dict[str, dict[str, set]]:
    """Per QI, each published label (any level) -> the raw values it covers."""
    out: dict[str, dict[str, set]] = {}
    for a, levels in h.items():
        raw = [str(v) for v in levels[0]]
        cover: dict[str, set] = {}
        for level in levels.values():
            for v, g in zip(raw, level, strict=True):
                cover.setdefault(str(g), set()).add(v)
        out[a] = cover
    return out


def _source(bench: BenchPeers, into: Path) -> pd.DataFrame:
    """The QI and sensitive columns as labels (a seeded sample), written as a data set."""
    import yaml

    from vpub_spark.datasets.presets import resolve_input
    from vpub_spark.engines.inprocess import InProcessEngine

    path, spec = resolve_input(bench.data, None)
    engine = InProcessEngine()
    loaded = engine.load(path, spec)
    if bench.rows is not None:
        loaded = engine.sample(loaded, bench.rows, bench.seed)
    cols = [*bench.qi, bench.sensitive]
    frame = pd.DataFrame(
        {
            a: np.asarray(loaded.dictionaries[a].labels, dtype=object)[loaded.data[a].to_numpy()]
            for a in cols
        }
    )
    (into / "data").mkdir(parents=True, exist_ok=True)
    frame.to_csv(into / "data" / "part.csv", index=False)
    attrs = [{"name": a, "order": sorted(frame[a].unique(), key=_order)} for a in cols]
    (into / "table.yaml").write_text(yaml.safe_dump({"name": "peers", "attributes": attrs}))
    return frame


def bench_peers(bench: BenchPeers) -> dict:
    """Run both tools on the same table and report time, memory and query error."""
    try:
        import anjana  # noqa: F401
    except ImportError:
        raise VpubError(
            "vpub bench peers needs ANJANA: pip install --no-deps anjana pycanon beartype (it is not installed at run time)"
        ) from None
    out = Path(bench.out)
    frame = _source(bench, out / "source")
    vpub = _in_child(_run_vpub, str(out / "source"), bench, str(out / "releases"))
    peer = _in_child(_run_anjana, frame, bench)
    queries, ours, theirs = _relative_errors(bench, frame, vpub["path"], peer["table"])
    result: dict = {
        "bench": asdict(bench),
        "rows": len(frame),
        "queries": queries,
        "vpub": {"wall_s": vpub["wall_s"], "peak_rss": vpub["peak_rss"], "relative_error": ours},
        "anjana": {
            "wall_s": peer["wall_s"],
            "peak_rss": peer["peak_rss"],
            "relative_error": theirs,
            "rows_out": len(peer["table"]),
        },
    }
    table = _peers_table(bench, result)
    out.mkdir(parents=True, exist_ok=True)
    peer["table"].to_csv(out / "anjana.csv", index=False)  # ANJANA's release, for checking
    return write_results(result, out / "results.json", [table])


def _relative_errors(
    bench: BenchPeers, frame: pd.DataFrame, release: str, generalized: pd.DataFrame
) -> tuple[int, float, float]:
    """The workload drawn from `frame` and answered exactly: its number of queries, and
    the mean relative error of vpub's release and of ANJANA's generalized table."""
    from vpub_spark.release.reader import open_release
    from vpub_spark.utility.queries import Estimator, workload
    from vpub_spark.utility.release_models import release_models

    domains = {a: sorted(frame[a].unique(), key=_order) for a in frame.columns}
    codes = pd.DataFrame(
        {
            a: pd.Categorical(frame[a], categories=domains[a]).codes.astype(np.int32)
            for a in frame.columns
        }
    )
    wl = workload(codes, domains, bench.qd, bench.p, bench.queries, bench.seed)
    models, _ = release_models(open_release(release), domains)
    ours = Estimator(models, len(frame), domains).counts(wl.queries)
    labelled = [{a: {str(domains[a][v]) for v in vs} for a, vs in q.items()} for q in wl.queries]
    peer = Generalized(generalized, _covers(hierarchies(frame, bench.qi)))
    theirs = np.array([peer.count(q) for q in labelled])
    return (
        len(wl.queries),
        float(np.mean(np.abs(ours - wl.actual) / wl.actual)),
        float(np.mean(np.abs(theirs - wl.actual) / wl.actual)),
    )


def _peers_table(bench: BenchPeers, result: dict) -> BenchTable:
    """`bench peers`' table: each tool's wall time, peak memory and query error."""
    t = BenchTable(
        f"vpub and ANJANA on {result['rows']:,} rows of {Path(bench.data).name}: {', '.join(bench.qi)} -> {bench.sensitive}, l = {bench.l}; {result['queries']:,} queries (qd = {bench.qd}, p = {bench.p}); one run each, in its own process",
        ("tool", "wall time (s)", "peak RSS (MiB)", "mean relative error"),
        left=("tool",),
    )
    for tool in ("vpub", "anjana"):
        r = result[tool]
        t.add_row(
            tool,
            f"{r['wall_s']:.2f}",
            f"{r['peak_rss'] / 2**20:,.0f}",
            f"{r['relative_error']:.4f}",
        )
    return t
