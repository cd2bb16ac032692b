"""Publishing releases to an S3-compatible object store (`s3://bucket/prefix` outputs): a
commit protocol that needs no rename, and private stores mirrored there (`mirrored`).
The I/O is `storage.py`; reading a committed release is `release/remote.py`.

The protocol (the lock, stale locks, tasks writing to the store, overwrite) and its
decisions: docs/how-to/data-lake.md, "Object stores".
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import StorageError, VpubError
from ..release.layout import MANIFEST, REMOTE, SUCCESS, TABLES
from ..release.remote import LOCK, STAGING, read_marker, remote_root
from ..storage import (
    create_once,
    delete,
    delete_all,
    download_files,
    exists,
    filesystem,
    fs_path,
    join,
    listing,
    read_bytes,
    scratch,
    storage_error,
    write_bytes,
)

LEASE_S = 6 * 3600.0


# --- writing ---------------------------------------------------------------------------


def _lock_body() -> bytes:
    return json.dumps(
        {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "run": uuid.uuid4().hex,
            "at": time.time(),
        }
    ).encode()


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


def _take_lock(uri: str, wait_s: float | None) -> tuple[bytes, bool]:
    """The lock's body, and whether a dead run's lock was broken to take it."""
    body, lock, broken = _lock_body(), join(uri, LOCK), False
    deadline = time.monotonic() + (wait_s or 0.0)
    while not create_once(lock, body):
        try:
            held = json.loads(read_bytes(lock))
        except (VpubError, ValueError):
            continue  # released (or being written) meanwhile: try again
        if _stale(held):
            delete(lock)  # a dead run's lock
            broken = True
            continue
        if time.monotonic() >= deadline:
            waited = f" (waited {wait_s:g} s)" if wait_s else "; pass --wait SECONDS to wait for it"
            raise VpubError(
                f"{uri} is being published by process {held.get('pid')} on {held.get('host')}{waited}"
            )
        time.sleep(0.2)
    return body, broken


def _claim(uri: str, broken: bool, overwrite: bool) -> None:
    """Empty an uncommitted prefix before writing into it: only the objects of a killed
    run (whose lock was just broken) or with `overwrite`; anything else is refused,
    so no data that is not ours is ever deleted."""
    others = [f for f in listing(uri) if f != LOCK]
    if others and not (broken or overwrite):
        raise VpubError(
            f"{uri} holds {len(others)} object(s) that are not a committed release; pass --overwrite to replace them"
        )
    delete_all(uri, keep=(LOCK,))


def _release_lock(uri: str, body: bytes) -> None:
    lock = join(uri, LOCK)
    try:
        if read_bytes(lock) == body:
            delete(lock)
    except (VpubError, OSError):
        pass


# --- stages whose tasks write straight to the store --------------------------------


def mark(local: Path, root: str) -> None:
    """Say in a local stage (or store copy) that its tasks write to `root` on the store."""
    (local / REMOTE).write_text(json.dumps({"root": root}))


def write_root(local: str | Path) -> str:
    """Where the tasks of a stage or store write: its object-store root, else itself."""
    return remote_root(local) or str(local)


RECEIPT = pa.schema([("file", pa.string()), ("sha256", pa.string()), ("rows", pa.int64())])


def _receipts(root: str):
    """A task's work: each file's SHA-256 and rows, from the bytes the store holds."""

    def run(chunk: pd.DataFrame) -> pd.DataFrame:
        out = []
        for f in chunk["file"]:
            data = read_bytes(join(root, f))
            rows = pq.ParquetFile(pa.BufferReader(data)).metadata.num_rows
            out.append((f, hashlib.sha256(data).hexdigest(), rows))
        return pd.DataFrame(out, columns=RECEIPT.names)

    return run


def record_parts(stage: Path, engine) -> None:
    """For a stage whose tasks wrote to the store: every part file's SHA-256 and rows,
    computed in the engine's tasks (the driver moves no data), kept in the marker for
    the manifest (`manifest.part_entries`)."""
    marker = read_marker(stage)
    if marker is None:
        return
    root = marker["root"]
    files = [f for f in listing(root) if f.startswith(f"{TABLES}/") and f.endswith(".parquet")]
    got = _in_tasks(pd.DataFrame({"file": files}), _receipts(root), RECEIPT, engine)
    marker["files"] = {
        f: {"sha256": d, "rows": int(r)}
        for f, d, r in zip(got["file"], got["sha256"], got["rows"], strict=True)
    }
    (stage / REMOTE).write_text(json.dumps(marker))


DONE = pa.schema([("file", pa.string()), ("differs", pa.bool_())])


def _in_tasks(todo: pd.DataFrame, run, schema: pa.Schema, engine=None) -> pd.DataFrame:
    """`run` over the rows of `todo` in the engine's tasks (on Spark the executors do the
    I/O, the driver moves no data), or here without an engine."""
    return run(todo) if engine is None else engine.map_rows(todo, run, schema, 0)


def _put(stage: str, uri: str, sums: dict[str, str]):
    """A task's work: upload its files, read each back and say whether it differs from
    the audited file's SHA-256 (pure function of its input: a retried task redoes it)."""

    def run(chunk: pd.DataFrame) -> pd.DataFrame:
        differs = []
        for f in chunk["file"]:
            write_bytes(join(uri, f), (Path(stage) / f).read_bytes())
            differs.append(
                f in sums and hashlib.sha256(read_bytes(join(uri, f))).hexdigest() != sums[f]
            )
        return pd.DataFrame({"file": list(chunk["file"]), "differs": differs})

    return run


def _copy(src: str, dst: str):
    """A task's work: copy objects within the store (server-side: no data moves here)."""

    def run(chunk: pd.DataFrame) -> pd.DataFrame:
        system = filesystem()
        for f in chunk["file"]:
            try:
                system.copy_file(fs_path(join(src, f)), fs_path(join(dst, f)))
            except OSError as e:
                raise storage_error("cannot copy", join(src, f), e) from None
        return pd.DataFrame({"file": list(chunk["file"]), "differs": False})  # copied as is

    return run


def _local_files(stage: Path) -> list[str]:
    """The stage's own files (hidden ones, the marker and the read cache, stay here)."""
    files = (str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file())
    return sorted(f for f in files if not any(c.startswith(".") for c in f.split("/")))


def _upload(stage: Path, uri: str, engine=None) -> None:
    """The files the driver staged (parts written here, the manifest's neighbours),
    each read back and compared with the manifest's SHA-256; the manifest; `_SUCCESS`
    last, created only if absent. Parts the tasks wrote to the store are not moved:
    the audit read them there."""
    manifest = json.loads((stage / MANIFEST).read_text())
    sums = {
        f"{part['path']}/{name}": digest
        for t in manifest.get("tables", [])
        for part in t.get("parts", {}).values()
        for name, digest in part.get("sha256", {}).items()
    }
    files = _local_files(stage)
    todo = pd.DataFrame({"file": [f for f in files if f in sums]})
    put = _put(str(stage), uri, sums)
    done = _in_tasks(todo, put, DONE, engine)
    if len(done) != len(todo) or done["differs"].any():
        raise StorageError(
            f"{uri}: an uploaded object differs from the audited file; nothing was committed"
        )
    put(
        pd.DataFrame(
            {
                "file": [f for f in files if f not in sums and f not in (MANIFEST, SUCCESS)]
                + [MANIFEST]
            }
        )
    )
    if not create_once(join(uri, SUCCESS), b""):
        raise VpubError(
            f"{uri} was committed by another run meanwhile; this run's upload is not committed"
        )


def _replace(uri: str, staged: str, engine=None) -> None:
    """Overwrite: the old release leaves first (`_SUCCESS`, then its objects), then the
    staged parts are copied into place in the engine's tasks."""
    delete(join(uri, SUCCESS))
    delete_all(uri, keep=(LOCK, STAGING + "/"))
    _in_tasks(pd.DataFrame({"file": listing(staged)}), _copy(staged, uri), DONE, engine)


@contextmanager
def remote_stage(
    uri: str, overwrite: bool = False, wait_s: float | None = None, engine=None
) -> Iterator[Path]:
    """Publish to `uri` with the module's protocol: yield a local staging directory whose
    marker sends the tasks' parts to the store (the release's own prefix, or `_staging/`
    under it when a committed release is overwritten); on success commit. On failure
    this run's parts are deleted and a committed release is left as it was."""
    body, broken = _take_lock(uri, wait_s)
    local, root = scratch(), None
    try:
        committed = exists(join(uri, SUCCESS))
        if committed and not overwrite:
            raise VpubError(
                f"{uri} already exists and is not empty; pass --overwrite to replace it"
            )
        if committed:
            delete_all(join(uri, STAGING))  # a killed overwrite's parts
        else:
            _claim(uri, broken, overwrite)
        root = join(uri, STAGING) if committed else uri
        stage = local / "release"
        stage.mkdir()
        mark(stage, root)
        yield stage
        if committed:
            _replace(uri, root, engine)
        _upload(stage, uri, engine)
        if committed:
            delete_all(root)
    except BaseException:
        if root is not None:
            _forget(uri, root)
        raise
    finally:
        shutil.rmtree(local, ignore_errors=True)
        _release_lock(uri, body)


def _forget(uri: str, root: str) -> None:
    """A failed run's own objects: its staged parts, and everything but the lock if no
    release is committed any more (a failed overwrite's copy). Best effort: what a
    broken connection leaves is refused by the next run, naming it."""
    try:
        delete_all(uri if not exists(join(uri, SUCCESS)) else root, keep=(LOCK,))
    except VpubError:
        pass


# --- private directories (stores) ------------------------------------------------------


def _digests(root: Path) -> dict[str, str]:
    return {f: hashlib.sha256((root / f).read_bytes()).hexdigest() for f in _local_files(root)}


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
    """A private local working copy of the directory at `uri` (docs/how-to/data-lake.md):
    `new`: it must not hold `index` yet (objects without it are an aborted run's, and
    deleted); otherwise it must. Synchronized back only if the block succeeds."""
    body, broken = _take_lock(uri, wait_s)
    local, claimed = scratch(), False  # mkdtemp: mode 700
    try:
        has_index = exists(join(uri, index))
        if new and has_index:
            raise VpubError(f"{uri} already holds {index}; choose another location")
        if not new and not has_index:
            raise VpubError(f"{uri}: no {index}; nothing to open there")
        copy = local / "copy"
        copy.mkdir(mode=0o700)
        if new:
            _claim(uri, broken, False)
            claimed = True
            mark(copy, uri)  # the tasks write the store's part files straight to it
        else:
            download_files(uri, [f for f in listing(uri) if f != LOCK], copy)
        before = _digests(copy)
        yield copy
        _sync(copy, uri, before, index)
    except BaseException:
        if claimed:
            _forget(uri, uri)  # a new store's objects, which no index names
        raise
    finally:
        shutil.rmtree(local, ignore_errors=True)
        _release_lock(uri, body)
