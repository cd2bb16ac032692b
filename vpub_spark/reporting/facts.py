"""The numbers a release report shows, gathered from the published files alone (the
reader's view) and, given the source, from the owner's data too (the owner's view).

Every number is the one the corresponding command prints: the audit's checks are
`vpub audit`'s (`audit_release`), the guarantee is the catalog's and the export's
(`release.export.guarantee` and `guarantee_lines`), the risk figures are
`vpub utility`'s and `vpub releases show`'s (`utility.risk.table_risk`), KL and the
workload's errors are `vpub utility`'s (`utility.evaluate`, same defaults). Decisions:
a source is accepted only when the audit's source checks pass (its rows and every
table's multisets equal the release's; with the owner's `secret`, the keyed
fingerprint too), since a report comparing a release with other data would mislead;
distinct sensitive values per group are read from each table's ST, group sizes too
except for a generalized table, whose groups part holds its people without the
counterfeits (a projection has no groups: its cells' counts stand for them, and it
has no sensitive values).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engines.inprocess import HeldSourceEngine
from ..engines.pool import default_workers, run_tasks
from ..errors import DataError, VpubError
from ..lake.catalog import Root, lineage, manifests
from ..model import joined_sensitive_tables, unsafe_option
from ..release.audit.checks import AuditReport, per_group_cells
from ..release.audit.release import audit_release
from ..release.export import guarantee, guarantee_lines
from ..release.layout import COUNT, GROUP, SIZE
from ..release.reader import UNREADABLE, ReadAhead, ReleaseReader
from ..tablespec import table_spec_from_dict
from ..utility.evaluate import Utility, evaluate_loaded, load_source
from ..utility.queries import Estimator
from ..utility.release_models import release_models
from ..utility.risk import table_risk

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
    error: str | None = None
    """Why the table could not be read (an audit that failed), else None."""


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
    meanwhile: Callable[[], object] | None = None,
    ahead: ReadAhead | None = None,
) -> ReleaseFacts:
    """The report's numbers for the release at `path`.

    Args:
        path: a committed release's directory.
        source: the data it was published from (the owner's view), or None.
        secret: the owner's run record or seed file: the fingerprint is checked too.
        verify_key: an Ed25519 public key the manifest's signature must verify with.
        meanwhile: run in this process while the audit and the owner's measures run
            in forked ones (the command line imports the plotting library then).
        ahead: the release at `path` being read already (the command line starts it
            before its imports); else it is read here, beside the source.

    Returns:
        The facts, the owner's part only with `source`.

    Raises:
        DataError: `path` is not a release, or `source` is not the data it was
            published from (the failed check named).
    """
    ahead = ahead or ReadAhead(path)  # the parts and the source read side by side
    m = ahead.reader.manifest
    try:
        engine = _reading(m, source)
    finally:
        rel = ahead.result()  # no thread left running when the audit is forked
    work = partial(_audit_or_owner, rel, source, secret, verify_key, engine)
    parts = ["audit", "owner"] if source is not None else ["audit"]
    done = run_tasks(work, parts, default_workers(), meanwhile)  # on two cores, side by side
    (audit, tables), owner = done[0], done[1] if source is not None else None
    _owner_inputs_match(audit, source, str(m.get("release_id")))
    if isinstance(owner, Exception):  # a source the audit accepted, yet unusable
        raise owner
    return ReleaseFacts(
        release_id=str(m.get("release_id")),
        manifest=m,
        guarantee=guarantee(m),
        rule_sentences=rule_sentences(m, audit.passed),
        guarantee_lines=[line.removeprefix("- ").replace("`", "") for line in guarantee_lines(m)],
        audit=audit,
        signature=_signature(m, verify_key, audit),
        lineage=_lineage(str(path), m),
        tables=tables,
        limits=limits(m),
        owner=owner,
    )


def _reading(m: dict, source: str | None) -> HeldSourceEngine | None:
    """An engine holding `source`, read once here for the audit and the owner's
    measures, which are forked after it (the 10M `sal` source: read twice, 2.9 s of
    one core each, against 1.9 s on two), or None without a source."""
    spec = (m.get("source") or {}).get("table_spec")
    if source is None or spec is None:  # no spec: the audit says what is wrong
        return None
    return HeldSourceEngine(source, table_spec_from_dict(spec))


def _audit_or_owner(
    rel: ReleaseReader,
    source: str | None,
    secret: str | None,
    verify_key: str | None,
    engine: HeldSourceEngine | None,
    which: str,
):
    """The audit and the tables' facts (`which` = "audit"), or the owner's facts
    ("owner"): a task of its own, since neither needs the other, each reading the
    source through `engine` and the parts through `rel`, which holds them (the owner's
    measures take the longer: the 10M `sal` release's, 10.8 s against 8.2 s for the
    audit and the tables, side by side). The owner's failure is returned, not raised:
    a source the audit refuses is refused by name first."""
    if which == "audit":
        audit = audit_release(
            rel, source=source, engine=engine, verify_key=verify_key, secret=secret
        )
        return audit, [_table_facts(rel, entry) for entry in rel.tables]
    assert source is not None
    try:
        return owner_facts(rel, source, engine)
    except Exception as e:
        return e


def _owner_inputs_match(audit: AuditReport, source: str | None, release_id: str) -> None:
    """Refuse an owner's secret that did not make the release, then a source whose rows
    or multisets differ from the release's (every source check of the audit names the
    source)."""
    for c in audit.failures:
        if c.name == "secrecy: the owner's proof":
            raise DataError(f"--secret: {c.detail}")
    if source is None:
        return
    for c in audit.failures:
        if "source" in c.name:
            raise DataError(
                f"{Path(source).name}: not the data release {release_id} was published from "
                f"({c.name}: {c.detail})"
            )


def rule_sentences(m: dict, audited: bool = True) -> list[str]:
    """One plain sentence per rule (per marginal table for m-invariance without rules):
    who knows what, and the bound, as strong as the release makes it. A GNF verdict
    that the schema violates, an option without the posterior guarantee, tables of
    sensitive values grouped apart, or a failed audit each say so in the sentence.

    Args:
        m: the release's manifest.
        audited: whether the audit of the files passed.

    Returns:
        The sentences, in rule order.
    """
    p = (m.get("privacy") or {}).get("l") or (m.get("privacy") or {}).get("m")
    verdicts = {v.get("rule"): v for v in (m.get("gnf") or {}).get("verdicts", [])}
    unsafe, joined = unsafe_option(m), joined_sensitive_tables(m)
    bound = f"with probability above 1/{p}"
    if unsafe:
        bound = f"beyond what the audit shows (no group shows a value in more than 1/{p} of its rows; made with {unsafe}, which has no posterior bound)"
    elif joined:
        bound += f" from any one of the tables {', '.join(joined)} (not from them combined)"
    if not audited:
        bound += "; but the audit of these files FAILED, so this is not shown"
    out = []
    for i, r in enumerate(m.get("rules") or []):
        v = verdicts.get(i, {})
        who = f"Rule {i + 1}, {', '.join(r['lhs'])} -> {r['rhs']}: "
        if v.get("status") == "violated":
            out.append(
                who
                + f"NOT guaranteed: the schema violates Guardian Normal Form ({v.get('reason')})."
            )
            continue
        why = f" ({v['reason']})" if v.get("reason") else ""
        out.append(
            who + f"whoever knows a person's {', '.join(r['lhs'])} and reads this release "
            f"cannot tell their {r['rhs']} {bound}{why}."
        )
    if not out and (m.get("privacy") or {}).get("model") == "m-invariance":
        for t in m.get("tables") or []:
            qi = [a for a in t.get("attributes", []) if a != t.get("sensitive")]
            out.append(
                f"Marginal {t['name']}: whoever knows a person's {', '.join(qi)} cannot tell "
                f"their {t.get('sensitive')} {bound}."
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
        "The bound holds against anyone who knows the algorithm, this software and every "
        "published file, but not the owner's secret seed or private store; whoever has "
        "those can re-run the algorithm and learn more.",
        "Counts estimated from the release are estimates: within a group, the release "
        "does not say which person holds which sensitive value.",
    ]
    if unsafe_option(m):
        out.append(
            f"It was made with {unsafe_option(m)}: an adversary who knows the algorithm can "
            f"infer a value with probability above 1/{p}; only the audited bound holds."
        )
    if joined_sensitive_tables(m):
        out.append(
            "Its tables of different sensitive attributes were grouped each on its own: "
            "whoever knows how those attributes go together can combine the tables' groups "
            "beyond the bound of each."
        )
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


def _lineage(path: str, m: dict) -> list[str]:
    """The releases of its family this one supersedes, newest first (itself first),
    from the releases beside it (a local directory or an object store's prefix)."""
    rid = str(m.get("release_id"))
    parent = (
        path.rstrip("/").rsplit("/", 1)[0] if "://" in path else str(Path(path).resolve().parent)
    )
    try:
        found = manifests(Root(parent))
    except VpubError:  # a root that cannot be listed: the release alone
        return [rid]
    return lineage(found, rid) if rid in found else [rid]


def _table_facts(rel: ReleaseReader, entry: dict) -> TableFacts:
    """A table's facts; one that cannot be read (the audit says why) has its error."""
    s = entry.get("sensitive")
    facts = TableFacts(
        name=str(entry.get("name")),
        kind=str(entry.get("kind")),
        attributes=list(entry.get("attributes", [])),
        sensitive=", ".join(s) if isinstance(s, list) else str(s or ""),
        rows=int(entry.get("rows", 0)),
        sizes=np.zeros(0, np.int64),
        distinct=None,
        risk={},
    )
    try:
        sizes, distinct = _groups(rel, entry)
        return replace(facts, sizes=sizes, distinct=distinct, risk=table_risk(rel, entry))
    except UNREADABLE as e:
        return replace(facts, error=str(e) or type(e).__name__)


def _groups(rel: ReleaseReader, entry: dict) -> tuple[np.ndarray, np.ndarray | None]:
    """(rows per group, distinct sensitive values per group): a projection's cells and
    no values; a generalized table's sizes from its groups part (the ST of a marginal
    holds counterfeits too, the sizes only people)."""
    name = entry["name"]
    if entry.get("kind") == "projection":
        return _ints(rel.read(name, "counts", [COUNT])[COUNT]), None
    st = rel.read(name, "st")
    sizes, distinct = group_sizes(st, entry.get("sensitive"))
    if entry.get("kind") == "generalized":
        groups = rel.read(name, "groups", [GROUP, SIZE])
        people = groups.group_by(GROUP).aggregate([(SIZE, "sum")]).sort_by(GROUP)
        sizes = _ints(people[f"{SIZE}_sum"])
    return sizes, distinct


def group_sizes(st: pa.Table, sensitive: str | list[str] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per group of an ST (group, sensitive value(s), count): its size and its number of
    distinct sensitive values (combinations, for several; a suppressed group's null
    values count as none), from the auditor's per-group pass (`per_group_cells`, NumPy
    over the writer's order) for one attribute, Arrow's group-by for several.

    Args:
        st: the table's ST part.
        sensitive: its sensitive attribute, or several.

    Returns:
        (sizes, distinct), one entry per group, in group order.
    """
    names = sensitive if isinstance(sensitive, list) else [str(sensitive)]
    every = st.num_rows and not st[COUNT].null_count and pc.min(st[COUNT]).as_py() > 0
    every = every and not any(st[a].null_count for a in names)
    shown = st
    if not every:
        shown = st.filter(pc.greater(st[COUNT], 0))
        for a in names:
            shown = shown.filter(pc.is_valid(shown[a]))
    runs = per_group_cells(shown, names[0]) if len(names) == 1 and shown.num_rows else None
    if runs is not None and every:  # every row shown: its per-group pass has the sizes
        return runs[1].astype(np.int64), runs[4].astype(np.int64)
    sizes = st.group_by(GROUP).aggregate([(COUNT, "sum")]).sort_by(GROUP)
    if runs is not None:
        with_values, per = runs[0], runs[4]
    else:
        cells = shown.group_by([GROUP, *names]).aggregate([])
        counted = cells.group_by(GROUP).aggregate([([], "count_all")]).sort_by(GROUP)
        with_values, per = _ints(counted[GROUP]), _ints(counted["count_all"])
    groups = _ints(sizes[GROUP])
    at = np.minimum(np.searchsorted(with_values, groups), max(len(with_values) - 1, 0))
    found = with_values[at] == groups if len(with_values) else np.zeros(len(groups), bool)
    distinct = np.where(found, per[at] if len(with_values) else 0, 0)
    return _ints(sizes[f"{COUNT}_sum"]), distinct.astype(np.int64)


def _ints(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.to_numpy(), dtype=np.int64)


def owner_facts(
    rel: ReleaseReader, source: str, engine: HeldSourceEngine | None = None
) -> OwnerFacts:
    """KL, the workload's errors (`vpub utility`'s defaults and code: the same figures)
    and each attribute's true and estimated distribution, from `source` read with the
    manifest's table spec (by `engine`, which may hold it already)."""
    models, domains = release_models(rel)
    domains, codes = load_source(rel, source, domains, engine)
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
