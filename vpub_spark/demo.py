"""`make demo`: generate a data set, then publish it end to end on the embedded default
engine (000: rules, UAD, anatomy, release, audit) and print where the release is."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .config import PublishConfig, RandomRules
from .datasets.presets import resolve_input, write_generated
from .engines import make_engine
from .engines.settings import SparkSettings
from .model import PrivacySpec
from .publishing.pipeline import publish
from .release.audit.release import audit_release
from .report import audit_table, console, profile_table, progress_step, publish_summary


@dataclass(frozen=True)
class Demo:
    out: str = "out/demo"
    rows: int = 200_000
    engine: str = "spark"
    spark_conf: str | None = None


def run_demo(demo: Demo) -> int:
    out = Path(demo.out)
    engine = make_engine(demo.engine, SparkSettings.load(demo.spark_conf))
    t0 = time.perf_counter()
    data_dir = out / "sal"
    with progress_step(f"generate {demo.rows:,} rows of the synthetic `sal` table"):
        write_generated(engine, "sal", demo.rows, 7, str(data_dir), overwrite=True)
    path, spec = resolve_input(data_dir, None)
    with progress_step(f"profile with the {engine.name} engine"):
        loaded = engine.load(path, spec)
    console.print(profile_table(loaded.profile(), f"domain profile of {data_dir}"))

    cfg = PublishConfig(
        input_path=str(data_dir),
        privacy=PrivacySpec("l-diversity", 10),
        rules=RandomRules(c=5, lhs=3, seed=42),
        method="uad",
        output_path=str(out / "releases"),
        release_id="sal-uad-l10",
        seed=42,
        engine=engine.name,
        overwrite=True,
    )
    console.print(
        "[bold]publish[/bold]: 5 random irreducible rules, l = 10, UAD (000 Algorithm 2), anatomy per table"
    )
    result = publish(cfg, engine, progress_step)
    publish_summary(result)
    with progress_step("re-audit the committed release against the source (vpub audit --source)"):
        report = audit_release(result.path, source=str(data_dir))
    console.print(
        audit_table(report)
        if not report.passed
        else f"audit: [green]passed[/green] {len(report.checks)} checks"
    )
    console.print(
        f"[green]demo finished in {time.perf_counter() - t0:.1f} s[/green]; the release is in {result.path}"
    )
    return 0 if report.passed else 1
