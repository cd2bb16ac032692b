"""`vpub datasets adult | generate` and `vpub profile`: data sets and their domains."""

from __future__ import annotations

import argparse
import time

from ..datasets.presets import resolve_input, write_adult, write_generated
from ..report import console, profile_table
from .common import engine_of, engine_options


def cmd_datasets_adult(args: argparse.Namespace) -> int:
    with console.status("reading and generalizing Adult ..."):
        w = write_adult(
            engine_of(args), args.path, args.out, args.sample, args.seed, args.overwrite
        )
    console.print(
        f"wrote {w.rows} rows × {len(w.spec.attributes)} attributes to {w.path} ({w.dropped} rows with missing values dropped)"
    )
    return 0


def cmd_datasets_generate(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    engine = engine_of(args)
    with console.status(f"starting the {engine.name} engine ..."):
        startup = engine.start()  # outside the timed part
    t0 = time.perf_counter()
    if args.engine == "inprocess":
        with Progress(console=console) as bar:
            task = bar.add_task(f"generating {args.name}", total=args.rows)
            w = write_generated(
                engine,
                args.name,
                args.rows,
                args.seed,
                args.out,
                args.overwrite,
                lambda n: bar.advance(task, n),
            )
    else:
        with console.status(f"generating {args.rows:,} rows of {args.name} with Spark ..."):
            w = write_generated(engine, args.name, args.rows, args.seed, args.out, args.overwrite)
    dt = time.perf_counter() - t0
    console.print(
        f"wrote {w.rows:,} rows of {args.name} to {w.path} in {dt:.1f} s ({w.rows / dt:,.0f} rows/s)"
        + (f"; Spark start-up {startup:.1f} s before that" if startup else "")
    )
    return 0


def load(args: argparse.Namespace):
    """The table of `--input` (with `--table`), loaded by the chosen engine."""
    path, spec = resolve_input(args.input, args.table)
    return engine_of(args).load(path, spec)


def cmd_profile(args: argparse.Namespace) -> int:
    loaded = load(args)
    title = f"{loaded.spec.name}: {loaded.rows:,} rows ({loaded.rows_dropped:,} dropped for missing values)"
    console.print(profile_table(loaded.profile(), title))
    return 0


def register(sub) -> None:
    ds = sub.add_parser(
        "datasets", help="write the Adult preset or a synthetic data set"
    ).add_subparsers(dest="what", required=True)
    a = ds.add_parser("adult", help="000 §6.1's 7-attribute Adult table")
    a.add_argument("--path", required=True, help="directory with adult.data.csv and adult.test.csv")
    a.add_argument("--out", required=True)
    a.add_argument(
        "--sample", type=int, default=None, help="sample this many rows without replacement"
    )
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--overwrite", action="store_true")
    engine_options(a)
    a.set_defaults(func=cmd_datasets_adult)
    g = ds.add_parser("generate", help="a synthetic data set: sal, occ, texas or census")
    g.add_argument("name", choices=["sal", "occ", "texas", "census"])
    g.add_argument("--rows", type=int, required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--out", required=True)
    g.add_argument("--overwrite", action="store_true")
    engine_options(g)
    g.set_defaults(func=cmd_datasets_generate)

    pr = sub.add_parser("profile", help="domain profile of a table")
    pr.add_argument("--input", required=True)
    pr.add_argument("--table", default=None, help="table spec YAML (default: INPUT/table.yaml)")
    engine_options(pr)
    pr.set_defaults(func=cmd_profile)
