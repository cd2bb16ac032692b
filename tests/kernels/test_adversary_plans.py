"""003 §1's adversary against a chunked run with the chunk plan visible
(kernels/partitioning.plan_chunks, which 002's marginals, 004's store and 003's
streamliner share): she sees which rows each chunk holds, the groups, and each group's
values; the plan is cut top-down from row counts and published multisets, so it tells
her nothing. A planner that closed a chunk at its first l-eligible prefix (the
rule it replaced, written out here) pins values with certainty on the same tables,
which shows the adversary would catch the leak.

Exact: every table with the true table's multiset, every priority order inside each
value (`within_value_orders`: exact for RDA when no tuple is left over, checked on every
run, tests/kernels/test_adversary.py)."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from adversary import Adversary, group_release, uniform, within_value_orders

from vpub_spark.kernels.partitioning import QiShards, combine_counts, plan_chunks, shard_counts
from vpub_spark.kernels.streamliner import rda

N = 6
CODES = pd.DataFrame({"x": np.arange(N)})
SHARDING = QiShards(("x",), (N,))


def _plan_by_counts(t: np.ndarray, l: int, chunk_rows: int) -> np.ndarray:
    return np.array(_counts_plan(tuple(np.asarray(t).tolist()), l, chunk_rows))


@functools.cache
def _counts_plan(t: tuple, l: int, chunk_rows: int) -> tuple:
    """kernels/partitioning.plan_chunks from the table's shard counts (memoized)."""
    frame = CODES.assign(s=np.array(t))
    counts = combine_counts(shard_counts(frame, ["s"], SHARDING), ["s"], {"x": N, "s": N})
    return tuple(plan_chunks(counts, l, chunk_rows).part_of(SHARDING.of(CODES)).tolist())


def _plan_by_eligible_prefix(t: np.ndarray, l: int, chunk_rows: int) -> np.ndarray:
    """The replaced rule: a chunk closes once it has chunk_rows rows AND is l-eligible;
    an ineligible tail merges backwards."""
    ends, start = [], 0
    for i in range(N):
        held = t[start : i + 1]
        if len(held) >= chunk_rows and np.bincount(held).max() * l <= len(held):
            ends.append(i)
            start = i + 1
    if not ends or ends[-1] != N - 1:
        ends.append(N - 1)
    while len(ends) > 1 and np.bincount(t[ends[-2] + 1 :]).max() * l > N - 1 - ends[-2]:
        ends.pop(-2)
    return np.searchsorted(np.asarray(ends), np.arange(N))


@functools.cache
def _rda(rows: tuple, values: tuple, order: tuple, l: int) -> tuple:
    """RDA on one chunk (memoized: chunks recur across the candidate tables)."""
    r = np.array(rows)
    g = rda(
        CODES.iloc[r].reset_index(drop=True), np.array(values), l, 0, priority=np.array(order)
    ).group
    assert (np.bincount(g) == l).all(), "a leftover: the reduced enumeration is not exact"
    return tuple(g.tolist())


def _chunked(plan, l: int, chunk_rows: int) -> Adversary:
    """RDA in every chunk of `plan`, the release being (chunk of every row, groups)."""

    def run(t: np.ndarray, priority: np.ndarray):
        chunk = plan(t, l, chunk_rows)
        group = np.empty(N, dtype=np.int64)
        for c in np.unique(chunk):
            rows = np.flatnonzero(chunk == c)
            order = np.argsort(np.argsort(priority[rows]))
            g = _rda(tuple(rows.tolist()), tuple(t[rows].tolist()), tuple(order.tolist()), l)
            group[rows] = np.array(g) + N * int(c)
        return tuple(chunk.tolist()), group

    def release(out, t):
        return out[0], group_release(out[1], t)

    return Adversary(uniform(run, within_value_orders), release)


CASES = [  # (values on x = 0..5, l, chunk_rows, chunks of the plan)
    ([0, 1, 2, 3, 4, 5], 2, 2, 3),  # cut in three: every chunk eligible however placed
    ([0, 0, 1, 2, 1, 2], 2, 2, 1),  # a a b c b c: one chunk; the replaced rule cut 4 + 2
    ([0, 1, 1, 2, 2, 0], 2, 2, 1),
    ([0, 0, 1, 1, 2, 2], 3, 3, 1),
]


@pytest.mark.parametrize("values, l, chunk_rows, chunks", CASES)
def test_chunks_cut_from_published_multisets_keep_every_posterior_at_most_one_over_l(
    values, l, chunk_rows, chunks
):
    t = np.array(values)
    assert len(np.unique(_plan_by_counts(t, l, chunk_rows))) == chunks
    worst = _chunked(_plan_by_counts, l, chunk_rows).worst_posterior(t)
    assert worst <= Fraction(1, l)


def _plan_at_lowest_level(t: np.ndarray, l: int, chunk_rows: int) -> np.ndarray:
    """The fallback replaced (a large skewed range cut at the lowest level k whose runs,
    closing at chunk_rows * 2**k rows with a short tail joining the run before, are all
    eligible)."""
    size = chunk_rows
    while True:
        run = np.minimum(np.arange(N) // size, max(N // size, 1) - 1)
        if run.max() == 0 or all(
            np.bincount(t[run == r]).max() * l <= (run == r).sum() for r in np.unique(run)
        ):
            return run
        size *= 2


def test_a_large_skewed_range_stays_one_chunk():
    """a a b c b c (l = 2) with chunk_rows = 1: no top-down cut is safe (a holds 1/3 >
    1/4), so the plan is one chunk and keeps 1/2. The fallback it replaced (cut at the
    lowest level whose runs are all eligible: here level 2, the whole table) told her
    that x0 = x1 or x2 = x3 or x4 = x5 held one value: one posterior reached 3/4."""
    t = np.array([0, 0, 1, 2, 1, 2])
    assert len(np.unique(_plan_by_counts(t, 2, 1))) == 1
    assert _chunked(_plan_by_counts, 2, 1).worst_posterior(t) == Fraction(1, 2)
    assert _chunked(_plan_at_lowest_level, 2, 1).worst_posterior(t) == Fraction(3, 4)


def test_chunks_closed_at_an_eligible_prefix_pin_values():
    """a a b c b c under the replaced rule: the plan 4 + 2 shows rows 0 and 1 were
    not eligible together, so both hold a: certainty."""
    t = np.array([0, 0, 1, 2, 1, 2])
    assert _chunked(_plan_by_eligible_prefix, 2, 2).worst_posterior(t) == 1
