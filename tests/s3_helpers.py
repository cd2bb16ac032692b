"""A real S3-compatible server on loopback for the object-store tests: moto's standalone
server (`moto[server]`, a test dependency: pure Python, installs from the package
registry with no binary download, and implements conditional writes, If-None-Match,
which the commit protocol relies on)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator

ACCESS = {
    "AWS_ACCESS_KEY_ID": "vpub-test",
    "AWS_SECRET_ACCESS_KEY": "vpub-test-secret",
    "AWS_REGION": "us-east-1",
}


def free_port() -> int:
    """A TCP port free on loopback now (the test servers bind it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_environment() -> dict[str, str]:
    """The environment that points pyarrow and boto3 at a server on a free loopback port.
    conftest sets it when the test session starts, before any Spark JVM, whose Python
    workers (the upload tasks) inherit the environment the JVM was launched with."""
    return ACCESS | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}


@contextlib.contextmanager
def s3_server(port: int | None = None) -> Iterator[dict[str, str]]:
    """Start moto_server on `port` (default: a free one) on loopback; yield the
    environment that points pyarrow and boto3 at it (endpoint, region, credentials)."""
    port = port or free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(endpoint, timeout=1)
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("moto_server did not start")
        yield ACCESS | {"AWS_ENDPOINT_URL": endpoint}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def new_bucket() -> str:
    """A fresh bucket on the server the environment points at; its s3:// URI."""
    import boto3

    name = f"vpub-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}"
