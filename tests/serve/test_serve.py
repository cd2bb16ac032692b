"""`vpub serve`: a real uvicorn server on loopback over a store and a release
directory. Answers equal the library's, under 1,000 requests from 100 concurrent
clients too; bad requests get 4xx errors naming the field, and every error (an unknown
path, a wrong method too) is JSON; no token, no answer; off loopback a token is required; the rate
limit answers 429; the catalog summarizes, audits and estimates; no answer carries a
row."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from release_helpers import workload_truths
from serve_helpers import call, running

from vpub_spark.errors import SpecError
from vpub_spark.release.reader import open_release
from vpub_spark.serve.app import ServeSettings
from vpub_spark.serve.limits import RateLimit, check_binding
from vpub_spark.statdb.db import LOG, METHODS, StatDB, where_text
from vpub_spark.statdb.workload import workload
from vpub_spark.utility.queries import estimate_count
from vpub_spark.utility.release_models import release_models
from vpub_spark.utility.risk import release_risk
from vpub_spark.utility.where import parse_where


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    token = tmp_path_factory.mktemp("token") / "token"
    token.write_text("s3cret\n")
    return str(token)


@pytest.fixture(scope="module")
def server(store, token_file):
    settings = ServeSettings(str(store[0]), str(store[1].parent), token_file, max_body=2048, rate=0)
    with running(settings) as url:
        yield url


def _texts(db: StatDB, count: int, seed: int) -> list[str]:
    sizes = {a: len(v) for a, v in db.domains.items()}
    return [
        where_text(db.meta, q) for q in workload(sizes, db.qi, db.sensitive, 2, 0.2, count, seed)
    ]


def test_1000_requests_from_100_concurrent_clients_none_lost_all_equal_to_the_library(
    server, store
):
    db = StatDB.open(store[0])
    texts = _texts(db, 250, 1)
    jobs = [(t, m) for t in texts for m in METHODS]  # 1,000 requests
    expected = {job: db.count(job[0], job[1], log=False) for job in jobs}
    log_file = store[0] / LOG
    lines = len(log_file.read_text().splitlines()) if log_file.exists() else 0
    with ThreadPoolExecutor(100) as pool:
        got = list(
            pool.map(
                lambda job: call(server, "/statdb/count", {"where": job[0], "method": job[1]}), jobs
            )
        )
    assert len(got) == 1000 and all(status == 200 for status, _ in got)
    for job, (_, body) in zip(jobs, got, strict=True):
        assert (body["lower"], body["upper"], body["method"]) == (
            expected[job].low,
            expected[job].high,
            job[1],
        )
        assert set(body) == {"lower", "upper", "method", "version", "elapsed_ms"}  # no rows
    log = (store[0] / LOG).read_text().splitlines()
    assert len(log) == lines + 1000
    assert json.loads(log[-1])["query"].startswith("[127.0.0.1] ")


def test_structured_queries_and_the_schema(server, store):
    db = StatDB.open(store[0])
    ages = db.domains["age"]
    status, body = call(
        server,
        "/statdb/count",
        {"ranges": {"age": [ages[3], ages[20]]}, "sensitive": ["j03", "j04"]},
    )
    expected = db.count(f"age between {ages[3]} and {ages[20]} and job in (j03, j04)", log=False)
    assert status == 200 and (body["lower"], body["upper"]) == (expected.low, expected.high)
    status, schema = call(server, "/statdb/schema")
    assert status == 200 and set(schema["qi"]) == set(db.qi)
    assert schema["sensitive"] == {"job": db.domains["job"]} and schema["rows"] == len(db.values)
    assert call(server, "/health", token=None) == (200, {"status": "ok"})


@pytest.mark.parametrize(
    "body, raw, status, field",
    [
        (None, b"{not json", 400, None),
        (None, b"[1, 2]", 400, None),
        (None, b"\xff\xfe", 400, None),
        ({"where": "weight = 3"}, None, 422, "where"),
        ({"where": ""}, None, 422, "where"),
        ({"where": "zip = 15", "method": "magic"}, None, 422, "method"),
        ({"where": "zip = 15", "method": "ran-pert"}, None, 422, "method"),
        ({"ranges": {"age": ["9999", "1"]}}, None, 422, "ranges.age"),
        ({"ranges": {"age": ["69", "20"]}}, None, 422, "ranges.age"),  # an empty range
        ({"ranges": {"weight": ["1", "2"]}}, None, 422, "ranges.weight"),
        ({"ranges": {"age": "all"}}, None, 422, "ranges.age"),
        ({"ranges": {"age": [20, 30]}}, None, 422, "ranges.age"),  # labels are strings
        ({"ranges": {"job": ["j01", "j02"]}}, None, 422, "ranges.job"),  # not a QI attribute
        ({"ranges": ["age"]}, None, 422, "ranges"),
        ({"sensitive": []}, None, 422, "sensitive"),
        ({"sensitive": ["nobody"]}, None, 422, "sensitive"),
        ({"sensitive": [3]}, None, 422, "sensitive"),
        ({"sensitive": "j01"}, None, 422, "sensitive"),
        ({}, None, 422, "where"),
        (None, b'{"where": "' + b"x" * 5000 + b'"}', 413, None),
    ],
)
def test_bad_requests_get_errors_naming_the_field(server, body, raw, status, field):
    got, answer = call(server, "/statdb/count", body, raw=raw)
    assert got == status and answer.get("field") == field and answer["error"]


def _raw(url: str, path: str, method: str):
    """(status, headers, JSON body) of a bodiless request; fails unless the body is JSON."""
    req = urllib.request.Request(
        url + path, method=method, headers={"Authorization": "Bearer s3cret"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, json.loads(r.read())
    except urllib.error.HTTPError as e:
        assert e.headers["Content-Type"] == "application/json", (path, e.headers["Content-Type"])
        return e.code, e.headers, json.loads(e.read())


@pytest.mark.parametrize(
    "method, path, status, allow",
    [
        ("GET", "/statdb/count", 405, "POST"),
        ("PUT", "/statdb/count", 405, "POST"),
        ("POST", "/statdb/schema", 405, "GET, HEAD"),
        ("DELETE", "/releases/r", 405, "GET, HEAD"),
        ("GET", "/releases/r/estimate", 405, "POST"),
        ("GET", "/nope", 404, None),
        ("POST", "/nope", 404, None),
        ("GET", "/static/app.js", 404, None),
        ("GET", "/statdb", 404, None),
        ("GET", "/releases/r/x/y", 404, None),
    ],
)
def test_unknown_paths_and_wrong_methods_answer_json(server, method, path, status, allow):
    got, headers, body = _raw(server, path, method)
    assert got == status and set(body) == {"error", "field"} and body["field"] is None
    assert path in body["error"]
    assert headers.get("Allow") == allow  # sorted, so the same in every process
    if allow:
        assert f"use {allow}" in body["error"]


def test_the_page_files_are_served_at_their_paths(server):
    for path, kind in [
        ("/", "text/html"),
        ("/index.html", "text/html"),
        ("/app.js", "javascript"),
        ("/style.css", "text/css"),
    ]:
        with urllib.request.urlopen(server + path, timeout=10) as r:
            assert r.status == 200 and kind in r.headers["Content-Type"] and r.read()


def test_huge_ranges_answer_the_whole_table(server, store):
    db = StatDB.open(store[0])
    ranges = {a: [db.domains[a][0], db.domains[a][-1]] for a in db.qi}
    status, body = call(server, "/statdb/count", {"ranges": ranges})
    assert status == 200 and body["lower"] == body["upper"] == len(db.values)


def test_no_token_no_answer_and_tokens_off_loopback(server):
    for path, body in [
        ("/statdb/count", {"where": "zip = 15"}),
        ("/statdb/schema", None),
        ("/releases", None),
    ]:
        assert call(server, path, body, token=None)[0] == 401
        assert call(server, path, body, token="wrong") == (
            401,
            {"error": "missing or wrong bearer token", "field": "authorization"},
        )
    with pytest.raises(SpecError, match="needs --token-file"):
        check_binding("0.0.0.0", None)
    check_binding("0.0.0.0", "t")
    check_binding("127.0.0.1", None)


def test_the_catalog_summarizes_audits_and_estimates(server, store):
    status, listing = call(server, "/releases")
    assert status == 200 and [r["id"] for r in listing["releases"]] == ["r"]
    assert listing["releases"][0]["guarantee"] == "m-invariance (m = 4) on 2 rules Q -> S"
    status, summary = call(server, "/releases/r")
    assert status == 200 and summary["audit"]["passed"] and summary["audit"]["checks"] > 5
    assert [t["kind"] for t in summary["tables"]] and "config" not in summary
    rel = open_release(store[1])
    risk = release_risk(rel)  # each table's risk figures, as the library computes them
    assert summary["risk"].keys() == risk.keys() and all(
        summary["risk"][t] == pytest.approx(risk[t]) for t in risk
    )
    models, domains = release_models(rel)
    where = "age between 30 and 50"
    status, est = call(server, "/releases/r/estimate", {"where": where})
    assert status == 200 and est["rows"] == rel.manifest["source"]["rows"]
    assert est["estimate"] == pytest.approx(
        estimate_count(models, parse_where(where, domains), est["rows"], domains)
    )
    assert call(server, "/releases/nope")[0] == 404
    assert call(server, "/releases/..%2F..%2Fetc")[0] == 404
    assert call(server, "/releases/r/estimate", {"where": "weight = 1"})[1]["field"] == "where"
    assert call(server, "/releases/r/estimate", {})[1]["field"] == "where"


def test_a_release_report_is_the_readers_view(server, store):
    """`/releases/{id}/report`: `vpub report`'s page without a source (no owner's view,
    nothing private), allowed to load nothing; behind the token like every endpoint."""
    from vpub_spark.reporting.facts import release_facts
    from vpub_spark.reporting.html import release_page

    req = urllib.request.Request(server + "/releases/r/report")
    req.add_header("Authorization", "Bearer s3cret")
    with urllib.request.urlopen(req, timeout=60) as r:
        page, headers = r.read().decode(), r.headers
    assert headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert page == release_page(release_facts(store[1]))
    assert "<h1>Release report: r</h1>" in page and "owner's view" not in page.replace(
        "the reader's view", ""
    )
    assert str(store[1].parent) not in page and 'seed":' not in page
    assert call(server, "/releases/nope/report")[0] == 404
    assert call(server, "/releases/r/report", token=None)[0] == 401


def test_openapi_and_the_page_are_served(server):
    from vpub_spark.serve.app import openapi_document

    status, spec = call(server, "/openapi.json", token=None)
    assert status == 200 and spec["openapi"].startswith("3.")
    # the document the HTTP API reference is made from, as JSON (status codes as strings)
    assert spec == json.loads(json.dumps(openapi_document()))
    assert {
        "/statdb/count",
        "/statdb/schema",
        "/releases",
        "/releases/{id}",
        "/releases/{id}/estimate",
        "/health",
    } <= set(spec["paths"])
    assert "requestBody" in spec["paths"]["/statdb/count"]["post"]
    with urllib.request.urlopen(server + "/", timeout=10) as r:
        page = r.read().decode()
    assert "app.js" in page and "http" not in page.split("<body>")[1].split("openapi")[0]  # no CDN


def test_rate_limits_answer_429_with_retry_after(store):
    with running(ServeSettings(str(store[0]), rate=1, burst=3)) as url:
        statuses = [
            call(url, "/statdb/count", {"where": "zip = 15"}, token=None)[0] for _ in range(6)
        ]
        assert statuses[:3] == [200, 200, 200] and 429 in statuses[3:]
        req = urllib.request.Request(url + "/statdb/schema")
        try:
            urllib.request.urlopen(req, timeout=10)
            raise AssertionError("expected 429")
        except urllib.error.HTTPError as e:
            assert e.code == 429 and int(e.headers["Retry-After"]) >= 1
    now = [100.0]  # the bucket read on a clock of the test's own, not the machine's
    limit = RateLimit(2, 1, clock=lambda: now[0])
    assert limit.wait("a") == 0 and limit.wait("a") == 0.5 and limit.wait("b") == 0
    now[0] += 0.25  # half a token back: a quarter second more to wait
    assert limit.wait("a") == 0.25
    now[0] += 0.25
    assert limit.wait("a") == 0 and limit.wait("a") == 0.5
    now[0] += 61  # idle clients are dropped after a minute; a returning one starts full
    assert limit.wait("b") == 0 and list(limit._buckets) == ["b"]
    with pytest.raises(SpecError, match="burst"):
        RateLimit(1, 0)


def test_bench_serve_checks_every_answer(store, tmp_path):
    from vpub_bench.bench_statdb import BenchServe, bench_serve

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = bench_serve(
        BenchServe(str(store[0]), clients=4, queries=40, rate=100, port=port, out=str(tmp_path))
    )
    for phase in ("paced", "closed"):  # every answer equal to the library's; no timing asserted
        assert r[phase]["equal_to_library"] == r[phase]["queries"] == 40
    db = StatDB.open(store[0])  # and the library's answers hold the source table's counts
    for text, truth in workload_truths(db, store[2], 2, 0.06, 40, 1):
        answer = db.count(text, "dyn-ana", log=False)
        assert answer.low <= truth <= answer.high, (text, truth, answer)
    written = json.loads((tmp_path / f"{store[0].name}.json").read_text())
    assert {k: written[k] for k in ("paced", "closed")} == {k: r[k] for k in ("paced", "closed")}
