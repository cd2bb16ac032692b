"""`vpub serve`: the statistical database and the release catalog as a web service and a
web page (004 §1.2): a Starlette application over one private store (`StatDB`) and,
optionally, a directory of releases. The endpoints and their JSON are described at
`/openapi.json` (from the docstrings below); the page (`static/`) is served at `/`.

Errors, access and decisions: docs/tutorials/serve.md; docs/explanation/performance.md.
"""

from __future__ import annotations

import hmac
import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.schemas import SchemaGenerator

from ..errors import SpecError, VpubError
from ..model import UNSAFE_ASSIGN
from ..release.stores.store import STORE_FILE
from ..release.stores.versions import versions_of
from ..reporting.html import POLICY
from ..statdb.db import METHODS, StatDB
from .catalog import Catalog, UnknownRelease
from .limits import RateLimit
from .openapi import BASE
from .queries import Bad, query_of

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
    verify_key: str | None = None  # refuse the store unless store.json is signed by this key

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


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (an unknown path, a wrong method) in the same JSON."""
    assert isinstance(exc, HTTPException)
    path, headers = request.url.path, dict(exc.headers or {})
    if exc.status_code == 404:
        message = f"no such path: {path}"
    elif exc.status_code == 405:
        headers["Allow"] = ", ".join(sorted(m.strip() for m in headers.get("Allow", "").split(",")))
        message = f"{request.method} is not allowed on {path}; use {headers['Allow']}"
    else:
        message = str(exc.detail)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=headers)
    body = {"error": message, "field": None}
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"error": "internal server error", "field": None}, status_code=500)


class Api:
    """The endpoints over one store and an optional catalog."""

    def __init__(self, settings: ServeSettings):
        self.settings, self.token = settings, settings.token()
        self._seal = self._stamp()
        self._db = StatDB.open(settings.store, settings.verify_key)
        self._reopen = threading.Lock()
        self.catalog = Catalog(Path(settings.releases)) if settings.releases else None
        self.limit = RateLimit(settings.rate, settings.burst)

    def _stamp(self) -> tuple[int, int]:
        st = (Path(self.settings.store) / STORE_FILE).stat()
        return st.st_mtime_ns, st.st_size

    @property
    def db(self) -> StatDB:
        """The store as it is now: a new version (`vpub statdb update`) or a new marginal
        rewrites store.json, and the next request reopens the store (checked as at start)."""
        if self._stamp() != self._seal:
            with self._reopen:
                seal = self._stamp()
                if seal != self._seal:
                    try:
                        self._db = StatDB.open(self.settings.store, self.settings.verify_key)
                    except VpubError as e:
                        raise ApiError(
                            503, f"the store changed and cannot be opened: {e}"
                        ) from None
                    self._seal = seal
        return self._db

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
        return JSONResponse(
            {
                "qi": {a: db.domains[a] for a in db.qi},
                "sensitive": {db.sensitive: db.domains[db.sensitive]},
                "rows": db.rows,
                "m": db.meta.get("m"),
                "posterior": db.meta.get("assign", "random") != UNSAFE_ASSIGN,
                "methods": list(METHODS),
                "versions": [e["version"] for e in versions_of(db.meta)],
            }
        )

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
        db = self.db  # one store for the whole request
        try:
            query, where = query_of(body, db)
        except Bad as e:
            raise ApiError(422, str(e), e.field) from None
        version = body.get("version")
        if version is not None and not isinstance(version, int | str):
            raise ApiError(422, "version must be a version number or id", "version")
        t0 = time.perf_counter()
        try:
            answer = db.count(query, method, log=False, version=version)
        except SpecError as e:
            field = "version" if "no version" in str(e) else "method"
            raise ApiError(422, str(e), field) from None
        elapsed = 1000 * (time.perf_counter() - t0)
        db.log([(f"[{self._client(request)}] {where}", answer)])
        return JSONResponse(
            {
                "lower": answer.low,
                "upper": answer.high,
                "method": method,
                "version": answer.version,
                "elapsed_ms": elapsed,
            }
        )

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

    async def report(self, request: Request) -> Response:
        """One release's report.
        ---
        summary: vpub report's page of one release, the reader's view (no source, nothing private)
        parameters: [{name: id, in: path, required: true, schema: {type: string}}]
        responses: {200: {description: a self-contained HTML page, content: {text/html: {schema: {type: string}}}}, 404: {description: unknown release}}
        """
        self.guard(request)
        rid = request.path_params["id"]
        try:
            page = await run_in_threadpool(self._catalog().report, rid)
        except UnknownRelease as e:
            raise ApiError(404, str(e), "id") from None
        return HTMLResponse(page, headers={"Content-Security-Policy": POLICY})

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
            est, rows = await run_in_threadpool(
                self._catalog().estimate, request.path_params["id"], where
            )
        except UnknownRelease as e:
            raise ApiError(404, str(e), "id") from None
        except VpubError as e:
            raise ApiError(422, str(e), "where") from None
        elapsed = 1000 * (time.perf_counter() - t0)
        return JSONResponse({"estimate": est, "rows": rows, "elapsed_ms": elapsed})

    def routes(self) -> list[Route]:
        return [Route(path, getattr(self, name), methods=m) for path, name, m in ENDPOINTS]


ENDPOINTS = (  # (path, Api method, HTTP methods)
    ("/health", "health", None),
    ("/statdb/schema", "schema", None),
    ("/statdb/count", "count", ["POST"]),
    ("/releases", "releases", None),
    ("/releases/{id}", "release", None),
    ("/releases/{id}/report", "report", None),
    ("/releases/{id}/estimate", "estimate", ["POST"]),
)


def openapi_document() -> dict:
    """The OpenAPI document of the endpoints, from their docstrings: no store needed
    (the docs' HTTP API reference is generated from it)."""
    routes: list[BaseRoute] = [
        Route(path, getattr(Api, name), methods=m) for path, name, m in ENDPOINTS
    ]
    return SchemaGenerator(BASE).get_schema(routes)


def build_app(settings: ServeSettings) -> Starlette:
    """The application (the store opened, so checked owner-only and intact, now)."""
    api = Api(settings)
    spec = openapi_document()

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(spec)

    routes = [*api.routes(), Route("/openapi.json", openapi, include_in_schema=False)]
    routes += _static_routes()
    handlers = {ApiError: _api_error, HTTPException: _http_error, Exception: _internal_error}
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.state.signed_by = api.db.meta.get("signed_by")  # the command says when it went unchecked
    return app


def _static_routes() -> list[Route]:
    """The page's files, each at its own path (`/` is index.html), so any other path
    is the router's JSON 404 and a wrong method on an endpoint its JSON 405."""

    def serve(file: Path):
        async def endpoint(request: Request) -> FileResponse:
            return FileResponse(file)

        return endpoint

    files = sorted(p for p in STATIC.iterdir() if p.is_file())
    routes = [Route(f"/{p.name}", serve(p), include_in_schema=False) for p in files]
    return [Route("/", serve(STATIC / "index.html"), include_in_schema=False), *routes]


def app_from_env() -> Starlette:
    """The application of a `--workers` process: settings from the environment."""
    return build_app(ServeSettings(**json.loads(os.environ[ENV])))


def settings_env(settings: ServeSettings) -> str:
    return json.dumps(asdict(settings))
