"""Committing a release (docs/reference/release-format.md): write-then-rename, so an
output directory appears complete or not at all, and `audit_and_commit`, the last step
of every publisher.

A run first takes the target's lock (`exclusive`: an exclusive `flock` on a hidden
sibling `.<name>.lock`, released by the kernel if the process dies), so exactly one of
two concurrent runs for the same target proceeds; the other fails at once with a clear
message, or waits (`wait_s`). Then it stages into a hidden sibling
`.<name>.staging-<id>` holding an `owner` file (host and process id), and at commit
checks the target again before renaming the stage into place. A driver killed outright
cannot clean up; the next run for the same target removes the staging directories whose
owner is a process of this host that no longer exists (another host's are left alone:
we cannot tell if it lives). Decision: the lock is advisory and needs a file system
with working `flock` (local disks; NFS v4 and most shared volumes map it to their
locks)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from ..errors import PrivacyError, StorageError, VpubError
from ..release.audit.release import AuditReport, audit_release
from ..release.layout import MANIFEST, REMOTE, SUCCESS
from ..release.signing import sign, signer_id
from ..release.stores.store import STORE_FILE
from ..storage import is_remote
from .objectstore import alive, mirrored, remote_stage


def check_target(target: Path, overwrite: bool) -> None:
    if target.exists() and any(target.iterdir()) and not overwrite:
        raise VpubError(f"{target} already exists and is not empty; pass --overwrite to replace it")
    _make_parent(target)


def _make_parent(target: Path) -> None:
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise VpubError(f"cannot create the output directory {parent}: {e.strerror}") from None
    if not os.access(parent, os.W_OK):
        raise VpubError(f"cannot write to {parent}: permission denied")


OWNER = ".owner"


def remove_stale_stages(target: Path) -> list[Path]:
    """Remove staging directories of `target` left by dead processes of this host, and
    those with no owner written yet. The caller holds the target's lock, and a run
    writes its owner right after making its stage under that lock, so a stage without
    one belongs to a run killed in between (a garbled owner is left alone)."""
    removed = []
    for stage in target.parent.glob(f".{target.name}.staging-*"):
        try:
            owner = (stage / OWNER).read_text().split()
        except FileNotFoundError:
            owner = []
        except OSError:
            continue
        ownerless = not owner
        dead = len(owner) == 2 and owner[0] == socket.gethostname() and not alive(int(owner[1]))
        if ownerless or dead:
            shutil.rmtree(stage, ignore_errors=True)
            removed.append(stage)
    return removed


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive flock on `path`, or None if another process holds it.
    Taken on the file the path names at that moment (a lock file unlinked by its last
    holder while we waited is not ours: try again)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _holder(path: Path) -> str:
    try:
        host, pid = path.read_text().split()
        return f"process {pid} on {host}"
    except (OSError, ValueError):
        return "another process"


@contextmanager
def exclusive(target: str | Path, wait_s: float | None = None) -> Iterator[None]:
    """Hold `target`'s lock for the block: another holder makes this fail at once with a
    clear error, or wait up to `wait_s` seconds for it."""
    target = Path(target)
    _make_parent(target)
    lock = target.parent / f".{target.name}.lock"
    deadline = time.monotonic() + (wait_s or 0.0)
    while (fd := _try_lock(lock)) is None:
        if time.monotonic() >= deadline:
            waited = f" (waited {wait_s:g} s)" if wait_s else "; pass --wait SECONDS to wait for it"
            raise VpubError(f"{target} is being published by {_holder(lock)}{waited}")
        time.sleep(0.1)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())
        yield
    finally:
        os.unlink(lock)
        os.close(fd)


@contextmanager
def staged_directory(
    target: str | Path, overwrite: bool = False, private: bool = False, wait_s: float | None = None
) -> Iterator[Path]:
    """Hold `target`'s lock (`exclusive`), then yield a fresh staging directory beside
    it; on success check the target once more and rename the stage into place, on any
    failure delete it and leave `target` untouched. `private`: owner-only permissions
    (docs/explanation/architecture.md, "Private state"), set before anything is written
    into it."""
    target = Path(target)
    with exclusive(target, wait_s):
        check_target(target, overwrite)
        remove_stale_stages(target)
        with _stage(target, overwrite, private) as stage:
            yield stage


@contextmanager
def staged_release(
    target: str | Path, overwrite: bool = False, wait_s: float | None = None, engine=None
) -> Iterator[Path]:
    """A release's staging directory: `staged_directory` for a local target, the object
    store's protocol (`objectstore.remote_stage`, uploading in `engine`'s tasks) for an
    `s3://` one."""
    stage = (
        remote_stage(str(target), overwrite, wait_s, engine)
        if is_remote(target)
        else staged_directory(target, overwrite, wait_s=wait_s)
    )
    with stage as path:
        yield path


@contextmanager
def staged_store(target: str | Path, wait_s: float | None = None) -> Iterator[Path]:
    """A new private store's staging directory: owner-only `staged_directory` for a local
    one, a private local copy synchronized to the object store (`objectstore.mirrored`)
    for an `s3://` one."""
    stage = (
        mirrored(str(target), STORE_FILE, True, wait_s)
        if is_remote(target)
        else staged_directory(target, private=True, wait_s=wait_s)
    )
    with stage as path:
        yield path


@contextmanager
def _stage(target: Path, overwrite: bool, private: bool) -> Iterator[Path]:
    stage = target.parent / f".{target.name}.staging-{uuid.uuid4().hex[:8]}"
    try:
        stage.mkdir(mode=0o700 if private else 0o777)
        if private:
            stage.chmod(0o700)  # mkdir's mode is filtered by the umask
        (stage / OWNER).write_text(f"{socket.gethostname()} {os.getpid()}\n")
        yield stage
        (stage / OWNER).unlink()
        check_target(target, overwrite)  # again: nothing may have committed meanwhile
        if target.exists():
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            target.rename(old)
            stage.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            stage.rename(target)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


class Steps:
    """Times named steps and tells an optional observer (the CLI's progress display);
    the timings go into the manifest."""

    def __init__(self, observer: Callable[[str], AbstractContextManager[object]] | None = None):
        self.observer = observer
        self.timings: dict[str, float] = {}
        self.started = time.perf_counter()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        if self.observer is not None:
            with self.observer(name):
                yield
        else:
            yield
        self.timings[name] = time.perf_counter() - t0


def write_manifest(stage: Path, manifest: dict) -> None:
    tmp = stage / f".{MANIFEST}.tmp"
    try:
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
        tmp.replace(stage / MANIFEST)
    except OSError as e:
        raise StorageError(f"cannot write {stage / MANIFEST}: {e.strerror or e}") from None


# A local stage with at most this many bytes of parts is audited in the driver even on
# Spark: its memory is bounded by that, and a Spark job costs more than such an audit
# (docs/explanation/performance.md); the same checks either way (test_distributed_audit).
IN_DRIVER_BYTES = 2 << 20


def audit_in_tasks(stage: Path, engine) -> bool:
    """Whether the staged release is audited in the engine's tasks (`release/audit/distributed.py`):
    with an engine, when its parts are on an object store or over `IN_DRIVER_BYTES` (or
    the engine's own `in_driver_bytes`)."""
    if engine is None:
        return False
    if (stage / REMOTE).exists():
        return True
    limit = getattr(engine, "in_driver_bytes", IN_DRIVER_BYTES)
    return sum(f.stat().st_size for f in stage.rglob("*.parquet")) > limit


def audit_and_commit(
    stage: Path, manifest: dict, step: Steps, sign_key: str | None = None, engine=None
) -> AuditReport:
    """Write the manifest, audit the staged files (with `engine`: distributed, in its
    tasks, unless the release is small: `audit_in_tasks`), record the audit and the
    timings, sign the final manifest (with `sign_key`), and mark the stage complete
    (`_SUCCESS`); a failed audit raises and commits nothing."""
    write_manifest(stage, manifest)
    spread = audit_in_tasks(stage, engine)
    with step("audit"):
        report = audit_release(
            stage, require_committed=False, engine=engine if spread else None, distributed=spread
        )
    if not report.passed:
        failures = "; ".join(report.as_dict()["failures"][:5])
        raise PrivacyError(
            f"the audit of the staged release failed, nothing was committed: {failures}"
        )
    manifest["audit"] = report.as_dict()
    total = round(time.perf_counter() - step.started, 3)
    manifest["timings_s"] = {k: round(v, 3) for k, v in step.timings.items()} | {"total": total}
    if sign_key is not None:
        manifest["signed_by"] = signer_id(sign_key)
    write_manifest(stage, manifest)
    if sign_key is not None:
        sign(stage, sign_key)
    (stage / SUCCESS).write_text("")
    return report
