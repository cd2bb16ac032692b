"""`vpub bench scale`: UAD releases of growing `sal` tables on Spark, each
with its per-step times, the driver's peak memory (the Python driver and, apart, the
local JVM, which in local mode also hosts the executors), partitions, files and bytes;
then a cost model fitted on them and its prediction for a billion rows on a cluster.

The model, per step: t(n) = a + b n / c, where n is the number of rows, c the cores
running tasks (2 here), a the fixed cost (jobs, start of Python workers, the driver's
planning) and b the per-row cost of one core. It is fitted by least squares on the
measured runs. For E executors of k cores, c = E k: it assumes tasks scale out, which
the design makes true by keeping every per-row step inside tasks. Shuffle volume is
what the one shuffle moves, the encoded rows; files and bytes grow with partitions and
rows as measured.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from vpub_spark.config import PublishConfig, RandomRules
from vpub_spark.engines.base import utility_engine
from vpub_spark.errors import SpecError, VpubError
from vpub_spark.model import PrivacySpec
from vpub_spark.publishing.pipeline import publish
from vpub_spark.report import console

from .bench import generated
from .common import BenchTable, optional, started_engine, timed, write_results

STEPS = ("read and encode", "plan partitions", "anonymize and write", "audit")


@dataclass(frozen=True)
class BenchScale:
    rows: tuple[int, ...] = (1_000_000, 3_000_000, 10_000_000)
    name: str = "sal"
    l: int = 10
    c: int = 5
    lhs: int = 3
    seed: int = 7
    cores: int = 2
    predict_rows: int = 1_000_000_000
    executors: int = 100
    executor_cores: int = 4
    spark_conf: str | None = None
    out: str = "out/bench-scale"
    figure: str = "docs/figures/scale/cost-model.png"
    warm_up_rows: int = 100_000


def _rss(pid: int | str) -> int:
    """Resident bytes of a process (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _java_children() -> list[str]:
    me, out = str(__import__("os").getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields, comm = text.split(") ")[-1].split(), text.split("(", 1)[1].split(")", 1)[0]
        if fields[1] == me and comm == "java":
            out.append(stat.parent.name)
    return out


class PeakMemory:
    """Samples this process's and its JVM's resident memory every 0.1 s; the peaks."""

    def __init__(self) -> None:
        self.python = self.jvm = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        jvms = _java_children()
        while not self._stop.is_set():
            self.python = max(self.python, _rss("self"))
            self.jvm = max(self.jvm, sum(_rss(p) for p in jvms))
            time.sleep(0.1)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _sizes(path: Path) -> tuple[int, int]:
    files = [f for f in path.rglob("*.parquet")]
    return len(files), sum(f.stat().st_size for f in files)


def run_sizes(bench: BenchScale) -> list[dict]:
    """One Spark publish per size (the data generated once, not timed)."""
    out = Path(bench.out)
    engine, startup = started_engine("spark", bench.spark_conf)
    base = PublishConfig(
        input_path="",
        privacy=PrivacySpec("l-diversity", bench.l),
        rules=RandomRules(bench.c, bench.lhs, bench.seed),
        method="uad",
        output_path=str(out / "releases"),
        seed=bench.seed,
        engine="spark",
        overwrite=True,
    )
    # the JVM's first run, not measured
    warm = generated(bench.name, bench.warm_up_rows, bench.seed, out)
    publish(replace(base, input_path=str(warm), release_id="warm-up"), engine)
    runs = []
    for n in bench.rows:
        data = generated(bench.name, n, bench.seed, out)
        cfg = replace(base, input_path=str(data), release_id=f"{bench.name}-{n}")
        with PeakMemory() as peak, console.status(f"publishing {n:,} rows on Spark ..."):
            t0 = time.perf_counter()
            r = publish(cfg, engine)
            wall = time.perf_counter() - t0
        files, size = _sizes(Path(r.path))
        run = {
            "rows": n,
            "wall_s": wall,
            "steps_s": {k: r.timings.get(k, 0.0) for k in STEPS},
            "partitions": r.manifest["partitions"],
            "files": files,
            "bytes": size,
            "python_peak_bytes": peak.python,
            "jvm_peak_bytes": peak.jvm,
            "startup_s": startup,
        }
        runs.append(run)
    return runs


def fit(runs: list[dict], cores: int) -> dict[str, tuple[float, float]]:
    """Per step, (a seconds, b core-seconds per row) of t(n) = a + b n / cores."""
    n = np.array([r["rows"] for r in runs], dtype=float)
    out = {}
    for step in STEPS:
        t = np.array([r["steps_s"][step] for r in runs])
        (a, b), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(n), n / cores]), t, rcond=None)
        out[step] = (float(a), float(b))
    return out


def predict(model: dict, runs: list[dict], bench: BenchScale) -> dict:
    """What the model says of `predict_rows` on `executors` x `executor_cores`."""
    n, cores = bench.predict_rows, bench.executors * bench.executor_cores
    last = runs[-1]
    per_row_bytes = last["bytes"] / last["rows"]
    rows_per_partition = last["rows"] / last["partitions"]
    partitions = int(np.ceil(n / rows_per_partition))
    files_per_partition = last["files"] / last["partitions"]
    return {
        "rows": n,
        "executors": bench.executors,
        "cores": cores,
        "steps_s": {s: a + b * n / cores for s, (a, b) in model.items()},
        "partitions": partitions,
        "files": int(files_per_partition * partitions),
        "release_bytes": per_row_bytes * n,
        "shuffle_bytes": n * (4 * 8 + 8),
    }


def plot(runs: list[dict], model: dict, bench: BenchScale, path: Path) -> None:
    optional("matplotlib").use("Agg")
    plt = optional("matplotlib.pyplot")

    n = np.array([r["rows"] for r in runs], dtype=float)
    grid = np.geomspace(n.min(), bench.predict_rows, 50)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for step, (a, b) in model.items():
        line = ax.plot(grid, a + b * grid / bench.cores, "--", lw=1)[0]
        ax.plot(n, [r["steps_s"][step] for r in runs], "o", color=line.get_color(), label=step)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="rows",
        ylabel="seconds (2 cores)",
        title="vpub publish on Spark: measured (dots) and the cost model (dashes)",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bench_scale(bench: BenchScale) -> dict:
    runs = run_sizes(bench)
    model = fit(runs, bench.cores)
    guess = predict(model, runs, bench)
    results = {
        "runs": runs,
        "model": {k: {"fixed_s": a, "core_s_per_row": b} for k, (a, b) in model.items()},
        "prediction": guess,
    }
    tables = [
        _sizes_table(bench, runs),
        _model_table(bench, model, len(runs)),
        _prediction_table(bench, guess),
    ]
    written = write_results(results, Path(bench.out) / "scale.json", tables)
    plot(runs, model, bench, Path(bench.figure))
    console.print(f"plot in {bench.figure}")
    return written


def _sizes_table(bench: BenchScale, runs: list[dict]) -> BenchTable:
    """`bench scale`'s measured runs: time, step times, peak memory, partitions, files."""
    t = BenchTable(
        f"UAD publish on Spark of growing {bench.name} tables, l = {bench.l}, c = {bench.c}, lhs = {bench.lhs}, {bench.cores} cores (one run each, after a {bench.warm_up_rows:,}-row warm-up)",
        (
            "rows",
            "wall (s)",
            *(f"{step} (s)" for step in STEPS),
            "driver Python peak (MiB)",
            "local JVM peak (MiB)",
            "partitions",
            "files",
            "release (MiB)",
        ),
    )
    for r in runs:
        t.add_row(
            f"{r['rows']:,}",
            f"{r['wall_s']:.1f}",
            *(f"{r['steps_s'][step]:.1f}" for step in STEPS),
            f"{r['python_peak_bytes'] / 2**20:,.0f}",
            f"{r['jvm_peak_bytes'] / 2**20:,.0f}",
            str(r["partitions"]),
            str(r["files"]),
            f"{r['bytes'] / 2**20:,.0f}",
        )
    return t


def _model_table(bench: BenchScale, model: dict, runs: int) -> BenchTable:
    """`bench scale`'s cost model: per step, the fixed and the per-row cost."""
    t = BenchTable(
        f"cost model t(n) = a + b n / c per step, fitted by least squares on the {runs} runs above (c = {bench.cores} cores)",
        ("step", "a: fixed (s)", "b: core-s per million rows"),
        left=("step",),
    )
    for step, (a, b) in model.items():
        t.add_row(step, f"{a:.2f}", f"{b * 1e6:.2f}")
    return t


def _prediction_table(bench: BenchScale, guess: dict) -> BenchTable:
    """`bench scale`'s prediction: what the cost model says of `predict_rows` on a cluster."""
    t = BenchTable(
        f"the cost model's prediction for {guess['rows']:,} rows on {guess['executors']} executors x {bench.executor_cores} cores",
        ("steps (s)", "partitions", "files", "release (GiB)", "shuffle (GiB)"),
    )
    t.add_row(
        f"{sum(guess['steps_s'].values()):,.0f}",
        f"{guess['partitions']:,}",
        f"{guess['files']:,}",
        f"{guess['release_bytes'] / 2**30:,.0f}",
        f"{guess['shuffle_bytes'] / 2**30:,.0f}",
    )
    return t


@dataclass(frozen=True)
class BenchKl:
    """`vpub bench kl`: a release's KL divergence and the exact answers of a query
    workload (`queries` of dimension `qd`, value share `p`), in process and on Spark (KL:
    the release in every task, one shuffle, one aggregate per term); medians of `repeat`
    warm runs."""

    release: str
    source: str
    repeat: int = 3
    engines: tuple[str, ...] = ("inprocess", "spark")
    workers: tuple[int, ...] = ()  # in-process worker counts (default: all cores)
    forms: tuple[str, ...] = ("every-task", "one-shuffle", "per-term")
    queries: int = 1000
    qd: int = 3
    p: float = 0.4
    seed: int = 0
    spark_conf: str | None = None
    out: str = "out/bench-kl"


def _alternating(runs: dict[str, Callable[[], object]], repeat: int) -> dict:
    """Each run's value and median time over `repeat` rounds after one untimed round,
    every run once a round in turn: on a machine whose speed drifts, each round's runs
    share its speed."""
    for run in runs.values():
        run()
    rounds = [{name: timed(run) for name, run in runs.items()} for _ in range(repeat)]
    out = {}
    for name in runs:
        times = [r[name][1] for r in rounds]
        out[name] = {
            "value": rounds[0][name][0],
            "median_s": statistics.median(times),
            "runs_s": times,
        }
    return out


def _per_worker_count(
    runs: dict[str, Callable[[], object]], workers: tuple[int, ...]
) -> dict[str, Callable[[], object]]:
    """Each in-process run once per worker count (`VPUB_WORKERS` set around it, as a user
    sets it), labelled with the count; as they are without counts."""
    if not workers:
        return runs
    return {
        f"{name} ({w} workers)": partial(_with_workers, w, run)
        for w in workers
        for name, run in runs.items()
    }


def _with_workers(count: int, run: Callable[[], object]) -> object:
    before = os.environ.get("VPUB_WORKERS")
    os.environ["VPUB_WORKERS"] = str(count)
    try:
        return run()
    finally:
        if before is None:
            del os.environ["VPUB_WORKERS"]
        else:
            os.environ["VPUB_WORKERS"] = before


def bench_kl(bench: BenchKl) -> dict:
    """The source is read once per engine, outside the timed runs; the workloads of both
    engines are checked equal. In process, the KL is timed with the release's models
    built before (as `vpub utility` times it), with the release read inside the timer,
    as every Spark task reads it, and with the source read too; the workload with the
    source held and read: the Spark tasks read the source themselves
    (`engines/spark/direct.py`), so the runs that read it are their like. Both engines'
    runs alternate, round by round (`_alternating`)."""
    from vpub_spark.release.reader import open_release
    from vpub_spark.utility.evaluate import load_release_and_source, load_source
    from vpub_spark.utility.kl import kl_divergence
    from vpub_spark.utility.queries import workload
    from vpub_spark.utility.release_models import release_models

    _, models, domains, src = load_release_and_source(bench.release, bench.source)
    results: dict = {"release": Path(bench.release).name, "rows": len(src), "repeat": bench.repeat}

    def kl_reading_the_release() -> float:  # as each Spark task does
        return kl_divergence(release_models(open_release(bench.release))[0], src, domains)

    def read_source():  # the source alone, read and coded
        return load_source(open_release(bench.release), bench.source, domains)[1]

    def kl_reading_both() -> float:  # the whole of one `vpub utility` KL in process
        _, fresh, _, source = load_release_and_source(bench.release, bench.source)
        return kl_divergence(fresh, source, domains)

    def answers(source) -> list[int]:
        return _answers(workload(source, domains, bench.qd, bench.p, bench.queries, bench.seed))

    runs: dict[str, Callable[[], object]] = {}
    if "inprocess" in bench.engines:
        held = {
            "kl in process": lambda: kl_divergence(models, src, domains),
            "kl in process, release read too": kl_reading_the_release,
            "kl in process, release and source read too": kl_reading_both,
            "workload in process": lambda: answers(src),
            "workload in process, source read too": lambda: answers(read_source()),
        }
        runs |= _per_worker_count(held, bench.workers)
    if "spark" in bench.engines:
        runs |= _spark_kl_runs(bench)
    results |= _alternating(runs, bench.repeat)
    _check_agreement(results)
    table = _kl_table(bench, results)
    return write_results(results, Path(bench.out) / f"{results['release']}.json", [table])


def _kl_table(bench: BenchKl, results: dict) -> BenchTable:
    """`bench kl`'s table: each run's value and median time."""
    t = BenchTable(
        f"KL divergence and {bench.queries:,} queries' exact answers (qd = {bench.qd}, p = {bench.p}) of release {results['release']} on its {results['rows']:,} source rows (median of {bench.repeat}, runs alternating round by round)",
        ("run", "result", "median (s)", "source rows/s"),
        left=("run", "result"),
    )
    for name in [k for k in results if k.startswith(("kl", "workload"))]:
        value = results[name]["value"]
        shown = (
            f"KL {value:.6f} nats"
            if name.startswith("kl")
            else f"{len(value):,} answers summing to {sum(value):,}"
        )
        took = results[name]["median_s"]
        t.add_row(name, shown, f"{took:.2f}", f"{results['rows'] / max(took, 1e-9):,.0f}")
    return t


def _check_agreement(results: dict) -> None:
    """Every way of computing the KL gives the same value (to 1e-9), and every engine the
    same workload answers: a benchmark of wrong results is no benchmark."""
    kls = [r["value"] for k, r in results.items() if k.startswith("kl")]
    answers = [r["value"] for k, r in results.items() if k.startswith("workload")]
    if kls and max(kls) - min(kls) > 1e-9 * max(1.0, abs(kls[0])):
        raise VpubError(f"the KL runs disagree: {sorted(kls)}")
    if any(a != answers[0] for a in answers):
        raise VpubError("the engines' workload answers disagree")


def _answers(wl) -> list[int]:
    return [int(a) for a in wl.actual]


def _spark_kl_runs(bench: BenchKl) -> dict[str, Callable[[], object]]:
    """The Spark runs of `bench_kl`, the source read and cached first, untimed."""
    from vpub_spark.release.reader import open_release
    from vpub_spark.tablespec import table_spec_from_dict
    from vpub_spark.utility.engine_jobs import engine_counts, release_files, release_space
    from vpub_spark.utility.queries import draw_workload

    engine, _ = started_engine("spark", bench.spark_conf)
    rel = open_release(bench.release)
    loaded = engine.persist(
        engine.load(bench.source, table_spec_from_dict(rel.manifest["source"]["table_spec"]))
    )
    loaded.data.count()  # read and cached outside the timed runs
    _, domains, luts, sizes = release_space(rel, loaded)
    files = release_files(rel, loaded)
    forms = {
        "every-task": "kl spark, release in every task",
        "one-shuffle": "kl spark, one shuffle",
        "per-term": "kl spark, per term",
    }
    unknown = set(bench.forms) - set(forms)
    if unknown:
        raise SpecError(f"unknown KL forms {sorted(unknown)}; known: {sorted(forms)}")
    applies = {f for f in forms if f != "one-shuffle" or files.estimates is not None}
    runs: dict[str, Callable[[], object]] = {
        name: partial(utility_engine(engine).release_kl, loaded, files, f)
        for f, name in forms.items()
        if f in bench.forms and f in applies
    }
    runs["workload spark"] = lambda: _answers(
        draw_workload(
            list(loaded.names),
            domains,
            bench.qd,
            bench.p,
            bench.queries,
            bench.seed,
            engine_counts(engine, loaded, luts, sizes),
        )
    )
    return runs
