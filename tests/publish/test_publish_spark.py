"""The Spark adapter of publishing: the same release as the in-process engine, and P
partitions really run as P tasks (docs/explanation/architecture.md, "Spark pitfalls")."""

import shutil
from functools import partial

import pandas as pd
import pytest
from release_helpers import config, contents, same_contents
from spark_helpers import with_jobs

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def sal(tmp_path_factory):
    from vpub_spark.datasets.presets import write_generated

    d = tmp_path_factory.mktemp("sal") / "sal"
    write_generated(InProcessEngine(), "sal", 30_000, 11, str(d))
    return d


RULES = {"random": {"c": 5, "lhs": 3, "seed": 2}}


KINDS = {  # what each method publishes of sal under RULES at l = 4
    "uad": {"anatomy", "projection"},
    "gd": {"anatomy", "projection"},
    "single_attribute": {"projection"},
}


@pytest.mark.parametrize("method", sorted(KINDS))
def test_spark_and_inprocess_publish_the_same_release(spark_engine, sal, tmp_path, method):
    """Every anatomy method: the same manifest tables (names, kinds, rows, checksums aside)
    and the same rows in every part of every table."""
    cfg = dict(partitions=3, seed=7, method=method)  # l = 4: at 5, race's share leaves P = 1
    a = publish(config(sal, tmp_path / "a", RULES, 4, **cfg), InProcessEngine())
    b = publish(config(sal, tmp_path / "b", RULES, 4, engine="spark", **cfg), spark_engine)
    assert b.manifest["engine"] == "spark" and b.manifest["partitions"] == 3

    def tables(m):
        return [{k: v for k, v in t.items() if k != "parts"} for t in m["tables"]]

    assert tables(a.manifest) == tables(b.manifest)
    assert a.manifest["source"]["fingerprint"] == b.manifest["source"]["fingerprint"]
    assert {t["kind"] for t in b.manifest["tables"]} == KINDS[method]
    assert same_contents(contents(a.path), contents(b.path))
    assert audit_release(b.path, source=str(sal / "data")).passed


def test_spark_and_inprocess_publish_one_shared_grouping_alike(spark_engine, sal, tmp_path):
    """`gd` under rules of two right-hand sides: two anatomy tables that publish one
    grouping (kernels/shared_grouping.py), the same on both engines."""
    cfg = dict(partitions=2, seed=5, method="gd")
    rules = ["age, gender -> occupation", "age, marital -> education"]
    a = publish(config(sal, tmp_path / "a", rules, 4, **cfg), InProcessEngine())
    b = publish(config(sal, tmp_path / "b", rules, 4, engine="spark", **cfg), spark_engine)
    shared = [t for t in b.manifest["tables"] if t.get("grouping") == "shared"]
    assert len({t["sensitive"] for t in shared}) == 2
    assert same_contents(contents(a.path), contents(b.path))
    assert b.audit.passed


def test_two_partitions_run_as_two_tasks(spark_engine, sal, tmp_path):
    result = publish(
        config(sal, tmp_path / "r", RULES, 4, engine="spark", partitions=2), spark_engine
    )
    summary = result.partitions
    assert sorted(summary["part"].unique()) == [0, 1]
    for _, per_table in summary.groupby("table"):
        # each partition ran in its own Spark task (partition id), none ran empty-handed
        assert per_table["task"].nunique() == 2 and (per_table["rows"] > 0).all()
    assert result.audit.passed


def test_spark_kl_equals_inprocess_kl(spark_engine, sal, tmp_path):
    from vpub_spark.datasets.presets import resolve_input
    from vpub_spark.engines.inprocess import InProcessEngine
    from vpub_spark.release.reader import open_release
    from vpub_spark.utility.engine_jobs import release_files
    from vpub_spark.utility.evaluate import load_release_and_source
    from vpub_spark.utility.kl import kl_divergence

    for method in ("uad", "gd"):
        result = publish(config(sal, tmp_path / method, RULES, 5, method=method), InProcessEngine())
        _, models, domains, src = load_release_and_source(str(result.path), str(sal / "data"))
        expected = kl_divergence(models, src, domains)
        path, spec = resolve_input(sal, None)
        rel, loaded = open_release(result.path), spark_engine.load(path, spec)
        files = release_files(rel, loaded)
        got = [
            spark_engine.release_kl(loaded, files),  # the form the engine picks
            spark_engine.release_kl(loaded, files, "one-shuffle"),  # it applies: no error
            spark_engine.release_kl(loaded, files, "per-term"),  # gd's: separator terms
        ]
        if method == "uad":  # the every-task form's one pass, on one release
            assert loaded.direct is not None  # the every-task form's tasks read the source
            # one pass: the map stage and the reduce stage (a job each under AQE), no more
            run = partial(spark_engine.release_kl, loaded, files, "every-task")
            broadcast, jobs = with_jobs(spark_engine.spark, run, f"kl-{method}")
            assert 0 < jobs <= 2
            got.append(broadcast)
        here = InProcessEngine()
        local = here.load(path, spec)
        got.append(here.release_kl(local, release_files(rel, local)))
        assert got == pytest.approx([expected] * len(got), rel=1e-9, abs=1e-9)


def test_the_source_entropy_is_the_same_packed_or_by_columns(spark_engine, sal, monkeypatch):
    import numpy as np
    import pandas as pd

    from vpub_spark.datasets.presets import resolve_input
    from vpub_spark.engines.spark import kl_one_pass
    from vpub_spark.engines.spark.kl import source_entropy

    path, spec = resolve_input(sal, None)
    loaded = spark_engine.load(path, spec)
    frame = pd.read_parquet(sal / "data")
    p = frame.value_counts().to_numpy(float) / len(frame)
    packed = source_entropy(loaded)
    monkeypatch.setattr(kl_one_pass, "term_of", lambda *a: None)  # keys too wide to pack
    by_columns = source_entropy(loaded)
    assert packed == pytest.approx(float(np.sum(p * np.log(p))), rel=1e-12)
    assert by_columns == pytest.approx(packed, rel=1e-12)


@pytest.mark.parametrize("rows", ["direct", "packed", "columns"])
def test_spark_utility_equals_inprocess_utility(spark_engine, sal, tmp_path, monkeypatch, rows):
    """`vpub utility --engine spark`: the same KL, workload and errors as in process,
    with the source read by the tasks themselves (`engines/spark/direct.py`), or from
    Spark's rows packed into one key or passed column by column."""
    from vpub_spark.engines.spark import engine, kl_one_pass

    if rows != "direct":
        monkeypatch.setattr(engine, "readable_directly", lambda *a: False)
    if rows == "columns":  # domains too wide to pack
        monkeypatch.setattr(kl_one_pass, "term_of", lambda *a: None)
    from vpub_spark.utility.engine_jobs import engine_utility
    from vpub_spark.utility.evaluate import evaluate

    result = publish(config(sal, tmp_path / "u", RULES, 5), InProcessEngine())
    here = evaluate(str(result.path), str(sal / "data"), 2, 0.3, 150, 4)
    there = engine_utility(spark_engine, str(result.path), str(sal / "data"), 2, 0.3, 150, 4)
    assert there.kl == pytest.approx(here.kl, rel=1e-9)
    assert (
        there.mean_relative_error,
        there.median_relative_error,
        there.queries,
        there.redrawn,
    ) == (here.mean_relative_error, here.median_relative_error, here.queries, here.redrawn)


@pytest.mark.parametrize("rows", ["one-word", "packed", "columns"])
def test_both_engines_number_rows_of_equal_qi_alike(spark_engine, sal, tmp_path, monkeypatch, rows):
    """uad's shards read each row's index among the rows of equal QI (kernels/
    partitioning.py): Spark's window numbers them as the in-process engine does, on a
    table made of duplicates (every row twice), so both publish the same release with
    two partitions; whether the partition pass moves each row as one bigint (codes and
    index, its key computed from it), its codes packed beside its key (an index too
    wide to pack with them), or the window and the pass move columns (domains too wide
    to pack)."""
    if rows == "packed":
        from vpub_spark.engines.spark import rows as spark_rows

        monkeypatch.setattr(spark_rows, "_word_packing", lambda *a: None)
    if rows == "columns":
        from vpub_spark.engines.spark import kl_one_pass

        monkeypatch.setattr(kl_one_pass, "term_of", lambda *a: None)  # no packing at all
    doubled = tmp_path / "doubled"
    (doubled / "data").mkdir(parents=True)
    source = pd.read_parquet(sal / "data").head(3000)
    pd.concat([source, source]).to_parquet(doubled / "data" / "part-00000.parquet", index=False)
    shutil.copy(sal / "table.yaml", doubled / "table.yaml")
    cfg = dict(partitions=2, seed=7, method="uad")
    a = publish(config(doubled, tmp_path / "a", RULES, 4, **cfg), InProcessEngine())
    b = publish(config(doubled, tmp_path / "b", RULES, 4, engine="spark", **cfg), spark_engine)
    assert a.manifest["partitions"] == b.manifest["partitions"] == 2
    assert same_contents(contents(a.path), contents(b.path))
