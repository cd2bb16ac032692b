"""Several anatomy tables of one release seen together.

`gd` on attributes x, y, s, u under `x -> s`, `x -> u` publishes two anatomy tables,
{x, y, s} and {x, y, u}, over the same people. Drawn per table (the old rule, kept here
so these tests have teeth), the two groupings combine against 003 §1's adversary
(tests/adversary.py) who knows the table's multiset of (s, u) pairs: on six rows where u
follows s she learns a value with certainty. The repair, one grouping per partition that
every anatomy table publishes (kernels/shared_grouping.py, called by
`AnatomyJob.shared_grouping`), keeps every attribute's posterior at 1/l: the tests
below walk every table with the multiset and every dealing the job can draw, on 4-8
rows, l = 2 and 3, with two and three attributes, at the eligibility limit and where
no grouping of l rows exists."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from adversary import (
    Adversary,
    combination_codes,
    rng_outcomes,
    within_value_orders,
    worst_attribute_posterior,
)
from test_adversary_publishers import _partition_outcomes

from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.model import PublishedTable
from vpub_spark.publishing.anatomy import AnatomyJob
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.export import guarantee, guarantee_lines


def _release(groupings, rows: np.ndarray) -> tuple:
    """Each table's groups as its QIT and ST show them: id, rows, sorted values."""
    return tuple(
        frozenset(
            (int(i), tuple(np.flatnonzero(g == i).tolist()), tuple(sorted(rows[g == i, k])))
            for i in np.unique(g)
        )
        for k, g in enumerate(map(np.array, groupings))
    )


def independent_posterior(pairs: list, l: int) -> Fraction:
    """The old rule: two anatomy tables (on s, on u) drawn independently over the same
    rows (one partition); the worst posterior of one row's s or u over every release of
    every table with the multiset of `pairs`."""
    combos, t = combination_codes(pairs)
    x = tuple(range(len(t)))

    def outcomes(table: np.ndarray):
        rows = combos[table]
        per_table = [
            _partition_outcomes("anatomy", x, tuple(rows[:, k].tolist()), l) for k in (0, 1)
        ]
        for (g1, p1), (g2, p2) in itertools.product(*per_table):
            yield (g1, g2), p1 * p2

    adversary = Adversary(outcomes, lambda out, table: _release(out, combos[table]))
    return worst_attribute_posterior(adversary, combos, t)


def shared_posterior(rows: list, l: int) -> Fraction:
    """The same for one anatomy table per attribute as the job publishes them: one
    grouping (`AnatomyJob.shared_grouping`, its every dealing walked) for all."""
    combos, t = combination_codes(rows)
    k = combos.shape[1]
    names = [f"s{j}" for j in range(k)]
    tables = tuple(PublishedTable(f"t{j}", ("x", a), a) for j, a in enumerate(names))
    job = AnatomyJob("unused", tables, l, 0, (0,), {})

    def outcomes(table: np.ndarray):
        frame = pd.DataFrame(
            {"x": np.arange(len(table)), **dict(zip(names, combos[table].T, strict=True))}
        )
        keys = within_value_orders(table)  # the dealing orders rows within a combination only
        for group, p in rng_outcomes(lambda: job.shared_grouping(frame, 0), keys):
            yield tuple(group.tolist()), p

    adversary = Adversary(outcomes, lambda g, table: _release([g] * k, combos[table]))
    return worst_attribute_posterior(adversary, combos, t)


CORRELATED = [(0, 0), (1, 1), (2, 2), (0, 0), (1, 1), (2, 2)]


def test_two_groupings_of_correlated_attributes_combine_beyond_one_over_l():
    """The old rule, u following s: each table alone keeps 1/2, together they pin a value."""
    assert independent_posterior(CORRELATED, 2) == 1


def test_two_groupings_of_crossed_attributes_keep_one_over_l():
    """Every pairing of two values of s with two of u once: nothing to combine."""
    assert independent_posterior([(0, 0), (1, 1), (0, 1), (1, 0)], 2) == Fraction(1, 2)


@pytest.mark.parametrize(
    ("rows", "l"),
    [
        (CORRELATED, 2),  # the old rule's 1
        ([(0, 0), (1, 1), (0, 1), (1, 0)], 2),
        ([(0, 0), (0, 1), (0, 2), (1, 0), (2, 1), (3, 2)], 2),  # s's top share exactly 1/2
        ([(0, 0), (0, 0), (1, 1), (1, 1), (2, 0), (3, 1)], 2),  # both at 1/2, correlated
        ([(0, 0), (0, 1), (1, 0), (1, 1), (2, 2)], 2),  # five rows: a group of three
        ([(0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (2, 0)], 3),
        ([(0, 0), (0, 1), (1, 2), (1, 0), (2, 1), (2, 2), (3, 3)], 3),  # seven: a leftover
        ([(0, 0, 0), (0, 1, 1), (1, 0, 1), (1, 1, 0)], 2),  # no group of two: one group
        ([(0, 0, 0), (1, 1, 1), (0, 1, 1), (1, 0, 0), (2, 2, 2), (2, 2, 2)], 2),
    ],
)
def test_one_shared_grouping_keeps_every_attribute_at_one_over_l(rows, l):
    assert shared_posterior(rows, l) <= Fraction(1, l)


def _two_table_release(tmp_path) -> Path:
    """`gd` under x -> s, x -> u on six rows, published through the public API."""
    data = tmp_path / "t"
    (data / "data").mkdir(parents=True)
    rows = ["x,y,s,u"] + [
        f"x{i},y{(i * 5) % 6},{'abc'[i % 3]},{'abc'[(i * 2) % 3]}" for i in range(6)
    ]
    (data / "data" / "part.csv").write_text("\n".join(rows) + "\n")
    (data / "table.yaml").write_text(
        "name: t\nattributes: [{name: x}, {name: y}, {name: s}, {name: u}]\n"
    )
    cfg = {
        "input": {"path": str(data)},
        "privacy": {"l": 2},
        "rules": ["x -> s", "x -> u"],
        "method": "gd",
        "output": {"path": str(tmp_path / "out"), "release_id": "r1"},
        "engine": "inprocess",
        "seed": 3,
    }
    publish(config_from_dict(cfg), InProcessEngine())
    return tmp_path / "out" / "r1"


def test_a_release_of_two_anatomy_tables_publishes_one_grouping(tmp_path):
    """`vpub publish`'s two tables group every person alike, each group diverse in s and
    in u, and the release's words make no exception of it."""
    release = _two_table_release(tmp_path)
    manifest = json.loads((release / "manifest.json").read_text())
    anatomy = [t for t in manifest["tables"] if t.get("sensitive")]
    assert sorted(t["sensitive"] for t in anatomy) == ["s", "u"]
    assert all(t["grouping"] == "shared" for t in anatomy)
    qits = [pq.read_table(release / "tables" / t["name"] / "qit").to_pandas() for t in anatomy]
    groups = [q.sort_values(["x"])[["x", "group_id"]].reset_index(drop=True) for q in qits]
    assert groups[0].equals(groups[1])
    for t in anatomy:  # each group: >= 2 rows, pairwise distinct values
        st = pq.read_table(release / "tables" / t["name"] / "st").to_pandas()
        assert (st.groupby("group_id")["count"].max() == 1).all()
        assert (st.groupby("group_id")["count"].sum() >= 2).all()
    report = audit_release(release)
    assert report.passed and any(c.name == "shared grouping" for c in report.checks)
    assert "from any one" not in guarantee_lines(manifest)[1]
    assert "per table" not in guarantee(manifest)
    apart = manifest | {"tables": [t | {"grouping": None} for t in manifest["tables"]]}
    assert "from any one of the tables" in guarantee_lines(apart)[1]
    assert guarantee(apart).endswith("posterior guarantee per table (2 tables of sensitive values)")


def test_the_audit_finds_tables_marked_shared_that_group_people_apart(tmp_path):
    """A QIT whose groups were drawn on their own fails `shared grouping`."""
    release = _two_table_release(tmp_path)
    manifest = json.loads((release / "manifest.json").read_text())
    name = next(t["name"] for t in manifest["tables"] if t.get("sensitive") == "u")
    path = next((release / "tables" / name / "qit").glob("*.parquet"))
    qit = pq.read_table(path).to_pandas()
    qit["group_id"] = qit["group_id"].to_numpy()[::-1]  # the same groups, other people
    pq.write_table(pa.Table.from_pandas(qit, preserve_index=False), path)
    failed = {c.name for c in audit_release(release).failures}
    assert "shared grouping" in failed
