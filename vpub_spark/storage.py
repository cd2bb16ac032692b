"""Object-store I/O: `s3://bucket/key` URIs on any S3-compatible store (AWS,
MinIO, Ceph, R2) through `pyarrow.fs`, and boto3 for the one call pyarrow cannot send
(a conditional create). Where to connect comes from the standard environment only
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
`AWS_ENDPOINT_URL`), read by pyarrow and boto3 themselves, so no credential is ever in a
config, a manifest or a log. Low in the package (imports only `errors`): the engines'
tasks read inputs and write parts through it; the release's commit protocol on top of
it is `lake/objectstore.py` (reading a release there: `release/remote.py`).

Decision: objects are deleted through boto3 (DeleteObject, DeleteObjects), never with
pyarrow's `delete_file` / `delete_dir*`, which leave zero-byte `prefix/` "directory"
marker objects behind (pyarrow keeps the parent "directory" alive). Nothing here
creates directories either: an object store needs none. So a prune, a cleanup or a
refused publish leaves no marker, and `delete_all` removes any marker found under the
prefix (another tool's) with the rest."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import TypeGuard

from .errors import DataError, StorageError, VpubError

SCHEME = "s3://"


TABLE_KINDS = ("catalog", "delta", "iceberg")  # inputs that are tables (sources.py)


def table_kind(input_path: str) -> str | None:
    """`catalog`, `delta` or `iceberg` for a table input (`kind:name`), else None."""
    kind = input_path.split(":", 1)[0]
    return kind if kind in TABLE_KINDS and ":" in input_path else None


def is_remote(path: str | Path | None) -> TypeGuard[str]:
    """Whether `path` is an `s3://` URI (a `Path` never is: it would collapse the `//`)."""
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
    options: dict = {
        "region": os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or "us-east-1"
    }
    if endpoint:
        scheme, _, host = endpoint.partition("://")
        options |= {"endpoint_override": host or scheme, "scheme": scheme if host else "https"}
    return fs.S3FileSystem(**options)


def _client():
    import boto3

    return boto3.client("s3")  # endpoint, region and credentials from the environment


def fs_path(uri: str) -> str:
    bucket, key = split(uri)
    return f"{bucket}/{key}" if key else bucket


def storage_error(what: str, uri: str, e: Exception) -> StorageError:
    return StorageError(
        f"{what} {uri}: {getattr(e, 'response', {}).get('Error', {}).get('Message') or e}"
    )


def exists(uri: str) -> bool:
    from pyarrow import fs

    try:
        return filesystem().get_file_info(fs_path(uri)).type != fs.FileType.NotFound
    except OSError as e:
        raise storage_error("cannot reach", uri, e) from None


def read_bytes(uri: str) -> bytes:
    try:
        with filesystem().open_input_stream(fs_path(uri)) as f:
            return f.read()
    except OSError as e:
        raise storage_error("cannot read", uri, e) from None


def write_bytes(uri: str, data: bytes) -> None:
    try:
        with filesystem().open_output_stream(fs_path(uri)) as f:
            f.write(data)
    except OSError as e:
        raise storage_error("cannot write", uri, e) from None


def create_once(uri: str, data: bytes) -> bool:
    """Create `uri` only if no object has that key (If-None-Match: *): False if one has."""
    from botocore.exceptions import ClientError

    bucket, key = split(uri)
    try:
        _client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in (
            "PreconditionFailed",
            "ConditionalRequestConflict",
        ):
            return False
        raise storage_error("cannot create", uri, e) from None
    return True


def delete(uri: str) -> None:
    """Delete the object at `uri` (none there: nothing to do)."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split(uri)
    try:
        _client().delete_object(Bucket=bucket, Key=key)
    except (BotoCoreError, ClientError) as e:
        raise storage_error("cannot delete", uri, e) from None


def _keys(uri: str) -> list[str]:
    """Every key under the prefix `uri` (markers included), relative to it."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split(uri)
    prefix = f"{key}/" if key else ""
    try:
        pages = _client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", []))
    except (BotoCoreError, ClientError) as e:
        raise storage_error("cannot list", uri, e) from None


def _delete_keys(uri: str, names: list[str]) -> None:
    """Delete the objects `names` (relative to `uri`), 1,000 per request."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split(uri)
    prefix = f"{key}/" if key else ""
    client = _client()
    try:
        for i in range(0, len(names), 1000):
            batch = [{"Key": prefix + n} for n in names[i : i + 1000]]
            failed = client.delete_objects(
                Bucket=bucket, Delete={"Objects": batch, "Quiet": True}
            ).get("Errors")
            if failed:
                raise StorageError(
                    f"cannot delete {bucket}/{failed[0].get('Key')}: {failed[0].get('Message')}"
                )
    except (BotoCoreError, ClientError) as e:
        raise storage_error("cannot delete", uri, e) from None


def listing(uri: str) -> list[str]:
    """Every object under `uri` (recursively), as paths relative to it."""
    from pyarrow import fs

    base = fs_path(uri)
    try:
        infos = filesystem().get_file_info(
            fs.FileSelector(base, recursive=True, allow_not_found=True)
        )
    except OSError as e:
        raise storage_error("cannot list", uri, e) from None
    return sorted(i.path[len(base) + 1 :] for i in infos if i.type == fs.FileType.File)


def children(uri: str) -> list[str]:
    """The names directly under `uri` (one level)."""
    from pyarrow import fs

    base = fs_path(uri)
    try:
        infos = filesystem().get_file_info(fs.FileSelector(base, allow_not_found=True))
    except OSError as e:
        raise storage_error("cannot list", uri, e) from None
    return sorted(i.base_name for i in infos)


def delete_all(uri: str, keep: tuple[str, ...] = ()) -> int:
    """Delete every object under `uri` but `keep` (names, or prefixes ending in `/`),
    directory markers included; how many were deleted."""
    kept = tuple(k for k in keep if k.endswith("/"))
    names = [f for f in _keys(uri) if f not in keep and not f.startswith(kept)]
    _delete_keys(uri, names)
    return len(names)


DATA_SUFFIXES = (".parquet", ".csv", ".csv.gz")


def data_objects(uri: str, kind: str | None = None) -> list[str]:
    """The data files of an input on the store (the object itself, or the `.parquet` /
    `.csv` / `.csv.gz` objects under the prefix, `_` and `.` names left out), sorted URIs."""
    ext = (
        DATA_SUFFIXES
        if kind is None
        else ((".parquet",) if kind == "parquet" else (".csv", ".csv.gz"))
    )
    found = [f for f in listing(uri) if f.endswith(ext) and not base_name(f).startswith(("_", "."))]
    if found:
        return [join(uri, f) for f in found]
    if exists(uri) and uri.endswith(ext):
        return [uri]
    raise DataError(f"{uri}: no {kind or 'data'} files on the store")


# --- local copies ----------------------------------------------------------------------

_COPIES: dict[str, Path] = {}


def scratch() -> Path:
    """A new private scratch directory under `$VPUB_SCRATCH` (default: the system's
    temporary directory)."""
    root = Path(os.environ.get("VPUB_SCRATCH") or tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="vpub-", dir=root))


def scratch_until_exit() -> Path:
    """A private scratch directory that lives until the process exits (local copies)."""
    local = scratch()
    atexit.register(shutil.rmtree, local, True)
    return local


def download_files(uri: str, files: list[str], into: Path) -> None:
    system = filesystem()
    for f in files:
        (into / f).parent.mkdir(parents=True, exist_ok=True)
        try:
            with (
                system.open_input_stream(f"{fs_path(uri)}/{f}") as src,
                open(into / f, "wb") as dst,
            ):
                shutil.copyfileobj(src, dst, 1 << 20)
        except OSError as e:
            raise storage_error("cannot read", join(uri, f), e) from None


def download(uri: str, local: Path) -> None:
    """One object into `local` (nothing when there is no such object)."""
    if exists(uri):
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(read_bytes(uri))


def local_path(path: str) -> str:
    """`path` where this process can read it: a local copy of an object-store input
    (`local_input`, made once per process), a local path as it is."""
    return str(local_input(path)) if is_remote(path) else path


def local_input(uri: str) -> Path:
    """A local copy of an input table (a file or a directory of files) at `uri`."""
    if uri not in _COPIES:
        files = listing(uri)
        local = scratch_until_exit()
        name = base_name(uri)
        if files:
            download_files(uri, files, local / name)
        elif exists(uri):  # a single object
            (local / name).write_bytes(read_bytes(uri))
        else:
            raise DataError(f"{uri}: no such object or prefix")
        _COPIES[uri] = local / name
    return _COPIES[uri]


def input_outline(uri: str) -> Path:
    """A local copy of an input's files but its data (its table.yaml), to resolve the
    table spec while Spark's tasks read the data on the store (`on_store` maps back)."""
    local = scratch_until_exit() / base_name(uri)
    local.mkdir()
    download_files(uri, [f for f in listing(uri) if not f.endswith(DATA_SUFFIXES)], local)
    return local


def on_store(local: str | Path, outline: Path, uri: str) -> str:
    """The URI of a path inside `input_outline(uri)`."""
    rest = Path(local).relative_to(outline).as_posix()
    return uri if rest == "." else join(uri, rest)


def cache_root() -> Path:
    """The user's cache of this software (the Spark class-data archive, downloaded data
    sets): `$VPUB_CACHE`, else `$XDG_CACHE_HOME/vpub`, else `~/.cache/vpub`."""
    if os.environ.get("VPUB_CACHE"):
        return Path(os.environ["VPUB_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "vpub"
