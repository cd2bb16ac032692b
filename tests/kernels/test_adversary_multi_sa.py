"""003 §1's algorithm-aware adversary (tests/adversary.py) against the whole path of
`multi_sa_bip` (000 Appendix B), as `publish` runs it: in `exact` mode one program
loop on the table's combinations of sensitive values; in `partitioned` mode the chunk
plan (`plan_chunks` on QI-local shards, from the table's counts), each chunk's
program loop, its canonical order and seeded placement, group ids numbered from each
chunk's first row. She sees every group: its id, the QI values of its rows, and its
combinations of sensitive values, or, for the suppressed residue, only its rows.

Her prior is uniform over the tables with the true multiset of combinations; the
posterior asked for is of one attribute's value ("row i has s = a"), at most 1/l.
Appendix B's residue (what no program could make diverse) broke it: on five rows its
single tuple is read from the multiset (posterior 1). Every program now keeps its
residue l-eligible (kernels/bip.py). The placement's draws are walked exactly (the
orders inside each combination: `within_value_orders`, exact since rows are compared
only within their combination); the programs depend on a chunk's multiset only and are
solved once per multiset. `test_the_composition_is_what_publish_writes` proves the
composition equal to what `publish` writes through the public API."""

from __future__ import annotations

import functools
import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from adversary import (
    Adversary,
    combination_codes,
    rng_outcomes,
    within_value_orders,
    worst_attribute_posterior,
)

import vpub_spark.kernels.bip as bip
from vpub_spark.kernels.bip import MultiSaPlan, multi_sa_groups, place_rows
from vpub_spark.kernels.partitioning import (
    SHARDS,
    QiShards,
    ShardCounts,
    partition_seed,
    plan_chunks,
)

SEED = 5
SA = ["s", "u"]
# (s, u) pairs; each table below is l-eligible for s and for u
FIVE = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 2)]  # Appendix B suppresses (2, 2) alone
SIX = [(0, 0), (0, 1), (1, 0), (1, 1), (0, 0), (2, 2)]
THREE_L = [(0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (2, 0)]
# every value twice: two chunks of four rows at chunk_rows 4, whose multisets vary
EIGHT = [(0, 0), (0, 0), (1, 1), (1, 1), (2, 2), (2, 3), (3, 2), (3, 3)]
EIGHT_SHOWN = [(0, 0), (1, 1), (2, 2), (3, 3), (0, 0), (1, 1), (2, 3), (3, 2)]  # a residue


def _frame(rows: np.ndarray) -> pd.DataFrame:
    """The rows x = 0..n-1 with their sensitive pairs."""
    return pd.DataFrame({"x": np.arange(len(rows)), "s": rows[:, 0], "u": rows[:, 1]})


def chunk_plan(rows: np.ndarray, l: int, chunk_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(each row's chunk, each chunk's first group id) as `partitioned_plan` makes them."""
    return _chunk_plan(tuple(map(tuple, rows.tolist())), l, chunk_rows)


@functools.cache
def _chunk_plan(rows: tuple, l: int, chunk_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The counts built at once, as `combine_counts` sums the engines' (the composition
    test runs the real counting)."""
    pairs = np.array(rows)
    n = len(pairs)
    shards = QiShards(("x",), (n,)).of(pd.DataFrame({"x": np.arange(n)}))
    values = {}
    for i, a in enumerate(SA):
        values[a] = np.zeros((SHARDS, n), dtype=np.int64)
        np.add.at(values[a], (shards, pairs[:, i]), 1)
    counts = ShardCounts(np.bincount(shards, minlength=SHARDS), values, 0)
    plan = plan_chunks(counts, l, chunk_rows)
    return plan.part_of(shards), plan.first_group


@functools.cache
def _programs(multiset: tuple, l: int) -> tuple[MultiSaPlan, np.ndarray]:
    """The program loop on a chunk's multiset of pairs, as `multi_sa_chunk` solves it
    (the same call on the same combinations and counts: solved once per multiset)."""
    combos, counts = np.unique(np.array(multiset), axis=0, return_counts=True)
    return multi_sa_groups(combos, counts, l, "cbc", 30), combos


def _place(values: tuple, l: int, seed: int, first: int) -> tuple[tuple, int]:
    """One chunk (rows in x order, `values` their pairs) as `multi_sa_chunk` places it:
    the canonical order (by pair, then x), each row's combination, `place_rows` with the
    chunk's seed; (each row's group id, the suppressed group's id or -1)."""
    rows = np.array(values)
    plan, _ = _programs(tuple(sorted(values)), l)
    order = np.lexsort((np.arange(len(rows)), rows[:, 1], rows[:, 0]))
    inverse = np.unique(rows[order], axis=0, return_inverse=True)[1].reshape(-1)
    group = np.empty(len(rows), dtype=np.int64)
    group[order] = place_rows(inverse, plan, seed)
    suppressed = first + len(plan.groups) if (group == len(plan.groups)).any() else -1
    return tuple((group + first).tolist()), suppressed


@functools.cache
def _chunk_outcomes(values: tuple, l: int, seed: int, first: int) -> list[tuple[tuple, Fraction]]:
    """Every placement of one chunk with its probability (`_place`'s draws walked)."""
    rows = np.array(values)
    order = np.lexsort((np.arange(len(rows)), rows[:, 1], rows[:, 0]))
    keys = within_value_orders(np.unique(rows[order], axis=0, return_inverse=True)[1].reshape(-1))
    return rng_outcomes(lambda: _place(values, l, seed, first), keys)


def _chunks(rows: np.ndarray, l: int, chunk_rows: int | None):
    """Each chunk's rows, values, seed and first group id (one chunk in exact mode)."""
    if chunk_rows is None:
        part, first = np.zeros(len(rows), dtype=np.int64), np.zeros(1, dtype=np.int64)
    else:
        part, first = chunk_plan(rows, l, chunk_rows)
    for p in range(len(first)):
        mine = np.flatnonzero(part == p)
        seed = SEED if chunk_rows is None else partition_seed(SEED, 0, p)
        yield mine, tuple(map(tuple, rows[mine].tolist())), seed, int(first[p])


def _joined(rows: int, placed) -> tuple[tuple, frozenset]:
    """Chunks' placements [(rows, (ids, suppressed id))] as one output."""
    group, suppressed = np.zeros(rows, dtype=np.int64), set()
    for mine, (gid, sup) in placed:
        group[mine] = gid
        suppressed.add(sup)
    return tuple(group.tolist()), frozenset(suppressed - {-1})


def path_of(rows: np.ndarray, l: int, chunk_rows: int | None) -> tuple[tuple, frozenset]:
    """The output of the path with the real seeds."""
    return _joined(
        len(rows), [(m, _place(v, l, s, f)) for m, v, s, f in _chunks(rows, l, chunk_rows)]
    )


def path_outcomes(combos: np.ndarray, l: int, chunk_rows: int | None):
    """Outcomes of the whole path on a table of combination codes (exact mode when
    `chunk_rows` is None), every chunk's draws walked independently."""

    def outcomes(t: np.ndarray):
        per_chunk = [
            [(mine, o, w) for o, w in _chunk_outcomes(v, l, s, f)]
            for mine, v, s, f in _chunks(combos[t], l, chunk_rows)
        ]
        for pick in itertools.product(*per_chunk):
            out = _joined(len(t), [(mine, o) for mine, o, _ in pick])
            yield out, Fraction(np.prod([w for *_, w in pick]))

    return outcomes


def release(out, t: np.ndarray) -> frozenset:
    """What the files show: each group's id, rows and sorted combinations (codes), the
    suppressed groups' rows only."""
    group, suppressed = np.array(out[0]), out[1]
    return frozenset(
        (int(g), tuple(np.flatnonzero(group == g).tolist()))
        + (("suppressed",) if g in suppressed else tuple(sorted(t[group == g].tolist())))
        for g in np.unique(group)
    )


def worst_path_posterior(pairs: list, l: int, chunk_rows: int | None) -> Fraction:
    """The largest posterior of one row's value of one attribute, over every release of
    every table with the multiset of `pairs`."""
    combos, t = combination_codes(pairs)
    adv = Adversary(path_outcomes(combos, l, chunk_rows), release)
    return worst_attribute_posterior(adv, combos, t)


@pytest.mark.parametrize(
    "pairs, l, chunk_rows",
    [(FIVE, 2, None), (SIX, 2, None), (THREE_L, 3, None), (EIGHT, 2, 4)],
)
def test_multi_sa_keeps_every_posterior_at_one_over_l(pairs, l, chunk_rows):
    assert worst_path_posterior(pairs, l, chunk_rows) <= Fraction(1, l)


def test_appendix_b_residue_told_its_value(monkeypatch):
    """The replaced rule, a residue left as the programs leave it: the single row of
    (2, 2) that no group could take is read from the multiset (posterior 1)."""
    monkeypatch.setattr(bip, "residue_cells", lambda *_: iter(()))
    _programs.cache_clear()
    _chunk_outcomes.cache_clear()
    try:
        assert worst_path_posterior(FIVE, 2, None) == 1
    finally:
        _programs.cache_clear()
        _chunk_outcomes.cache_clear()


@pytest.mark.parametrize(
    "pairs, mode, chunk_rows", [(SIX, "exact", 20_000), (EIGHT_SHOWN, "partitioned", 4)]
)
def test_the_composition_is_what_publish_writes(tmp_path, pairs, mode, chunk_rows):
    """The composition is the real path: `method: multi_sa_bip` (seed SEED) writes
    exactly the groups and cells `path_of` gives with the real seeds (two chunks in
    partitioned mode)."""
    from vpub_spark.config import config_from_dict
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.publishing.pipeline import publish

    pairs = np.array(pairs)
    data = tmp_path / "t"
    (data / "data").mkdir(parents=True)
    labels = {"x": [f"x{i}" for i in range(len(pairs))], "s": pairs[:, 0], "u": pairs[:, 1]}
    frame = pd.DataFrame(labels).assign(s=lambda f: "s" + f["s"].astype(str))
    frame.assign(u=lambda f: "u" + f["u"].astype(str)).to_csv(
        data / "data" / "part.csv", index=False
    )
    (data / "table.yaml").write_text("name: t\nattributes: [{name: x}, {name: s}, {name: u}]\n")
    cfg = {
        "input": {"path": str(data)},
        "privacy": {"l": 2},
        "rules": ["x -> s", "x -> u"],
        "method": "multi_sa_bip",
        "multi_sa": {"mode": mode, "chunk_rows": chunk_rows},
        "output": {"path": str(tmp_path / "out"), "release_id": "r1"},
        "engine": "inprocess",
        "seed": SEED,
    }
    publish(config_from_dict(cfg), InProcessEngine())
    folder = tmp_path / "out" / "r1" / "tables" / "multi_sa"
    qit = pd.concat(pd.read_parquet(f) for f in sorted((folder / "qit").glob("*.parquet")))
    st = pd.concat(pd.read_parquet(f) for f in sorted((folder / "st").glob("*.parquet")))
    group, suppressed = path_of(pairs, 2, None if mode == "exact" else chunk_rows)
    written = qit.assign(row=qit["x"].str[1:].astype(int)).sort_values("row")["group_id"]
    assert written.tolist() == list(group)
    cells = [
        (int(r.group_id), None if pd.isna(r.s) else (int(r.s[1:]), int(r.u[1:])), int(r.count))
        for r in st.itertuples()
    ]
    assert sorted(cells, key=_key) == _cells(np.array(group), suppressed, pairs)
    assert suppressed  # the case covers a residue


def _key(cell: tuple) -> tuple:
    return cell[0], cell[1] or (-1, -1)


def _cells(group: np.ndarray, suppressed: frozenset, rows: np.ndarray) -> list:
    """The ST cells (group id, pair or None when suppressed, count) of an output."""
    out = []
    for g in np.unique(group):
        mine = rows[group == g]
        if g in suppressed:
            out.append((int(g), None, len(mine)))
        else:
            pairs, counts = np.unique(mine, axis=0, return_counts=True)
            out += [
                (int(g), (int(p[0]), int(p[1])), int(c)) for p, c in zip(pairs, counts, strict=True)
            ]
    return sorted(out, key=_key)
