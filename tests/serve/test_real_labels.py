"""`vpub serve` over a store whose labels hold parentheses, quotes, commas, brackets,
`nan`, a keyword and Unicode (a real uvicorn server on loopback): the JSON form and the
where form answer what `StatDB.count` answers, the condition text round-trips, errors
name their field, and an attribute the store does not serve is never shown."""

from __future__ import annotations

import json

import pytest
from serve_helpers import BIRTH, call, running

from vpub_spark.kernels.statdb import Query
from vpub_spark.release.reader import open_release
from vpub_spark.serve.app import ServeSettings
from vpub_spark.statdb.db import LOG, METHODS, StatDB, where_text
from vpub_spark.utility.queries import estimate_count
from vpub_spark.utility.release_models import release_models
from vpub_spark.utility.where import parse_where


@pytest.fixture(scope="module")
def labels_server(labels_store):
    with running(ServeSettings(str(labels_store[0]), str(labels_store[1].parent), rate=0)) as url:
        yield url


FORMS = [
    {
        "ranges": {"education": ["Bachelors degree(BA AB BS)", "Masters degree(MA MS)"]},
        "sensitive": ["Craft (repair)", "it's", "nan", "and"],
    },
    {
        "ranges": {"origin": ["Mexican (Mexicano)", 'O\'Brien, "Jr"'], "education": ["nan", "nan"]},
        "sensitive": ["Sales, retail", "x=y"],
    },
    {"ranges": {"origin": ["[none]", "Ünïcödé"]}},
    {"sensitive": ["Adm-clerical"]},
]


def _query(db: StatDB, form: dict) -> Query:
    """The form's Query, each label looked up in the store's domain by the test itself."""
    ranges = {
        a: (db.domains[a].index(lo), db.domains[a].index(hi))
        for a, (lo, hi) in form.get("ranges", {}).items()
    }
    labels = db.domains[db.sensitive]
    chosen = form.get("sensitive", labels)
    return Query(ranges, frozenset(labels.index(v) for v in chosen))


@pytest.mark.parametrize("form", FORMS)
def test_json_and_where_forms_answer_as_the_library(labels_server, labels_store, form):
    db = StatDB.open(labels_store[0])
    query = _query(db, form)
    text = where_text(db.meta, query)
    assert db.query(text) == query  # the text reads back to the same codes
    for method in METHODS:
        expected = db.count(query, method, log=False)
        for body in (form, {"where": text}):
            status, answer = call(labels_server, "/statdb/count", {**body, "method": method})
            assert status == 200, answer
            assert (answer["lower"], answer["upper"]) == (expected.low, expected.high), (
                method,
                body,
            )
    logged = json.loads((labels_store[0] / LOG).read_text().splitlines()[-1])
    assert logged["query"] == f"[127.0.0.1] {text}"


def test_an_unserved_attribute_is_never_shown(labels_server):
    status, answer = call(labels_server, "/statdb/count", {"where": "birth_self = x"})
    assert status == 422 and answer["field"] == "where"
    assert "unknown attribute 'birth_self'; there are: education, origin, job" in answer["error"]
    status, other = call(
        labels_server, "/statdb/count", {"ranges": {"birth_self": [BIRTH[0], BIRTH[0]]}}
    )
    assert status == 422 and other["field"] == "ranges.birth_self"
    _, schema = call(labels_server, "/statdb/schema")
    for shown in (answer["error"], other["error"], json.dumps(schema)):
        assert not any(v in shown for v in BIRTH[1:]) and "birth_self" not in json.dumps(schema)


@pytest.mark.parametrize(
    "body, field, says",
    [
        ({"sensitive": ["Craft"]}, "sensitive", "job has no value 'Craft'"),
        ({"sensitive": ["Craft (repair)", 'O\'Brien, "Jr"']}, "sensitive", "job has no value"),
        (
            {"ranges": {"education": ["Children", "Bachelors degree"]}},
            "ranges.education",
            "no value 'Bachelors degree'",
        ),
        ({"ranges": {"education": ["nan", "Children"]}}, "ranges.education", "an empty range"),
        ({"where": "origin = Mexican (Mexicano)"}, "where", "column"),  # unquoted: a syntax error
        ({"where": "education in (Children, nan)"}, "where", "no range of its values"),
    ],
)
def test_bad_labels_name_their_field(labels_server, body, field, says):
    status, answer = call(labels_server, "/statdb/count", body)
    assert status == 422 and answer["field"] == field and says in answer["error"]


def test_the_release_example_is_in_its_own_labels_and_estimates(labels_server, labels_store):
    status, summary = call(labels_server, "/releases/r")
    assert (
        status == 200
        and summary["example"] == "education in ('Bachelors degree(BA AB BS)', Children)"
    )
    assert summary["gnf"]["verdicts"] == []  # a marginal release: no GNF rules to show
    rel = open_release(labels_store[1])
    models, domains = release_models(rel)
    status, est = call(labels_server, "/releases/r/estimate", {"where": summary["example"]})
    n = int(rel.manifest["source"]["rows"])
    expected = estimate_count(models, parse_where(summary["example"], domains), n, domains)
    assert status == 200 and est["estimate"] == pytest.approx(expected) and expected > 0
