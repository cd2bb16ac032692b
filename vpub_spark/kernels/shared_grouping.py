"""One grouping shared by every anatomy table of a partition (a departure from 000 §5,
which anatomizes each sub-table on its own), planned from the partition's combination
counts alone, each group holding distinct values of every sensitive attribute.

The plan, and why it is safe: docs/explanation/algorithms.md ("Several anatomy tables,
one grouping"); docs/explanation/threat-model.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .anatomy import anatomy_groups
from .arrays import dense_ids, lex_order, stable_order


def partition_grouping(
    frame: pd.DataFrame, sensitive: Sequence[str], l: int, seed: int
) -> np.ndarray:
    """The grouping every anatomy table of one partition publishes: anatomy's dealing
    when they share one sensitive attribute (the other columns as its QI), else
    `shared_groups` on the rows in their canonical order (by every column).

    Args:
        frame: the partition's encoded rows (every column the tables hold).
        sensitive: the tables' sensitive attributes, without repeats.
        l: the diversity; the partition is l-eligible in each attribute.
        seed: the seed of the dealing.

    Returns:
        The group id of each row of `frame`, from 0.

    Raises:
        ValueError: an attribute is not l-eligible on the rows.
    """
    if len(sensitive) == 1:
        others = [c for c in frame.columns if c != sensitive[0]]
        return anatomy_groups(frame, sensitive[0], l, seed, others)
    canon = lex_order([frame[c].to_numpy() for c in frame.columns])
    group = np.empty(len(frame), dtype=np.int64)
    group[canon] = shared_groups([frame[s].to_numpy()[canon] for s in sensitive], l, seed)
    return group


def shared_groups(values: Sequence[np.ndarray], l: int, seed: int) -> np.ndarray:
    """The group of each row, ids 0..G-1, every group holding at least l rows and
    pairwise distinct values of each column of `values`, or at most a 1/l share of each
    value where a pooled group is larger.

    Args:
        values: the sensitive codes, one array per attribute, the rows in an order that
            depends on their content only (a retried task repeats every choice).
        l: the diversity; every attribute must be l-eligible on these rows.
        seed: the seed of the dealing within a combination.

    Returns:
        The group id of each row (int64).

    Raises:
        ValueError: an attribute is not l-eligible on the rows.
    """
    n = len(values[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    for v in values:
        if np.bincount(v).max() * l > n:
            raise ValueError(f"{n} rows are not {l}-eligible in every sensitive attribute")
    combos, inverse, counts = _combinations(values)
    slot_group = plan_slots(combos, counts, l)
    shuffled = np.random.default_rng(seed).permutation(n)
    order = shuffled[stable_order(inverse[shuffled])]  # by combination, random within
    group = np.empty(n, dtype=np.int64)
    group[order] = slot_group
    return group


def _combinations(values: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct combinations [m, k] in lexicographic order, each row's index among
    them, each combination's count)."""
    cols = [np.asarray(v, dtype=np.int64) for v in values]
    order = lex_order(cols)
    sorted_cols = np.stack([c[order] for c in cols], axis=1)
    new = np.ones(len(order), dtype=bool)
    new[1:] = (sorted_cols[1:] != sorted_cols[:-1]).any(axis=1)
    starts = np.flatnonzero(new)
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return sorted_cols[starts], inverse, np.diff(np.r_[starts, len(order)])


def plan_slots(combos: np.ndarray, counts: np.ndarray, l: int) -> np.ndarray:
    """The group of each slot, the slots ordered by combination then group: a function
    of the combination counts alone (the module's plan).

    Args:
        combos: the distinct combinations [m, k], in lexicographic order.
        counts: each combination's number of rows (every attribute l-eligible).
        l: the diversity.

    Returns:
        The group id (0..G-1) of each of the sum(counts) slots.
    """
    slot_group = _place(combos, counts, l)
    combo_of = np.repeat(np.arange(len(counts)), counts)
    fill = np.bincount(slot_group[slot_group >= 0], minlength=max(int(slot_group.max()) + 1, 0))
    pooled = (slot_group < 0) | (fill[np.maximum(slot_group, 0)] < l)
    if pooled.any():
        pooled |= np.isin(slot_group, _joining(combos, combo_of, slot_group, pooled, l))
        pool = np.flatnonzero(pooled)  # ordered by combination, as the slots are
        sub_counts = np.bincount(combo_of[pool], minlength=len(counts))
        keep = sub_counts > 0
        inner = (
            plan_slots(combos[keep], sub_counts[keep], l) if pooled.sum() < len(pooled) else None
        )
        top = int(slot_group.max()) + 1
        slot_group[pool] = top + (inner if inner is not None else 0)
    order = np.lexsort((slot_group, combo_of))
    return dense_ids(slot_group[order])[1].astype(np.int64)


def _place(combos: np.ndarray, counts: np.ndarray, l: int) -> np.ndarray:
    """The greedy placement: each combination's slots, in turn, to the next groups from
    where the last one stopped (round the g groups) that hold none of its values and
    fewer than ceil(n/g) rows; -1 for a slot no group can take. The scan reads windows
    that double, so a combination costs about its count, not g."""
    n, k = int(counts.sum()), combos.shape[1]
    g = n // l
    cap = -(-n // g)
    freq = [np.bincount(combos[:, j], weights=counts).astype(np.int64) for j in range(k)]
    hard = np.max([freq[j][combos[:, j]] for j in range(k)], axis=0)
    order = np.lexsort((*[combos[:, j] for j in range(k - 1, -1, -1)], -hard))
    used = [np.zeros((len(f), g), dtype=bool) for f in freq]
    fill = np.zeros(g, dtype=np.int64)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    slot_group = np.full(n, -1, dtype=np.int64)
    cursor = 0
    for c in order:
        held = [used[j][combos[c, j]] for j in range(k)]
        idx, cursor = _next_free(fill, cap, held, int(counts[c]), cursor)
        fill[idx] += 1
        for row in held:
            row[idx] = True
        slot_group[starts[c] : starts[c] + len(idx)] = idx
    return slot_group


def _next_free(
    fill: np.ndarray, cap: int, held: list[np.ndarray], need: int, cursor: int
) -> tuple[np.ndarray, int]:
    """Up to `need` groups from `cursor` on (round the groups) with room and none of the
    `held` values, ascending; the cursor after the last one taken."""
    g = len(fill)
    found, scanned, width = [], 0, max(2 * need, 64)
    while need and scanned < g:
        width = min(width, g - scanned)
        window = (cursor + scanned + np.arange(width)) % g
        free = fill[window] < cap
        for row in held:
            free &= ~row[window]
        hit = window[np.flatnonzero(free)[:need]]
        found.append(hit)
        need -= len(hit)
        if need == 0 and len(hit):
            cursor = (int(hit[-1]) + 1) % g
        scanned, width = scanned + width, width * 2
    return (np.sort(np.concatenate(found)) if found else np.zeros(0, np.int64)), cursor


def _joining(
    combos: np.ndarray, combo_of: np.ndarray, slot_group: np.ndarray, pooled: np.ndarray, l: int
) -> np.ndarray:
    """The groups that join the pool until it is l-diverse in every attribute: those
    holding fewest of its over-represented values first, then the fuller, then the
    lower id. A group of at least l distinct values never breaks a diverse value."""
    k = combos.shape[1]
    values = [combos[combo_of, j] for j in range(k)]
    size = int(pooled.sum())
    count = [np.bincount(v[pooled], minlength=int(v.max()) + 1) for v in values]
    over = [np.flatnonzero(c * l > size) for c in count]
    slots = np.flatnonzero(~pooled)
    groups, index = dense_ids(slot_group[slots])
    held = np.zeros(len(groups), dtype=np.int64)
    for v, bad in zip(values, over, strict=True):
        held += np.bincount(index, np.isin(v[slots], bad), len(groups)).astype(np.int64)
    fill = np.bincount(index, minlength=len(groups))
    joined: list[int] = []
    by_group = slots[np.argsort(index, kind="stable")]
    bounds = np.r_[0, np.cumsum(fill)]
    for i in np.lexsort((groups, -fill, held)):
        if all((c * l <= size).all() for c in count):
            break
        rows = by_group[bounds[i] : bounds[i + 1]]
        size += len(rows)
        for c, v in zip(count, values, strict=True):
            np.add.at(c, v[rows], 1)
        joined.append(int(groups[i]))
    return np.array(joined, dtype=np.int64)
