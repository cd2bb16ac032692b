"""The auditor (DESIGN.md §4, §7): re-checks a release from its files alone.

It shares no code with the writer or the anatomy kernel: it reads the manifest and the
Parquet files with pyarrow and checks, per anatomy table, that QIT and ST agree on the
groups and their sizes and that in every group no sensitive value has a share above
1/l; per multi-SA table, the condition of 000 Appendix B in every group and how
suppressed groups look; per generalized marginal (002), that every group is m-unique and its box an interval
of the published domain; per projection, that it is aggregated; that every table covers every row; and that
the manifest's schema is GNF for its rules (000 Definition 5) with the verdicts it
records. With the source data it also checks that every table's multisets equal the
source's projections (nothing lost, nothing invented), reading the source with the
table spec the manifest records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import VpubError
from ..gnf import check_gnf
from ..model import PublishedTable, Schema
from ..rules import parse_rules
from .reader import COUNT, FORMAT_VERSION, GROUP, PARTS, Release, open_release

REQUIRED = (
    "format_version",
    "release_id",
    "created_at",
    "software_version",
    "seed",
    "source",
    "privacy",
    "rules",
    "method",
    "tables",
    "gnf",
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class AuditReport:
    release: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def as_dict(self) -> dict:
        return {
            "passed": self.passed,
            "checks": len(self.checks),
            "failures": [f"{c.name}: {c.detail}" for c in self.failures],
        }


def audit_release(
    path: str | Path, source: str | None = None, require_committed: bool = True
) -> AuditReport:
    """Audit the release at `path`; the in-process engine reads `source` (it needs the
    source's rows in memory, which the auditor's value counts keep small)."""
    report = AuditReport(Path(path).name)

    def check(name: str, ok: object, detail: str = "") -> bool:
        report.checks.append(Check(name, bool(ok), detail))
        return bool(ok)

    try:
        rel = open_release(path)
    except VpubError as e:
        check("manifest", False, str(e))
        return report
    m = rel.manifest
    missing = [k for k in REQUIRED if k not in m]
    if not check(
        "manifest fields",
        not missing,
        f"missing: {', '.join(missing)}" if missing else "all present",
    ):
        return report
    check(
        "format version",
        m["format_version"] == FORMAT_VERSION,
        f"{m['format_version']} (this auditor reads {FORMAT_VERSION})",
    )
    if require_committed:
        check(
            "committed",
            rel.committed,
            "_SUCCESS present" if rel.committed else "no _SUCCESS: the release was never committed",
        )
    try:
        l = int(
            m["privacy"]["l"]
            if m["privacy"].get("model", "l-diversity") == "l-diversity"
            else m["privacy"]["m"]
        )
        rows = int(m["source"]["rows"])
        rules = parse_rules(m["rules"])
        tables = [PublishedTable.from_entry(t) for t in m["tables"]]
    except (VpubError, KeyError, TypeError, ValueError) as e:
        check("manifest schema", False, f"unreadable: {e}")
        return report
    if m["privacy"].get("model") == "m-invariance":
        _invariance_checks(rel, tables, check)
    else:
        _schema_checks(m, tables, rules, check)
    on_disk = (
        {d.name for d in (rel.path / "tables").iterdir() if d.is_dir()}
        if (rel.path / "tables").is_dir()
        else set()
    )
    listed = {t.name for t in tables}
    check(
        "tables on disk",
        on_disk == listed,
        f"on disk {sorted(on_disk)}, in the manifest {sorted(listed)}",
    )
    for entry, t in zip(m["tables"], tables, strict=True):
        try:
            _table_checks(rel, entry, t, l, rows, check)
        except (VpubError, pa.ArrowException, KeyError) as e:
            check(f"{t.name}: readable", False, str(e))
    if source is not None:
        _source_checks(rel, tables, source, check)
    return report


def _invariance_checks(rel: Release, tables: list[PublishedTable], check: Callable) -> None:
    """m-invariant marginals (002 Theorems 3-4) are not judged by GNF (000), which would
    flag any two tables sharing the sensitive attribute: they are safe together because
    every tuple keeps its signature. From the files: every table is a generalized
    marginal of one sensitive attribute, and every marginal shows the same multiset of
    group signatures (a bucket with c tuples per value becomes c groups with its
    signature in every marginal). Which tuple has which signature is checked by the
    private audit (`vpub audit --state`)."""
    kinds = {t.kind for t in tables}
    sens = {t.sensitive for t in tables}
    check(
        "m-invariance: one sensitive attribute, generalized marginals",
        kinds == {"generalized"} and len(sens) == 1,
        f"kinds {sorted(kinds)}, sensitive {sorted(map(str, sens))}",
    )
    if kinds != {"generalized"} or len(sens) != 1:
        return
    s = next(iter(sens))
    multisets = {}
    for t in tables:
        st = rel.read(t.name, "st", [GROUP, s]).to_pandas()
        sig = (
            st.assign(**{s: st[s].astype(str)})
            .sort_values([GROUP, s])
            .groupby(GROUP)[s]
            .agg("\x1f".join)
        )
        multisets[t.name] = sig.value_counts().sort_index()
    first = next(iter(multisets.values()))
    differ = [n for n, v in multisets.items() if not v.equals(first)]
    check(
        "m-invariance: the same signatures in every marginal",
        not differ,
        f"{len(first)} distinct signatures in {len(tables)} marginals"
        if not differ
        else f"{', '.join(differ)} differ from {tables[0].name}",
    )


def _schema_checks(m: dict, tables: list[PublishedTable], rules, check: Callable) -> None:
    gnf = check_gnf(Schema(tuple(tables)), rules)
    why = "; ".join(f"rule {v.index + 1} '{v.rule}': {v.reason}" for v in gnf.violated)
    check("GNF", gnf.ok, why or f"{len(rules)} rules, each unreachable or guarded")
    recorded = m["gnf"].get("verdicts") if isinstance(m["gnf"], dict) else None
    check(
        "GNF verdicts as recorded",
        recorded == [v.as_dict() for v in gnf.verdicts],
        "the manifest's verdicts match a fresh check",
    )
    for entry, t in zip(m["tables"], tables, strict=True):
        check(
            f"{t.name}: kind",
            entry.get("kind") == t.kind,
            f"{entry.get('kind')}; sensitive: {t.sensitive or ', '.join(t.sensitive_set) or None}",
        )


def _table_checks(
    rel: Release, entry: dict, t: PublishedTable, l: int, rows: int, check: Callable
) -> None:
    parts = set(entry.get("parts", {}))
    check(f"{t.name}: parts", parts == set(PARTS[t.kind]), f"{sorted(parts)}")
    check(
        f"{t.name}: rows",
        entry.get("rows") == rows,
        f"manifest says {entry.get('rows')}, the source had {rows}",
    )
    if t.kind == "projection":
        counts = rel.read(t.name, "counts")
        _columns(check, t.name, "counts", counts, [*t.attributes, COUNT])
        total = pc.sum(counts[COUNT]).as_py() or 0
        check(f"{t.name}: covers every row", total == rows, f"counts sum to {total} of {rows}")
        distinct = counts.group_by(list(t.attributes)).aggregate([]).num_rows
        check(
            f"{t.name}: aggregated",
            distinct == counts.num_rows and pc.min(counts[COUNT]).as_py() > 0,
            f"{counts.num_rows} rows, {distinct} distinct",
        )
        return
    if t.kind == "multi_sa":
        _multi_sa_checks(rel, entry, t, l, rows, check)
        return
    if t.kind == "generalized":
        _generalized_checks(rel, entry, t, l, rows, check)
        return
    s = t.sensitive
    qi = [a for a in t.attributes if a != s]
    qit, st = rel.read(t.name, "qit"), rel.read(t.name, "st")
    _columns(check, t.name, "qit", qit, [GROUP, *qi])
    _columns(check, t.name, "st", st, [GROUP, s, COUNT])
    check(
        f"{t.name}: covers every row",
        qit.num_rows == rows,
        f"QIT has {qit.num_rows} rows of {rows}",
    )
    sizes = qit.group_by(GROUP).aggregate([([], "count_all")]).rename_columns([GROUP, "qit_size"])
    cells = st.group_by([GROUP, s]).aggregate([(COUNT, "sum")])
    per_group = cells.group_by(GROUP).aggregate(
        [(f"{COUNT}_sum", "sum"), (f"{COUNT}_sum", "max"), (f"{COUNT}_sum", "min")]
    )
    per_group = per_group.rename_columns([GROUP, "st_size", "top", "least"])
    joined = sizes.join(per_group, GROUP, join_type="full outer")
    both = joined.num_rows == sizes.num_rows == per_group.num_rows
    check(
        f"{t.name}: same groups in QIT and ST",
        both,
        f"{sizes.num_rows} groups in QIT, {per_group.num_rows} in ST",
    )
    if not both:
        return
    size, st_size = joined["qit_size"].to_numpy(), joined["st_size"].to_numpy()
    top, least = joined["top"].to_numpy(), joined["least"].to_numpy()
    check(
        f"{t.name}: group sizes agree",
        (size == st_size).all(),
        f"{int((size != st_size).sum())} groups differ",
    )
    check(f"{t.name}: ST counts positive", least.min() > 0, f"smallest count {least.min()}")
    share = top / np.maximum(st_size, 1)
    worst = int(np.argmax(share))
    check(
        f"{t.name}: {l}-diverse",
        (top * l <= st_size).all(),
        f"{sizes.num_rows} groups; largest share {share[worst]:.3f} (group {joined[GROUP][worst].as_py()}), limit 1/{l} = {1 / l:.3f}",
    )


def _generalized_checks(
    rel: Release, entry: dict, t: PublishedTable, m: int, rows: int, check: Callable
) -> None:
    """A marginal of the m-invariant publisher (002): GROUPS and ST agree on the groups and
    their sizes, every group is m-unique (at least m sensitive values, each once) and
    every box is an interval of the attribute's published domain (min <= max)."""
    s = t.sensitive
    qi = [a for a in t.attributes if a != s]
    groups, st = rel.read(t.name, "groups"), rel.read(t.name, "st")
    _columns(
        check,
        t.name,
        "groups",
        groups,
        [GROUP, *[f"{a}_{e}" for a in qi for e in ("min", "max")], "size"],
    )
    _columns(check, t.name, "st", st, [GROUP, s, COUNT])
    g = groups.to_pandas()
    per = (
        st.group_by(GROUP)
        .aggregate([(COUNT, "sum"), (COUNT, "max"), (s, "count_distinct")])
        .to_pandas()
    )
    per = per.rename(
        columns={f"{COUNT}_sum": "st_size", f"{COUNT}_max": "top", f"{s}_count_distinct": "values"}
    )
    joined = g.merge(per, on=GROUP, how="outer")
    both = len(joined) == len(g) == len(per) and g[GROUP].is_unique
    check(
        f"{t.name}: same groups in GROUPS and ST",
        both,
        f"{len(g)} groups in GROUPS, {len(per)} in ST",
    )
    if not both:
        return
    check(
        f"{t.name}: covers every row",
        int(g["size"].sum()) == rows,
        f"group sizes sum to {int(g['size'].sum())} of {rows}",
    )
    check(
        f"{t.name}: group sizes agree",
        (joined["size"] == joined["st_size"]).all(),
        f"{int((joined['size'] != joined['st_size']).sum())} groups differ",
    )
    unique = (
        (joined["top"] == 1) & (joined["values"] == joined["st_size"]) & (joined["values"] >= m)
    )
    worst = joined.loc[~unique, GROUP].head(3).tolist()
    check(
        f"{t.name}: {m}-unique",
        unique.all(),
        f"{len(joined)} groups, each with >= {m} distinct sensitive values, once each"
        if unique.all()
        else f"{int((~unique).sum())} groups are not, e.g. {worst}",
    )
    domains = entry.get("domains") or {}
    for a in qi:
        if a not in domains:
            check(f"{t.name}: domain of {a}", False, "the manifest lists no domain")
            continue
        pos = {v: i for i, v in enumerate(domains[a])}
        lo, hi = g[f"{a}_min"].astype(str).map(pos), g[f"{a}_max"].astype(str).map(pos)
        ok = lo.notna().all() and hi.notna().all() and (lo <= hi).all()
        check(
            f"{t.name}: boxes on {a}",
            ok,
            "every box an interval of the domain"
            if ok
            else "a box end is not a domain value or min > max",
        )


def _multi_sa_checks(
    rel: Release, entry: dict, t: PublishedTable, l: int, rows: int, check: Callable
) -> None:
    """000 Appendix B: in every published group, for every sensitive attribute A_i, every
    combination v of the other sensitive attributes and every value a of A_i,
    l * count(a, v) <= count(v). Suppressed groups: one ST row, every sensitive value null."""
    sa = list(t.sensitive_set)
    qi = [a for a in t.attributes if a not in sa]
    qit, st = rel.read(t.name, "qit"), rel.read(t.name, "st")
    _columns(check, t.name, "qit", qit, [GROUP, *qi])
    check(
        f"{t.name}/st: columns",
        sorted(st.column_names) == sorted([GROUP, *sa, COUNT]),
        f"{st.column_names}",
    )
    check(
        f"{t.name}: covers every row",
        qit.num_rows == rows,
        f"QIT has {qit.num_rows} rows of {rows}",
    )
    frame = st.to_pandas()
    for a in sa:
        frame[a] = frame[a].astype(object)
    nulls = frame[sa].isna()
    suppressed = nulls.all(axis=1)
    check(
        f"{t.name}: suppression hides every sensitive value",
        (nulls.any(axis=1) == suppressed).all(),
        f"{int((nulls.any(axis=1) & ~suppressed).sum())} ST rows partly null",
    )
    sizes = (
        qit.group_by(GROUP).aggregate([([], "count_all")]).to_pandas().set_index(GROUP)["count_all"]
    )
    st_sizes = frame.groupby(GROUP)[COUNT].sum()
    same = sizes.sort_index().index.equals(st_sizes.sort_index().index)
    check(
        f"{t.name}: same groups in QIT and ST",
        same,
        f"{len(sizes)} groups in QIT, {len(st_sizes)} in ST",
    )
    if not same:
        return
    check(
        f"{t.name}: group sizes agree",
        (sizes.sort_index() == st_sizes.sort_index()).all(),
        "per group, QIT rows = ST counts",
    )
    check(
        f"{t.name}: ST counts positive",
        (frame[COUNT] > 0).all(),
        f"smallest count {frame[COUNT].min()}",
    )
    sup_groups = frame.loc[suppressed, GROUP]
    one_row = frame[GROUP].isin(sup_groups).sum() == len(sup_groups) and sup_groups.is_unique
    sup_rows = int(frame.loc[suppressed, COUNT].sum())
    check(
        f"{t.name}: suppressed groups",
        one_row,
        f"{len(sup_groups)} groups, {sup_rows} rows, one null ST row each",
    )
    check(
        f"{t.name}: suppressed rows as recorded",
        entry.get("suppressed_rows") == sup_rows,
        f"manifest {entry.get('suppressed_rows')}, files {sup_rows}",
    )
    cells = frame.loc[~suppressed].groupby([GROUP, *sa], sort=False)[COUNT].sum().reset_index()
    worst, where, bad = 0.0, "", 0
    for a in sa:
        others = [b for b in sa if b != a]
        total = (
            cells.groupby([GROUP, *others], sort=False)[COUNT].transform("sum")
            if others
            else cells.groupby(GROUP)[COUNT].transform("sum")
        )
        bad += int((l * cells[COUNT] > total).sum())
        share = (cells[COUNT] / total).to_numpy()
        if len(share) and share.max() > worst:
            i = int(np.argmax(share))
            worst, where = float(share[i]), f"{a} in group {cells[GROUP].iloc[i]}"
    check(
        f"{t.name}: multi-SA {l}-diverse",
        bad == 0,
        f"{cells[GROUP].nunique()} groups; largest share of one value given the other sensitive values {worst:.3f} ({where}), limit 1/{l}",
    )


def _columns(check: Callable, table: str, part: str, data: pa.Table, expected: list[str]) -> None:
    names = data.column_names
    check(
        f"{table}/{part}: columns",
        sorted(names) == sorted(expected),
        f"{names}, expected {expected}",
    )
    nulls = [n for n in names if data[n].null_count]
    check(f"{table}/{part}: no missing values", not nulls, f"nulls in {nulls}" if nulls else "none")


def _labels(frame: pd.DataFrame) -> pd.DataFrame:
    """A value-count frame in a canonical form: string labels, sorted rows."""
    cols = [c for c in frame.columns if c != COUNT]
    out = frame.astype({c: str for c in cols}).astype({COUNT: np.int64})
    return out.sort_values(cols, kind="stable").reset_index(drop=True)


def _source_checks(
    rel: Release, tables: list[PublishedTable], source: str, check: Callable
) -> None:
    from ..engines.inprocess import InProcessEngine
    from ..kernels.partitioning import ContentShards, combine_counts, fingerprint, shard_counts
    from ..tablespec import table_spec_from_dict

    spec = table_spec_from_dict(rel.manifest["source"]["table_spec"])
    loaded = InProcessEngine().load(source, spec)
    data = loaded.data
    check(
        "source: rows",
        loaded.rows == rel.manifest["source"]["rows"],
        f"source has {loaded.rows}, the manifest says {rel.manifest['source']['rows']}",
    )
    counts = combine_counts(shard_counts(data, [], ContentShards(0)), [], {})
    same = fingerprint(
        counts, {a: loaded.dictionaries[a].labels for a in loaded.names}
    ) == rel.manifest["source"].get("fingerprint")
    check(
        "source: fingerprint",
        same,
        "the manifest's fingerprint"
        if same
        else "the source differs from the one the release was made from",
    )

    def source_counts(cols: list[str]) -> pd.DataFrame:
        c = data.groupby(cols, sort=False).size().rename(COUNT).reset_index()
        for a in cols:
            c[a] = np.asarray(loaded.dictionaries[a].labels, dtype=object)[c[a].to_numpy()]
        return _labels(c)

    def release_counts(table: pa.Table, cols: list[str], weight: str | None = None) -> pd.DataFrame:
        agg = table.group_by(cols).aggregate([(weight, "sum")] if weight else [([], "count_all")])
        return _labels(agg.rename_columns([*cols, COUNT]).to_pandas())

    for t in tables:
        if t.kind == "projection":
            pairs = [
                (
                    list(t.attributes),
                    release_counts(rel.read(t.name, "counts"), list(t.attributes), COUNT),
                )
            ]
        elif t.kind == "multi_sa":
            sa = list(t.sensitive_set)
            qi = [a for a in t.attributes if a not in sa]
            pairs = [(qi, release_counts(rel.read(t.name, "qit", qi), qi))] if qi else []
            st = rel.read(t.name, "st", [*sa, COUNT]).drop_null()
            published = release_counts(st, sa, COUNT)
            merged = published.merge(
                source_counts(sa), on=sa, how="left", suffixes=("", "_source")
            ).fillna(0)
            invented = merged[merged[COUNT] > merged[f"{COUNT}_source"]]
            check(
                f"{t.name}: ({', '.join(sa)}) within the source",
                invented.empty,
                "every published combination occurs as often in the source"
                if invented.empty
                else f"{len(invented)} combinations published more often than the source has them",
            )
        elif (
            t.kind == "generalized"
        ):  # boxes hide QI values; the sensitive multiset must be the source's
            pairs = [
                (
                    [t.sensitive],
                    release_counts(
                        rel.read(t.name, "st", [t.sensitive, COUNT]), [t.sensitive], COUNT
                    ),
                )
            ]
        else:
            qi = [a for a in t.attributes if a != t.sensitive]
            pairs = [
                (qi, release_counts(rel.read(t.name, "qit", qi), qi)),
                (
                    [t.sensitive],
                    release_counts(
                        rel.read(t.name, "st", [t.sensitive, COUNT]), [t.sensitive], COUNT
                    ),
                ),
            ]
        for cols, published in pairs:
            expected = source_counts(cols)
            same = published.equals(expected)
            check(
                f"{t.name}: ({', '.join(cols)}) equals the source",
                same,
                "same multiset" if same else _difference(published, expected),
            )


def _difference(published: pd.DataFrame, expected: pd.DataFrame) -> str:
    cols = [c for c in expected.columns if c != COUNT]
    merged = published.merge(
        expected, on=cols, how="outer", suffixes=("_release", "_source")
    ).fillna(0)
    diff = merged[merged[f"{COUNT}_release"] != merged[f"{COUNT}_source"]]
    row = diff.iloc[0] if len(diff) else None
    example = (
        ""
        if row is None
        else f"; e.g. {dict(row[cols])}: release {int(row[f'{COUNT}_release'])}, source {int(row[f'{COUNT}_source'])}"
    )
    return f"{len(diff)} value combinations differ{example}"
