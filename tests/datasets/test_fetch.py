"""`vpub datasets adult --download` against a real HTTP server on loopback serving an
archive in the UCI layout (no header, a space after each comma, the test split's
comment line and trailing `.` on its labels), made here from the local copy."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest
from release_helpers import vpub

from vpub_spark.datasets.fetch import ADULT_SHA256, adult_directory
from vpub_spark.errors import DataError

ADULT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "adult"
pytestmark = pytest.mark.skipif(not ADULT.is_dir(), reason="shared/data/adult is missing")


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line]


def _uci_archive() -> bytes:
    """The local copy written back in the layout of the UCI archive."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, test in (("adult.data", False), ("adult.test", True)):
            rows = [
                ", ".join(r.split(",")) + ("." if test else "")
                for r in _lines(ADULT / f"{name}.csv")[1:]
            ]
            head = ["|1x3 Cross validator"] if test else []
            z.writestr(name, "\n".join([*head, *rows, ""]) + "\n")
    return buf.getvalue()


@pytest.fixture(scope="module")
def server():
    archive = _uci_archive()

    class Handler(http.server.BaseHTTPRequestHandler):
        hits = 0

        def do_GET(self):  # the http.server protocol names it
            Handler.hits += 1
            self.send_response(200)
            self.send_header("Content-Length", str(len(archive)))
            self.end_headers()
            self.wfile.write(archive)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/adult.zip"
    yield url, hashlib.sha256(archive).hexdigest(), Handler
    httpd.shutdown()


def test_download_prepares_the_layout_of_the_local_copy_once(server, tmp_path):
    url, digest, handler = server
    before = handler.hits
    got = adult_directory(url, digest, cache=tmp_path)
    for name in ("adult.data.csv", "adult.test.csv"):
        assert _lines(got / name) == _lines(ADULT / name)
    assert adult_directory(url, digest, cache=tmp_path) == got
    assert handler.hits == before + 1  # the second call read the cache
    assert [p.name for p in got.parent.iterdir()] == [got.name]  # no stage left


def test_other_bytes_than_the_pin_are_refused_and_nothing_is_cached(server, tmp_path):
    url, digest, _ = server
    with pytest.raises(DataError, match=f"SHA-256 {digest}, not the pinned {ADULT_SHA256}"):
        adult_directory(url, ADULT_SHA256, cache=tmp_path)
    assert not (tmp_path / "adult").exists()


def test_offline_the_error_names_path(tmp_path):
    closed = "http://127.0.0.1:9/adult.zip"  # the discard port: nothing listens on loopback
    with pytest.raises(DataError, match="--path DIR"):
        adult_directory(closed, ADULT_SHA256, cache=tmp_path)
    assert not (tmp_path / "adult").exists()


def test_the_command_uses_the_cache_without_the_network(tmp_path):
    cached = tmp_path / "cache" / "adult" / ADULT_SHA256[:16]
    cached.mkdir(parents=True)
    for name in ("adult.data.csv", "adult.test.csv"):
        (cached / name).write_text((ADULT / name).read_text())
    env = {**os.environ, "VPUB_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "adult"
    raw = tmp_path / "data" / "adult"
    cmd = vpub(
        "datasets",
        "adult",
        "--download",
        "--raw",
        str(raw),
        "--out",
        str(out),
        "--engine",
        "inprocess",
    )
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote 45223 rows" in " ".join(done.stdout.split())
    for name in ("adult.data.csv", "adult.test.csv"):
        assert (raw / name).read_bytes() == (ADULT / name).read_bytes()
    both = vpub("datasets", "adult", "--download", "--path", str(cached), "--out", str(out))
    refused = subprocess.run(both, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "not allowed with argument" in refused.stderr
