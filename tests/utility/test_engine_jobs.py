"""The engine operations behind `vpub utility` on an engine (`utility/engine_jobs.py`):
in process they give exactly what `evaluate` gives, and a query's count by filter
(`count_matching`) equals its count by cube."""

import numpy as np
import pytest
from release_helpers import config

from vpub_spark.datasets.presets import resolve_input, write_generated
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.reader import open_release
from vpub_spark.utility.engine_jobs import engine_counts, engine_utility, release_space
from vpub_spark.utility.evaluate import evaluate


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    d = tmp_path_factory.mktemp("sal") / "sal"
    write_generated(InProcessEngine(), "sal", 8_000, 3, str(d))
    rules = {"random": {"c": 3, "lhs": 2, "seed": 5}}
    result = publish(config(d, d.parent / "out", rules, 4), InProcessEngine())
    return d, result.path


def test_the_in_process_engine_gives_what_evaluate_gives(release):
    data, path = release
    here = evaluate(str(path), str(data / "data"), 2, 0.3, 120, 4)
    there = engine_utility(InProcessEngine(), str(path), str(data / "data"), 2, 0.3, 120, 4)
    assert there.kl == pytest.approx(here.kl, rel=1e-9, abs=1e-12) and here.kl > 0
    assert (there.mean_relative_error, there.queries, there.redrawn) == (
        here.mean_relative_error,
        here.queries,
        here.redrawn,
    )


def test_a_count_by_filter_equals_the_count_by_cube(release):
    data, path = release
    engine = InProcessEngine()
    loaded = engine.load(*resolve_input(data, None))
    _, domains, luts, sizes = release_space(open_release(path), loaded)
    counts = engine_counts(engine, loaded, luts, sizes)
    rng = np.random.default_rng(1)
    queries = []
    for _ in range(20):
        attrs = rng.choice(list(loaded.names), size=2, replace=False)
        queries.append(
            {
                str(a): set(rng.choice(len(domains[a]), size=2, replace=False).tolist())
                for a in attrs
            }
        )
    by_cube = [int(c) for c in counts(queries)]
    by_filter = [counts.exact(q) for q in queries]
    assert by_cube == by_filter and sum(by_cube) > 0
