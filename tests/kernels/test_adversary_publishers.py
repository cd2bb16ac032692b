"""003 §1's algorithm-aware adversary (tests/adversary.py) against the whole path of
000's rule-based methods and 003's streamliner methods, as `publish` runs them.

- `uad`, `gd`, `single_attribute` (one rule x -> s: one anatomy table): the partition
  plan (`plan_partitions`: shard s to partition s mod P, P the largest number up to the
  target whose partitions are all l-eligible), then anatomy in each partition, group ids
  run on across partitions (`AnatomyJob.run`); with `anonymizer: rda | gda` each
  partition is generalized by the streamliner instead (`AnatomyJob.generalize`).
- `rda`, `gda`, `ria`: the chunk plan (`plan_marginal_chunks` with m = l), each chunk's
  canonical order and the streamliner seeded per chunk (`StreamlinerJob.run`).

The shards are a keyed hash of each row's QI content, the key derived from the secret
seed: the adversary does not know them. She is given the hash as a random oracle (each
distinct QI content's shard uniform and independent), and with a target of 2
partitions only its parity matters, so every parity of every content is enumerated
(rows with the same QI share it). She sees every group: its id, its partition (the part
file), the QI values of its rows and its sensitive values; every random draw is walked
(the orders inside each value, exact as tests/kernels/test_adversary.py shows).
`test_the_composition_is_what_publish_writes` proves that the compositions give what
`publish` writes through the public API, with the real keyed shards and seeds."""

from __future__ import annotations

import functools
import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from adversary import Adversary, labeled_release, rng_outcomes, tables_of, within_value_orders
from publish_paths import LABELS, chunks_of, frame_of, small_input

from vpub_spark.kernels.anatomy import anatomize
from vpub_spark.kernels.partitioning import (
    SHARDS,
    ContentShards,
    ShardCounts,
    partition_seed,
    plan_partitions,
)
from vpub_spark.kernels.sampling import with_occurrence
from vpub_spark.kernels.streamliner import streamline
from vpub_spark.publishing.marginals import canonical

SEED = 11
RULE = {"rules": ["x -> s"]}
TABLE_1 = [0, 0, 1, 1, 2]  # 003 Table 1: flu, flu, cold, cold, HIV


@functools.cache
def _partitions(t: tuple, shard: tuple, l: int, target: int) -> tuple[np.ndarray, np.ndarray]:
    """(each row's partition, each partition's first group id) as `AnatomyMethod.plan`
    makes them from these shards (the counts built at once, as `combine_counts` sums
    them: `test_the_composition_is_what_publish_writes` runs the engines' counting)."""
    shards, values = np.asarray(shard), np.asarray(t)
    hist = np.zeros((SHARDS, values.max() + 1), dtype=np.int64)
    np.add.at(hist, (shards, values), 1)
    counts = ShardCounts(np.bincount(shards, minlength=SHARDS), {"s": hist}, 0)
    plan = plan_partitions(counts, l, target)
    return plan.part_of(shards), plan.first_group


def _anonymize(kind: str, x: np.ndarray, t: np.ndarray, l: int, seed: int) -> np.ndarray:
    """One partition's local group per row (rows in x order, as given), by anatomy or by
    the streamliner on the canonical order, as `AnatomyJob.run` calls them."""
    if kind == "anatomy":  # a row id as the last QI key tells rows sharing x apart
        rows = np.arange(len(t))  # (in row order, as the stable canonical order keeps them)
        qit, _ = anatomize(pd.DataFrame({"x": x, "row": rows, "s": t}), "s", l, seed)
        return qit.sort_values("row")["group_id"].to_numpy()
    canon = canonical(pd.DataFrame({"x": x, "s": t}))
    assert (canon["x"].to_numpy() == np.sort(x)).all() and (np.diff(x) >= 0).all()
    sizes = {"x": int(x.max()) + 1}
    group = np.empty(len(t), dtype=np.int64)  # back from the canonical (x, s) order
    group[np.lexsort((t, x))] = streamline(
        kind, canon[["x"]], canon["s"].to_numpy(), l, seed, sizes
    ).group
    return group


def _keys(kind: str, t: np.ndarray) -> list[np.ndarray] | None:
    """The reduced draws of one partition: anatomy's permutation orders the canonical
    positions (by value) and only the orders inside a value matter; the streamliner's
    permutation is a priority per canonical position, read only inside a value when no
    tuple is left over (checked by `_leftover_free`); RIA's draws are walked whole."""
    if kind == "anatomy":
        return [p / len(t) for p in within_value_orders(np.sort(t))]
    if kind in ("rda", "gda"):
        return [np.argsort(p) for p in within_value_orders(t)]
    return None


class _Leftover(Exception):
    """A streamliner's group took a leftover: the reduced draws are not exact there."""


def _leftover_free(kind: str, group: np.ndarray, l: int) -> np.ndarray:
    if kind in ("rda", "gda") and (np.bincount(group) != l).any():
        raise _Leftover
    return group


@functools.cache
def _partition_outcomes(kind: str, x: tuple, t: tuple, l: int) -> list[tuple[tuple, Fraction]]:
    """Every local grouping of one partition with its probability (releases alike merged)."""
    xs, ts = np.array(x), np.array(t)
    dist: dict[tuple, Fraction] = {}
    try:
        run = lambda: _leftover_free(kind, _anonymize(kind, xs, ts, l, 0), l)  # noqa: E731
        walked = rng_outcomes(run, _keys(kind, ts))
    except _Leftover:  # every order walked instead
        walked = rng_outcomes(lambda: _anonymize(kind, xs, ts, l, 0))
    for group, p in walked:
        key = tuple(group.tolist())
        dist[key] = dist.get(key, Fraction(0)) + p
    return list(dist.items())


def rule_based_outcomes(x: np.ndarray, l: int, target: int, kind: str, per_row: bool):
    """Every (partition per row, group id per row) of the rule-based path on the rows
    (in x order), with its probability: every parity of every shard, every draw of
    every partition. A shard per row (the hash reads each row's OCCURRENCE among rows
    of equal QI), or, `per_row` False, per QI content (the rule replaced)."""
    content = np.arange(len(x)) if per_row else np.unique(x, return_inverse=True)[1]

    def outcomes(t: np.ndarray):
        bits = content.max() + 1
        for parity in itertools.product((0, 1), repeat=bits):
            shard = tuple(np.array(parity)[content].tolist())
            part, first = _partitions(tuple(t.tolist()), shard, l, target)
            yield from _combine(kind, x, t, l, part, first, Fraction(1, 2**bits))

    return outcomes


def _combine(kind, x, t, l, part, first, weight):
    """Every grouping of the whole table: one of each partition's, ids offset."""
    parts = [np.flatnonzero(part == p) for p in range(len(first))]
    dists = [
        _partition_outcomes(kind, tuple(x[r].tolist()), tuple(t[r].tolist()), l) for r in parts
    ]
    for combo in itertools.product(*dists):
        group, p = np.empty(len(t), dtype=np.int64), weight
        for rows, first_id, (local, q) in zip(parts, first, combo, strict=True):
            group[rows] = np.array(local) + first_id
            p *= q
        yield (tuple(part.tolist()), tuple(group.tolist())), p


def published_view(x: np.ndarray):
    """What a reader of the files sees: per group, its id, its partition, its rows' QI
    values and its sensitive values (rows sharing a QI are alike to her)."""

    def release(out, t: np.ndarray) -> frozenset:
        part, group = np.array(out[0]), np.array(out[1])
        return frozenset(
            (
                int(g),
                int(part[group == g][0]),
                tuple(sorted(x[group == g].tolist())),
                tuple(sorted(t[group == g].tolist())),
            )
            for g in np.unique(group)
        )

    return release


@functools.cache
def rule_based_adversary(
    x: tuple, l: int, target: int, kind: str = "anatomy", per_row: bool = True
) -> Adversary:
    xs = np.array(x)
    outcomes = rule_based_outcomes(xs, l, target, kind, per_row)
    return Adversary(outcomes, published_view(xs), rows_shown=len(set(x)) == len(x))


SHARED_X, SHARED_VALUES = (0, 0, 1, 2, 3, 4), [0, 0, 1, 1, 2, 2]
RULE_BASED_CASES = [  # (x, values, l, anonymizer, every table as the true one)
    ((0, 1, 2, 3), [0, 0, 1, 2], 2, "anatomy", True),  # two partitions possible
    ((0, 1, 2, 3, 4), TABLE_1, 2, "anatomy", True),
    ((0, 1, 2, 3, 4, 5), [0, 0, 0, 1, 2, 3], 2, "anatomy", False),  # top share exactly 1/2
    ((0, 1, 2, 3, 4, 5), [0, 0, 1, 1, 2, 3], 3, "anatomy", False),  # l = 3
    ((0, 0, 1, 2), [0, 0, 1, 2], 2, "anatomy", True),  # two rows share a QI
    (SHARED_X, SHARED_VALUES, 2, "anatomy", True),  # a shard per QI content gave 5/9
    ((0, 1, 2, 3), [0, 0, 1, 2], 2, "rda", True),
    ((0, 1, 2, 3), [0, 0, 1, 2], 2, "gda", True),
]


@pytest.mark.parametrize("x, values, l, kind, every", RULE_BASED_CASES)
def test_the_rule_based_path_keeps_every_posterior_at_one_over_l(x, values, l, kind, every):
    adv, t = rule_based_adversary(x, l, 2, kind), np.array(values)
    parts = {out[0] for u in tables_of(t) for _, out in adv.distribution(u).values()}
    assert len({max(p) for p in parts}) == 2  # both P = 1 and P = 2 are published
    worst = adv.worst_over_tables(t) if every else adv.worst_posterior(t)
    assert worst <= Fraction(1, l)


def test_a_shard_per_qi_content_told_more():
    """The adversary has teeth: with a shard per QI content (the rule replaced), two rows
    sharing x always share a partition, so whether P = 2 is refused depends on whether
    they hold one value; P shows in the release and a posterior reaches 5/9 > 1/2 where
    a shard per row keeps 1/2 (`RULE_BASED_CASES`)."""
    adv = rule_based_adversary(SHARED_X, 2, 2, per_row=False)
    assert adv.worst_over_tables(np.array(SHARED_VALUES)) == Fraction(5, 9)


def streamliner_path(t: np.ndarray, algorithm: str, l: int, chunk_rows: int) -> np.ndarray:
    """Each row's group id as `StreamlinerJob.run` writes it on x = 0..n-1: the chunk
    plan, each chunk's canonical order and the streamliner with the chunk's seed; ids
    are the chunk's first row plus the local group."""
    n, part = len(t), chunks_of(t, l, chunk_rows)
    frame, group = frame_of(t), np.zeros(n, dtype=np.int64)
    for p in np.unique(part).tolist():
        rows = np.flatnonzero(part == p)
        canon = canonical(frame.iloc[rows])
        assert (canon["x"].to_numpy() == rows).all()
        seed = partition_seed(SEED, 0, p)
        local = streamline(algorithm, canon[["x"]], canon["s"].to_numpy(), l, seed, {"x": n})
        group[rows] = local.group + rows[0]
    return group


@functools.cache
def streamliner_adversary(n: int, algorithm: str, l: int, chunk_rows: int) -> Adversary:
    """The path's draws walked: reduced to the orders inside each value on one chunk of
    RDA or GDA with no leftover (`_keys`), else every order."""

    def outcomes(t: np.ndarray):
        run = lambda: streamliner_path(t, algorithm, l, chunk_rows)  # noqa: E731
        one = len(np.unique(chunks_of(t, l, chunk_rows))) == 1
        if not one or algorithm == "ria":
            return rng_outcomes(run)
        try:
            return rng_outcomes(lambda: _leftover_free(algorithm, run(), l), _keys(algorithm, t))
        except _Leftover:
            return rng_outcomes(run)

    return Adversary(outcomes, labeled_release)


@pytest.mark.parametrize(
    "algorithm, values, l, chunk_rows, every",
    [
        ("rda", [0, 0, 1, 1, 2, 2], 2, 50_000, True),
        ("rda", [0, 1, 0, 2, 1, 3], 2, 3, False),  # two chunks of three
        ("gda", [0, 0, 1, 2], 2, 50_000, True),
        ("ria", [0, 0, 1, 2], 2, 50_000, True),
    ],
)
def test_the_streamliner_methods_keep_every_posterior_at_one_over_l(
    algorithm, values, l, chunk_rows, every
):
    adv, t = streamliner_adversary(len(values), algorithm, l, chunk_rows), np.array(values)
    assert (adv.worst_over_tables(t) if every else adv.worst_posterior(t)) <= Fraction(1, l)


def _publish(tmp_path, x, values, l: int, method: str, extra: dict) -> tuple[Path, dict]:
    """Publish through the public API (in process, seed SEED); the release's directory
    and its manifest."""
    from vpub_spark.config import config_from_dict
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.publishing.pipeline import publish

    cfg = {
        "input": {"path": str(small_input(tmp_path, x, values))},
        "privacy": {"l": l},
        "method": method,
        "output": {"path": str(tmp_path / "out"), "release_id": "r1"},
        "engine": "inprocess",
        "seed": SEED,
    }
    publish(config_from_dict(cfg | extra), InProcessEngine())
    root = tmp_path / "out" / "r1"
    return root, json.loads((root / "manifest.json").read_text())


def _parts(directory: Path) -> pd.DataFrame:
    """Every part of one table's part folder, with its partition number."""
    return pd.concat(
        pd.read_parquet(f).assign(part=int(f.stem.split("-")[1]))
        for f in sorted(directory.glob("*.parquet"))
    )


def _rows(frame: pd.DataFrame) -> list[tuple]:
    return sorted(map(tuple, frame.astype(str).to_numpy().tolist()))


@pytest.mark.parametrize(
    "method, anonymizer, x, values, parts",
    [
        ("uad", "anatomy", (0, 1, 2, 3, 4, 5), [0, 1, 0, 2, 1, 2], 2),
        ("gd", "anatomy", SHARED_X, SHARED_VALUES, 2),
        ("uad", "rda", (0, 1, 2, 3, 4, 5), [0, 1, 0, 2, 1, 2], 2),
        ("gd", "gda", (0, 0, 1, 1, 2, 3), [0, 1, 2, 0, 1, 2], 1),
    ],
)
def test_the_rule_based_composition_is_what_publish_writes(
    tmp_path, method, anonymizer, x, values, parts
):
    """`_partitions` and `_anonymize` are the real path: publishing with partitions: 2
    (seed SEED) writes the parts the composition gives with the real keyed shards (each
    row's OCCURRENCE among rows of equal x) and the real partition seeds."""
    extra = RULE | {"partitions": 2, "anonymizer": anonymizer}
    root, manifest = _publish(tmp_path, x, values, 2, method, extra)
    ((i, table),) = [(i, e) for i, e in enumerate(manifest["tables"]) if e.get("sensitive")]
    frame = pd.DataFrame({"x": x, "s": values})
    shard = ContentShards(SEED, ("x",), occurrence=True).of(with_occurrence(frame, ("x",)))
    part, first = _partitions(tuple(values), tuple(shard.tolist()), 2, 2)
    assert manifest["partitions"] == len(first) == parts
    xs, ts, group = np.array(x), np.array(values), np.zeros(len(x), dtype=np.int64)
    for p in range(len(first)):
        rows = np.flatnonzero(part == p)
        seed = partition_seed(SEED, i, p)
        group[rows] = _anonymize(anonymizer, xs[rows], ts[rows], 2, seed) + first[p]
    if anonymizer == "anatomy":
        qit = _parts(root / "tables" / table["name"] / "qit")
        made = pd.DataFrame({"group_id": group, "x": [f"x{v}" for v in x], "part": part})
        assert _rows(qit[["group_id", "x", "part"]]) == _rows(made)
    st = _parts(root / "tables" / table["name"] / "st")
    cells = pd.DataFrame({"group_id": group, "s": [LABELS[v] for v in values], "part": part})
    made = cells.groupby(["group_id", "s", "part"]).size().rename("count").reset_index()
    assert _rows(st[["group_id", "s", "part", "count"]]) == _rows(made)


@pytest.mark.parametrize(
    "algorithm, values, chunk_rows",
    [
        ("rda", [0, 0, 1, 1, 2, 2], 50_000),
        ("gda", [0, 1, 0, 2, 1, 3], 3),
        ("ria", [0, 0, 1, 2], 50_000),
    ],
)
def test_the_streamliner_composition_is_what_publish_writes(
    tmp_path, algorithm, values, chunk_rows
):
    """`streamliner_path` is the real path: `method: rda | gda | ria` (seed SEED) writes
    the groups (boxes and sizes) and values the composition gives."""
    extra = {"streamliner": {"sensitive": "s", "chunk_rows": chunk_rows}}
    n = len(values)
    root, _ = _publish(tmp_path, range(n), values, 2, algorithm, extra)
    group = streamliner_path(np.array(values), algorithm, 2, chunk_rows)
    made = pd.DataFrame({"group_id": group, "x": np.arange(n), "s": [LABELS[v] for v in values]})
    boxes = made.groupby("group_id")["x"].agg(["min", "max", "size"]).reset_index()
    boxes[["min", "max"]] = boxes[["min", "max"]].map(lambda v: f"x{v}")
    groups = _parts(root / "tables" / algorithm / "groups")
    assert _rows(groups[["group_id", "x_min", "x_max", "size"]]) == _rows(boxes)
    st = _parts(root / "tables" / algorithm / "st")
    cells = made.groupby(["group_id", "s"]).size().rename("count").reset_index()
    assert _rows(st[["group_id", "s", "count"]]) == _rows(cells)


def test_single_attribute_publishes_no_table_of_x_and_s(tmp_path):
    """The single-attribute baseline (000 §6) publishes each attribute's counts alone:
    no file joins x and s, so every posterior is the prior (the public multiset's)."""
    _, manifest = _publish(tmp_path, (0, 1, 2, 3), [0, 0, 1, 2], 2, "single_attribute", RULE)
    assert {e["kind"] for e in manifest["tables"]} == {"projection"}
    assert all(len(e["attributes"]) == 1 for e in manifest["tables"])
