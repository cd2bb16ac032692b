"""`StatDB`: 004's statistical database over a private bucket store (DESIGN.md §9).

The store is the marginal publisher's (`release/store.py`): a bucketization U of the
table (004 Definition 11) from its first m-unique partition. Every answer comes from a
decomposition of U, so every answer is m-invariant with every marginal ever published
from the same store (004 Lemmas 4 and 6): the query server and the published tables are
jointly safe. Methods (004 §6, §7, §9): `dyn-ana` (A-Count, the shortest anatomy
interval), `dyn-gen` (G-Count, a phantom MBR decomposition), and 004 §9's static
baselines `sta-ana` (Lemma 3) and `sta-gen` (Lemma 2). Decision: the static baselines
are computed on the store's own partition (each bucket decomposed by position, Figure 2
with no query), so they are one more member of the store's m-invariant series and may be
shown beside the dynamic answers. 004 §9 anatomizes and generalizes independently; two
unrelated partitions of one table invite an intersection attack, so a store never
serves them, nor `ran-pert`, whose noise is outside the series (that comparison is
`vpub compare`'s). Opening a store checks that
it is owner-only and that every bucket still holds each value of its signature equally
often (a tampered store is refused); every answered query is appended to the store's
private log `queries.jsonl` (query, method, interval, time).
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

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
from ..release.checks import AuditReport
from ..release.private_audit import bucket_checks
from ..release.store import BUCKET, bucket_files, read_store
from ..utility.where import parse_where

LOG = "queries.jsonl"
METHODS = ("dyn-ana", "dyn-gen", "sta-ana", "sta-gen")
_STATIC_LOCK = threading.Lock()  # one build of the static baselines at a time


@dataclass(frozen=True)
class Interval:
    """A result interval [low, high] (004 Definition 9): it holds the true count."""

    low: int
    high: int
    method: str

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
            raise SpecError(f"the condition on {a} is not a range of its domain; use between")
        ranges[a] = (lo, hi)
    chosen = conditions.get(sensitive, frozenset(range(len(meta["domains"][sensitive]))))
    return Query(ranges, frozenset(chosen))


def label_text(value: str) -> str:
    """A label as the `--where` grammar reads it: bare, or quoted when it holds a space,
    comma, parenthesis or quote."""
    if re.fullmatch(r"[^\s,()'\"]+", value):
        return value
    return f"'{value}'" if "'" not in value else f'"{value}"'


def range_text(a: str, labels: list[str], lo: int, hi: int) -> str:
    """`a between x and y` where the labels are numbers in increasing order (what
    `between` compares), else the range's labels as `a in (...)`."""
    try:
        numbers = [float(v) for v in labels]
    except ValueError:
        numbers = []
    if numbers and all(x < y for x, y in zip(numbers, numbers[1:], strict=False)):
        return f"{a} between {labels[lo]} and {labels[hi]}"
    return f"{a} in ({', '.join(label_text(v) for v in labels[lo : hi + 1])})"


def where_text(meta: dict, query: Query) -> str:
    """A Query as `--where` text in the store's labels (`parse_query` reads it back)."""
    d, s = meta["domains"], str(meta["sensitive"])
    parts = [range_text(a, d[a], lo, hi) for a, (lo, hi) in query.ranges.items()]
    chosen = ", ".join(label_text(d[s][v]) for v in sorted(query.sensitive))
    return " and ".join([*parts, f"{s} in ({chosen})"])


def _narrow(codes: np.ndarray) -> np.ndarray:
    """The smallest unsigned type holding the codes: scans read 4-8 times fewer bytes."""
    top = int(codes.max(initial=0))
    return codes.astype(np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.int64)


class StatDB:
    """Counting queries with result intervals from a store (see the module docstring)."""

    def __init__(self, state: Path, meta: dict, tuples: pd.DataFrame):
        self.state, self.meta = state, meta
        self.qi, self.sensitive = list(meta["qi"]), str(meta["sensitive"])
        self.domains = {a: list(v) for a, v in meta["domains"].items()}
        values = tuples[self.sensitive].to_numpy(np.int64)
        bucket = signature_buckets(tuples[BUCKET].to_numpy(np.int64), values)
        order = np.lexsort((values, bucket))  # bucket by bucket, value by value (004 §6.2)
        self.values = values[order]
        self.codes = {a: _narrow(tuples[a].to_numpy()[order]) for a in self.qi}
        self.bucket = bucket[order]
        self.cells = Cells.of(self.bucket, self.values)

    @cached_property
    def static(self) -> tuple[StaticAnatomy, StaticGeneralization]:
        """The store's own partition (every bucket decomposed by position) as sta-ana
        and sta-gen answer from it; built once, on first use."""
        with _STATIC_LOCK:
            if "static" in self.__dict__:  # another thread built it meanwhile
                return self.__dict__["static"]
            group = a_decompose(self.bucket, self.values, np.zeros(len(self.values), bool))
            ana = StaticAnatomy(group, SensitiveCounts.of(group, self.values))
            return ana, StaticGeneralization.of(group, self.codes, self.qi, self.values)

    @classmethod
    def open(cls, state: str | Path) -> StatDB:
        """Open a store: owner-only, and every bucket intact (else a clear error)."""
        state = Path(state)
        meta = read_store(state)
        _check_private(state)
        files = bucket_files(state)
        if not files:
            raise VpubError(f"{state.name}: the store holds no buckets")
        tuples = pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)
        report = AuditReport(state.name)
        bucket_checks(meta, tuples, report.check)
        if not report.passed:
            failures = "; ".join(report.as_dict()["failures"])
            raise VpubError(f"{state.name}: the store was changed or damaged, refused: {failures}")
        return cls(state, meta, tuples)

    def query(self, where: str) -> Query:
        """`where` as a Query on this store (`parse_query`)."""
        return parse_query(self.meta, where)

    def count(self, query: Query | str, method: str = "dyn-ana", log: bool = True) -> Interval:
        """The result interval of `query` (a Query or a `--where` text), appended to the
        private log unless `log` is False (a batch logs its answers at once)."""
        if method not in METHODS:
            raise SpecError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
        q = self.query(query) if isinstance(query, str) else query
        if method in ("dyn-ana", "sta-ana"):
            ok = qi_mask(self.codes, q.ranges, len(self.values))
            if method == "dyn-ana":
                low, high = a_count_cells(self.cells, ok, q.sensitive)
            else:
                low, high = self.static[0].interval(ok, q.sensitive)
        elif method == "dyn-gen":
            low, high = g_count_cells(self.cells, self.codes, q)
        else:
            low, high = self.static[1].interval(q)
        answer = Interval(low, high, method)
        if log:
            self.log([(query if isinstance(query, str) else repr(q), answer)])
        return answer

    def log(self, answers: list[tuple[str, Interval]]) -> None:
        """Append answers (query text, interval) to the store's private log `queries.jsonl`."""
        now = datetime.now(UTC).isoformat(timespec="seconds")
        lines = "".join(json.dumps({"time": now, "query": text, "method": a.method, "low": a.low, "high": a.high}) + "\n" for text, a in answers)  # fmt: skip
        fd = os.open(self.state / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write(lines)
