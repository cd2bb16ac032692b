"""`vpub statdb workload` and `vpub statdb batch`: workload files round-trip through the
`--where` grammar, a batch answers every line as `StatDB.count` does (in process and on
Spark), logs every answer, and a bad line fails the batch before any work, by number."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from release_helpers import workload_truths

from vpub_spark.cli import main
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError
from vpub_spark.release.stores.store import read_store
from vpub_spark.statdb.batch import answer_workload, write_workload
from vpub_spark.statdb.db import LOG, StatDB, parse_query, where_text
from vpub_spark.statdb.workload import workload


def test_where_text_round_trips_every_workload_query(store):
    meta = read_store(store[0])
    sizes = {a: len(v) for a, v in meta["domains"].items()}
    for lam in (1, 2):
        for q in workload(sizes, meta["qi"], meta["sensitive"], lam, 0.3, 50, lam):
            assert parse_query(meta, where_text(meta, q)) == q


def test_where_text_quotes_labels_the_grammar_would_split():
    meta = {
        "domains": {"city": ["New York", "Boston"], "s": ["a,b", "it's"]},
        "qi": ["city"],
        "sensitive": "s",
    }
    q = parse_query(meta, "city in ('New York', Boston) and s in ('a,b', \"it's\")")
    assert where_text(meta, q) == "city in ('New York', Boston) and s in ('a,b', 'it''s')"
    assert parse_query(meta, where_text(meta, q)) == q


@pytest.mark.parametrize("method", ["dyn-ana", "dyn-gen"])
def test_batch_answers_every_line_as_count_does_and_logs_them(store, tmp_path, method):
    state = store[0]
    path = tmp_path / "w.txt"
    assert write_workload(state, 2, 0.2, 40, 3, path) == 40
    before = len((state / LOG).read_text().splitlines()) if (state / LOG).exists() else 0
    batch = answer_workload(state, path, method, InProcessEngine(), parts=3)
    db = StatDB.open(state)
    lines = path.read_text().splitlines()
    assert list(batch.answers["line"]) == list(range(2, 42))  # line 1 is the header comment
    for row in batch.answers.itertuples():
        answer = db.count(lines[row.line - 1], method, log=False)
        assert (row.low, row.high, row.method) == (answer.low, answer.high, method)
    log = (state / LOG).read_text().splitlines()
    assert len(log) == before + 40
    assert json.loads(log[-1])["query"] == lines[-1] and json.loads(log[-1])["method"] == method


def test_batch_on_spark_equals_the_in_process_batch(store, tmp_path, spark_engine):
    path = tmp_path / "w.txt"
    write_workload(store[0], 2, 0.2, 30, 5, path)
    here = answer_workload(store[0], path, "dyn-ana", InProcessEngine())
    there = answer_workload(store[0], path, "dyn-ana", spark_engine, parts=4)
    cols = ["line", "where", "method", "low", "high"]
    pd.testing.assert_frame_equal(here.answers[cols], there.answers[cols])


def test_a_bad_line_fails_the_batch_naming_it_and_logs_nothing(store, tmp_path):
    state = store[0]
    path = tmp_path / "w.txt"
    path.write_text(
        f"# two queries\nage between {read_store(state)['domains']['age'][3]} and {read_store(state)['domains']['age'][9]}\nweight = 3\n"
    )
    before = (state / LOG).read_text() if (state / LOG).exists() else ""
    with pytest.raises(SpecError, match="w.txt line 3: .*weight"):
        answer_workload(state, path, "dyn-ana", InProcessEngine())
    assert ((state / LOG).read_text() if (state / LOG).exists() else "") == before
    path.write_text("# nothing\n\n")
    with pytest.raises(SpecError, match="no queries"):
        answer_workload(state, path, "dyn-ana", InProcessEngine())


def test_cli_workload_then_batch(store, tmp_path, capsys):
    state, wl, out = str(store[0]), tmp_path / "w.txt", tmp_path / "a.csv"
    assert (
        main(
            [
                "statdb",
                "workload",
                state,
                "--lam",
                "1",
                "--ql",
                "0.1",
                "--queries",
                "25",
                "--out",
                str(wl),
            ]
        )
        == 0
    )
    args = [
        "statdb",
        "batch",
        state,
        "--workload",
        str(wl),
        "--engine",
        "inprocess",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert "25 queries answered" in capsys.readouterr().out
    assert len(pd.read_csv(out)) == 25


def test_bench_statdb_times_both_methods_and_checks_every_interval(store, tmp_path):
    from vpub_bench.bench_statdb import BenchStatdb, bench_statdb

    r = bench_statdb(BenchStatdb(str(store[0]), queries=20, out=str(tmp_path)))
    for method in ("dyn-ana", "dyn-gen"):  # every interval held the truth; no timing asserted
        assert r["methods"][method]["held_the_truth"] == 20
    db = StatDB.open(store[0])  # the truth the benchmark counts is the source table's
    for text, truth in workload_truths(db, store[2], 2, 0.06, 20, 1):
        for method in ("dyn-ana", "dyn-gen"):
            answer = db.count(text, method, log=False)
            assert answer.low <= truth <= answer.high, (text, method, truth, answer)
    written = json.loads((tmp_path / f"{store[0].name}.json").read_text())
    assert written["queries"] == 20 and written["methods"] == r["methods"]


def test_a_workload_file_keeps_labels_with_unicode_line_separators(tmp_path):
    """Only "\n" ends a query: labels holding NEL, LINE SEPARATOR or a form feed (which
    `str.splitlines` would split at) are read back whole."""
    from vpub_spark.kernels.statdb import Query
    from vpub_spark.statdb.batch import read_workload

    meta = {
        "domains": {"a": ["x\x85y", "p\u2028q"], "s": ["u\x0cv", "w"]},
        "qi": ["a"],
        "sensitive": "s",
    }
    queries = [Query({"a": (0, 1)}, frozenset({0})), Query({"a": (1, 1)}, frozenset({0, 1}))]
    path = tmp_path / "w.txt"
    path.write_text("# two\n" + "".join(where_text(meta, q) + "\n" for q in queries))
    read = read_workload(path, meta)
    assert list(read["line"]) == [2, 3]
    assert [parse_query(meta, w) for w in read["where"]] == queries
