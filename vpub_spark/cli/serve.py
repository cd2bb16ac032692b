"""`vpub serve`: the statistical database and the release catalog as a web service and
page."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import SpecError
from ..report import console
from .common import whole_number


def register(sub) -> None:
    """`vpub serve`."""
    _register_serve(sub)


def cmd_serve(args: argparse.Namespace) -> int:
    """Checks everything (binding, token, store, catalog) before it listens; with
    `--workers N`, N processes each open the store (settings through the environment)."""
    import os

    import uvicorn

    from ..serve.app import ENV, ServeSettings, build_app, settings_env
    from ..serve.limits import check_binding

    settings = ServeSettings(
        args.store,
        args.releases,
        args.token_file,
        args.max_body,
        args.rate,
        args.burst,
        args.verify_key,
    )
    check_binding(args.host, settings.token())
    if args.releases is not None and not Path(args.releases).is_dir():
        raise SpecError(f"--releases {Path(args.releases).name}: no such directory")
    app = build_app(settings)
    shown = "the page, the API at /openapi.json" + (
        ", the release catalog" if args.releases else ""
    )
    console.print(
        f"serving {Path(args.store).name} on http://{args.host}:{args.port}/ ({shown}); {args.workers} worker(s)"
    )
    if args.verify_key is None and app.state.signed_by:
        console.print(
            f"note: the store is signed (key {app.state.signed_by}) but --verify-key was not given: its signature was not checked"
        )
    if args.workers == 1:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0
    del app
    os.environ[ENV] = settings_env(settings)
    target = "vpub_spark.serve.app:app_from_env"
    uvicorn.run(
        target,
        factory=True,
        workers=args.workers,
        host=args.host,
        port=args.port,
        log_level="warning",
    )
    return 0


def _register_serve(sub) -> None:
    """`vpub serve`: the statistical database and release catalog as a web service."""
    sv = sub.add_parser(
        "serve",
        help="the statistical database and release catalog as a web service and page (loopback by default)",
    )
    sv.add_argument("--store", required=True, help="a private bucket store (vpub statdb build)")
    sv.add_argument(
        "--verify-key",
        default=None,
        metavar="PEM",
        help="refuse the store unless store.json carries a valid Ed25519 signature by this key",
    )
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=whole_number(0, 65_535), default=8080)
    sv.add_argument(
        "--token-file",
        default=None,
        help="clients must send 'Authorization: Bearer <token>' (required off loopback)",
    )
    sv.add_argument(
        "--releases",
        default=None,
        help="a directory of releases to list, summarize, audit and estimate from",
    )
    sv.add_argument(
        "--max-body", type=whole_number(1), default=16_384, help="largest request body in bytes"
    )
    sv.add_argument(
        "--rate",
        type=float,
        default=50.0,
        help="requests a second per client address and process (0: no limit; default 50)",
    )
    sv.add_argument(
        "--burst",
        type=whole_number(1),
        default=100,
        help="requests a client may send at once (default 100)",
    )
    sv.add_argument(
        "--workers",
        type=whole_number(1),
        default=1,
        help="server processes, each with the store open (default 1)",
    )
    sv.set_defaults(func=cmd_serve)
