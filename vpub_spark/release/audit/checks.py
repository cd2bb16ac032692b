"""The audit's checks of one table, per table kind (docs/explanation/auditor.md), from the
files alone.

Each kind has a check of its parts (`<kind>_checks(rel, entry, table, l, rows, check)`;
`l` is m for generalized marginals) and a comparison with the source
(release/audit/source.py). `release/kinds.py` puts them in the registry. They share no code with the writers or the kernels: pyarrow and
pandas on the published files only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import DataError
from ...model import PublishedTable
from ..layout import COUNT, COUNTERFEITS, GROUP
from ..reader import ReleaseReader

Checker = Callable[..., bool]  # check(name, ok, detail="") -> ok


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class AuditReport:
    """An audit's result: every check run (name, passed, detail) and the warnings;
    `passed` when there was a check and every check passed."""

    release: str
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # said, but not failures

    def check(self, name: str, ok: object, detail: str = "") -> bool:
        """Record one check (a `Checker`); its result."""
        self.checks.append(Check(name, bool(ok), detail))
        return bool(ok)

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
            "warnings": list(self.warnings),
        }


def projection_checks(
    rel: ReleaseReader, entry: dict, t: PublishedTable, l: int, rows: int, check: Checker
) -> None:
    """An aggregated, duplicate-preserving projection: counts cover every row, no key twice."""
    counts = rel.read(t.name, "counts")
    columns(check, t.name, "counts", counts, [*t.attributes, COUNT])
    total = pc.sum(counts[COUNT]).as_py() or 0
    check(f"{t.name}: covers every row", total == rows, f"counts sum to {total} of {rows}")
    distinct = counts.group_by(list(t.attributes)).aggregate([]).num_rows
    check(
        f"{t.name}: aggregated",
        distinct == counts.num_rows and pc.min(counts[COUNT]).as_py() > 0,
        f"{counts.num_rows} rows, {distinct} distinct",
    )


def anatomy_checks(
    rel: ReleaseReader, entry: dict, t: PublishedTable, l: int, rows: int, check: Checker
) -> None:
    """QIT and ST agree on the groups and their sizes; in every group no sensitive value
    has a share above 1/l (Xiao & Tao's anatomy; 004 Definition 4)."""
    s = str(t.sensitive)
    qi = [a for a in t.attributes if a != s]
    group_ids = file_by_file(rel, check, t.name, "qit", [GROUP, *qi], GROUP)
    st = rel.read(t.name, "st")
    columns(check, t.name, "st", st, [GROUP, s, COUNT])
    if group_ids is None:
        return
    check(
        f"{t.name}: covers every row",
        len(group_ids) == rows,
        f"QIT has {len(group_ids)} rows of {rows}",
    )
    qit_groups, size = key_sums(_ints(group_ids))
    per_group = per_group_cells(st, s)
    both = per_group is not None and np.array_equal(qit_groups, per_group[0])
    check(
        f"{t.name}: same groups in QIT and ST",
        both,
        f"{len(qit_groups)} groups in QIT, "
        + ("ST group ids out of range" if per_group is None else f"{len(per_group[0])} in ST"),
    )
    if not both or per_group is None:
        return
    groups, st_size, top, least, _ = per_group
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
        f"{len(groups)} groups; largest share {share[worst]:.3f} (group {groups[worst]}), limit 1/{l} = {1 / l:.3f}",
    )


def _ints(column: pa.ChunkedArray) -> np.ndarray:
    """An integer column as int64 (nulls as 0: the column checks report them), copied
    only where a chunk or a type asks for it."""
    array = column.combine_chunks()
    if array.null_count:
        array = array.fill_null(0)
    return array.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def key_sums(key: np.ndarray, weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct keys ascending, the count of each, or the sum of its `weight`): by
    counting when the keys are dense (group ids) and only counted, else by a stable sort
    (near-linear on the ordered files a writer leaves; integer sums, exact); correct on
    any order."""
    if not len(key):
        return key, np.zeros(0, np.int64)
    low, high = int(key.min()), int(key.max())
    if weight is None and high - low <= 2 * len(key) + 1024:  # dense: by counting
        counts = np.bincount(key if low == 0 else key - low, minlength=high - low + 1)
        present = np.flatnonzero(counts)
        return present + low, counts[present].astype(np.int64)
    order = np.argsort(key, kind="stable")
    k = key[order]
    w = np.ones(len(k), np.int64) if weight is None else weight[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    return k[starts], np.add.reduceat(w, starts)


def row_multisets(tables: list[pa.Table], names: list[str]) -> list[tuple[np.ndarray, ...]]:
    """Each table's rows on `names` as a multiset that compares equal (`np.array_equal`,
    array by array) exactly when the tables' multisets are equal: the columns coded in
    one space shared by the tables (`_shared_codes`), packed into one int64 a row and
    counted by `key_sums` (its distinct keys and their counts), or, when the codes do not
    fit in 62 bits, the coded columns in lexicographic order."""
    coded = [_shared_codes([t[n] for t in tables]) for n in names]
    radix = [r for _, r in coded]
    packs = np.prod(np.array(radix, dtype=float)) < 2.0**62
    out = []
    for i, t in enumerate(tables):
        codes = [c[i] for c, _ in coded]
        if not packs:
            order = np.lexsort(codes[::-1])
            out.append(tuple(c[order] for c in codes))
            continue
        key = np.zeros(t.num_rows, np.int64)
        for c, r in zip(codes, radix, strict=True):
            key *= r
            key += c
        out.append(key_sums(key))
    return out


def _shared_codes(columns: list[pa.ChunkedArray]) -> tuple[list[np.ndarray], int]:
    """One column of several tables in one code space, and its radix: integers without
    nulls as their distance from the smallest of them, any other values as their
    position among the values of every table (a null: one past them)."""
    if all(pa.types.is_integer(c.type) and not c.null_count for c in columns):
        values = [_ints(c) for c in columns]
        low = min((int(v.min()) for v in values if len(v)), default=0)
        high = max((int(v.max()) for v in values if len(v)), default=0)
        return [v - low for v in values], high - low + 1
    arrays = [c.combine_chunks() for c in columns]
    encoded = [a if pa.types.is_dictionary(a.type) else pc.dictionary_encode(a) for a in arrays]
    union = pc.unique(pa.concat_arrays([e.dictionary for e in encoded]))
    codes = []
    for e in encoded:
        rank = pc.index_in(e.dictionary, value_set=union).to_numpy(zero_copy_only=False)
        index = e.indices.fill_null(len(e.dictionary)).to_numpy(zero_copy_only=False)
        codes.append(np.append(rank, len(union)).astype(np.int64)[index])
    return codes, len(union) + 1


def _one_row_per_cell(group: np.ndarray, value: np.ndarray, width: int) -> bool:
    """Whether the ST rows come in non-decreasing group order with no (group, value)
    cell twice (then a cell's sum is its row's count): linear, by a bitmap over the
    cells of the groups present when that is small (at most 64 bytes a row), unless the
    rows are in strictly increasing (group, value) order (no cell twice, by booleans)."""
    step, same = group[1:] > group[:-1], group[1:] == group[:-1]
    if (step | (same & (value[1:] > value[:-1]))).all():
        return True
    if not (step | same).all():
        return False
    low, high = int(group[0]), int(group[-1])
    cells = (high - low + 1) * width
    if low < 0 or cells > 64 * len(group) + 4096:
        return False
    cell = group - low  # in place from here: one row-sized temporary
    cell *= width
    cell += value
    seen = np.zeros(cells, dtype=bool)
    seen[cell] = True
    return int(np.count_nonzero(seen)) == len(group)


def per_group_cells(st: pa.Table, s: str):
    """Per ST group (ascending): its id, size, largest and smallest (group, value) count
    (rows of one value in one group summed) and number of values; None if the ids are
    too large to combine with the values in 64 bits."""
    group = _ints(st[GROUP])
    codes = pc.dictionary_encode(st[s].combine_chunks())
    width = len(codes.dictionary) + 1
    value = codes.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    value += 1
    count = _ints(st[COUNT])
    if len(group) and _one_row_per_cell(group, value, width):  # as the writer leaves it
        return _group_runs(group, count)
    if len(group) and np.abs(group).max() >= 2**62 // width:
        return None
    cells, counts = key_sums(group * width + value, count)
    return _group_runs(cells // width, counts)


def _group_runs(group: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, ...]:
    """For cells sorted by group: each group, the sum, largest and smallest of its
    counts, and its number of cells."""
    if not len(group):
        return group, count, count, count, count
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    return (
        group[starts],
        np.add.reduceat(count, starts),
        np.maximum.reduceat(count, starts),
        np.minimum.reduceat(count, starts),
        np.diff(np.r_[starts, len(group)]),
    )


def generalized_checks(
    rel: ReleaseReader, entry: dict, t: PublishedTable, m: int, rows: int, check: Checker
) -> None:
    """A generalized table: GROUPS and ST agree on the groups and their sizes, every
    group is m-unique (a marginal of the m-invariant publisher, 002: at least m values,
    each once) or l-diverse (003's methods: no value above 1/l of its group), and every
    box is an interval of the attribute's published domain (min <= max)."""
    s = str(t.sensitive)
    qi = [a for a in t.attributes if a != s]
    groups, st = rel.read(t.name, "groups"), rel.read(t.name, "st")
    columns(
        check,
        t.name,
        "groups",
        groups,
        [GROUP, *[f"{a}_{e}" for a in qi for e in ("min", "max")], "size"]
        + [COUNTERFEITS] * bool(entry.get(COUNTERFEITS)),
    )
    columns(check, t.name, "st", st, [GROUP, s, COUNT])
    g = groups.to_pandas()
    cells = per_group_cells(st, s)  # counting, not a hash aggregation
    if cells is None:
        check(f"{t.name}: same groups in GROUPS and ST", False, "ST group ids out of range")
        return
    names = (GROUP, "st_size", "top", "least", "values")
    per = pd.DataFrame(dict(zip(names, cells, strict=True))).drop(columns="least")
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
    fake = joined[COUNTERFEITS] if COUNTERFEITS in joined else 0
    agree = (joined["size"] + fake == joined["st_size"]) & (joined["size"] > 0)
    check(
        f"{t.name}: group sizes agree",
        agree.all(),
        f"{int((~agree).sum())} groups differ"
        + (" (size + counterfeits = ST's, >= 1 real tuple)" if COUNTERFEITS in joined else ""),
    )
    _group_privacy(rel, t.name, joined, m, check)
    _box_checks(t.name, g, qi, entry.get("domains") or {}, check)


def _group_privacy(
    rel: ReleaseReader, table: str, joined: pd.DataFrame, m: int, check: Checker
) -> None:
    """m-unique groups (002's marginals) or l-diverse ones (003's methods)."""
    if rel.manifest["privacy"].get("model") == "m-invariance":
        ok = (
            (joined["top"] == 1) & (joined["values"] == joined["st_size"]) & (joined["values"] >= m)
        )
        name, what = f"{m}-unique", f"each with >= {m} distinct sensitive values, once each"
    else:  # 003's methods: l-diversity per group, no value above 1/l
        ok = joined["top"] * m <= joined["st_size"]
        name, what = f"{m}-diverse", f"no sensitive value in more than 1/{m} of its group"
    worst = joined.loc[~ok, GROUP].head(3).tolist()
    check(
        f"{table}: {name}",
        ok.all(),
        f"{len(joined)} groups, {what}"
        if ok.all()
        else f"{int((~ok).sum())} groups are not, e.g. {worst}",
    )


def _box_checks(name: str, g: pd.DataFrame, qi: list[str], domains: dict, check: Checker) -> None:
    """Every box of a generalized table is an interval of the attribute's listed domain."""
    for a in qi:
        if a not in domains:
            check(f"{name}: domain of {a}", False, "the manifest lists no domain")
            continue
        pos = {v: i for i, v in enumerate(domains[a])}
        lo, hi = g[f"{a}_min"].astype(str).map(pos), g[f"{a}_max"].astype(str).map(pos)
        ok = lo.notna().all() and hi.notna().all() and (lo <= hi).all()
        check(
            f"{name}: boxes on {a}",
            ok,
            "every box an interval of the domain"
            if ok
            else "a box end is not a domain value or min > max",
        )


def multi_sa_checks(
    rel: ReleaseReader, entry: dict, t: PublishedTable, l: int, rows: int, check: Checker
) -> None:
    """000 Appendix B: in every published group, for every sensitive attribute A_i, every
    combination v of the other sensitive attributes and every value a of A_i,
    l * count(a, v) <= count(v). Suppressed groups: one ST row, every sensitive value null."""
    sa = list(t.sensitive_set)
    qi = [a for a in t.attributes if a not in sa]
    qit, st = rel.read(t.name, "qit"), rel.read(t.name, "st")
    columns(check, t.name, "qit", qit, [GROUP, *qi])
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
    _suppression_checks(t.name, entry, frame, suppressed, check)
    _diversity_check(t.name, frame.loc[~suppressed], sa, l, check)


def _diversity_check(name: str, shown: pd.DataFrame, sa: list[str], l: int, check: Checker) -> None:
    """l * count(a, v) <= count(v) in every group, for every SA attribute's value a and
    combination v of the others (000 Appendix B), over the published ST rows."""
    cells = shown.groupby([GROUP, *sa], sort=False)[COUNT].sum().reset_index()
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
        f"{name}: multi-SA {l}-diverse",
        bad == 0,
        f"{cells[GROUP].nunique()} groups; largest share of one value given the other sensitive values {worst:.3f} ({where}), limit 1/{l}",
    )


def _suppression_checks(
    name: str, entry: dict, frame: pd.DataFrame, suppressed: pd.Series, check: Checker
) -> None:
    """A suppressed group has exactly one ST row; the manifest counts its rows."""
    sup_groups = frame.loc[suppressed, GROUP]
    one_row = frame[GROUP].isin(sup_groups).sum() == len(sup_groups) and sup_groups.is_unique
    sup_rows = int(frame.loc[suppressed, COUNT].sum())
    check(
        f"{name}: suppressed groups",
        one_row,
        f"{len(sup_groups)} groups, {sup_rows} rows, one null ST row each",
    )
    check(
        f"{name}: suppressed rows as recorded",
        entry.get("suppressed_rows") == sup_rows,
        f"manifest {entry.get('suppressed_rows')}, files {sup_rows}",
    )


def columns(check: Checker, table: str, part: str, data: pa.Table, expected: list[str]) -> None:
    _column_checks(check, table, part, data.column_names, expected)
    nulls = [n for n in data.column_names if data[n].null_count]
    check(f"{table}/{part}: no missing values", not nulls, f"nulls in {nulls}" if nulls else "none")


def _column_checks(
    check: Checker, table: str, part: str, names: list[str], expected: list[str]
) -> None:
    check(
        f"{table}/{part}: columns",
        sorted(names) == sorted(expected),
        f"{names}, expected {expected}",
    )


def file_by_file(
    rel: ReleaseReader, check: Checker, table: str, part: str, expected: list[str], keep: str
) -> pa.ChunkedArray | None:
    """`columns`' checks of a large part, one file (one partition) in memory at a time,
    or over the part whole when `rel` holds it already (`ReleaseReader.kept`); the
    column `keep`, if present."""
    names = rel.column_names(table, part)
    _column_checks(check, table, part, names, expected)
    kept: list[pa.Array] = []
    nulls: set[str] = set()
    try:
        whole = rel.kept(table, part)
        for data in [whole] if whole is not None else rel.read_files(table, part, names):
            nulls.update(n for n in names if data[n].null_count)
            if keep in names:
                kept.extend(data[keep].chunks)
        column = pa.chunked_array(kept) if kept else pa.chunked_array([], pa.int64())
    except (pa.ArrowInvalid, KeyError) as e:  # a column one file lacks, or of another type
        raise DataError(f"tables/{table}/{part}: files disagree on their columns ({e})") from None
    missing = sorted(nulls, key=names.index)
    check(
        f"{table}/{part}: no missing values", not nulls, f"nulls in {missing}" if nulls else "none"
    )
    return column if keep in names else None
