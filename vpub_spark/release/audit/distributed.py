"""The distributed audit: each task audits one file set of a table with the kind's own
checks and returns a small summary; the driver only combines summaries, so its memory
does not grow with the release's rows.

Which kinds are audited in tasks, and why the combined checks are complete:
docs/explanation/performance.md, "The audit in the tasks".
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import DataError
from ...model import PublishedTable
from ..kinds import table_kind
from ..layout import GROUP
from ..reader import ReleaseReader, open_release
from .checks import AuditReport, Checker

UNIT_KINDS = ("anatomy", "generalized")
SUMMARY = pa.schema([("table", pa.string()), ("file", pa.string()), ("summary", pa.string())])
COVERS = "covers every row"


@dataclass(frozen=True)
class _FileView(ReleaseReader):
    """A release that shows, of every part, only the file named `file`."""

    file: str = ""

    def part_files(self, table: str, part: str) -> list[str]:
        return [self.file]


def units(rel: ReleaseReader) -> pd.DataFrame:
    """(table, file) for every file name of a unit kind's table, as found."""
    rows = []
    for entry in rel.tables:
        if entry.get("kind") not in UNIT_KINDS:
            continue
        names = {f for part in entry.get("parts", {}) for f in rel.part_files(entry["name"], part)}
        rows += [(entry["name"], name) for name in sorted(names)]
    return pd.DataFrame(rows, columns=["table", "file"])


def audit_units(
    path: str, remote: str | None, manifest: str, l: int, todo: pd.DataFrame
) -> pd.DataFrame:
    """In a task: every unit of `todo` audited (docs/explanation/performance.md). A release whose
    parts are on an object store (`remote`) is seen through a task-local directory that
    holds its manifest and the unit's files, fetched from the store."""
    with tempfile.TemporaryDirectory(prefix="vpub-audit-") as tmp:
        rel = (
            ReleaseReader(Path(tmp), json.loads(manifest), remote) if remote else open_release(path)
        )
        out = []
        for table, file in zip(todo["table"], todo["file"], strict=True):
            entry = rel.table(table)
            out.append((table, file, json.dumps(_unit(rel, entry, file, l))))
    return pd.DataFrame(out, columns=SUMMARY.names)


def _unit(rel: ReleaseReader, entry: dict, file: str, l: int) -> dict:
    view = _FileView(rel.path, rel.manifest, rel.remote, file=file)
    t = PublishedTable.from_entry(entry)
    report = AuditReport(file)
    sha, first = {}, next(iter(entry["parts"]))
    for part in entry["parts"]:
        f = rel.local_file(t.name, part, file)
        if not f.is_file():
            return {"error": f"{t.name}/{part}/{file}: missing (the other parts have it)"}
        sha[part] = sha256_of(f)
    try:
        table_kind(t.kind).check(view, entry, t, l, -1, report.check)
        groups = view.read(t.name, first, columns=[GROUP])[GROUP]
    except (pa.ArrowException, KeyError, OSError, DataError) as e:
        return {"error": f"{t.name}/{file}: unreadable ({e})", "sha256": sha}
    rows = _rows(view, t, entry)
    checks = [(c.name, c.ok, c.detail) for c in report.checks if not c.name.endswith(COVERS)]
    return {"checks": checks, "rows": rows, "groups": group_range(groups), "sha256": sha}


def _rows(view: _FileView, t: PublishedTable, entry: dict) -> int:
    """The source rows this unit holds (QIT rows; a generalized table's group sizes)."""
    if t.kind == "generalized":
        return int(pc.sum(view.read(t.name, "groups", columns=["size"])["size"]).as_py() or 0)
    return view.read(t.name, "qit", columns=[GROUP]).num_rows


def summaries(rel: ReleaseReader, l: int, engine) -> dict[str, list[dict]]:
    """Every unit's summary, computed by the engine's tasks; per table, in file order."""
    todo = units(rel)
    if todo.empty:
        return {}
    run = partial(
        audit_units, str(rel.path), rel.remote, json.dumps(rel.manifest) if rel.remote else "", l
    )
    got = engine.map_rows(todo, run, SUMMARY, 0).sort_values(["table", "file"])
    out: dict[str, list[dict]] = {}
    for table, file, text in zip(got["table"], got["file"], got["summary"], strict=True):
        out.setdefault(table, []).append({"file": file} | json.loads(text))
    return out


def combined_checks(entry: dict, name: str, rows: int, found: list[dict], check: Checker) -> None:
    """The driver's part: every unit's checks merged, the rows summed, the group ranges
    disjoint, every file's SHA-256 equal to the manifest's."""
    for unit in found:
        if "error" in unit:
            check(f"{name}: readable", False, unit["error"])
            return
    merged: dict[str, tuple[bool, str]] = {}
    for unit in found:
        for check_name, ok, detail in unit["checks"]:
            seen = merged.get(check_name, (True, ""))
            if seen[0] and not ok:
                merged[check_name] = (False, f"{unit['file']}: {detail}")
            elif check_name not in merged:
                merged[check_name] = (
                    ok,
                    f"{len(found)} file(s); {detail}" if ok else f"{unit['file']}: {detail}",
                )
    for check_name, (ok, detail) in merged.items():
        check(check_name, ok, detail)
    total = sum(u["rows"] for u in found)
    check(f"{name}: {COVERS}", total == rows, f"{len(found)} file(s) hold {total} of {rows} rows")
    groups_apart(name, [u["groups"] for u in found], check)
    digests = {
        part: {u["file"]: u["sha256"].get(part) for u in found} for part in entry.get("parts") or {}
    }
    checksums_agree(entry, name, digests, check)


def groups_apart(name: str, ranges: list, check: Checker) -> None:
    """No two files' group-id ranges overlap, so no group spans two files (what makes a
    file set's group checks complete; the writers give each partition its own range).
    The in-driver audit checks it too, so both audits say the same."""
    spans = sorted(tuple(r) for r in ranges if r[0] is not None)
    apart = all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))
    check(
        f"{name}: groups within one file",
        apart,
        f"{len(spans)} file(s), group-id ranges disjoint"
        if apart
        else "two files share a group-id range",
    )


def file_group_ranges(rel: ReleaseReader, entry: dict) -> list[list]:
    """[min, max] group id of every file of the table's first part (in the driver)."""
    first = next(iter(entry["parts"]))
    out = []
    for f in rel.part_files(entry["name"], first):
        out.append(
            group_range(
                pq.read_table(rel.local_file(entry["name"], first, f), columns=[GROUP])[GROUP]
            )
        )
    return out


def checksums_agree(
    entry: dict, name: str, digests: Mapping[str, Mapping[str, str | None]], check: Checker
) -> None:
    """Per part, the files found (`digests`: part -> file -> SHA-256) are exactly those
    the manifest lists, byte for byte: a part edited after the commit is refused."""
    for part, meta in (entry.get("parts") or {}).items():
        listed, on_disk = meta.get("sha256") or {}, digests.get(part, {})
        changed = sorted(f for f, digest in on_disk.items() if listed.get(f) != digest)
        unlisted = sorted(set(listed) - set(on_disk))
        ok = bool(listed) and not changed and not unlisted
        detail = (
            f"{len(listed)} file(s) as committed"
            if ok
            else f"changed or unlisted: {changed}; missing: {unlisted}"
        )
        check(f"{name}/{part}: checksums", ok, detail if listed else "no checksums recorded")


def sha256_of(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def group_range(groups: pa.ChunkedArray) -> list:
    """[min, max] of a file's group ids."""
    return [pc.min(groups).as_py(), pc.max(groups).as_py()]


def is_unit_kind(kind: str) -> bool:
    return kind in UNIT_KINDS
