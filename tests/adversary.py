"""003 §1's adversary, simulated exactly, shared by the kernel tests.

She knows the algorithm, every tuple's QI and the release, not the private random
choices. Her prior is uniform over the tables t' the release allows (the true table's
multiset of sensitive values, placed on the rows in any way); her posterior weighs each
t' by P(release | t'), the probability that the algorithm publishes this exact release
from t'. `Adversary` computes it with exact fractions from `outcomes(t')`: every output
of the algorithm on t' with its probability (its random choices enumerated: `uniform`
over a list of choices such as every priority order, or `rng_outcomes` for a kernel that
draws from `numpy.random.default_rng`). Privacy asks that every posterior "row i has
value v" stays <= 1/l. The kernel runs only on the tables consistent with a release the
true table can give (the others cannot publish it), each once (memoized).

A release is `release(output, table)`: a hashable view of what is published. It must
depend on the table only through what is shown (each group's multiset of values), so
that t' is consistent with a release r made from output o iff release(o, t') == r.
`group_release` drops group ids (003's generalized groups, 002's buckets);
`labeled_release` keeps them (000's anatomy joins QIT and ST on the group id).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

Outcomes = Callable[[np.ndarray], Iterable[tuple[Any, Fraction]]]


def group_release(group: np.ndarray, values: np.ndarray) -> frozenset:
    """Which rows share a group and each group's sorted values (ids dropped)."""
    return frozenset(
        (tuple(np.flatnonzero(group == g).tolist()), tuple(sorted(values[group == g].tolist())))
        for g in np.unique(group)
    )


def labeled_release(group: np.ndarray, values: np.ndarray) -> frozenset:
    """`group_release` with each group's published id kept."""
    return frozenset(
        (
            int(g),
            tuple(np.flatnonzero(group == g).tolist()),
            tuple(sorted(values[group == g].tolist())),
        )
        for g in np.unique(group)
    )


def tables_of(values: np.ndarray) -> list[np.ndarray]:
    """Every table with `values`' multiset: its distinct permutations, sorted."""
    return _tables(tuple(sorted(np.asarray(values).tolist())))


@functools.cache
def _tables(multiset: tuple) -> list[np.ndarray]:
    return [np.array(t) for t in sorted(set(itertools.permutations(multiset)))]


def table_index(tables: list, values: np.ndarray) -> int:
    """The position of the table `values` in `tables`."""
    return next(i for i, t in enumerate(tables) if (t == values).all())


def uniform(run: Callable[[np.ndarray, Any], Any], choices) -> Outcomes:
    """Outcomes of `run(t, c)` for c equally likely among `choices` (a sequence, or a
    function of the table giving one)."""

    def outcomes(t: np.ndarray):
        cs = list(choices(t) if callable(choices) else choices)
        return [(run(t, c), Fraction(1, len(cs))) for c in cs]

    return outcomes


def every_order(n: int) -> list[np.ndarray]:
    """Every priority order of n rows (all n! permutations)."""
    return [np.array(p) for p in itertools.permutations(range(n))]


def within_value_orders(values: np.ndarray) -> list[np.ndarray]:
    """One priority per way of ordering the rows inside each value (prod c_v! of them,
    rows of smaller values first). Exact in place of `every_order` for a kernel that
    compares priorities only between rows of one value (the caller says why)."""
    values = np.asarray(values)
    rows = [np.flatnonzero(values == v) for v in np.unique(values)]
    out = []
    for perms in itertools.product(*(itertools.permutations(r.tolist()) for r in rows)):
        p = np.empty(len(values), dtype=np.int64)
        p[np.concatenate([np.array(q, dtype=np.int64) for q in perms])] = np.arange(len(values))
        out.append(p)
    return out


class _Replay:
    """numpy's Generator as used by the kernels (`random`, `permutation`, `integers`, `choice`
    without replacement), taking each draw from a path of branch indices: the draw has
    `count` equally likely branches, and `rng_outcomes` walks every path."""

    def __init__(self, path: list[list[int]], keys: Sequence[np.ndarray] | None):
        self.path, self.keys, self.at = path, keys, 0

    def _branch(self, count: int) -> int:
        if self.at == len(self.path):
            self.path.append([0, count])
        index, known = self.path[self.at]
        assert known == count, "the draws changed between runs: the kernel is not replayable"
        self.at += 1
        return index

    def random(self, size: int) -> np.ndarray:
        """n uniform floats, used as sort keys: one branch per order of them (all n!),
        or per key in `keys` (a caller's reduction, e.g. orders within a value) for a
        draw of the keys' length."""
        if self.keys is not None and size == len(self.keys[0]):
            return np.asarray(self.keys[self._branch(len(self.keys))], dtype=np.float64)
        p = _nth_permutation(size, self._branch(math.factorial(size)))
        return (p + 0.5) / size

    def permutation(self, x) -> np.ndarray:
        """Every order of the items, or, for a draw of the keys' length, one order per key
        (the items sorted by it: a caller's reduction, as for `random`)."""
        items = np.arange(x) if isinstance(x, int | np.integer) else np.asarray(x)
        if self.keys is not None and len(items) == len(self.keys[0]):
            return items[np.argsort(self.keys[self._branch(len(self.keys))], kind="stable")]
        return items[_nth_permutation(len(items), self._branch(math.factorial(len(items))))]

    def integers(self, low, high) -> np.ndarray:
        """One uniform integer in [low, high_i) per entry of `high` (an array): one
        branch per combination of them."""
        highs = (np.asarray(high, dtype=np.int64) - low).reshape(-1)
        index, out = self._branch(math.prod(highs.tolist())), []
        for h in highs.tolist()[::-1]:
            index, r = divmod(index, h)
            out.append(low + r)
        return np.array(out[::-1], dtype=np.int64).reshape(np.shape(high))

    def choice(self, a, size: int, replace: bool = True) -> np.ndarray:
        """Without replacement only, as a k-subset in increasing order, each with
        probability 1/C(n, k): exact for a caller that sorts the draw at once (ria)."""
        assert not replace and isinstance(a, int | np.integer), "only choice(n, k, replace=False)"
        combos = list(itertools.combinations(range(int(a)), size))
        return np.array(combos[self._branch(len(combos))], dtype=np.int64)


def _nth_permutation(n: int, index: int) -> np.ndarray:
    items, out = list(range(n)), []
    for k in range(n, 0, -1):
        q, index = divmod(index, math.factorial(k - 1))
        out.append(items.pop(q))
    return np.array(out, dtype=np.int64)


def rng_outcomes(
    fn: Callable[[], Any], keys: Sequence[np.ndarray] | None = None
) -> list[tuple[Any, Fraction]]:
    """Every outcome of fn() with its exact probability: while fn runs,
    numpy.random.default_rng(seed) returns a `_Replay` (any seed), and every path of
    its draws is walked once (a path's probability: the product of 1/branches)."""
    path: list[list[int]] = []
    out = []
    real = np.random.default_rng
    while True:
        replay = _Replay(path, keys)
        np.random.default_rng = lambda *_a, _r=replay, **_k: _r
        try:
            result = fn()
        finally:
            np.random.default_rng = real
        del path[replay.at :]
        out.append((result, Fraction(1, math.prod(count for _, count in path))))
        while path and path[-1][0] + 1 == path[-1][1]:
            path.pop()
        if not path:
            return out
        path[-1][0] += 1


class Adversary:
    """003 §1's adversary for one algorithm (its `outcomes`) and one release view.
    `rows_shown`: the view names the rows, so a table t' gives r only if
    release(out, t') == r for the true table's output (`posterior` skips the others
    unrun); False where rows alike in QI are alike in the view (every table is run)."""

    def __init__(
        self,
        outcomes: Outcomes,
        release: Callable[[Any, np.ndarray], Hashable] = group_release,
        rows_shown: bool = True,
    ):
        self.outcomes, self.release, self.rows_shown = outcomes, release, rows_shown
        self._dist: dict[bytes, dict[Hashable, tuple[Fraction, Any]]] = {}
        self.runs = 0  # tables the algorithm was run on (every outcome of each)

    def distribution(self, t: np.ndarray) -> dict[Hashable, tuple[Fraction, Any]]:
        """P(release | t) for every release t can give (with one output that gives it)."""
        key = np.asarray(t).tobytes()
        if key not in self._dist:
            self.runs += 1
            dist: dict[Hashable, tuple[Fraction, Any]] = {}
            for out, p in self.outcomes(t):
                r = self.release(out, t)
                dist[r] = (dist.get(r, (Fraction(0), out))[0] + p, out)
            assert sum(p for p, _ in dist.values()) == 1, "outcomes' probabilities do not sum to 1"
            self._dist[key] = dist
        return self._dist[key]

    def posterior(self, r: Hashable, out: Any, values: np.ndarray) -> np.ndarray:
        """Pr[row i has value v | release r] as an object array [row, value index over
        np.unique(values)] of Fractions; `out` is an output that gives r."""
        vals = np.unique(values).tolist()
        weight = np.full((len(values), len(vals)), Fraction(0), dtype=object)
        for t in tables_of(values):
            if self.rows_shown and self.release(out, t) != r:
                continue  # t' disagrees with what r shows: it never gives r
            p = self.distribution(t).get(r, (Fraction(0), None))[0]
            for row, v in enumerate(t.tolist()):
                weight[row, vals.index(v)] += p
        total = weight[0].sum()
        assert total > 0, "no table gives this release"
        return weight / total

    def worst_posterior(self, values: np.ndarray) -> Fraction:
        """The largest posterior over every release the true table `values` can give."""
        values = np.asarray(values)
        return max(
            max(self.posterior(r, out, values).reshape(-1))
            for r, (_, out) in self.distribution(values).items()
        )

    def posteriors(self, values: np.ndarray) -> dict[Hashable, np.ndarray]:
        """`posterior` of every release any table with `values`' multiset can give, in
        one pass over the tables (each table's distribution added to the releases it
        gives: linear in the tables, where a `posterior` per release is quadratic)."""
        vals = np.unique(values).tolist()
        weights: dict[Hashable, np.ndarray] = {}
        for t in tables_of(values):
            cols = [vals.index(v) for v in t.tolist()]
            for r, (p, _) in self.distribution(t).items():
                w = weights.setdefault(
                    r, np.full((len(values), len(vals)), Fraction(0), dtype=object)
                )
                w[np.arange(len(values)), cols] += p
        return {r: w / w[0].sum() for r, w in weights.items()}

    def worst_over_tables(self, values: np.ndarray) -> Fraction:
        """`worst_posterior` for every table with `values`' multiset as the true one."""
        return max(max(w.reshape(-1)) for w in self.posteriors(values).values())


def combination_codes(rows: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct combinations of several sensitive attributes [K, |S|], sorted; each
    row's code among them): a table of several attributes as `Adversary` reads one."""
    combos = np.unique(np.array(rows), axis=0)
    return combos, np.array([int(np.flatnonzero((combos == r).all(axis=1))[0]) for r in rows])


def worst_attribute_posterior(adv: Adversary, combos: np.ndarray, codes: np.ndarray) -> Fraction:
    """The largest posterior of one row's value of one attribute ("row i has A = a": the
    combinations' posteriors summed), over every release of every table with the
    multiset of `codes` (`combination_codes`)."""
    return max(
        max(post[:, combos[:, i] == a].sum(axis=1))
        for post in adv.posteriors(codes).values()
        for i in range(combos.shape[1])
        for a in np.unique(combos[:, i])
    )


def worst_posterior(run, values: np.ndarray, choices, release=group_release) -> Fraction:
    """The largest posterior over every release the true table can give, the random
    choices of `run(t, c)` being equally likely among `choices` (exact)."""
    return Adversary(uniform(run, choices), release).worst_posterior(values)


def known_seed_posterior(run, values: np.ndarray, seed, release=group_release) -> Fraction:
    """The same adversary who also knows the seed (or any one random choice) of
    `run(t, seed)`: she weighs only the tables that give the published release with
    that seed (exact)."""
    return worst_posterior(run, values, [seed], release)
