"""The release format's names (docs/reference/release-format.md): version, files,
reserved columns, paths.

```
<output>/<release_id>/
  manifest.json
  tables/<table>/<part>/part-<p>.parquet
  _SUCCESS                     written last, only after the audit passed
```
Every module that reads or writes a release takes its names from here; this module
imports only the parts' column names (`estimate/columns.py`, below it).
"""

from __future__ import annotations

from pathlib import Path

from ..estimate.columns import COUNT as COUNT
from ..estimate.columns import COUNTERFEITS as COUNTERFEITS
from ..estimate.columns import GROUP as GROUP
from ..estimate.columns import SIZE as SIZE

FORMAT_VERSION = (
    3  # 2: every part file has its SHA-256 in the manifest; 3: no seed (a secret), a keyed proof
)
MANIFEST, SUCCESS = "manifest.json", "_SUCCESS"
# a local stage whose parts go straight to an object store names that place here (hidden:
# never uploaded; written by lake/objectstore.py, read by release/remote.py)
REMOTE = ".remote.json"
RESERVED = (GROUP, COUNT)  # no source attribute may carry these names


TABLES = "tables"  # the directory of a release's tables


def table_dir(root: str | Path, table: str, part: str) -> Path:
    """`<root>/tables/<table>/<part>`: the directory of one part of one table."""
    return Path(root) / TABLES / table / part


def tables_location(root: str | Path) -> str | Path:
    """`<root>/tables` for a root that may be a URI (`s3://...`)."""
    if "://" in str(root):
        return f"{str(root).rstrip('/')}/{TABLES}"
    return Path(root) / TABLES


def part_location(root: str | Path, table: str, part: str) -> str | Path:
    """`table_dir` for a root that may be a URI (`s3://...`, where tasks write parts)."""
    if "://" in str(root):
        return f"{tables_location(root)}/{table}/{part}"
    return table_dir(root, table, part)


def part_file(part: int) -> str:
    """The file a partition writes: its name depends on the partition only, so a retried
    or speculative task rewrites the same file."""
    return f"part-{part:05d}.parquet"


def release_target(output: str, release_id: str) -> str | Path:
    """Where a release goes: `<output>/<release_id>`, a URI for an object store."""
    if output.startswith("s3://"):
        return f"{output.rstrip('/')}/{release_id}"
    return Path(output) / release_id


PRIVATE = "(private: named by store.store_id)"  # what a manifest shows for a private path


def public_path(path: str | None) -> str | None:
    """A path as a release may show it: relative paths as given; an absolute one only by
    its last component (`.../name`), so no release names the machine's directories."""
    if path is not None and path.startswith("delta:"):  # a Delta table input (sources.py)
        return f"delta:{public_path(path.removeprefix('delta:'))}"
    if path is None or not Path(path).is_absolute():
        return path
    return f".../{Path(path).name}"
