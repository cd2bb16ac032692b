"""`vpub bench multi-sa | marginals | streamliner`: the other methods' benchmarks (000
Appendix B's multi-SA baseline, 002's marginals against ANGEL, 003's RDA and GDA),
measured in one run, as `bench.py` measures UAD: the data set generated once (not
timed), Spark started once (timed apart), each publish timed from reading the input to
the committed, audited release."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Container
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from vpub_spark.config import PublishConfig, RandomRules
from vpub_spark.engines import make_engine
from vpub_spark.model import PrivacySpec
from vpub_spark.publishing.pipeline import publish
from vpub_spark.report import console

from .bench import ENGINES, generated, rows_per_step, variants
from .common import BenchTable, started_engine, timed, write_results


@dataclass(frozen=True)
class BenchMultiSa:
    """`vpub bench multi-sa`: the partitioned multi-SA baseline at scale, then exact vs
    partitioned vs UAD on a seeded sample."""

    name: str = "sal"
    rows: int = 1_000_000
    l: int = 2
    c: int = 5
    lhs: int = 3
    seed: int = 7
    solver: str = "highs"
    time_limit: float = 300.0
    chunk_rows: int = 20_000
    sample_rows: int = 50_000
    queries: int = 1000
    qd: int = 3
    p: float = 0.4
    engines: tuple[str, ...] = ENGINES
    workers: tuple[int, ...] = ()  # the in-process worker counts to run (default: all cores)
    spark_conf: str | None = None
    out: str = "out/bench-1m"


@dataclass(frozen=True)
class BenchMarginals:
    """`vpub bench marginals`: 002 §4's M1..M5 of `census` at m, per engine, and ANGEL."""

    rows: int = 1_000_000
    m: int = 6
    seed: int = 7
    chunk_rows: int = 50_000
    engines: tuple[str, ...] = ("spark", "inprocess")
    workers: tuple[int, ...] = ()  # the in-process worker counts to run (default: all cores)
    spark_conf: str | None = None
    out: str = "out/bench-1m"


def write_sample(source_dir: Path, rows: int, seed: int, out: Path) -> Path:
    """A seeded sample (without replacement) of a prepared data set, as its own data set."""
    from vpub_spark.datasets.presets import DATA, SPEC, resolve_input
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.lake.commit import staged_directory
    from vpub_spark.tablespec import write_table_spec

    if not (out / SPEC).exists():
        engine = InProcessEngine()
        path, spec = resolve_input(source_dir, None)
        sample = engine.sample(engine.load(path, spec), rows, seed)
        with staged_directory(out, True) as stage:
            engine.write_decoded(sample, stage / DATA)
            write_table_spec(spec, stage / SPEC)
    return out


def bench_multi_sa(bench: BenchMultiSa) -> dict:
    """000 Appendix B at scale: the partitioned mode on the whole table per engine (each
    run timed from reading to the committed release), then, on a seeded sample small
    enough for the exact mode, exact vs partitioned vs UAD: time, KL, relative error
    and suppressed rows, all measured in this run."""
    from vpub_spark.config import MultiSaSettings

    out = Path(bench.out)
    data = generated(bench.name, bench.rows, bench.seed, out)
    settings = MultiSaSettings("partitioned", bench.solver, bench.time_limit, bench.chunk_rows)
    base = PublishConfig(
        input_path=str(data),
        privacy=PrivacySpec("l-diversity", bench.l),
        rules=RandomRules(bench.c, bench.lhs, bench.seed),
        method="multi_sa_bip",
        output_path=str(out / "releases"),
        seed=bench.seed,
        overwrite=True,
        multi_sa=settings,
    )
    results: dict = {
        "data": bench.name,
        "rows": bench.rows,
        "l": bench.l,
        "c": bench.c,
        "lhs": bench.lhs,
        "chunk_rows": bench.chunk_rows,
        "full": {},
        "sample": {},
    }
    results["full"] = _publish_per_engine(
        bench, base, "multi-sa", "partitioned multi-SA", omit=("driver_solves",)
    )
    sample = write_sample(
        data, bench.sample_rows, bench.seed, out / f"{bench.name}-sample-{bench.sample_rows}"
    )
    runs = {
        "multi_sa_bip exact": replace(
            base, input_path=str(sample), multi_sa=replace(settings, mode="exact")
        ),
        "multi_sa_bip partitioned": replace(base, input_path=str(sample)),
        "uad": replace(base, input_path=str(sample), method="uad"),
    }
    results["sample"] = _multi_sa_on_sample(bench, runs, sample)
    tables = [
        _multi_sa_full_table(bench, results["full"]),
        _multi_sa_sample_table(bench, results["sample"]),
    ]
    return write_results(results, out / "multi_sa.json", tables, default=str)


def _publish_per_engine(
    bench: BenchMultiSa | BenchMarginals,
    base: PublishConfig,
    release: str,
    doing: str,
    before: Callable[[], object] | None = None,
    omit: Container[str] = (),
) -> dict:
    """Publish `base` once per engine and in-process worker count (`variants`; each
    started apart, `before` run after the start), timed from reading to the committed
    release: per variant the seconds, start-up, workers, steps and the method's cost but
    its `omit` keys."""
    found: dict = {}
    for label, (name, workers) in variants(bench.engines, bench.workers).items():
        engine, startup = started_engine(name, bench.spark_conf, workers)
        if before is not None:
            before()
        cfg = replace(base, engine=name, release_id=f"{release}-{name}")
        with console.status(f"{label}: {doing} on {bench.rows:,} rows ..."):
            r, took = timed(partial(publish, cfg, engine))
        cost = r.manifest["method_cost"]
        found[label] = {
            "s": took,
            "startup_s": startup,
            "workers": getattr(engine, "workers", None),
            "steps_s": r.timings,
        } | {k: v for k, v in cost.items() if k not in omit}
    return found


def _multi_sa_on_sample(bench: BenchMultiSa, runs: dict[str, PublishConfig], sample: Path) -> dict:
    """Publish each of `runs` on the sample in process and measure it: time, KL,
    relative error, groups, suppressed rows and the multi-SA chunks."""
    from vpub_spark.utility.evaluate import evaluate

    engine = make_engine("inprocess")
    found: dict = {}
    for label, cfg in runs.items():
        one = replace(cfg, engine="inprocess", release_id=f"sample-{label.replace(' ', '-')}")
        with console.status(f"sample: {label} ..."):
            r, took = timed(partial(publish, one, engine))
            u = evaluate(
                str(r.path), str(sample / "data"), bench.qd, bench.p, bench.queries, bench.seed
            )
        cost = r.manifest.get("method_cost") or {}
        found[label] = {
            "s": took,
            "kl": u.kl,
            "relative_error": u.mean_relative_error,
            "suppressed_rows": cost.get("suppressed_rows", 0),
            "chunks": cost.get("chunks"),
            "all_optimal": cost.get("all_optimal"),
            "groups": sum(t.get("groups", 0) for t in r.manifest["tables"]),
        }
    return found


def _multi_sa_full_table(bench: BenchMultiSa, full: dict) -> BenchTable:
    """`bench multi-sa`'s first table: the partitioned mode on the whole table, per engine."""
    t = BenchTable(
        f"multi-SA (partitioned, {bench.solver}, chunks of {bench.chunk_rows:,} rows) on {bench.rows:,} rows of {bench.name}, l = {bench.l}, c = {bench.c}",
        (
            "engine",
            "time (s)",
            "start-up (s)",
            "chunks",
            "solves",
            "all optimal",
            "suppressed rows",
        ),
        left=("engine",),
    )
    for name, e in full.items():
        t.add_row(
            name,
            f"{e['s']:.1f}",
            f"{e['startup_s']:.1f}",
            str(e["chunks"]),
            str(e["solves"]),
            str(e["all_optimal"]),
            f"{e['suppressed_rows']:,}",
        )
    return t


def _multi_sa_sample_table(bench: BenchMultiSa, sample: dict) -> BenchTable:
    """`bench multi-sa`'s second table: exact, partitioned and UAD on the sample."""
    t = BenchTable(
        f"the same rules on a {bench.sample_rows:,}-row sample (in-process; {bench.queries} queries, qd = {bench.qd}, p = {bench.p})",
        ("method", "time (s)", "KL", "relative error", "groups", "suppressed rows"),
        left=("method",),
    )
    for label, e in sample.items():
        t.add_row(
            label,
            f"{e['s']:.2f}",
            f"{e['kl']:.4f}",
            f"{e['relative_error']:.4f}",
            f"{e['groups']:,}",
            f"{e['suppressed_rows']:,}",
        )
    return t


M_SCHEMAS = [
    ["age"],
    ["age", "gender"],
    ["age", "gender", "education"],
    ["age", "gender", "education", "marital"],
    ["age", "gender", "education", "marital", "race"],
]


def bench_marginals(bench: BenchMarginals) -> dict:
    """002 §4's efficiency run: M1..M5 (occupation sensitive) at m on the `census` table,
    per engine timed from reading the input to the committed, audited release and its
    private store; ANGEL (batches + one GT per marginal, in-process) timed in the same
    run on the same rows. Prints both and the ratios."""

    from vpub_spark.config import MarginalSettings

    out = Path(bench.out)
    data = generated("census", bench.rows, bench.seed, out)
    state = out / "private" / "census-store"
    qi = tuple(dict.fromkeys(a for s in M_SCHEMAS for a in s))
    base = PublishConfig(
        input_path=str(data),
        privacy=PrivacySpec("m-invariance", None, bench.m),
        rules=(),
        method="marginals",
        output_path=str(out / "releases"),
        seed=bench.seed,
        overwrite=True,
        marginals=MarginalSettings(
            "occupation", tuple(tuple(s) for s in M_SCHEMAS), str(state), qi, bench.chunk_rows
        ),
    )
    results: dict = {
        "rows": bench.rows,
        "m": bench.m,
        "chunk_rows": bench.chunk_rows,
        "engines": {},
    }
    results["engines"] = _publish_per_engine(
        bench,
        base,
        "marginals",
        "marginals M1..M5",
        before=partial(shutil.rmtree, state, ignore_errors=True),
    )
    results["angel"] = _time_angel(data, qi, bench.m)
    steps = rows_per_step(
        f"rows/s per step, {bench.rows:,} census rows, m = {bench.m} (one run each)",
        bench.rows,
        {label: e["steps_s"] for label, e in results["engines"].items()},
    )
    tables = [_marginals_table(bench, results), steps]
    return write_results(results, out / "marginals.json", tables, default=str)


def _time_angel(data: Path, qi: tuple[str, ...], m: int) -> dict:
    """ANGEL's batches and one GT per marginal of M_SCHEMAS, in process: its seconds and
    the seconds reading the data set took."""
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.kernels.angel import angel_batches, angel_tables
    from vpub_spark.tablespec import load_table_spec

    with console.status("ANGEL: batches and five GTs (in-process) ..."):
        t0 = time.perf_counter()
        loaded = InProcessEngine().load(str(data / "data"), load_table_spec(data / "table.yaml"))
        read = time.perf_counter() - t0
        frame, sizes = loaded.data, {a: loaded.dictionaries[a].size for a in loaded.names}
        extents = {a: sizes[a] - 1 for a in qi}
        s = frame["occupation"].to_numpy()
        t1 = time.perf_counter()
        batch = angel_batches(frame[list(qi)], s, m, extents)
        for attrs in M_SCHEMAS:
            angel_tables(frame[list(qi)], attrs, s, m, extents, batch)
        angel = time.perf_counter() - t1
    return {"s": angel, "read_s": read}


def _marginals_table(bench: BenchMarginals, results: dict) -> BenchTable:
    """`bench marginals`' table: each engine's run against ANGEL's."""
    angel, read = results["angel"]["s"], results["angel"]["read_s"]
    t = BenchTable(
        f"m-invariant marginals M1..M5 of {bench.rows:,} census rows, m = {bench.m} (one run each)",
        (
            "run",
            "end to end (s)",
            "start-up (s)",
            "bucketize+decompose+write (s)",
            "chunks",
            "vs ANGEL",
        ),
        left=("run",),
    )
    for name, e in results["engines"].items():
        core = e["steps_s"].get("bucketize, decompose and write", float("nan"))
        t.add_row(
            f"ours, {name}",
            f"{e['s']:.1f}",
            f"{e['startup_s']:.1f}",
            f"{core:.1f}",
            str(e["chunks"]),
            f"{core / angel:.0%} (core) / {e['s'] / (angel + read):.0%} (end to end)",
        )
    t.add_row(
        "ANGEL, in-process",
        f"{angel + read:.1f}",
        "-",
        f"{angel:.1f} (batches + 5 GTs)",
        "-",
        "100%",
    )
    return t


@dataclass(frozen=True)
class BenchStreamliner:
    """`vpub bench streamliner`: 003's RDA and GDA published at several sizes, per engine
    (003 Figure 1: near-linear in n); `sal` with 003 §4's QI, Salary sensitive."""

    rows: tuple[int, ...] = (600_000, 1_200_000, 6_000_000)
    methods: tuple[str, ...] = ("rda", "gda")
    l: int = 8
    seed: int = 7
    engines: tuple[str, ...] = ENGINES
    spark_conf: str | None = None
    out: str = "out/bench-streamliner"


def bench_streamliner(bench: BenchStreamliner) -> dict:
    """One publish per size, method and engine, timed from reading the input to the
    committed, audited release (Spark's start-up timed apart); prints rows/s."""
    out = Path(bench.out)
    data = {n: generated("sal", n, bench.seed, out) for n in bench.rows}
    results: dict = {"l": bench.l, "runs": []}
    for name in bench.engines:
        results["runs"] += _streamliner_on_engine(bench, name, data)
    table = _streamliner_table(bench, results["runs"])
    return write_results(results, out / "streamliner.json", [table])


def _streamliner_on_engine(bench: BenchStreamliner, name: str, data: dict[int, Path]) -> list:
    """Start one engine and publish each size of `data` with each method on it, timed."""
    from vpub_spark.config import StreamlinerSettings

    settings = StreamlinerSettings(
        "salary",
        ("age", "gender", "education", "birthplace"),
        (("age", 1), ("gender", 10_000), ("education", 1), ("birthplace", 1)),
    )
    engine, startup = started_engine(name, bench.spark_conf)
    runs = []
    for n, path in data.items():
        for method in bench.methods:
            cfg = PublishConfig(
                input_path=str(path),
                privacy=PrivacySpec("l-diversity", bench.l),
                method=method,
                streamliner=settings,
                output_path=str(Path(bench.out) / "releases"),
                release_id=f"{method}-{name}",
                seed=bench.seed,
                engine=name,
                overwrite=True,
            )
            with console.status(f"{name}: {method} on {n:,} rows ..."):
                r, took = timed(partial(publish, cfg, engine))
            runs.append(
                {
                    "engine": name,
                    "rows": n,
                    "method": method,
                    "seconds": took,
                    "startup_s": startup,
                    "dm": r.manifest["method_cost"]["dm"],
                }
            )
    return runs


def _streamliner_table(bench: BenchStreamliner, runs: list[dict]) -> BenchTable:
    """`bench streamliner`'s table: time, rows/s and the normalized DM per run."""
    t = BenchTable(
        f"003 RDA / GDA on sal, l = {bench.l}: publish time per engine (Spark start-up apart)",
        ("engine", "method", "rows", "seconds", "rows/s", "DM / (n l)"),
        left=("engine", "method"),
    )
    for x in runs:
        t.add_row(
            x["engine"],
            x["method"],
            f"{x['rows']:,}",
            f"{x['seconds']:.1f}",
            f"{x['rows'] / x['seconds']:,.0f}",
            f"{x['dm'] / (x['rows'] * bench.l):.5f}",
        )
    return t
