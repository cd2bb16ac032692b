"""`StatDB`: 004's statistical database over a private bucket store: counting queries
answered with result intervals by `dyn-ana` (A-Count), `dyn-gen` (G-Count) and the
static baselines `sta-ana` and `sta-gen` (004 §6, §7, §9), on any version of the store.

Why every answer is m-invariant with every marginal published from the store, across
versions, and the decisions: docs/explanation/statdb.md.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import SpecError, VpubError
from ..kernels.statdb import (
    Cells,
    Query,
    SensitiveCounts,
    StaticAnatomy,
    StaticGeneralization,
    a_count_cells,
    a_decompose,
    g_count_cells,
    qi_mask,
    signature_buckets,
)
from ..release.stores.integrity import verified
from ..release.stores.store import BUCKET, read_store
from ..release.stores.versions import COUNTERFEIT, latest, read_version, version_number
from ..utility.where import codes_text, label_text, parse_where, range_text

LOG = "queries.jsonl"


def _dyn_ana(b: Bucketization, q: Query) -> tuple[int, int]:
    """A-Count over the buckets' cells (004 §6)."""
    return a_count_cells(b.cells, b.qi_ok(q), q.sensitive)


def _dyn_gen(b: Bucketization, q: Query) -> tuple[int, int]:
    """G-Count over the buckets' cells (004 §7)."""
    return g_count_cells(b.cells, b.codes, q, b.fake)


def _sta_ana(b: Bucketization, q: Query) -> tuple[int, int]:
    """Static anatomy's interval (004 §9's baseline) from the store's own partition."""
    return b.static[0].interval(b.qi_ok(q), q.sensitive)


def _sta_gen(b: Bucketization, q: Query) -> tuple[int, int]:
    """Static generalization's interval (004 §9's baseline)."""
    if b.fake is not None:
        raise SpecError(
            "sta-gen reads every group's box as its tuples' extent, which a counterfeit (no QI values) breaks; this version holds counterfeits: ask dyn-ana, dyn-gen or sta-ana"
        )
    return b.static[1].interval(q)


ANSWERS: dict[str, Callable[[Bucketization, Query], tuple[int, int]]] = {
    "dyn-ana": _dyn_ana,
    "dyn-gen": _dyn_gen,
    "sta-ana": _sta_ana,
    "sta-gen": _sta_gen,
}
"""The query methods, by name: each answers a query from an open store."""
METHODS = tuple(ANSWERS)
_STATIC_LOCK = threading.Lock()  # one build of the static baselines at a time


@dataclass(frozen=True)
class Interval:
    """A result interval [low, high] (004 Definition 9): it holds the true count."""

    low: int
    high: int
    method: str
    version: int = 1

    def __str__(self) -> str:
        return f"[{self.low:,}, {self.high:,}]"


def _check_private(state: Path) -> None:
    for root, _dirs, files in os.walk(state):
        for p in [Path(root), *(Path(root) / f for f in files)]:
            mode = stat.S_IMODE(p.stat().st_mode)
            if mode & 0o077:
                raise VpubError(
                    f"{p}: mode {mode:o}; a private store must be owner-only (chmod -R go-rwx {state})"
                )


def parse_query(meta: dict, where: str) -> Query:
    """`age between 30 and 50 and salary in (3, 4)`: ranges on QI attributes (the
    `vpub query` grammar; a QI condition must select a range of its domain), any
    set on the sensitive attribute."""
    conditions = parse_where(where, meta["domains"])
    sensitive, qi = str(meta["sensitive"]), list(meta["qi"])
    ranges = {}
    for a, codes in conditions.items():
        if a == sensitive:
            continue
        if a not in qi:
            raise SpecError(f"{a} is not a QI attribute of this store ({', '.join(qi)})")
        if not codes:
            raise SpecError(f"the condition on {a} selects no value (an empty range)")
        lo, hi = min(codes), max(codes)
        if len(codes) != hi - lo + 1:
            order = ", ".join(label_text(v) for v in meta["domains"][a])
            raise SpecError(
                f"the condition on {a} selects no range of its values, which are in order: {order}"
            )
        ranges[a] = (lo, hi)
    chosen = conditions.get(sensitive, frozenset(range(len(meta["domains"][sensitive]))))
    return Query(ranges, frozenset(chosen))


def where_text(meta: dict, query: Query) -> str:
    """A Query as condition text in the store's labels (`parse_query` reads it back)."""
    d, s = meta["domains"], str(meta["sensitive"])
    parts = [range_text(a, d[a], lo, hi) for a, (lo, hi) in query.ranges.items()]
    return " and ".join([*parts, codes_text(s, d[s], query.sensitive)])


def _narrow(codes: np.ndarray) -> np.ndarray:
    """The smallest unsigned type holding the codes: scans read 4-8 times fewer bytes."""
    top = int(codes.max(initial=0))
    return codes.astype(np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.int64)


class Bucketization:
    """One version's bucketization as the answers read it: tuples bucket by bucket,
    value by value (004 §6.2), the served QI codes, the cells; `fake`: which tuples are
    counterfeits (None: none), never meeting a QI condition."""

    def __init__(self, qi: list[str], sensitive: str, tuples: pd.DataFrame, sizes=None):
        values = tuples[sensitive].to_numpy(np.int64)
        bucket = signature_buckets(tuples[BUCKET].to_numpy(np.int64), values)
        order = np.lexsort((values, bucket))
        self.values = values[order]
        fake = tuples[COUNTERFEIT].to_numpy(bool)[order] if COUNTERFEIT in tuples else None
        self.fake = fake if fake is not None and fake.any() else None
        codes = {a: tuples[a].to_numpy()[order] for a in qi}
        if self.fake is not None:  # one past each domain: no QI range holds a counterfeit
            codes = {a: np.where(self.fake, sizes[a], c) for a, c in codes.items()}
        self.codes = {a: _narrow(c) for a, c in codes.items()}
        self.bucket = bucket[order]
        self.cells = Cells.of(self.bucket, self.values)

    @property
    def rows(self) -> int:
        """The real tuples (counterfeits are not rows of the table)."""
        return len(self.values) - (0 if self.fake is None else int(self.fake.sum()))

    def qi_ok(self, q: Query) -> np.ndarray:
        """The real tuples meeting every QI condition of `q` (a counterfeit's codes lie
        past every domain, so a condition on any attribute leaves it out)."""
        ok = qi_mask(self.codes, q.ranges, len(self.values))
        return ok & ~self.fake if self.fake is not None and not q.ranges else ok

    @cached_property
    def static(self) -> tuple[StaticAnatomy, StaticGeneralization]:
        """The store's own partition (every bucket decomposed by position) as sta-ana
        and sta-gen answer from it; built once, on first use."""
        with _STATIC_LOCK:
            if "static" in self.__dict__:  # another thread built it meanwhile
                return self.__dict__["static"]
            group = a_decompose(self.bucket, self.values, np.zeros(len(self.values), bool))
            ana = StaticAnatomy(group, SensitiveCounts.of(group, self.values))
            qi = list(self.codes)
            return ana, StaticGeneralization.of(group, self.codes, qi, self.values)


class StatDB:
    """Counting queries with result intervals from a store (docs/explanation/statdb.md),
    on any of its versions (release/stores/versions.py; default: the latest)."""

    def __init__(self, state: Path, meta: dict, tuples: pd.DataFrame):
        self.qi, self.sensitive = list(meta["qi"]), str(meta["sensitive"])
        # the served attributes only: the QI attributes and the sensitive one
        self.domains = {a: list(meta["domains"][a]) for a in [*self.qi, self.sensitive]}
        self.state, self.meta = state, meta | {"domains": self.domains}
        self.latest = latest(meta)
        self._base = tuples
        self._views: dict[int, Bucketization] = {}
        self._lock = threading.Lock()

    def bucketization(self, version: int | str | None = None) -> Bucketization:
        """A version's bucketization (by number or opaque id; None: the latest), read
        once and kept."""
        n = version_number(self.meta, version)
        with self._lock:
            if n not in self._views:
                tuples = self._base
                if n > 1:
                    v = read_version(self.state, self.meta, self._base, n)
                    tuples = v.with_counterfeits(self.sensitive)
                sizes = {a: len(self.domains[a]) for a in self.qi}
                self._views[n] = Bucketization(self.qi, self.sensitive, tuples, sizes)
            return self._views[n]

    @property
    def rows(self) -> int:
        """The latest version's real tuples."""
        return self.bucketization().rows

    @property
    def values(self) -> np.ndarray:
        return self.bucketization().values

    @property
    def codes(self) -> dict[str, np.ndarray]:
        return self.bucketization().codes

    @property
    def bucket(self) -> np.ndarray:
        return self.bucketization().bucket

    @property
    def cells(self) -> Cells:
        return self.bucketization().cells

    @property
    def static(self) -> tuple[StaticAnatomy, StaticGeneralization]:
        return self.bucketization().static

    @classmethod
    def open(cls, state: str | Path, verify_key: str | None = None) -> StatDB:
        """Open a store: owner-only and intact (release/stores/integrity.py: store.json
        unedited, every file of its SHA-256, every code in its domain, every bucket
        m-invariant; with `verify_key` signed by that key), else a one-line error."""
        state = Path(state)
        read_store(state)  # not a store, or another format: said as it is
        _check_private(state)
        meta, tuples = verified(state, verify_key)
        return cls(state, meta, tuples)

    def query(self, where: str) -> Query:
        """`where` as a Query on this store (`parse_query`)."""
        return parse_query(self.meta, where)

    def count(
        self,
        query: Query | str,
        method: str = "dyn-ana",
        log: bool = True,
        version: int | str | None = None,
    ) -> Interval:
        """The result interval of `query` (a Query or a `--where` text) on `version`
        (default: the latest), appended to the private log unless `log` is False (a
        batch logs its answers at once)."""
        if method not in METHODS:
            raise SpecError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
        q = self.query(query) if isinstance(query, str) else self._checked(query)
        n = version_number(self.meta, version)
        low, high = ANSWERS[method](self.bucketization(n), q)
        answer = Interval(low, high, method, n)
        if log:
            self.log([(query if isinstance(query, str) else repr(q), answer)])
        return answer

    def _checked(self, q: Query) -> Query:
        """A Query built by hand: every range on a QI attribute, inside its domain."""
        for a, (lo, hi) in q.ranges.items():
            if a not in self.qi or not 0 <= lo <= hi < len(self.domains[a]):
                raise SpecError(f"a range on {a} must be codes 0 <= lo <= hi < its domain's size")
        return q

    def log(self, answers: list[tuple[str, Interval]]) -> None:
        """Append answers (query text, interval, version) to the store's private log
        `queries.jsonl`."""
        now = datetime.now(UTC).isoformat(timespec="seconds")
        lines = "".join(
            json.dumps(
                {
                    "time": now,
                    "query": text,
                    "method": a.method,
                    "version": a.version,
                    "low": a.low,
                    "high": a.high,
                }
            )
            + "\n"
            for text, a in answers
        )
        fd = os.open(self.state / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write(lines)
