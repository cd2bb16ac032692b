"""`vpub demo`: the end-to-end demo on a generated data set (vpub_spark/demo.py)."""

from __future__ import annotations

import argparse

from .common import config_of, engine_options


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import Demo, run_demo  # imported when run: `vpub` starts faster

    return run_demo(config_of(Demo, args))


def register(sub) -> None:
    d = sub.add_parser("demo", help="the end-to-end demo on a generated data set")
    d.add_argument("--out", default="out/demo")
    d.add_argument("--rows", type=int, default=200_000)
    engine_options(d)
    d.set_defaults(func=cmd_demo)
