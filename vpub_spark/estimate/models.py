"""One estimate model per table kind, behind one protocol (000 §5.1;
docs/explanation/algorithms.md).

A model is one published table in code space (`codes.py`) and answers three
questions: `marginal(keys)`, its estimated count at each row of `keys` (codes of some
of its attributes; what KL and the junction-tree estimate use); `count(query)`, its
estimated COUNT(*) of a query's conditions on its attributes; and `joint`, its whole
estimated distribution (for message passing over overlapping tables).
- `ProjectionModel`: an aggregated projection gives its counts.
- `AnatomyModel`: for any subset A of its attributes (QI part Q_A, maybe S),
  est_A(x) = sum_g n_g(x_{Q_A}) * (c_g(x_S) / |g| if S in A else 1): QI values and the
  sensitive value are independent inside a group.
- `MultiSaModel` (multi_sa.py) and `GeneralizedModel` (generalized.py).
`release/kinds.py` names each kind's model; `utility/release_models.py` builds a
release's models from its files.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

import numpy as np
import pandas as pd

from ..kernels.arrays import dense_ids, pack_codes, positions
from .codes import EST, Part, Query, mask, to_codes
from .columns import COUNT, GROUP
from .qi_runs import QiRuns, cell_sums, pair_sums, qi_runs


class EstimateModel(Protocol):
    """What the estimators (KL, queries, GD's scorer) ask of a published table."""

    @property
    def name(self) -> str: ...

    @property
    def attributes(self) -> tuple[str, ...]: ...

    @property
    def view(self) -> bool:
        """True for a view of the whole table (a generalized marginal, 002): queries go
        to the smallest view holding their attributes. False for the tables of a
        decomposition (GNF), combined by the junction tree."""
        ...

    def rows(self) -> int: ...

    def marginal(self, keys: pd.DataFrame) -> np.ndarray: ...

    def count(self, query: Query) -> float: ...

    @property
    def joint(self) -> pd.DataFrame: ...


def _at(keys: pd.DataFrame, est: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """`est`'s EST at every row of `keys` (0 where it has none)."""
    return keys.merge(est, on=cols, how="left")[EST].fillna(0.0).to_numpy(float)


def _cell_index(
    frame: pd.DataFrame, cols: Sequence[str], sizes: Mapping[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's cell over `cols` (mixed radix over `sizes`, in `cols`' order), for the
    rows that have one (the mask): a code outside the domain, such as a suppressed -1,
    falls in no cell, as no query's values hold it."""
    codes = [frame[c].to_numpy() for c in cols]  # packed as they are: no int64 copies
    ok = np.ones(len(frame), bool)
    for c, a in zip(codes, cols, strict=True):
        ok &= (c >= 0) & (c < sizes[a])
    if not ok.all():
        codes = [c[ok] for c in codes]
    return pack_codes(
        codes, [sizes[a] for a in cols], len(codes[0]) if codes else int(ok.sum())
    ), ok


DENSE_SHARES = 1 << 28
"""An anatomy table's shares are found through a dense table of counts
(`AnatomyModel._count_cells`, one byte a cell when no count exceeds 255: 256 MB at
most) when groups x (sensitive values + 1) is at most this many cells."""


JOINT_CELLS = 1 << 24
"""An anatomy table may hold a dense estimated joint, a sum per (QI cell, sensitive
value) (`AnatomyModel._joint`), of at most this many cells (128 MB): KL's keys and
the workload's cubes are then read from it."""

JOINT_PER_ROW = 4
"""... and of at most this many cells per QIT row (the joint's work is its rows and
its cells; sorting the rows into runs is the alternative)."""


def _padded(joint: np.ndarray, k: int) -> np.ndarray:
    """`joint` with zeros appended on its last axis to length `k`."""
    pad = np.zeros([*joint.shape[:-1], k - joint.shape[-1]])
    return np.concatenate([joint, pad], axis=-1)


def _joint_fits(cells: int, rows: int) -> bool:
    """Whether an anatomy table of `rows` QIT rows holds a dense joint of `cells` sums
    (`AnatomyModel._joint`) rather than sorting its rows into runs per key: at most
    `JOINT_CELLS`, and a few per row (the joint's work is its rows and its cells)."""
    return cells <= min(JOINT_CELLS, JOINT_PER_ROW * rows)


def _distinct(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(key, return_inverse=True)`, without its sort when the keys are
    already strictly increasing (a KL term's distinct source rows, in key order)."""
    if len(key) < 2 or bool(np.all(key[1:] > key[:-1])):
        return key, np.arange(len(key))
    return np.unique(key, return_inverse=True)


def _summed(values: pd.Series, frame: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    return values.groupby([frame[c] for c in cols], sort=False).sum().rename(EST).reset_index()


@dataclass(frozen=True)
class ProjectionModel:
    """An aggregated projection: `counts` (codes + count)."""

    name: str
    attributes: tuple[str, ...]
    counts: pd.DataFrame
    view = False
    _held: dict[tuple[str, ...], pd.DataFrame] = field(
        default_factory=dict, compare=False, repr=False
    )

    def rows(self) -> int:
        return int(self.counts[COUNT].sum())

    def estimates(self, cols: list[str]) -> pd.DataFrame:
        """EST at every combination of `cols` the table holds."""
        return self.counts.groupby(cols, sort=False)[COUNT].sum().rename(EST).reset_index()

    def marginal(self, keys: pd.DataFrame) -> np.ndarray:
        cols = list(keys.columns)
        if not cols:
            return np.full(len(keys), float(self.rows()))
        if tuple(cols) not in self._held:  # kept: every slice of keys on `cols` reuses it
            self._held[tuple(cols)] = self.estimates(cols)
        return _at(keys, self._held[tuple(cols)], cols)

    def count(self, query: Query) -> float:
        return float(self.counts.loc[mask(self.counts, query), COUNT].sum())

    def cube(self, cols: Sequence[str], sizes: Mapping[str, int]) -> np.ndarray:
        """`count` of every cell over `cols` at once: a dense array in `cols`' order."""
        cell, ok = _cell_index(self.counts, cols, sizes)
        shape = [sizes[a] for a in cols]
        weights = self.counts[COUNT].to_numpy(float)[ok]
        return np.bincount(cell, weights=weights, minlength=math.prod(shape)).reshape(shape)

    @cached_property
    def joint(self) -> pd.DataFrame:
        return self.estimates(list(self.attributes))

    @classmethod
    def from_parts(cls, entry: dict, parts: Mapping[str, Part], domains) -> ProjectionModel:
        return cls(entry["name"], tuple(entry["attributes"]), to_codes(parts["counts"], domains))


@dataclass(frozen=True)
class Groups:
    """Anatomy groups as dense indices: for QIT rows, ST rows, and each group's size."""

    qit: np.ndarray
    st: np.ndarray
    size: np.ndarray

    @property
    def count(self) -> int:
        return len(self.size)


@dataclass(frozen=True)
class AnatomyModel:
    """An anatomy table: `qit` (group_id + QI codes) and `st` (group_id, S code, count)."""

    name: str
    attributes: tuple[str, ...]
    sensitive: str
    qit: pd.DataFrame
    st: pd.DataFrame
    view = False
    _per_q_held: dict[tuple[str, ...], pd.DataFrame] = field(
        default_factory=dict, compare=False, repr=False
    )
    _sorted_held: dict[tuple[str, ...], QiRuns | None] = field(
        default_factory=dict, compare=False, repr=False
    )
    _joints: dict[tuple[tuple[str, ...], tuple[int, ...], bool], np.ndarray] = field(
        default_factory=dict, compare=False, repr=False
    )
    _making: threading.RLock = field(default_factory=threading.RLock, compare=False, repr=False)

    @property
    def qi(self) -> list[str]:
        return [a for a in self.attributes if a != self.sensitive]

    def rows(self) -> int:
        return len(self.qit)

    @cached_property
    def groups(self) -> Groups:
        ids, index = dense_ids(self.st[GROUP].to_numpy())
        size = np.bincount(index, weights=self.st[COUNT].to_numpy(), minlength=len(ids))
        return Groups(positions(ids, self.qit[GROUP].to_numpy()), index, size)

    @cached_property
    def share(self) -> pd.DataFrame:
        """Per (group, sensitive value), `w` = c_g(s) / |g|."""
        size = self.st.groupby(GROUP)[COUNT].sum().rename("size")
        share = self.st.join(size, on=GROUP)
        return share.assign(w=share[COUNT] / share["size"])[[GROUP, self.sensitive, "w"]]

    def _per_q(self, q: list[str]) -> pd.DataFrame:
        """n_g(x_q): the QIT's rows per group and combination of `q`, kept per `q` (every
        marginal on the same columns, e.g. one per chunk of rows, reuses it)."""
        if tuple(q) not in self._per_q_held:
            self._per_q_held[tuple(q)] = (
                self.qit.groupby([GROUP, *q], sort=False).size().rename("n").reset_index()
            )
        return self._per_q_held[tuple(q)]

    def estimates(self, cols: list[str]) -> pd.DataFrame:
        """EST = sum_g n_g(x_q) c_g(s) / |g| at every combination of `cols` the groups
        give (without the sensitive attribute: the QIT's counts)."""
        q = [c for c in cols if c != self.sensitive]
        per_q = self._per_q(q)
        if self.sensitive not in cols:
            return per_q.groupby(q, sort=False)["n"].sum().rename(EST).reset_index()
        j = per_q.merge(self.share, on=GROUP)
        return _summed(j["n"] * j["w"], j, cols)

    def marginal(self, keys: pd.DataFrame) -> np.ndarray:
        cols = list(keys.columns)
        if not cols:
            return np.full(len(keys), float(self.rows()))
        q = [c for c in cols if c != self.sensitive]
        sorted_est = self._sorted_marginal(keys, q)
        if sorted_est is not None:
            return sorted_est
        if self.sensitive not in cols:
            return _at(keys, self.estimates(cols), cols)
        per_q = self._per_q(q)
        needed = keys.drop_duplicates()
        joined = needed.merge(per_q, on=q, how="inner") if q else needed.merge(per_q, how="cross")
        joined = joined.merge(self.share, on=[GROUP, self.sensitive], how="inner")
        return _at(keys, _summed(joined["n"] * joined["w"], joined, cols), cols)

    def _qi_runs(self, q: list[str]) -> QiRuns | None:
        """n_g(x_q) as `QiRuns`, kept per q; None when the codes do not pack."""
        if tuple(q) not in self._sorted_held:
            g = self.groups
            codes = [self.qit[c].to_numpy() for c in q]  # no int64 copies: packed as they are
            self._sorted_held[tuple(q)] = qi_runs(codes, g.qit, g.count)
        return self._sorted_held[tuple(q)]

    def _sorted_marginal(self, keys: pd.DataFrame, q: list[str]) -> np.ndarray | None:
        """`marginal` in NumPy, without pandas joins (they do not scale: at 7.8M keys of a
        10M-row table they took 99 s): read from the dense joint over `q` (`_joint`) when
        it fits, else each distinct key meets the (group, x_q) runs of its QI key
        (`qi_runs.pair_sums`), weighted by c_g(s) / |g| when s is asked for. None when
        the codes do not pack into int64 (then the joins answer)."""
        with_s = self.sensitive in keys.columns
        s = keys[self.sensitive].to_numpy() if with_s else np.zeros(len(keys), np.int32)
        if not self.rows() or self.st.empty or s.min(initial=0) < 0:
            return None
        radix = self._radix(q)
        if radix is not None and self._joint_fits(radix, with_s):
            return self._joint_at(keys, q, s if with_s else None, radix)
        runs = self._qi_runs(q)
        if runs is None:
            return None
        codes = [keys[c].to_numpy() for c in q]
        outside = np.zeros(len(keys), bool)
        for c, r in zip(codes, runs.radix, strict=True):
            outside |= (c < 0) | (c >= r)  # a code the QIT never shows: no group holds it
        if outside.any():
            codes = [np.clip(c, 0, r - 1) for c, r in zip(codes, runs.radix, strict=True)]
        qkey = pack_codes(codes, runs.radix, len(keys))
        top = max(int(s.max(initial=0)), int(self.st[self.sensitive].max())) + 1 if with_s else 1
        qkey *= top
        np.add(qkey, s, out=qkey, casting="unsafe")  # s of any integer type, >= 0
        if outside.any():
            qkey[outside] = -1
        wanted, back = _distinct(qkey)
        kq = np.floor_divide(wanted, top)
        lo, hi = runs.slices(kq)
        if not with_s:
            total = np.r_[0.0, np.cumsum(runs.n)]
            return (total[hi] - total[lo])[back]
        ks = (wanted - kq * top).astype(np.int32 if top < 2**31 else np.int64)
        return pair_sums(lo, hi, self._weights(runs, ks), ks)[back]

    @cached_property
    def _code_ranges(self) -> dict[str, tuple[int, int]]:
        """Each QI column's smallest and largest code in the QIT."""
        return {c: (int(self.qit[c].min()), int(self.qit[c].max())) for c in self.qi}

    def _radix(self, q: list[str]) -> list[int] | None:
        """Each QI column's largest code + 1 in the QIT; None when one is negative."""
        if not self.rows() or any(self._code_ranges[c][0] < 0 for c in q):
            return None
        return [self._code_ranges[c][1] + 1 for c in q]

    def _whole_joint_fits(self, sizes: Mapping[str, int], with_s: bool) -> bool:
        """Whether `cube` sums down the joint over every QI attribute: it fits, and every
        QIT row is inside every QI domain (a row another attribute's -1 leaves out of
        that joint still counts in a cube without that attribute)."""
        radix = self._radix(self.qi)
        if radix is None or any(r > sizes[a] for a, r in zip(self.qi, radix, strict=True)):
            return False
        return self._joint_fits([sizes[a] for a in self.qi], with_s)

    def _joint_fits(self, radix: Sequence[int], with_s: bool) -> bool:
        """Whether the dense joint over `radix` (`_joint`) is held rather than sorting
        the QIT's rows into runs."""
        width = int(self._shares[1].max(initial=-1)) + 1 if with_s else 1
        return _joint_fits(math.prod(radix) * max(width, 1), self.rows())

    def _joint_at(
        self, keys: pd.DataFrame, q: list[str], s: np.ndarray | None, radix: list[int]
    ) -> np.ndarray:
        """The dense joint over `q` (`_joint`) read at each key (0 outside it)."""
        joint = self._joint(tuple(q), tuple(radix), s is not None)
        codes = [keys[c].to_numpy() for c in q]
        hit = np.ones(len(keys), bool) if s is None else s < joint.shape[1]
        for c, r in zip(codes, radix, strict=True):
            hit &= (c >= 0) & (c < r)  # a code the QIT never shows: no group holds it
        cell = pack_codes([np.where(hit, c, 0) for c in codes], radix, len(keys))
        return np.where(hit, joint[cell, 0 if s is None else np.where(hit, s, 0)], 0.0)

    def _joint(self, q: tuple[str, ...], radix: tuple[int, ...], with_s: bool) -> np.ndarray:
        """est at every cell of QI attributes `q` (mixed radix over `radix`, in `q`'s
        order; a code outside it in no cell), a dense (cells, width) array: with S, at
        every sensitive code (`qi_runs.cell_sums`); without, the QIT's rows (width 1).
        Kept per (q, radix, with_s); threads wait for the one that makes it."""
        with self._making:
            if (q, radix, with_s) not in self._joints:
                cell, ok = _cell_index(self.qit, q, dict(zip(q, radix, strict=True)))
                cells = math.prod(radix)
                self._joints[q, radix, with_s] = (
                    cell_sums(cell, self.groups.qit[ok], cells, self._shares)
                    if with_s
                    else np.bincount(cell, minlength=cells).astype(float)[:, None]
                )
            return self._joints[q, radix, with_s]

    def _weights(self, runs: QiRuns, s: np.ndarray):
        """The pairs' terms n_g(x_q) c_g(s) / |g| for `pair_sums`: a lookup in the dense
        table of counts (`_count_cells`) times each run's n_g / |g| when the table is
        small enough, else `_share_at`'s search within each group."""
        cells = self._count_cells
        if cells is None:
            return lambda at, s_: self._share_at(runs.group[at], s_) * runs.n[at]
        table, top = cells
        np.minimum(s, top, out=s)  # a value no group holds: the zero column past the table
        rate = runs.per_run("rate", lambda: runs.n / self.groups.size[runs.group])
        # int32: the table has at most DENSE_SHARES cells
        base = runs.per_run("cell", lambda: runs.group.astype(np.int32) * np.int32(top + 1))
        return lambda at, s_: table[base[at] + s_] * rate[at]

    @cached_property
    def _shares(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """c_g(s) / |g| sorted by (dense group, s), with each group's first position."""
        g = self.groups
        s, w = (
            self.st[self.sensitive].to_numpy(np.int64),
            self.st[COUNT].to_numpy(float) / g.size[g.st],
        )
        first = np.r_[0, np.cumsum(np.bincount(g.st, minlength=g.count))]
        a, b = g.st[:-1], g.st[1:]  # sorted by (group, s) as written, mostly: checked on
        ordered = (b > a) | ((b == a) & (s[1:] >= s[:-1]))  # row-sized booleans only
        if not bool(ordered.all()):
            order = np.argsort(g.st * (int(s.max(initial=0)) + 2) + s + 1, kind="stable")
            s, w = s[order], w[order]
        return first, s, w

    @cached_property
    def _count_cells(self) -> tuple[np.ndarray, int] | None:
        """c_g(s) per group x (max s + 2) cell (0: g does not hold s; the last column,
        s = top, is always 0: every larger value is looked up there), in the smallest
        unsigned integer type that holds the counts, when that has at most `DENSE_SHARES`
        cells; else None. A share is then one lookup and a division by |g|."""
        g = self.groups
        s = self.st[self.sensitive].to_numpy(np.int64)
        count = self.st[COUNT].to_numpy(np.int64)
        top = int(s.max(initial=-1)) + 1
        if g.count * (top + 1) > DENSE_SHARES or top == 0:
            return None
        table = np.zeros(g.count * (top + 1), np.min_scalar_type(int(count.max(initial=0))))
        known = s >= 0  # a suppressed value (-1) is never asked for
        table[(g.st * (top + 1) + s)[known]] = count[known]
        return table, top

    def _share_at(self, group: np.ndarray, s: np.ndarray) -> np.ndarray:
        """c_g(s) / |g| for each (group, s) pair (0 where g does not hold s), when the
        dense table of counts is too large: a binary search within each group's few
        values, all pairs at once. At 10M rows (1M groups of 10, 50 sensitive values: a
        50 MB table) one task's 34M pairs took 1.8 s by the dense table and 12.6 s by the
        search; one search over all (group, s) keys took 22 s for 67M pairs (~12 cache
        misses a pair)."""
        first, values, share = self._shares
        lo, end = first[group], first[group + 1]
        hi = end.copy()
        while True:
            open_ = lo < hi
            if not open_.any():
                break
            mid = (lo + hi) // 2
            right = open_ & (values[np.minimum(mid, len(values) - 1)] < s)
            lo, hi = np.where(right, mid + 1, lo), np.where(open_ & ~right, mid, hi)
        at = np.minimum(lo, len(values) - 1)
        return np.where((lo < end) & (values[at] == s), share[at], 0.0)

    def count(self, query: Query) -> float:
        """est = sum_g n_g(q_QI) * c_g(q_S) / |g| (docs/explanation/algorithms.md)."""
        in_q = mask(self.qit, {a: v for a, v in query.items() if a in self.qi})
        if self.sensitive not in query:
            return float(in_q.sum())
        g = self.groups
        n_g = np.bincount(g.qit[in_q], minlength=g.count)
        in_s = mask(self.st, {self.sensitive: query[self.sensitive]})
        c_g = np.bincount(g.st[in_s], weights=self.st[COUNT].to_numpy()[in_s], minlength=g.count)
        return float(np.sum(n_g * c_g / g.size))

    def cube(self, cols: Sequence[str], sizes: Mapping[str, int]) -> np.ndarray:
        """`count` of every cell over `cols` at once, a dense array in `cols`' order:
        without S the QIT's rows per cell; with S, sum_g n_g(x_q) c_g(s) / |g| for all
        cells; each summed down from the whole joint over the table's QI (`_joint`, made
        once for every cube) when it is affordable, else from the joint over `cols`' QI.
        1,000 queries on the 1M `sal` release took about 11 s one `count` at a time,
        1.07 s by cubes (`Estimator.counts`)."""
        q = [a for a in cols if a != self.sensitive]
        with_s = self.sensitive in cols
        over = self.qi if self._whole_joint_fits(sizes, with_s) else q
        cells = tuple(sizes[a] for a in over)
        joint = self._joint(tuple(over), cells, with_s).reshape([*cells, -1])
        if with_s:
            k = sizes[self.sensitive]
            joint = joint[..., :k] if joint.shape[-1] >= k else _padded(joint, k)
        else:
            joint = joint[..., 0]  # the QIT's rows: width 1
        joint = joint.sum(axis=tuple(i for i, a in enumerate(over) if a not in q))
        kept = [a for a in over if a in q] + ([self.sensitive] if with_s else [])
        return np.transpose(joint, [kept.index(a) for a in cols])

    @cached_property
    def joint(self) -> pd.DataFrame:
        """Every QI combination of a group with every sensitive value of it."""
        return self.estimates(list(self.attributes))

    @classmethod
    def from_parts(cls, entry: dict, parts: Mapping[str, Part], domains) -> AnatomyModel:
        qit, st = to_codes(parts["qit"], domains), to_codes(parts["st"], domains)
        return cls(entry["name"], tuple(entry["attributes"]), entry["sensitive"], qit, st)


def anonymized_model(
    frame: pd.DataFrame,
    attributes: Sequence[str],
    sensitive: str | None,
    l: int,
    seed: int,
    group: np.ndarray | None = None,
) -> AnatomyModel | ProjectionModel:
    """The model of one table anonymized in memory by the release's kernel (one
    partition): anatomy for `sensitive`, on its own or by the `group` of each row that
    every anatomy table of the release shares (kernels/shared_grouping.py), or the
    aggregated projection."""
    from ..kernels.anatomy import anatomize, grouped_tables

    cols = list(attributes)
    if sensitive is None:
        counts = frame.groupby(cols, sort=False).size().rename(COUNT).reset_index()
        return ProjectionModel("t", tuple(cols), counts)
    if group is None:
        qit, st = anatomize(frame[cols], sensitive, l, seed)
    else:
        qit, st = grouped_tables(frame[cols], sensitive, [c for c in cols if c != sensitive], group)
    return AnatomyModel("t", tuple(cols), sensitive, qit, st)
