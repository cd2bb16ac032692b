"""Releases on an S3-compatible object store (issue 19): `s3://bucket/prefix` outputs and
inputs through `pyarrow.fs` (AWS, MinIO, Ceph, R2), and a commit protocol that needs no
rename.

Where to connect comes from the standard environment only (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`), read by
pyarrow and boto3 themselves, so no credential is ever in a config, a manifest or a log.

Publishing to `s3://.../<release_id>` (`remote_stage`):
1. **Lock.** The run creates `<release_id>/_LOCK` (host, process, run id) with a
   conditional create (`If-None-Match: *`, S3's compare-and-set, through boto3, since
   pyarrow cannot send it). A second run for the same release fails at once, naming the
   holder, before it writes anything. Decision: a lock object rather than a conditional
   `_SUCCESS` alone, because two runs writing the same part keys would interleave
   their parts before either reached `_SUCCESS`. `_SUCCESS` is still created
   conditionally, so a run whose lock was wrongly broken still cannot commit over
   another.
2. **Stale locks and aborted runs.** A lock whose process is gone (same host) or older
   than the lease (`VPUB_S3_LEASE_S`, default 6 h) is broken by the next run, which
   then deletes every object of the uncommitted release: an aborted run's parts.
3. **Stage, audit, upload.** The release is built and audited in a local staging
   directory exactly as for a local output (`VPUB_SCRATCH`, default the system's
   temporary directory; on a cluster it must be shared, like any local output). Its
   parts are uploaded under the release's prefix by the engine's tasks (on Spark the
   executors upload through the same `pyarrow.fs` code; they need the same `AWS_*`
   environment, e.g. `spark.executorEnv.*` on a cluster), each uploaded object is read
   back and its SHA-256 compared with the manifest's, then the manifest, then
   `_SUCCESS` last. Until `_SUCCESS` exists, readers and the auditor ignore the release.
4. **Overwrite** deletes the old `_SUCCESS` first (the release disappears for readers),
   then its objects, then uploads.

Private stores on S3 (`mirrored`, e.g. `marginals.state: s3://bucket/private/store`): under
the same `_LOCK` protocol the store is downloaded into a private local directory (mode
700), used and changed there exactly as a local store, then synchronized back: new and
changed files first, files the run removed deleted, the index (`store.json`) last, so
a reader sees either the old index or the new one and every file either names. An
aborted first run leaves objects without an index; the next run deletes them. Owner-
only permissions cannot be set on objects: the bucket's policy must keep the store's
prefix private (it is never inside the output root, checked).

Reading (`fetched`): a committed release is downloaded once per process into a private
temporary directory and read and audited there, so the auditor checks the bytes the
object store holds. Inputs (`local_input`) are downloaded the same way.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyarrow as pa

from ..errors import DataError, StorageError, VpubError
from .layout import MANIFEST, SUCCESS

SCHEME = "s3://"
LOCK = "_LOCK"
LEASE_S = 6 * 3600.0


def is_remote(path: str | Path | None) -> bool:
    return isinstance(path, str) and path.startswith(SCHEME)


def base_name(path: str | Path) -> str:
    """The last component of a local path or an `s3://` URI."""
    return str(path).rstrip("/").rsplit("/", 1)[-1]


def split(uri: str) -> tuple[str, str]:
    """`s3://bucket/key/...` -> (bucket, key without slashes at the ends)."""
    rest = uri[len(SCHEME) :].strip("/")
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise VpubError(f"{uri}: no bucket; expected s3://bucket/prefix")
    return bucket, key


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts)])


def filesystem():
    """A pyarrow S3 filesystem configured from the standard environment."""
    from pyarrow import fs

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    options: dict = {"region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"}  # fmt: skip
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        options |= {"endpoint_override": host or scheme, "scheme": scheme if host else "https"}
    return fs.S3FileSystem(**options)


def _client():
    import boto3

    return boto3.client("s3")  # endpoint, region and credentials from the environment


def _path(uri: str) -> str:
    bucket, key = split(uri)
    return f"{bucket}/{key}" if key else bucket


def _error(what: str, uri: str, e: Exception) -> StorageError:
    return StorageError(f"{what} {uri}: {getattr(e, 'response', {}).get('Error', {}).get('Message') or e}")  # fmt: skip


def exists(uri: str) -> bool:
    from pyarrow import fs

    try:
        return filesystem().get_file_info(_path(uri)).type != fs.FileType.NotFound
    except OSError as e:
        raise _error("cannot reach", uri, e) from None


def read_bytes(uri: str) -> bytes:
    try:
        with filesystem().open_input_stream(_path(uri)) as f:
            return f.read()
    except OSError as e:
        raise _error("cannot read", uri, e) from None


def write_bytes(uri: str, data: bytes) -> None:
    try:
        with filesystem().open_output_stream(_path(uri)) as f:
            f.write(data)
    except OSError as e:
        raise _error("cannot write", uri, e) from None


def create_once(uri: str, data: bytes) -> bool:
    """Create `uri` only if no object has that key (If-None-Match: *): False if one has."""
    from botocore.exceptions import ClientError

    bucket, key = split(uri)
    try:
        _client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):  # fmt: skip
            return False
        raise _error("cannot create", uri, e) from None
    return True


def delete(uri: str) -> None:
    """Delete the object at `uri`."""
    try:
        filesystem().delete_file(_path(uri))
    except OSError as e:
        raise _error("cannot delete", uri, e) from None


def listing(uri: str) -> list[str]:
    """Every object under `uri` (recursively), as paths relative to it."""
    from pyarrow import fs

    base = _path(uri)
    try:
        infos = filesystem().get_file_info(fs.FileSelector(base, recursive=True, allow_not_found=True))  # fmt: skip
    except OSError as e:
        raise _error("cannot list", uri, e) from None
    return sorted(i.path[len(base) + 1 :] for i in infos if i.type == fs.FileType.File)


def children(uri: str) -> list[str]:
    """The names directly under `uri` (one level)."""
    from pyarrow import fs

    base = _path(uri)
    try:
        infos = filesystem().get_file_info(fs.FileSelector(base, allow_not_found=True))
    except OSError as e:
        raise _error("cannot list", uri, e) from None
    return sorted(i.base_name for i in infos)


def delete_all(uri: str, keep: tuple[str, ...] = ()) -> int:
    """Delete every object under `uri` but `keep`; how many were deleted."""
    files = [f for f in listing(uri) if f not in keep]
    system = filesystem()
    for f in files:
        system.delete_file(f"{_path(uri)}/{f}")
    return len(files)


# --- reading ---------------------------------------------------------------------------

_FETCHED: dict[str, Path] = {}


def _scratch() -> Path:
    root = Path(os.environ.get("VPUB_SCRATCH") or tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="vpub-", dir=root))


def _download(uri: str, files: list[str], into: Path) -> None:
    system = filesystem()
    for f in files:
        (into / f).parent.mkdir(parents=True, exist_ok=True)
        try:
            with system.open_input_stream(f"{_path(uri)}/{f}") as src, open(into / f, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except OSError as e:
            raise _error("cannot read", join(uri, f), e) from None


def fetched(uri: str) -> Path:
    """A local copy of the committed release at `uri` (downloaded once per process and
    removed at exit); an uncommitted one is refused, as readers must ignore it."""
    if uri not in _FETCHED:
        if not exists(join(uri, SUCCESS)):
            raise DataError(f"{uri}: no {SUCCESS}: not a committed release (readers ignore it)")
        files = [f for f in listing(uri) if f != LOCK]
        local = _scratch()
        atexit.register(shutil.rmtree, local, True)
        _download(uri, files, local / "release")
        _FETCHED[uri] = local / "release"
    return _FETCHED[uri]


def local_input(uri: str) -> Path:
    """A local copy of an input table (a file or a directory of files) at `uri`."""
    if uri not in _FETCHED:
        files = listing(uri)
        local = _scratch()
        atexit.register(shutil.rmtree, local, True)
        name = base_name(uri)
        if files:
            _download(uri, files, local / name)
        elif exists(uri):  # a single object
            (local / name).write_bytes(read_bytes(uri))
        else:
            raise DataError(f"{uri}: no such object or prefix")
        _FETCHED[uri] = local / name
    return _FETCHED[uri]


# --- writing ---------------------------------------------------------------------------


def _lock_body() -> bytes:
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "run": uuid.uuid4().hex, "at": time.time()}).encode()  # fmt: skip


def alive(pid: int) -> bool:
    """Whether process `pid` of this host exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stale(lock: dict) -> bool:
    lease = float(os.environ.get("VPUB_S3_LEASE_S", LEASE_S))
    if lock.get("host") == socket.gethostname() and not alive(int(lock.get("pid", 0))):
        return True
    return time.time() - float(lock.get("at", 0.0)) > lease


def _take_lock(uri: str, wait_s: float | None) -> bytes:
    body, lock = _lock_body(), join(uri, LOCK)
    deadline = time.monotonic() + (wait_s or 0.0)
    while not create_once(lock, body):
        try:
            held = json.loads(read_bytes(lock))
        except (VpubError, ValueError):
            continue  # released (or being written) meanwhile: try again
        if _stale(held):
            delete(lock)  # a dead run's lock
            continue
        if time.monotonic() >= deadline:
            waited = f" (waited {wait_s:g} s)" if wait_s else "; pass --wait SECONDS to wait for it"
            raise VpubError(f"{uri} is being published by process {held.get('pid')} on {held.get('host')}{waited}")  # fmt: skip
        time.sleep(0.2)
    return body


def _release_lock(uri: str, body: bytes) -> None:
    lock = join(uri, LOCK)
    try:
        if read_bytes(lock) == body:
            delete(lock)
    except (VpubError, OSError):
        pass


def _put(stage: str, uri: str, sums: dict[str, str]):
    """A task's work: upload its files, read each back and say whether it differs from
    the audited file's SHA-256 (pure function of its input: a retried task redoes it)."""

    def run(chunk: pd.DataFrame) -> pd.DataFrame:
        differs = []
        for f in chunk["file"]:
            write_bytes(join(uri, f), (Path(stage) / f).read_bytes())
            differs.append(f in sums and hashlib.sha256(read_bytes(join(uri, f))).hexdigest() != sums[f])  # fmt: skip
        return pd.DataFrame({"file": list(chunk["file"]), "differs": differs})

    return run


def _upload(stage: Path, uri: str, engine=None) -> None:
    """Parts first, in the engine's tasks when there is one (`map_rows`: on Spark the
    executors upload, the driver moves no data), each read back and compared with the
    manifest's SHA-256; then the manifest and its signature; `_SUCCESS` last, created
    only if absent."""
    manifest = json.loads((stage / MANIFEST).read_text())
    sums = {f"{part['path']}/{name}": digest for t in manifest.get("tables", []) for part in t.get("parts", {}).values() for name, digest in part.get("sha256", {}).items()}  # fmt: skip
    files = sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file())
    todo = pd.DataFrame({"file": [f for f in files if f in sums]})
    put = _put(str(stage), uri, sums)
    done = put(todo) if engine is None else engine.map_rows(todo, put, pa.schema([("file", pa.string()), ("differs", pa.bool_())]), 0)  # fmt: skip
    if len(done) != len(todo) or done["differs"].any():
        raise StorageError(f"{uri}: an uploaded object differs from the audited file; nothing was committed")  # fmt: skip
    put(pd.DataFrame({"file": [f for f in files if f not in sums and f not in (MANIFEST, SUCCESS)] + [MANIFEST]}))  # fmt: skip
    if not create_once(join(uri, SUCCESS), b""):
        raise VpubError(f"{uri} was committed by another run meanwhile; this run's upload is not committed")  # fmt: skip


@contextmanager
def remote_stage(uri: str, overwrite: bool = False, wait_s: float | None = None, engine=None) -> Iterator[Path]:  # fmt: skip
    """Publish to `uri` with the module's protocol: yield a local staging directory; on
    success upload it and commit; on failure the remote release is left as it was (a
    committed one untouched, an uncommitted one cleaned by the next run)."""
    body = _take_lock(uri, wait_s)
    local = _scratch()
    try:
        committed = exists(join(uri, SUCCESS))
        if committed and not overwrite:
            raise VpubError(
                f"{uri} already exists and is not empty; pass --overwrite to replace it"
            )
        if not committed:
            delete_all(uri, keep=(LOCK,))  # an aborted run's parts
        stage = local / "release"
        stage.mkdir()
        yield stage
        if committed:  # overwrite: readers stop seeing it first
            delete(join(uri, SUCCESS))
            delete_all(uri, keep=(LOCK,))
        _upload(stage, uri, engine)
    finally:
        shutil.rmtree(local, ignore_errors=True)
        _release_lock(uri, body)


# --- private directories (stores) ------------------------------------------------------


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()}  # fmt: skip


def _sync(local: Path, uri: str, before: dict[str, str], index: str) -> None:
    """Upload what changed since `before` (the index last), delete what the run removed."""
    after = _digests(local)
    changed = sorted(f for f, d in after.items() if before.get(f) != d and f != index)
    for f in changed:
        write_bytes(join(uri, f), (local / f).read_bytes())
    for f in sorted(set(before) - set(after)):
        delete(join(uri, f))
    if index in after and before.get(index) != after[index]:
        write_bytes(join(uri, index), (local / index).read_bytes())


@contextmanager
def mirrored(uri: str, index: str, new: bool, wait_s: float | None = None) -> Iterator[Path]:
    """A private local working copy of the directory at `uri` (see the module docstring):
    `new`: it must not hold `index` yet (objects without it are an aborted run's, and
    deleted); otherwise it must. Synchronized back only if the block succeeds."""
    body = _take_lock(uri, wait_s)
    local = _scratch()  # mkdtemp: mode 700
    try:
        has_index = exists(join(uri, index))
        if new and has_index:
            raise VpubError(f"{uri} already holds {index}; choose another location")
        if not new and not has_index:
            raise VpubError(f"{uri}: no {index}; nothing to open there")
        copy = local / "copy"
        copy.mkdir(mode=0o700)
        if new:
            delete_all(uri, keep=(LOCK,))
        else:
            _download(uri, [f for f in listing(uri) if f != LOCK], copy)
        before = _digests(copy)
        yield copy
        _sync(copy, uri, before, index)
    finally:
        shutil.rmtree(local, ignore_errors=True)
        _release_lock(uri, body)
