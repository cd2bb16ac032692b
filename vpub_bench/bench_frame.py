"""`vpub bench frame`: publishing a Spark DataFrame against publishing the same rows from
their Parquet files, on the same Spark session, a job that prints numbers.

A generated `sal` table of `rows` rows; UAD, `c` random rules, l; one seed. Each round
publishes (a) the Parquet data set by its path, whose rows the tasks read themselves,
and (b) `spark.read.parquet(...)` handed to the pipeline as a frame, whose rows cross
from the JVM to the tasks as Arrow; the pair's order alternates by round. Both releases
must hold the same rows (checked); the medians of `repeat` rounds and their ratio are
reported, the session's start-up apart.
"""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from .bench import generated
from .common import BenchTable, started_engine, timed, write_results


@dataclass(frozen=True)
class BenchFrame:
    rows: int = 1_000_000
    l: int = 5
    c: int = 5
    lhs: int = 3
    repeat: int = 3
    seed: int = 7
    spark_conf: str | None = None
    out: str = "out/bench-frame"


def _contents(path: Path) -> str:
    """A digest of every part's rows, sorted: what two releases of the same rows must
    share (their files' bytes may differ, as the tasks' row order may)."""
    import hashlib

    import pandas as pd

    from vpub_spark.release.reader import open_release

    rel, digest = open_release(path), hashlib.sha256()
    for t in rel.tables:
        for part in t["parts"]:
            frame = rel.read(t["name"], part).to_pandas()
            frame = frame[sorted(frame.columns)].sort_values(sorted(frame.columns))
            digest.update(pd.util.hash_pandas_object(frame, index=False).values.tobytes())
    return digest.hexdigest()


def bench_frame(bench: BenchFrame) -> dict:
    from vpub_spark.config import PublishConfig, RandomRules
    from vpub_spark.frames import frame_input
    from vpub_spark.model import PrivacySpec
    from vpub_spark.publishing.pipeline import publish
    from vpub_spark.tablespec import load_table_spec

    out = Path(bench.out)
    data = generated("sal", bench.rows, bench.seed, out)
    engine, startup = started_engine("spark", bench.spark_conf)
    spec = load_table_spec(data / "table.yaml")
    cfg = PublishConfig(
        input_path=str(data),
        privacy=PrivacySpec("l-diversity", bench.l),
        rules=RandomRules(bench.c, bench.lhs, bench.seed),
        method="uad",
        engine="spark",
        output_path=str(out / "releases"),
        seed=bench.seed,
        overwrite=True,
    )

    def from_files():
        return publish(replace(cfg, release_id="files"), engine)

    def from_frame():
        df = engine.spark.read.parquet(str(data / "data"))  # type: ignore[attr-defined]
        frame = frame_input(df, spec, what="Spark DataFrame")
        return publish(replace(cfg, release_id="frame"), engine, frame=frame)

    times: dict[str, list[float]] = {"files": [], "frame": []}
    made = set()
    for r in range(bench.repeat):
        pair = [("files", from_files), ("frame", from_frame)]
        for name, run in pair if r % 2 == 0 else pair[::-1]:
            done, seconds = timed(run)
            times[name].append(seconds)
            made.add(_contents(Path(done.path)))
    if len(made) != 1:
        raise AssertionError("the frame's release differs from the files' release")
    shutil.rmtree(out / "releases", ignore_errors=True)
    results = {
        "rows": bench.rows,
        "startup_s": startup,
        "files_s": times["files"],
        "frame_s": times["frame"],
        "ratio": statistics.median(times["frame"]) / statistics.median(times["files"]),
    }
    return write_results(results, out / "frame.json", [_table(results)])


def _table(r: dict) -> BenchTable:
    t = BenchTable(
        f"{r['rows']:,} sal rows, UAD on Spark (start-up {r['startup_s']:.1f} s apart)",
        ["input", "median seconds", "rounds", "ratio"],
        ["input"],
    )
    files, frame = statistics.median(r["files_s"]), statistics.median(r["frame_s"])
    t.add_row("Parquet files (the tasks read them)", f"{files:.2f}", len(r["files_s"]), "1.00x")
    t.add_row(
        "Spark DataFrame (rows from the JVM as Arrow)",
        f"{frame:.2f}",
        len(r["frame_s"]),
        f"{r['ratio']:.2f}x",
    )
    return t
