"""`vpub datasets adult | generate` and `vpub profile`: data sets and their domains."""

from __future__ import annotations

import argparse
import time

from ..report import check_report, console, profile_table
from .common import SEED, engine_of, engine_options


def cmd_datasets_adult(args: argparse.Namespace) -> int:
    from ..datasets.fetch import adult_directory, copy_raw
    from ..datasets.presets import write_adult

    path = args.path
    if args.download:
        with console.status("downloading Adult from the UCI archive (once; then cached) ..."):
            path = str(adult_directory())
    if args.raw:
        copy_raw(path, args.raw)
        console.print(f"copied the raw CSVs to {args.raw}")
    with console.status("reading and generalizing Adult ..."):
        w = write_adult(engine_of(args), path, args.out, args.sample, args.seed, args.overwrite)
    console.print(
        f"wrote {w.rows} rows × {len(w.spec.attributes)} attributes to {w.path} ({w.dropped} rows with missing values dropped)"
    )
    return 0


def cmd_datasets_generate(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from ..datasets.presets import write_generated

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
                args.dependence,
                args.top_share,
            )
    else:
        with console.status(f"generating {args.rows:,} rows of {args.name} with Spark ..."):
            w = write_generated(
                engine,
                args.name,
                args.rows,
                args.seed,
                args.out,
                args.overwrite,
                None,
                args.dependence,
                args.top_share,
            )
    dt = time.perf_counter() - t0
    console.print(
        f"wrote {w.rows:,} rows of {args.name} to {w.path} in {dt:.1f} s ({w.rows / dt:,.0f} rows/s)"
        + (f"; Spark start-up {startup:.1f} s before that" if startup else "")
    )
    return 0


def load(args: argparse.Namespace):
    """The table of `--input` (with `--table`), loaded by the chosen engine."""
    from ..datasets.presets import resolve_input

    path, spec = resolve_input(args.input, args.table)
    return engine_of(args).load(path, spec)


def cmd_profile(args: argparse.Namespace) -> int:
    loaded = load(args)
    title = f"{loaded.spec.name}: {loaded.rows:,} rows ({loaded.rows_dropped:,} dropped for missing values)"
    console.print(profile_table(loaded.profile(), title))
    return 0


def parse_model(text: str | None):
    """`vpub check --model` (`k=5,distinct_l=3,...`, privacy.thresholds_from_text) ->
    a check.Model."""
    from ..privacy import thresholds_from_text
    from ..utility.check import Model

    return Model(thresholds_from_text(text))


def cmd_check(args: argparse.Namespace) -> int:
    import json

    from ..utility.check import check_table

    engine = engine_of(args)
    qi = [a.strip() for a in args.qi.split(",") if a.strip()]
    report = check_table(
        engine,
        args.data,
        qi,
        args.sa,
        parse_model(args.model),
        args.ordered,
        args.worst,
        args.weight,
        args.table,
    )
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, default=float))
    else:
        console.print(check_report(report))
    return 0 if report.passed else 1


def register(sub) -> None:
    _register_datasets(sub)
    _register_profile(sub)
    _register_check(sub)


def _register_datasets(sub) -> None:
    """`vpub datasets adult` and `vpub datasets generate`: write a data set."""
    ds = sub.add_parser(
        "datasets", help="write the Adult preset or a synthetic data set"
    ).add_subparsers(dest="what", required=True)
    a = ds.add_parser("adult", help="000 §6.1's 7-attribute Adult table")
    source = a.add_mutually_exclusive_group(required=True)
    source.add_argument("--path", help="directory with adult.data.csv and adult.test.csv")
    source.add_argument(
        "--download",
        action="store_true",
        help="download the UCI archive (pinned SHA-256), cached under the user's cache directory",
    )
    a.add_argument(
        "--raw",
        metavar="DIR",
        help="also copy the raw CSVs to DIR (the Adult configs in conf/ read data/adult)",
    )
    a.add_argument("--out", required=True)
    a.add_argument(
        "--sample", type=int, default=None, help="sample this many rows without replacement"
    )
    a.add_argument("--seed", type=SEED, default=0)
    a.add_argument("--overwrite", action="store_true")
    engine_options(a)
    a.set_defaults(func=cmd_datasets_adult)
    g = ds.add_parser("generate", help="a synthetic data set: sal, occ, texas or census")
    g.add_argument("name", choices=["sal", "occ", "texas", "census"])
    g.add_argument("--rows", type=int, required=True)
    g.add_argument("--seed", type=SEED, default=0)
    g.add_argument("--out", required=True)
    g.add_argument("--overwrite", action="store_true")
    g.add_argument(
        "--dependence",
        type=float,
        default=0.0,
        help="share of rows whose last (sensitive) attribute is a function of the others, 0..1",
    )
    g.add_argument(
        "--top-share",
        type=float,
        default=None,
        metavar="P",
        help="give the last (sensitive) attribute's most likely value this share of the rows, "
        "0 < P < 1 (near 1/m no m-eligible cut of the table exists)",
    )
    engine_options(g)
    g.set_defaults(func=cmd_datasets_generate)


def _register_profile(sub) -> None:
    """`vpub profile`: the domain profile of a table."""
    pr = sub.add_parser("profile", help="domain profile of a table")
    pr.add_argument("--input", required=True)
    pr.add_argument("--table", default=None, help="table spec YAML (default: INPUT/table.yaml)")
    engine_options(pr)
    pr.set_defaults(func=cmd_profile)


def _register_check(sub) -> None:
    """`vpub check`: the privacy models of any table, per equivalence class."""
    ck = sub.add_parser(
        "check",
        help="k-anonymity, l-diversity variants and t-closeness of any table, per equivalence class",
    )
    ck.add_argument("data", help="a CSV or Parquet file or directory (from any tool)")
    ck.add_argument("--qi", required=True, help="quasi-identifiers, comma-separated")
    ck.add_argument("--sa", required=True, help="the sensitive attribute")
    ck.add_argument(
        "--model",
        default=None,
        help="thresholds to check, by privacy.also's names: k=5,distinct_l=3,entropy_l=2.5,"
        "recursive_c=3,t=0.2 (l and c are short for distinct_l and recursive_c; "
        "exit 1 if one fails)",
    )
    ck.add_argument(
        "--ordered",
        action="store_true",
        help="ordered EMD for t: the sensitive attribute in its declared order (--table), else as numbers",
    )
    ck.add_argument(
        "--table",
        default=None,
        metavar="SPEC",
        help="a table spec declaring the sensitive attribute's order (order:, bins); default: the data set's table.yaml, if any",
    )
    ck.add_argument(
        "--weight",
        default=None,
        metavar="COLUMN",
        help="each row counts as COLUMN rows (fractions allowed); default: a vpub export's own (weight, count or size beside group_id), else 1; 'none': every row once",
    )
    ck.add_argument("--worst", type=int, default=5, help="how many of the smallest classes to show")
    ck.add_argument("--json", action="store_true")
    engine_options(ck, default="inprocess")
    ck.set_defaults(func=cmd_check)
