"""The release catalog `vpub serve --releases DIR` shows: every committed
release directly under DIR, its manifest summary and `vpub query`'s estimate.

A summary holds what the manifest says in public (tables, the guarantee, the GNF
verdicts, the audit recorded at publishing) and the audit the server itself runs on
the files (`release/audit/release.py`, cached until the manifest changes). No summary carries a
row, a group's contents or a path; its `example` is a condition in the release's own
published labels, for the page to show. Decisions: a release id is looked up among the
listed directory names only (no path from a request reaches the file system); a
directory without a committed manifest is not listed; a manifest that cannot be read is
listed with its error, so a broken release is seen rather than hidden.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError, VpubError
from ..release.audit.release import audit_release
from ..release.export import guarantee
from ..release.layout import MANIFEST, SUCCESS
from ..release.reader import open_release, read_manifest
from ..utility.queries import Estimator
from ..utility.release_models import release_models
from ..utility.risk import release_risk
from ..utility.where import increasing_numbers, parse_where, range_text


class UnknownRelease(VpubError):
    """No committed release of that id under the catalog's directory."""


def example_where(domains: Mapping[str, Sequence[Any]], attributes: list[str]) -> str | None:
    """A condition the release answers, in its published labels (quoted as the grammar
    reads them): the first attribute's middle values as `between` when its labels are
    increasing numbers, else its first two labels as `in (...)`."""
    for a in attributes:
        labels = [str(v) for v in domains.get(a, [])]
        if labels:
            lo, hi = (
                (len(labels) // 4, len(labels) // 2)
                if increasing_numbers(labels)
                else (0, min(1, len(labels) - 1))
            )
            return range_text(a, labels, lo, hi)
    return None


def _table(t: dict) -> dict:
    keys = ("name", "kind", "attributes", "sensitive", "rows", "groups", "enforces")
    return {k: t[k] for k in keys if k in t}


def summary(manifest: dict) -> dict:
    """The public summary of one release's manifest."""
    gnf = manifest.get("gnf") or {}
    return {
        "id": manifest.get("release_id"),
        "created_at": manifest.get("created_at"),
        "method": manifest.get("method"),
        "guarantee": guarantee(manifest),
        "privacy": manifest.get("privacy"),
        "rules": manifest.get("rules") or [],
        "rows": (manifest.get("source") or {}).get("rows"),
        "tables": [_table(t) for t in manifest.get("tables") or []],
        "gnf": {"ok": gnf.get("ok"), "verdicts": gnf.get("verdicts", []), "note": gnf.get("note")}
        if gnf
        else None,
        "audit_at_publish": manifest.get("audit"),
    }


@dataclass
class Catalog:
    """The releases under `root`, with the audits and estimators built on first use."""

    root: Path
    _audits: dict = field(default_factory=dict)
    _estimators: dict = field(default_factory=dict)
    _reports: dict = field(default_factory=dict)
    _report_lock: threading.Lock = field(default_factory=threading.Lock)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _dirs(self) -> dict[str, Path]:
        if not self.root.is_dir():
            raise DataError(f"{self.root.name}: the releases directory is gone")
        return {
            d.name: d
            for d in sorted(self.root.iterdir())
            if d.is_dir() and not d.name.startswith(".") and (d / SUCCESS).is_file()
        }

    def _path(self, rid: str) -> Path:
        path = self._dirs().get(rid)
        if path is None:
            raise UnknownRelease(f"no committed release {rid!r} in this catalog")
        return path

    def listing(self) -> list[dict]:
        """One line per committed release: id, time, method, guarantee, rows."""
        out: list[dict] = []
        for rid, path in self._dirs().items():
            try:
                s = summary(read_manifest(path))
            except VpubError as e:
                out.append({"id": rid, "error": str(e)})
                continue
            keys = ("created_at", "method", "guarantee", "rows")
            out.append({"id": rid, **{k: s[k] for k in keys}, "tables": len(s["tables"])})
        return out

    def release(self, rid: str) -> dict:
        """The summary with the server's own audit of the files and each table's
        re-identification risk and information loss (utility/risk.py)."""
        path = self._path(rid)
        stamp = (path / MANIFEST).stat().st_mtime_ns
        if self._audits.get(rid, (None,))[0] != stamp:
            report = audit_release(path).as_dict()
            risk = release_risk(open_release(path)) if report["passed"] else None
            self._audits[rid] = (
                stamp,
                {k: report[k] for k in ("passed", "checks", "failures")},
                risk,
            )
        _, audit, risk = self._audits[rid]
        s = summary(read_manifest(path))
        try:
            estimator = self._estimator(rid, path)
            attributes = [a for t in s["tables"] for a in t.get("attributes", [])]
            example = example_where(estimator.domains, attributes)
        except VpubError:
            example = None
        return s | {"audit": audit, "risk": risk, "example": example}

    def _estimator(self, rid: str, path: Path) -> Estimator:
        """The release's estimator, built once per manifest version."""
        stamp = (path / MANIFEST).stat().st_mtime_ns
        with self._lock:
            if self._estimators.get(rid, (None,))[0] != stamp:
                rel = open_release(path)
                models, domains = release_models(rel)
                n = int(rel.manifest["source"]["rows"])
                self._estimators[rid] = (stamp, Estimator(models, n, domains))
            return self._estimators[rid][1]

    def report(self, rid: str) -> str:
        """`vpub report`'s page of the release, the reader's view (no source), made on
        first use and again when its manifest changes."""
        from ..reporting.facts import release_facts
        from ..reporting.html import release_page

        path = self._path(rid)
        with self._report_lock:  # one report made at a time, each once
            stamp = (path / MANIFEST).stat().st_mtime_ns
            if self._reports.get(rid, (None,))[0] != stamp:
                self._reports[rid] = (stamp, release_page(release_facts(path)))
            return self._reports[rid][1]

    def estimate(self, rid: str, where: str) -> tuple[float, int]:
        """`vpub query`'s estimate of COUNT(*) WHERE `where`, and the release's rows."""
        estimator = self._estimator(rid, self._path(rid))
        with self._lock:  # the estimator fills caches as it answers
            return estimator.count(parse_where(where, estimator.domains)), estimator.n
