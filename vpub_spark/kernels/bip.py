"""Multi-SA publishing by binary integer programming (000 Appendix B, Algorithm 3), solved
as one integer per distinct sensitive combination; `multi_sa_chunk` runs the loop on one
chunk of rows and places the rows.

Decisions (the aggregated program, the eligible residue and why it is safe, time
limits, the seeded placement): docs/explanation/multi-sa.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pulp

from .anatomy import COUNT, GROUP
from .solvers import SOLVERS


@dataclass(frozen=True)
class Solve:
    selected: np.ndarray  # per combination, how many tuples join the group
    status: str  # optimal | feasible (time limit) | no solution (time limit) | ...
    seconds: float

    @property
    def proven(self) -> bool:
        return self.status == "optimal"


@dataclass
class MultiSaPlan:
    groups: list[np.ndarray] = field(default_factory=list)  # per group, count per combination
    suppressed: np.ndarray | None = None  # count per combination of the suppressed residue
    solves: list[Solve] = field(default_factory=list)

    @property
    def all_optimal(self) -> bool:
        return all(s.proven for s in self.solves)


def _solver(name: str, time_limit: float | None):
    if name == "cbc":
        return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit)
    if name == "highs":
        return pulp.HiGHS(msg=False, timeLimit=time_limit)
    raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, not {name!r}")


def _classes(combos: np.ndarray, i: int) -> np.ndarray:
    """Each combination's constraint class for attribute i: the id of its values on the
    other sensitive attributes (all in one class when there is no other)."""
    if combos.shape[1] == 1:
        return np.zeros(len(combos), dtype=np.int64)
    return np.unique(np.delete(combos, i, axis=1), axis=0, return_inverse=True)[1].reshape(-1)


def constraint_cells(combos: np.ndarray) -> Iterator[tuple[np.ndarray, int, int]]:
    """Every constraint of the program as (members, lo, hi): for each sensitive attribute
    A_i and each combination v of the others, the combinations with S \\ A_i = v (sorted
    by A_i), of which members[lo:hi] have one value a of A_i; the constraint is
    l * x(members[lo:hi]) <= x(members). One sort per attribute (no scan per class)."""
    for i in range(combos.shape[1]):
        v = _classes(combos, i)
        order = np.lexsort((combos[:, i], v))
        for members in np.split(order, np.flatnonzero(np.diff(v[order])) + 1):
            cuts = [0, *(np.flatnonzero(np.diff(combos[members, i])) + 1).tolist(), len(members)]
            for lo, hi in zip(cuts, cuts[1:], strict=False):
                yield members, lo, hi


def presolve(combos: np.ndarray, available: np.ndarray, l: int) -> np.ndarray:
    """Combinations that can be non-zero in some solution. A constraint class (A_i, v)
    whose live members show fewer than l distinct values of A_i forces all of them to 0
    (each value's share is at most 1/l, so fewer than l values cannot add up to the
    class's total unless it is 0); repeat until nothing changes. Sound, and it removes
    most variables when the sensitive combinations are sparse."""
    live = available > 0
    s = combos.shape[1]
    changed = True
    while changed and live.any():
        changed = False
        for i in range(s):
            idx = np.flatnonzero(live)
            cls = _classes(combos[idx], i)
            pairs = np.unique(np.stack([cls, combos[idx, i]], axis=1), axis=0)
            distinct = np.bincount(pairs[:, 0], minlength=cls.max() + 1 if len(cls) else 0)
            dead = distinct[cls] < l
            if dead.any():
                live[idx[dead]] = False
                changed = True
    return live


def leaves_eligible(
    combos: np.ndarray, available: np.ndarray, selected: np.ndarray, l: int
) -> bool:
    """Whether the rows a group leaves behind (`available - selected`) are l-eligible for
    every sensitive attribute: no value over 1/l of them (true when none are left)."""
    left = available - selected
    return all(
        l * left[combos[:, i] == a].sum() <= left.sum()
        for i in range(combos.shape[1])
        for a in np.unique(combos[:, i])
    )


def residue_cells(
    combos: np.ndarray, available: np.ndarray, live: np.ndarray, l: int
) -> Iterator[tuple[int, np.ndarray]]:
    """The residue's constraints, as (rhs, weight per live variable): for every sensitive
    attribute A_i and value a, what the group leaves behind keeps a's share at most 1/l,
    l * (n_a - x_a) <= N - X, written X - l * x_a <= N - l * n_a (n: `available`). None
    when the available rows are not l-eligible themselves (then no residue can be)."""
    if not leaves_eligible(combos, available, np.zeros_like(available), l):
        return
    total = int(available.sum())
    for i in range(combos.shape[1]):
        for a in np.unique(combos[available > 0, i]):
            has_a = combos[:, i] == a
            rhs = total - l * int(available[has_a].sum())
            yield rhs, (1 - l * has_a[live]).astype(np.int64)


def solve_group(
    combos: np.ndarray,
    available: np.ndarray,
    l: int,
    solver: str = "cbc",
    time_limit: float | None = 60.0,
) -> Solve:
    """One program of Algorithm 3 over the distinct sensitive combinations `combos`
    [K, |S|] with `available` tuples each (variables only for what `presolve` keeps)."""
    import time

    t0 = time.perf_counter()
    live = np.flatnonzero(presolve(combos, available, l))
    selected = np.zeros(len(combos), dtype=np.int64)
    if len(live) == 0:
        return Solve(
            selected, "optimal", time.perf_counter() - t0
        )  # proven: only x = 0 is feasible
    prob = pulp.LpProblem("multi_sa", pulp.LpMaximize)
    x = [pulp.LpVariable(f"x{k}", 0, int(available[k]), cat=pulp.LpInteger) for k in live]
    prob += pulp.lpSum(x)
    for members, lo, hi in constraint_cells(combos[live]):
        if hi - lo < len(members):  # a class of one value was presolved to 0
            terms = [(x[k], 1 - l if lo <= j < hi else 1) for j, k in enumerate(members.tolist())]
            prob += pulp.LpAffineExpression(terms) >= 0
    for rhs, weights in residue_cells(combos, available, live, l):
        prob += pulp.LpAffineExpression(list(zip(x, weights.tolist(), strict=True))) <= rhs
    prob.solve(_solver(solver, time_limit))
    sol = prob.sol_status
    status = {
        pulp.LpSolutionOptimal: "optimal",
        pulp.LpSolutionIntegerFeasible: "feasible (time limit)",
        pulp.LpSolutionNoSolutionFound: "no solution (time limit)",
        pulp.LpSolutionInfeasible: "infeasible",
        pulp.LpSolutionUnbounded: "unbounded",
    }.get(sol, f"unknown ({pulp.LpStatus.get(prob.status)})")
    if status in ("optimal", "feasible (time limit)"):
        selected[live] = [int(round(var.value() or 0)) for var in x]
    return Solve(np.minimum(selected, available), status, time.perf_counter() - t0)


def multi_sa_groups(
    combos: np.ndarray,
    counts: np.ndarray,
    l: int,
    solver: str = "cbc",
    time_limit: float | None = 60.0,
) -> MultiSaPlan:
    """Algorithm 3's loop: solve, take the selection as a group, repeat on the rest;
    suppress the residue when a solve selects nothing."""
    plan = MultiSaPlan()
    available = np.asarray(counts, dtype=np.int64).copy()
    while available.sum() > 0:
        solve = solve_group(combos, available, l, solver, time_limit)
        plan.solves.append(solve)
        if solve.selected.sum() == 0:
            break
        plan.groups.append(solve.selected)
        available = available - solve.selected
    plan.suppressed = available
    return plan


def meets_constraints(combos: np.ndarray, selected: np.ndarray, l: int) -> bool:
    """The multi-SA condition of Algorithm 3 on one group (what the auditor will check)."""
    return all(
        l * selected[members[lo:hi]].sum() <= selected[members].sum()
        for members, lo, hi in constraint_cells(combos)
    )


def place_rows(inverse: np.ndarray, plan: MultiSaPlan, seed: int) -> np.ndarray:
    """Each row's group index in `plan.groups` (len(groups): suppressed). Within each
    combination k, rows in a seeded random order fill group 0's quota of k, then group
    1's, ...; rows beyond the quotas are the suppressed residue."""
    assert plan.suppressed is not None, "place_rows needs a solved plan"
    n = len(inverse)
    order = np.lexsort((np.random.default_rng(seed).random(n), inverse))
    k_sorted = inverse[order]
    start = np.searchsorted(k_sorted, np.arange(len(plan.suppressed)))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - start[k_sorted]
    group = np.zeros(n, dtype=np.int64)
    filled = np.zeros(len(plan.suppressed), dtype=np.int64)
    for quota in plan.groups:  # one vectorized pass per group (groups are few)
        filled = filled + quota
        group += rank >= filled[inverse]
    return group


@dataclass(frozen=True)
class ChunkResult:
    qit: pd.DataFrame  # group_id + QI codes, one row per tuple
    st: pd.DataFrame  # group_id + SA codes (null in a suppressed group) + count
    plan: MultiSaPlan
    suppressed_rows: int

    @property
    def groups(self) -> int:
        return len(self.plan.groups) + (self.suppressed_rows > 0)


def sa_combinations(
    chunk: pd.DataFrame, sa: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct SA combinations [K, |S|] sorted, their counts, each row's combination)."""
    combos, inverse, counts = np.unique(
        chunk[list(sa)].to_numpy(), axis=0, return_inverse=True, return_counts=True
    )
    return combos, counts, inverse.reshape(-1)


def multi_sa_chunk(
    chunk: pd.DataFrame,
    qi: Sequence[str],
    sa: Sequence[str],
    l: int,
    seed: int,
    solver: str = "cbc",
    time_limit: float | None = 60.0,
    first_group: int = 0,
    plan: MultiSaPlan | None = None,
    plan_combos: np.ndarray | None = None,
) -> ChunkResult:
    """Algorithm 3 on one chunk (or, with `plan`, the driver's solution for exactly this
    chunk's combinations `plan_combos`): groups numbered from `first_group`, the
    suppressed residue (if any) as one last group whose SA values are not published."""
    qi, sa = list(qi), list(sa)
    canon = chunk.sort_values([*sa, *qi], kind="stable").reset_index(drop=True)
    combos, counts, inverse = sa_combinations(canon, sa)
    if plan is None:
        plan = multi_sa_groups(combos, counts, l, solver, time_limit)
    elif plan_combos is None or not np.array_equal(plan_combos, combos):
        raise ValueError("the given plan was solved for other SA combinations than this chunk has")
    local = place_rows(inverse, plan, seed)
    gid = (first_group + local).astype(np.int64)
    suppressed = local == len(plan.groups)
    qit = (
        canon[qi]
        .assign(**{GROUP: gid})[[GROUP, *qi]]
        .sort_values([GROUP, *qi], kind="stable")
        .reset_index(drop=True)
    )
    kept = canon.loc[~suppressed, sa].assign(**{GROUP: gid[~suppressed]})
    st = (
        kept.groupby([GROUP, *sa], sort=True)
        .size()
        .rename(COUNT)
        .reset_index()
        .astype({a: "Int32" for a in sa})
    )
    n_sup = int(suppressed.sum())
    if n_sup:
        row = {
            GROUP: [first_group + len(plan.groups)],
            **{a: pd.array([pd.NA], dtype="Int32") for a in sa},
            COUNT: [n_sup],
        }
        st = pd.concat([st, pd.DataFrame(row)], ignore_index=True)
    return ChunkResult(qit, st[[GROUP, *sa, COUNT]], plan, n_sup)
