"""The `vpub` command (DESIGN.md §2): one module per feature, each with a
`register(subparsers)` beside its handlers. Handlers parse and print; the library does
the work. User errors print one clear line and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..errors import VpubError
from . import analyze, data, experiments, publish, releases, rules


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vpub", description="Privacy-preserving publication of microdata on Spark."
    )
    p.add_argument("--version", action="version", version=f"vpub_spark {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for feature in (data, rules, publish, analyze, releases, experiments):
        feature.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except VpubError as e:
        print(f"vpub: error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:  # a full disk, a vanished or unreadable file: one line, exit 2
        where = f": {e.filename}" if e.filename else ""
        print(f"vpub: error: {e.strerror or e}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vpub: interrupted", file=sys.stderr)
        return 130
