"""`make demo`: generate a data set, load it on the embedded default engine, and walk
through what the library does, printing a readable report."""

from __future__ import annotations

import time
from pathlib import Path

from .datasets.presets import resolve_input, write_generated
from .decompose.uad import uad
from .engines import make_engine
from .engines.spark.session import SparkSettings
from .gnf import check_gnf
from .model import PublishedTable, Schema
from .report import console, gnf_table, profile_table, rules_table
from .rules import check_eligibility, ineligibility, random_rules, reduce_rules


def run_demo(args) -> int:
    out = Path(args.out)
    engine = make_engine(args.engine, SparkSettings.load(args.spark_conf))
    t0 = time.perf_counter()
    data_dir = out / "sal"
    with console.status(f"generating {args.rows:,} rows of the synthetic `sal` table ..."):
        write_generated(engine, "sal", args.rows, 7, str(data_dir), overwrite=True)
    console.print(f"[bold]1. data[/bold]: {args.rows:,} synthetic IPUMS-like rows in {data_dir} ({time.perf_counter() - t0:.1f} s)")
    path, spec = resolve_input(data_dir, None)
    with console.status(f"reading and encoding with the {engine.name} engine ..."):
        loaded = engine.load(path, spec)
    console.print(profile_table(loaded.profile(), f"2. domain profile ({engine.name} engine)"))

    l = 10  # noqa: E741
    eligible = [a for a in loaded.names if ineligibility(a, *loaded.frequencies()[a], l) is None]
    rules = random_rules(loaded.names, c=5, lhs=3, seed=42, eligible_rhs=eligible)
    red = reduce_rules(rules)
    check_eligibility(red.kept, loaded.frequencies(), l)
    console.print(rules_table(red.kept, red))
    console.print(f"3. rules: 5 random irreducible rules, each RHS {l}-eligible ({', '.join(eligible)})")

    naive = Schema((PublishedTable("everything", loaded.names),))
    console.print(gnf_table(check_gnf(naive, red.kept)))
    console.print("4. publishing the whole table unprotected is not GNF (above). UAD's schema (000 Algorithm 2) is:")
    schema = uad(loaded.names, red.kept, seed=42)
    for t in schema.tables:
        protection = f"{t.kind} for {t.sensitive}" if t.sensitive else t.kind
        console.print(f"   {t.name}: {', '.join(t.attributes)}  ({protection})")
    console.print(gnf_table(check_gnf(schema, red.kept)))
    console.print(f"[green]demo finished in {time.perf_counter() - t0:.1f} s[/green]")
    return 0
