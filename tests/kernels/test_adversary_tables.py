"""Several anatomy tables of one release seen together (an open exception of the
posterior guarantee, docs/explanation/threat-model.md).

`gd` on attributes x, y, s, u under `x -> s`, `x -> u` publishes two anatomy tables,
{x, y, s} and {x, y, u}, each grouping the same people on its own (the seeds per table
differ). 003 §1's adversary (tests/adversary.py) who knows the table's multiset of
(s, u) pairs, how the two attributes go together, combines the groupings: on six
rows where u follows s she learns a value with certainty. Knowing only each
attribute's multiset (any pairing equally likely), the two tables are independent
draws on independent columns and her posterior is each table's own, which
tests/kernels/test_adversary_publishers.py bounds by 1/l. These tests keep the
measured exception and the release's words about it; a repair (one grouping for every
table of a partition, diverse in each attribute) would turn the first into a bound."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import numpy as np
from adversary import Adversary, combination_codes, worst_attribute_posterior
from test_adversary_publishers import _partition_outcomes


def combined_posterior(pairs: list, l: int) -> Fraction:
    """The worst posterior of one row's s or u over every release of every table with
    the multiset of `pairs`, two anatomy tables (on s, on u) drawn independently over
    the same rows (one partition, as `AnatomyJob.run` groups each table)."""
    combos, t = combination_codes(pairs)
    x = tuple(range(len(t)))

    def outcomes(table: np.ndarray):
        rows = combos[table]
        per_table = [
            _partition_outcomes("anatomy", x, tuple(rows[:, k].tolist()), l) for k in (0, 1)
        ]
        for (g1, p1), (g2, p2) in itertools.product(*per_table):
            yield (g1, g2), p1 * p2

    def release(out, table: np.ndarray) -> tuple:
        rows = combos[table]
        return tuple(
            frozenset(
                (int(i), tuple(np.flatnonzero(g == i).tolist()), tuple(sorted(rows[g == i, k])))
                for i in np.unique(g)
            )
            for k, g in enumerate(map(np.array, out))
        )

    return worst_attribute_posterior(Adversary(outcomes, release), combos, t)


def test_two_anatomy_tables_of_correlated_attributes_combine_beyond_one_over_l():
    """u follows s: each table alone keeps 1/2, together they pin a value."""
    assert combined_posterior([(0, 0), (1, 1), (2, 2), (0, 0), (1, 1), (2, 2)], 2) == 1


def test_two_anatomy_tables_of_crossed_attributes_keep_one_over_l():
    """Every pairing of two values of s with two of u once: nothing to combine."""
    assert combined_posterior([(0, 0), (1, 1), (0, 1), (1, 0)], 2) == Fraction(1, 2)


def test_a_release_of_two_anatomy_tables_says_its_guarantee_is_per_table(tmp_path):
    """The export's and the catalog's words for such a release name the exception."""
    from vpub_spark.config import config_from_dict
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.publish.pipeline import publish
    from vpub_spark.release.export import guarantee_lines
    from vpub_spark.serve.catalog import guarantee

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
    manifest = json.loads((tmp_path / "out" / "r1" / "manifest.json").read_text())
    assert sorted(t.get("sensitive") for t in manifest["tables"]) == ["s", "u"]
    assert "from any one of the tables" in guarantee_lines(manifest)[1]
    assert guarantee(manifest).endswith(
        "posterior guarantee per table (2 tables of sensitive values)"
    )
    one = manifest | {"tables": [t for t in manifest["tables"] if t.get("sensitive") == "s"]}
    assert "from any one" not in guarantee_lines(one)[1] and "per table" not in guarantee(one)
