"""The numbers a release report shows, gathered from the published files alone (the
reader's view) and, given the source, from the owner's data too (the owner's view).

Every number is the one the corresponding command prints: the audit's checks are
`vpub audit`'s (`audit_release`), the guarantee is the catalog's and the export's
(`release.export.guarantee` and `guarantee_lines`), the risk figures are
`vpub utility`'s and `vpub releases show`'s (`utility.risk.release_risk`), KL and the
workload's errors are `vpub utility`'s (`utility.evaluate`, same defaults). Decisions:
a source is accepted only when the audit's source checks pass (its rows and every
table's multisets equal the release's; with the owner's `secret`, the keyed
fingerprint too), since a report comparing a release with other data would mislead;
group sizes and distinct sensitive values are read from each table's ST (a projection
has no groups: its cells' counts stand for them, and it has no sensitive values).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DataError
from ..lake.catalog import Root, lineage, manifests
from ..release.audit.checks import AuditReport
from ..release.audit.release import audit_release
from ..release.export import guarantee, guarantee_lines
from ..release.layout import COUNT, GROUP
from ..release.reader import ReleaseReader, open_release
from ..utility.evaluate import Utility, evaluate_loaded, load_source
from ..utility.queries import Estimator
from ..utility.release_models import release_models
from ..utility.risk import release_risk

WORKLOAD = {"qd": 3, "p": 0.4, "queries": 1000, "seed": 0}
"""`vpub utility`'s workload defaults: the report's owner view uses the same."""


@dataclass(frozen=True)
class TableFacts:
    """One published table: what the manifest says, each group's size and number of
    distinct sensitive values (None for a projection), and its risk figures."""

    name: str
    kind: str
    attributes: list[str]
    sensitive: str
    rows: int
    sizes: np.ndarray
    distinct: np.ndarray | None
    risk: dict[str, float]


@dataclass(frozen=True)
class AttributeFacts:
    """One attribute's distribution: the source's counts and the release's estimates."""

    name: str
    labels: list[str]
    true: np.ndarray
    estimate: np.ndarray


@dataclass(frozen=True)
class OwnerFacts:
    """What only the owner, holding the source, can see."""

    utility: Utility
    workload: dict[str, float]
    attributes: list[AttributeFacts]


@dataclass(frozen=True)
class ReleaseFacts:
    """Everything a release report shows."""

    release_id: str
    manifest: dict
    guarantee: str
    rule_sentences: list[str]
    guarantee_lines: list[str]
    audit: AuditReport
    signature: str
    lineage: list[str]
    tables: list[TableFacts]
    limits: list[str]
    owner: OwnerFacts | None


def release_facts(
    path: str | Path,
    source: str | None = None,
    secret: str | None = None,
    verify_key: str | None = None,
) -> ReleaseFacts:
    """The report's numbers for the release at `path`.

    Args:
        path: a committed release's directory.
        source: the data it was published from (the owner's view), or None.
        secret: the owner's run record or seed file: the fingerprint is checked too.
        verify_key: an Ed25519 public key the manifest's signature must verify with.

    Returns:
        The facts, the owner's part only with `source`.

    Raises:
        DataError: `path` is not a release, or `source` is not the data it was
            published from (the failed check named).
    """
    rel = open_release(path)
    m = rel.manifest
    audit = audit_release(path, source=source, verify_key=verify_key, secret=secret)
    if source is not None:
        _source_matches(audit, source, str(m.get("release_id")))
    return ReleaseFacts(
        release_id=str(m.get("release_id")),
        manifest=m,
        guarantee=guarantee(m),
        rule_sentences=rule_sentences(m),
        guarantee_lines=[line.removeprefix("- ").replace("`", "") for line in guarantee_lines(m)],
        audit=audit,
        signature=_signature(m, verify_key, audit),
        lineage=_lineage(Path(path), m),
        tables=[_table_facts(rel, entry, risk) for entry, risk in _risks(rel)],
        limits=limits(m),
        owner=owner_facts(rel, source) if source is not None else None,
    )


def _source_matches(audit: AuditReport, source: str, release_id: str) -> None:
    """Refuse a source whose rows or multisets differ from the release's."""
    for c in audit.failures:
        if c.name.startswith("source:") or "the source" in c.name:
            raise DataError(
                f"{Path(source).name}: not the data release {release_id} was published from "
                f"({c.name}: {c.detail})"
            )


def _risks(rel: ReleaseReader) -> list[tuple[dict, dict[str, float]]]:
    risks = release_risk(rel)
    return [(entry, risks[entry["name"]]) for entry in rel.tables]


def rule_sentences(m: dict) -> list[str]:
    """One plain sentence per rule (per marginal table, for m-invariance): who knows
    what, and the bound; the GNF verdict that makes it hold."""
    privacy = m.get("privacy") or {}
    p = privacy.get("l") or privacy.get("m")
    verdicts = {v.get("rule"): v for v in (m.get("gnf") or {}).get("verdicts", [])}
    out = []
    for i, r in enumerate(m.get("rules") or []):
        why = verdicts.get(i, {}).get("reason")
        out.append(
            f"Rule {i + 1}, {', '.join(r['lhs'])} -> {r['rhs']}: whoever knows a person's "
            f"{', '.join(r['lhs'])} and reads this release cannot tell their {r['rhs']} "
            f"with probability above 1/{p}" + (f" ({why})." if why else ".")
        )
    if not out and privacy.get("model") == "m-invariance":
        for t in m.get("tables") or []:
            qi = [a for a in t.get("attributes", []) if a != t.get("sensitive")]
            out.append(
                f"Marginal {t['name']}: whoever knows a person's {', '.join(qi)} cannot tell "
                f"their {t.get('sensitive')} with probability above 1/{p}, in this release "
                "and in every release published from the same private store."
            )
    return out


def limits(m: dict) -> list[str]:
    """What the release cannot show, in plain words: the threat model's limits that
    apply to it (docs/explanation/threat-model.md)."""
    privacy = m.get("privacy") or {}
    p = privacy.get("l") or privacy.get("m")
    out = [
        "The guarantee bounds what can be learned about one person's sensitive value "
        "from their quasi-identifiers. It does not hide who is in the table, and facts "
        f"true of a whole group stay visible: a group where every value but one is rare "
        f"still shows that the common one is likely (never above 1/{p} for a person).",
        "It holds against anyone who knows the algorithm, this software and every "
        "published file, but not the owner's secret seed or private store; whoever has "
        "those can re-run the algorithm and learn more.",
        "Counts estimated from the release are estimates: within a group, the release "
        "does not say which person holds which sensitive value.",
    ]
    if (m.get("partitions") or 1) > 1:
        out.append(
            f"The release shows that the rows were split into {m['partitions']} partitions; "
            "the number tells nothing of where sensitive values lie."
        )
    if (m.get("suppression") or {}).get("rows"):
        out.append(
            f"{m['suppression']['rows']:,} rows were left out (suppressed) to meet the rules."
        )
    return out


def _signature(m: dict, verify_key: str | None, audit: AuditReport) -> str:
    """The signature's state in words: verified, unchecked or absent."""
    if not m.get("signed_by"):
        return "unsigned"
    if verify_key is None:
        return f"signed by {m['signed_by']}: not checked (no key given)"
    ok = all(c.ok for c in audit.checks if c.name == "signature")
    return f"signed by {m['signed_by']}: " + ("verified" if ok else "DOES NOT VERIFY")


def _lineage(path: Path, m: dict) -> list[str]:
    """The releases of its family this one supersedes, newest first (itself first)."""
    found = manifests(Root(str(path.resolve().parent)))
    rid = str(m.get("release_id"))
    return lineage(found, rid) if rid in found else [rid]


def _table_facts(rel: ReleaseReader, entry: dict, risk: dict[str, float]) -> TableFacts:
    s = entry.get("sensitive")
    sensitive = ", ".join(s) if isinstance(s, list) else str(s or "")
    if entry.get("kind") == "projection":
        counts = rel.read(entry["name"], "counts", [COUNT])
        sizes, distinct = _ints(counts[COUNT]), None
    else:
        sizes, distinct = group_sizes(rel.read(entry["name"], "st"), s)
    return TableFacts(
        name=entry["name"],
        kind=str(entry.get("kind")),
        attributes=list(entry.get("attributes", [])),
        sensitive=sensitive,
        rows=int(entry.get("rows", 0)),
        sizes=sizes,
        distinct=distinct,
        risk=risk,
    )


def group_sizes(st: pa.Table, sensitive: str | list[str] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per group of an ST (group, sensitive value(s), count): its size and its number of
    distinct sensitive values (combinations, for several; a suppressed group's null
    values count as none).

    Args:
        st: the table's ST part.
        sensitive: its sensitive attribute, or several.

    Returns:
        (sizes, distinct), one entry per group, in group order.
    """
    names = sensitive if isinstance(sensitive, list) else [str(sensitive)]
    sizes = st.group_by(GROUP).aggregate([(COUNT, "sum")]).sort_by(GROUP)
    shown = st.filter(pc.greater(st[COUNT], 0))
    for a in names:
        shown = shown.filter(pc.is_valid(shown[a]))
    cells = shown.group_by([GROUP, *names]).aggregate([])
    per = cells.group_by(GROUP).aggregate([([], "count_all")]).sort_by(GROUP)
    groups, with_values = _ints(sizes[GROUP]), _ints(per[GROUP])
    at = np.minimum(np.searchsorted(with_values, groups), max(len(with_values) - 1, 0))
    found = with_values[at] == groups if len(with_values) else np.zeros(len(groups), bool)
    distinct = np.where(found, _ints(per["count_all"])[at] if len(with_values) else 0, 0)
    return _ints(sizes[f"{COUNT}_sum"]), distinct.astype(np.int64)


def _ints(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.to_numpy(), dtype=np.int64)


def owner_facts(rel: ReleaseReader, source: str) -> OwnerFacts:
    """KL, the workload's errors (`vpub utility`'s defaults) and each attribute's true
    and estimated distribution, from `source` read with the manifest's table spec."""
    models, domains = release_models(rel)
    domains, codes = load_source(rel, source, domains)
    w = WORKLOAD
    utility = evaluate_loaded(
        models, domains, codes, int(w["qd"]), w["p"], int(w["queries"]), int(w["seed"])
    )
    estimator = Estimator(models, len(codes), domains)
    attributes = []
    for a in codes.columns:
        labels = [str(v) for v in domains[a]]
        true = np.bincount(codes[a].to_numpy(), minlength=len(labels))
        estimate = estimator.counts([{a: frozenset([i])} for i in range(len(labels))])
        attributes.append(AttributeFacts(a, labels, true, estimate))
    return OwnerFacts(utility, dict(w), attributes)
