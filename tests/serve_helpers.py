"""A real `vpub serve` (uvicorn) on loopback for the server's tests, and HTTP helpers."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import uvicorn

from vpub_spark.serve.app import ServeSettings, build_app

# the labels of the store `labels_store` (tests/serve/conftest.py), as a census extract's
EDUCATION = [
    "Bachelors degree(BA AB BS)",
    "Children",
    "Masters degree(MA MS)",
    "nan",
    "Some, college",
]
ORIGIN = ["Mexican (Mexicano)", "Puerto Rican", 'O\'Brien, "Jr"', "[none]", "Ünïcödé"]
JOB = ["Adm-clerical", "Craft (repair)", "Sales, retail", "it's", "x=y", "nan", "and"]
BIRTH = ["Mexico", "Puerto-Rico", "Outlying-US(Guam-USVI-etc)"]  # in the data, never served


@contextlib.contextmanager
def running(settings: ServeSettings):
    """`vpub serve`'s application on a free loopback port, in a thread; yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(
        build_app(settings), host="127.0.0.1", port=port, log_level="warning", backlog=2048
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    assert server.started, "the server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def call(url: str, path: str, body=None, token: str | None = "s3cret", raw: bytes | None = None):
    """(status, JSON) of GET `path`, or POST when `body` or `raw` is given."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method="GET" if data is None else "POST")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())  # every error is JSON
