"""`vpub serve`: the statistical database and the release catalog as a web service and
a web page (004 §1.2: "an online server with a user-friendly interface ... displays the
result in the user's web browser"; issue 17).

A Starlette application over one private store (`StatDB`) and, optionally, a directory
of releases (`Catalog`). Every answer is an interval or an estimate, never a row or a
group's contents. The endpoints and their JSON are described at `/openapi.json` (from
the docstrings below); the page (`static/`) is served at `/`.

Errors are JSON `{"error": ..., "field": ...}`: 400 malformed JSON, 401 without the
bearer token when one is set (required off loopback: `limits.check_binding`), 404 an
unknown release, 413 a body over `max_body` bytes, 422 naming the field of a bad
query, 429 over the client's rate (`Retry-After` says when to come back). Every count
is appended to the store's private query log with the client's address.

Decisions: one `StatDB` is shared by the requests of a process and read only, and a
count runs inline on the event loop (0.6 ms at 600k rows; handing it to a thread cost
more than it saved); `--workers N` runs N processes, each with the store open, which is
how the server uses more than one core.
"""

from __future__ import annotations

import hmac
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.schemas import SchemaGenerator
from starlette.staticfiles import StaticFiles

from ..errors import VpubError
from ..statdb.db import METHODS, StatDB
from .catalog import Catalog, UnknownRelease
from .limits import RateLimit
from .openapi import BASE
from .queries import Bad, where_of

MAX_BODY = 16_384
STATIC = Path(__file__).parent / "static"
ENV = "VPUB_SERVE"  # the settings, as JSON, for `--workers N` processes


@dataclass(frozen=True)
class ServeSettings:
    """What `vpub serve` serves and how much it lets in."""

    store: str
    releases: str | None = None
    token_file: str | None = None
    max_body: int = MAX_BODY
    rate: float = 50.0  # requests a second per client address (0: no limit)
    burst: int = 100

    def token(self) -> str | None:
        if self.token_file is None:
            return None
        token = Path(self.token_file).read_text().strip()
        if not token:
            raise VpubError(f"{Path(self.token_file).name}: the token file is empty")
        return token


class ApiError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None, headers=None):
        super().__init__(message)
        self.status, self.field, self.headers = status, field, headers


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    body = {"error": str(exc), "field": exc.field}
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)


class Api:
    """The endpoints over one store and an optional catalog."""

    def __init__(self, settings: ServeSettings):
        self.settings, self.token = settings, settings.token()
        self.db = StatDB.open(settings.store)
        self.catalog = Catalog(Path(settings.releases)) if settings.releases else None
        self.limit = RateLimit(settings.rate, settings.burst)

    def _client(self, request: Request) -> str:
        return request.client.host if request.client else "?"

    def guard(self, request: Request) -> None:
        """The bearer token, then the client's rate."""
        if self.token is not None:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                raise ApiError(401, "missing or wrong bearer token", "authorization")
        wait = self.limit.wait(self._client(request))
        if wait:
            message = f"over {self.settings.rate:g} requests/s; retry in {wait:.2f} s"
            raise ApiError(429, message, headers={"Retry-After": str(max(1, round(wait)))})

    async def body(self, request: Request) -> dict:
        """The guarded request's JSON object, at most `max_body` bytes."""
        self.guard(request)
        raw = b""
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > self.settings.max_body:
                raise ApiError(413, f"the body is over {self.settings.max_body:,} bytes")
        try:
            body = json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ApiError(400, f"malformed JSON: {e}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    async def health(self, request: Request) -> JSONResponse:
        """Liveness.
        ---
        summary: The server is up
        responses: {200: {description: '{"status": "ok"}'}}
        """
        return JSONResponse({"status": "ok"})

    async def schema(self, request: Request) -> JSONResponse:
        """The store's attributes.
        ---
        summary: The QI attributes and the sensitive one, each with its domain's labels
        responses: {200: {description: 'QI domains, the sensitive domain, rows, methods',
          content: {application/json: {schema: {$ref: '#/components/schemas/Schema'}}}}}
        """
        self.guard(request)
        db = self.db
        return JSONResponse({
            "qi": {a: db.domains[a] for a in db.qi}, "sensitive": {db.sensitive: db.domains[db.sensitive]},
            "rows": len(db.values), "m": db.meta.get("m"), "methods": list(METHODS),
        })  # fmt: skip

    async def count(self, request: Request) -> JSONResponse:
        """A counting query's result interval.
        ---
        summary: The result interval of COUNT(*) WHERE ... (004 Definition 9)
        requestBody: {required: true, content: {application/json: {schema: {$ref: '#/components/schemas/CountQuery'}}}}
        responses:
          200: {description: the interval, content: {application/json: {schema: {$ref: '#/components/schemas/Interval'}}}}
          400: {description: malformed JSON}
          413: {description: body too large}
          422: {description: a bad query; field names the part}
          429: {description: over the client's rate}
        """
        body = await self.body(request)
        method = body.get("method", "dyn-ana")
        if method not in METHODS:
            raise ApiError(422, f"method must be one of {', '.join(METHODS)}", "method")
        try:
            where = where_of(body, self.db)
            t0 = time.perf_counter()
            answer = self.db.count(where, method, log=False)
        except Bad as e:
            raise ApiError(422, str(e), e.field) from None
        except VpubError as e:
            raise ApiError(422, str(e), "where") from None
        elapsed = 1000 * (time.perf_counter() - t0)
        self.db.log([(f"[{self._client(request)}] {where}", answer)])
        return JSONResponse({"lower": answer.low, "upper": answer.high, "method": method, "elapsed_ms": elapsed})  # fmt: skip

    def _catalog(self) -> Catalog:
        if self.catalog is None:
            raise ApiError(404, "this server has no release catalog (vpub serve --releases DIR)")
        return self.catalog

    async def releases(self, request: Request) -> JSONResponse:
        """The release catalog.
        ---
        summary: Every committed release (id, time, method, guarantee, rows, tables)
        responses: {200: {description: a list of releases}, 404: {description: no catalog}}
        """
        self.guard(request)
        return JSONResponse({"releases": await run_in_threadpool(self._catalog().listing)})

    async def release(self, request: Request) -> JSONResponse:
        """One release's summary.
        ---
        summary: Tables, guarantee, GNF verdicts, the audit at publishing and the server's own audit
        parameters: [{name: id, in: path, required: true, schema: {type: string}}]
        responses: {200: {description: the summary}, 404: {description: unknown release}}
        """
        self.guard(request)
        rid = request.path_params["id"]
        try:
            return JSONResponse(await run_in_threadpool(self._catalog().release, rid))
        except UnknownRelease as e:
            raise ApiError(404, str(e), "id") from None

    async def estimate(self, request: Request) -> JSONResponse:
        """An estimate from a release.
        ---
        summary: vpub query's estimate of COUNT(*) WHERE ... from one release (000 §6.1)
        parameters: [{name: id, in: path, required: true, schema: {type: string}}]
        requestBody: {required: true, content: {application/json: {schema: {$ref: '#/components/schemas/EstimateQuery'}}}}
        responses: {200: {description: '{"estimate", "rows", "elapsed_ms"}'}, 404: {description: unknown release}, 422: {description: a bad query}}
        """
        body = await self.body(request)
        where = body.get("where")
        if not isinstance(where, str) or not where.strip():
            raise ApiError(422, "where must be a non-empty string", "where")
        t0 = time.perf_counter()
        try:
            est, rows = await run_in_threadpool(self._catalog().estimate, request.path_params["id"], where)  # fmt: skip
        except UnknownRelease as e:
            raise ApiError(404, str(e), "id") from None
        except VpubError as e:
            raise ApiError(422, str(e), "where") from None
        elapsed = 1000 * (time.perf_counter() - t0)
        return JSONResponse({"estimate": est, "rows": rows, "elapsed_ms": elapsed})

    def routes(self) -> list:
        return [
            Route("/health", self.health),
            Route("/statdb/schema", self.schema),
            Route("/statdb/count", self.count, methods=["POST"]),
            Route("/releases", self.releases),
            Route("/releases/{id}", self.release),
            Route("/releases/{id}/estimate", self.estimate, methods=["POST"]),
        ]


def build_app(settings: ServeSettings) -> Starlette:
    """The application (the store opened, so checked owner-only and intact, now)."""
    api = Api(settings)
    spec = SchemaGenerator(BASE).get_schema(api.routes())

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(spec)

    routes = [*api.routes(), Route("/openapi.json", openapi, include_in_schema=False)]
    routes.append(Mount("/", StaticFiles(directory=STATIC, html=True)))
    return Starlette(routes=routes, exception_handlers={ApiError: _api_error})


def app_from_env() -> Starlette:
    """The application of a `--workers` process: settings from the environment."""
    return build_app(ServeSettings(**json.loads(os.environ[ENV])))


def settings_env(settings: ServeSettings) -> str:
    return json.dumps(asdict(settings))
