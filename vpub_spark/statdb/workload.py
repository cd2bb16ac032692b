"""004 §9's query workloads: on lambda random QI attributes and on the sensitive
attribute, a random interval of length max(1, round(ql |A|)) of A's domain (Table 4:
ql 2%..10%, lambda 1..3); the other QI attributes are unconstrained. Decision: 004
writes the length as [ql |A|]; we round, and never go below one value."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import SpecError
from ..kernels.statdb import Query


def workload(
    sizes: Mapping[str, int],
    qi: list[str],
    sensitive: str,
    lam: int,
    ql: float,
    count: int,
    seed: int,
) -> list[Query]:
    if not 1 <= lam <= len(qi):
        raise SpecError(f"lambda must be between 1 and {len(qi)} (the QI attributes), not {lam}")
    if not 0 < ql <= 1:
        raise SpecError(f"ql must be in (0, 1], not {ql}")
    rng = np.random.default_rng(seed)

    def interval(a: str) -> tuple[int, int]:
        length = max(1, round(ql * sizes[a]))
        lo = int(rng.integers(0, sizes[a] - length + 1))
        return lo, lo + length - 1

    out = []
    for _ in range(count):
        chosen = [qi[i] for i in sorted(rng.choice(len(qi), size=lam, replace=False))]
        ranges = {a: interval(a) for a in chosen}
        lo, hi = interval(sensitive)
        out.append(Query(ranges, frozenset(range(lo, hi + 1))))
    return out
