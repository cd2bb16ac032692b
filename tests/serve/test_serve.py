"""`vpub serve` (issue 17, the API part): a real uvicorn server on loopback over a
store; answers equal the library's, under concurrent requests too; bad requests get
4xx errors naming the field; no token, no answer; off loopback, a token is required."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import uvicorn

from vpub_spark.errors import SpecError
from vpub_spark.serve.app import build_app, check_binding
from vpub_spark.statdb.db import LOG, StatDB
from vpub_spark.statdb.workload import workload


@pytest.fixture(scope="module")
def server(store):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = build_app(str(store[0]), token="s3cret", max_body=2048)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    assert srv.started
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


def _post(url: str, body, token: str | None = "s3cret", raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url + "/statdb/count", data=data, method="POST")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_counts_equal_the_library_under_concurrent_requests(server, store):
    db = StatDB.open(store[0])
    sizes = {a: len(v) for a, v in db.domains.items()}
    from vpub_spark.statdb.db import where_text

    texts = [where_text(db.meta, q) for q in workload(sizes, db.qi, db.sensitive, 2, 0.2, 50, 1)]
    expected = {(t, m): db.count(t, m, log=False) for t in texts for m in ("dyn-ana", "dyn-gen")}
    jobs = [(t, m) for t in texts for m in ("dyn-ana", "dyn-gen")] * 2  # 200 requests
    with ThreadPoolExecutor(32) as pool:
        got = list(pool.map(lambda job: _post(server, {"where": job[0], "method": job[1]}), jobs))
    assert len(got) == len(jobs) and all(status == 200 for status, _ in got)
    for (t, m), (_, body) in zip(jobs, got, strict=True):
        assert (body["lower"], body["upper"], body["method"]) == (expected[(t, m)].low, expected[(t, m)].high, m)  # fmt: skip
    last = json.loads((store[0] / LOG).read_text().splitlines()[-1])
    assert last["query"].startswith("[127.0.0.1] ")


def test_structured_queries_and_the_schema(server, store):
    db = StatDB.open(store[0])
    ages = db.domains["age"]
    status, body = _post(server, {"ranges": {"age": [ages[3], ages[20]]}, "sensitive": ["j03", "j04"]})  # fmt: skip
    expected = db.count(f"age between {ages[3]} and {ages[20]} and job in (j03, j04)", log=False)
    assert status == 200 and (body["lower"], body["upper"]) == (expected.low, expected.high)
    with urllib.request.urlopen(server + "/statdb/schema", timeout=10) as r:
        schema = json.loads(r.read())
    assert set(schema["qi"]) == set(db.qi) and schema["sensitive"] == {"job": db.domains["job"]}
    with urllib.request.urlopen(server + "/health", timeout=10) as r:
        assert json.loads(r.read())["status"] == "ok"


@pytest.mark.parametrize(
    "body, raw, status, field",
    [
        (None, b"{not json", 400, None),
        (None, b"[1, 2]", 400, None),
        ({"where": "weight = 3"}, None, 422, "where"),
        ({"where": ""}, None, 422, "where"),
        ({"where": "zip = 15", "method": "magic"}, None, 422, "method"),
        ({"ranges": {"age": ["9999", "1"]}}, None, 422, "ranges.age"),
        ({"ranges": {"weight": ["1", "2"]}}, None, 422, "ranges.weight"),
        ({"ranges": {"age": "all"}}, None, 422, "ranges.age"),
        ({"sensitive": []}, None, 422, "sensitive"),
        ({}, None, 422, "where"),
        (None, b'{"where": "' + b"x" * 5000 + b'"}', 413, None),
    ],
)
def test_bad_requests_get_errors_naming_the_field(server, body, raw, status, field):
    got, answer = _post(server, body, raw=raw)
    assert got == status and answer.get("field") == field and answer["error"]


def test_no_token_no_answer_and_tokens_off_loopback(server):
    assert _post(server, {"where": "zip = 15"}, token=None)[0] == 401
    assert _post(server, {"where": "zip = 15"}, token="wrong")[0] == 401
    with pytest.raises(SpecError, match="needs --token-file"):
        check_binding("0.0.0.0", None)
    check_binding("0.0.0.0", "t")
    check_binding("127.0.0.1", None)


def test_bench_serve_checks_every_answer(store, tmp_path):
    from vpub_spark.experiments.bench_statdb import BenchServe, bench_serve

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = bench_serve(BenchServe(str(store[0]), clients=4, queries=20, port=port, out=str(tmp_path)))
    assert r["equal_to_library"] == 20 and 0 < r["p50_ms"] <= r["p99_ms"] and r["queries_per_s"] > 0
