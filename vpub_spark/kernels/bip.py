"""Multi-SA publishing by binary integer programming (000 Appendix B, Algorithm 3).

The program of Algorithm 3 has a binary t_i per tuple: maximize sum t_i subject to,
for every sensitive attribute A_i, every combination v of the other sensitive
attributes and every value a of A_i,
    l * sum_{p: p[A_i] = a, p[S \\ A_i] = v} t_p  <=  sum_{q: q[S \\ A_i] = v} t_q.
Every constraint depends on a tuple's sensitive values only, so tuples with the same
sensitive combination are interchangeable: we solve the equivalent program with one
integer x_k in [0, n_k] per distinct sensitive combination k (n_k tuples), which has
the same optimum value and is as large as the number of distinct combinations, not
the number of tuples. Which x_k of the n_k tuples join the group is the caller's
(seeded) choice. Constraints are built only for combinations present.

Algorithm 3 repeats on the remaining tuples; x = 0 is always feasible, so the program
never "has no solution": when the optimum selects nothing (or the solver finds no
solution in its time limit), the residue is suppressed (its sensitive values are not
published). A solve that stops at the time limit with a feasible, unproven solution is
reported as `feasible (time limit)`, never as optimal.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pulp

SOLVERS = ("cbc", "highs")


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


def constraint_cells(combos: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every constraint of the program as (members, same): for each sensitive attribute
    A_i and each combination v of the others, the combinations with S \\ A_i = v, and
    among them those with one value a of A_i; the constraint is l * x(same) <= x(members)."""
    k, s = combos.shape
    for i in range(s):
        others = np.delete(combos, i, axis=1)
        v = np.unique(others, axis=0, return_inverse=True)[1].reshape(-1) if s > 1 else np.zeros(k, dtype=np.int64)
        for g in np.unique(v):
            members = np.flatnonzero(v == g)
            a = combos[members, i]
            for value in np.unique(a):
                yield members, members[a == value]


def solve_group(combos: np.ndarray, available: np.ndarray, l: int, solver: str = "cbc", time_limit: float | None = 60.0) -> Solve:  # noqa: E741
    """One program of Algorithm 3 over the distinct sensitive combinations `combos`
    [K, |S|] with `available` tuples each."""
    import time

    t0 = time.perf_counter()
    prob = pulp.LpProblem("multi_sa", pulp.LpMaximize)
    x = [pulp.LpVariable(f"x{k}", 0, int(available[k]), cat=pulp.LpInteger) for k in range(len(combos))]
    prob += pulp.lpSum(x)
    for members, same in constraint_cells(combos):
        prob += l * pulp.lpSum(x[k] for k in same) <= pulp.lpSum(x[k] for k in members)
    prob.solve(_solver(solver, time_limit))
    selected = np.array([int(round(var.value() or 0)) for var in x], dtype=np.int64)
    sol = prob.sol_status
    status = {
        pulp.LpSolutionOptimal: "optimal",
        pulp.LpSolutionIntegerFeasible: "feasible (time limit)",
        pulp.LpSolutionNoSolutionFound: "no solution (time limit)",
        pulp.LpSolutionInfeasible: "infeasible",
        pulp.LpSolutionUnbounded: "unbounded",
    }.get(sol, f"unknown ({pulp.LpStatus.get(prob.status)})")
    if status not in ("optimal", "feasible (time limit)"):
        selected[:] = 0
    return Solve(np.minimum(selected, available), status, time.perf_counter() - t0)


def multi_sa_groups(combos: np.ndarray, counts: np.ndarray, l: int, solver: str = "cbc", time_limit: float | None = 60.0) -> MultiSaPlan:  # noqa: E741
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


def meets_constraints(combos: np.ndarray, selected: np.ndarray, l: int) -> bool:  # noqa: E741
    """The multi-SA condition of Algorithm 3 on one group (what the auditor will check)."""
    return all(l * selected[same].sum() <= selected[members].sum() for members, same in constraint_cells(combos))
