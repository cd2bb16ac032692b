"""A store whose labels look like a real census extract's (parentheses, quotes, commas,
brackets, `nan`, Unicode, a leading space, which is trimmed): `vpub statdb workload` writes a file that
`vpub statdb batch` answers line by line, and every interval holds the true count read
from the source table (not from the store)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from release_helpers import marginals_store

from vpub_spark.cli import main
from vpub_spark.statdb.db import StatDB
from vpub_spark.utility.where import parse_conditions

EDUCATION = [
    "Bachelors degree(BA AB BS)",
    "Children",
    "Masters degree(MA MS)",
    "nan",
    " Some, college",
]
ORIGIN = ["Mexican (Mexicano)", "Puerto Rican", 'O\'Brien "Jr"', "[none]", "Ünïcödé"]
JOB = ["Adm-clerical", "Craft (repair)", "Sales, retail", "it's", "x=y", "nan"]


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("census")
    rng = np.random.default_rng(7)
    n = 1200
    frame = pd.DataFrame(
        {
            "education": rng.choice(EDUCATION, n),
            "origin": rng.choice(ORIGIN, n),
            "age": rng.integers(17, 80, n).astype(str),
            "job": rng.choice(JOB, n),
        }
    )
    state, _ = marginals_store(frame, tmp, ["education", "origin"], "job", 3, 3)
    return state, frame


def _true_count(frame: pd.DataFrame, where: str) -> int:
    """The count on the source: every condition as a set of labels (or a numeric range)."""
    keep = np.ones(len(frame), bool)
    for c in parse_conditions(where):
        column = frame[c.attr].str.strip()  # values are compared trimmed (encoding.py)
        if c.kind == "between":
            x = column.astype(float)
            keep &= ((x >= float(c.values[0])) & (x <= float(c.values[1]))).to_numpy()
        else:
            keep &= column.isin(c.values).to_numpy()
    return int(keep.sum())


def test_workload_then_batch_on_real_labels_hold_the_true_counts(census, tmp_path, capsys):
    state, frame = census
    work, answers = tmp_path / "w.txt", tmp_path / "a.csv"
    assert (
        main(
            [
                "statdb",
                "workload",
                str(state),
                "--lam",
                "2",
                "--ql",
                "0.4",
                "--queries",
                "60",
                "--out",
                str(work),
            ]
        )
        == 0
    )
    lines = [x for x in work.read_text().splitlines() if not x.startswith("#")]
    assert any(
        "(" in x.split(" in (", 1)[1] for x in lines if " in (" in x
    )  # labels with parentheses were written
    assert (
        main(
            [
                "statdb",
                "batch",
                str(state),
                "--workload",
                str(work),
                "--engine",
                "inprocess",
                "--out",
                str(answers),
            ]
        )
        == 0
    )
    got = pd.read_csv(answers, keep_default_na=False)
    assert len(got) == 60
    for row in got.itertuples():
        truth = _true_count(frame, row.where)
        assert row.low <= truth <= row.high, row.where


@pytest.mark.parametrize(
    "where",
    [
        "education in ('Bachelors degree(BA AB BS)', Children) and job in ('Craft (repair)', 'it''s')",
        "origin in ('O''Brien \"Jr\"', 'Puerto Rican') and job = nan",
        "origin in ('Puerto Rican', [none]) and job = Adm-clerical",
        "education in ('Some, college', nan) and origin = 'Mexican (Mexicano)' and job in ('Sales, retail', 'x=y')",
    ],
)
def test_query_command_answers_labels_with_parentheses_quotes_and_commas(census, capsys, where):
    state, frame = census
    assert main(["statdb", "query", str(state), "--where", where]) == 0
    out = capsys.readouterr().out
    answer = StatDB.open(state).count(where, log=False)
    assert "[none]" not in where or "[none]" in out  # printed as written, not as markup
    assert (
        f"[{answer.low:,}, {answer.high:,}]" in out
        and answer.low <= _true_count(frame, where) <= answer.high
    )
