"""`vpub serve`: the statistical database as a web service (004 §1.2: "an online server
with a user-friendly interface ... displays the result in the user's web browser").

A Starlette application over one private store (`StatDB`). It answers only with
intervals, never with rows or group contents:
- `GET /health`; `GET /statdb/schema`: the QI attributes and the sensitive one, each
  with its domain's labels (what the store was built from, nothing about any tuple).
- `POST /statdb/count` with `{"where": "age between 30 and 50 and salary in (3, 4)",
  "method": "dyn-ana" | "dyn-gen"}` or `{"ranges": {"age": ["30", "50"]}, "sensitive":
  ["3", "4"], ...}` -> `{"lower", "upper", "method", "elapsed_ms"}`; the answer is
  logged in the store's private log with the client's address.
- Errors are JSON `{"error": ..., "field": ...}`: 400 for malformed JSON, 413 for a
  body over `max_body` bytes, 422 naming the field for a bad query, 401 without the
  bearer token when one is set (required off loopback: `check_binding`).
Decision: one `StatDB` is shared by every request; its kernels only read the store's
arrays, and each count runs in Starlette's thread pool (NumPy releases the GIL in its
loops), so requests proceed in parallel. Not yet here (issue 17): releases, rate
limits, the web page.
"""

from __future__ import annotations

import hmac
import json
import time
from ipaddress import ip_address

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..errors import SpecError, VpubError
from ..statdb.db import METHODS, StatDB

MAX_BODY = 16_384


def check_binding(host: str, token: str | None) -> None:
    """A server off loopback must require a token."""
    try:
        loopback = ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback and not token:
        raise SpecError(f"binding to {host} (not loopback) needs --token-file: every client must send the bearer token")  # fmt: skip


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "field": field}, status_code=status)


def _where(body: dict, db: StatDB) -> str:
    """The query as `--where` text, from `where` or from `ranges` and `sensitive`."""
    if "where" in body:
        if not isinstance(body["where"], str) or not body["where"].strip():
            raise _Bad("where must be a non-empty string", "where")
        return body["where"]
    ranges = body.get("ranges", {})
    if not isinstance(ranges, dict):
        raise _Bad("ranges must map QI attributes to [low, high]", "ranges")
    parts = []
    for a, bounds in ranges.items():
        if not (isinstance(bounds, list) and len(bounds) == 2):
            raise _Bad(f"ranges.{a} must be [low, high]", f"ranges.{a}")
        parts.append(f"{a} in ({', '.join(_quoted(v) for v in _span(db, a, bounds))})")
    chosen = body.get("sensitive")
    if chosen is not None:
        if not isinstance(chosen, list) or not chosen:
            raise _Bad("sensitive must be a non-empty list of labels", "sensitive")
        parts.append(f"{db.sensitive} in ({', '.join(_quoted(str(v)) for v in chosen)})")
    if not parts:
        raise _Bad("give where, or ranges and/or sensitive", "where")
    return " and ".join(parts)


def _span(db: StatDB, a: str, bounds: list) -> list[str]:
    if a not in db.qi:
        raise _Bad(f"{a} is not a QI attribute of this store ({', '.join(db.qi)})", f"ranges.{a}")
    labels = db.domains[a]
    try:
        lo, hi = labels.index(str(bounds[0])), labels.index(str(bounds[1]))
    except ValueError:
        raise _Bad(f"ranges.{a}: {bounds} are not both labels of {a}", f"ranges.{a}") from None
    if lo > hi:
        raise _Bad(f"ranges.{a}: {bounds} is an empty range", f"ranges.{a}")
    return labels[lo : hi + 1]


def _quoted(v: str) -> str:
    return f"'{v}'" if "'" not in v else f'"{v}"'


class _Bad(Exception):
    def __init__(self, message: str, field: str | None):
        super().__init__(message)
        self.field = field


def build_app(store: str, token: str | None = None, max_body: int = MAX_BODY) -> Starlette:
    """The application over one store (opened, so checked owner-only and intact, now)."""
    db = StatDB.open(store)

    async def read(request: Request) -> dict:
        if token is not None:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                raise _Bad("missing or wrong bearer token", "authorization")
        raw = await request.body()
        if len(raw) > max_body:
            raise _TooBig(f"the body has {len(raw):,} bytes, more than {max_body:,}")
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as e:
            raise _Malformed(f"malformed JSON: {e.msg} at character {e.pos}") from None
        if not isinstance(body, dict):
            raise _Malformed("the body must be a JSON object")
        return body

    async def count(request: Request) -> JSONResponse:
        try:
            body = await read(request)
            method = body.get("method", "dyn-ana")
            if method not in METHODS:
                raise _Bad(f"method must be one of {', '.join(METHODS)}", "method")
            where = _where(body, db)
            t0 = time.perf_counter()
            answer = await run_in_threadpool(db.count, where, method, False)
            elapsed = 1000 * (time.perf_counter() - t0)
        except _Bad as e:
            return _error(401 if e.field == "authorization" else 422, str(e), e.field)
        except _TooBig as e:
            return _error(413, str(e))
        except _Malformed as e:
            return _error(400, str(e))
        except VpubError as e:
            return _error(422, str(e), "where")
        client = request.client.host if request.client else "?"
        db.log([(f"[{client}] {where}", answer)])
        return JSONResponse({"lower": answer.low, "upper": answer.high, "method": method, "elapsed_ms": elapsed})  # fmt: skip

    async def schema(request: Request) -> JSONResponse:
        return JSONResponse({
            "qi": {a: db.domains[a] for a in db.qi}, "sensitive": {db.sensitive: db.domains[db.sensitive]},
            "methods": list(METHODS),
        })  # fmt: skip

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "rows": len(db.values)})

    return Starlette(routes=[
        Route("/health", health), Route("/statdb/schema", schema),
        Route("/statdb/count", count, methods=["POST"]),
    ])  # fmt: skip


class _TooBig(Exception):
    pass


class _Malformed(Exception):
    pass
