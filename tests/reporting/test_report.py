"""`vpub report` of a golden release (Adult, UAD, l = 2, a fixed seed): every section
there, every number the one the corresponding command prints (`vpub audit --json`,
`vpub releases show --json`, `vpub utility`); the owner's sections only with the
source; bad input refused in one line with nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from vpub_spark.cli import main
from vpub_spark.release.layout import COUNT, GROUP
from vpub_spark.reporting.facts import group_sizes, limits, release_facts, rule_sentences

ROOT = Path(__file__).resolve().parents[2]
ADULT = ROOT.parent / "shared" / "data" / "adult"
CONF = ROOT / "conf" / "adult_uad.yaml"
SECTIONS = ("The guarantee", "The audit", "The tables", "What this release cannot show")
OWNER = "The owner's view"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def page_data(html: str) -> dict:
    found = re.search(
        r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S
    )
    assert found, "the page carries its numbers"
    return json.loads(found.group(1).replace("<\\/", "</"))


@pytest.fixture(scope="module")
def adult(tmp_path_factory) -> Path:
    """The golden release: conf/adult_uad.yaml on the real Adult data, seed 7."""
    if not ADULT.is_dir():
        pytest.skip("shared/data/adult is not beside the checkout")
    out = tmp_path_factory.mktemp("adult") / "releases"
    code = main(
        ["publish", "--config", str(CONF), "--input", str(ADULT), "--out", str(out)]
        + ["--seed", "7", "--engine", "inprocess", "--release-id", "adult-uad-l2"]
    )
    assert code == 0
    return out / "adult-uad-l2"


def test_every_number_is_the_one_its_command_prints(adult, capsys, tmp_path):
    out = tmp_path / "report.html"
    code, said, _ = run(capsys, "report", adult, "--source", ADULT, "--out", out)
    assert code == 0 and "owner's view" in said and out.is_file()
    html = out.read_text()
    data = page_data(html)
    for section in (*SECTIONS, OWNER):
        assert f"<h2>{section}" in html
    figures = sum(1 if t["kind"] == "projection" else 2 for t in data["tables"])
    assert html.count('<img src="data:image/svg+xml;base64,') == figures + 1 + 7  # 7 attributes

    code, audit, _ = run(capsys, "audit", adult, "--source", ADULT, "--json")
    assert code == 0 and data["audit"] == json.loads(audit)
    assert f'Audit <span class="ok">PASSED</span>: {data["audit"]["checks"]} checks' in html

    code, shown, _ = run(capsys, "releases", "show", adult.parent, "adult-uad-l2", "--json")
    risk = json.loads(shown)["risk"]
    assert {
        t["name"]: {k: round(v, 4) for k, v in t["risk"].items()} for t in data["tables"]
    } == risk

    code, utility, _ = run(capsys, "utility", adult, "--source", ADULT, "--engine", "inprocess")
    kl = re.search(r"KL divergence: (\S+) nats", utility).group(1)
    mean, median = re.search(r"mean (\S+), median (\S+)", " ".join(utility.split())).groups()
    assert f"{data['utility']['kl']:.4f}" == kl and f"<b>{kl}</b> nats" in html
    u = data["utility"]
    assert (f"{u['mean_relative_error']:.4f}", f"{u['median_relative_error']:.4f}") == (
        mean,
        median,
    )
    assert f"<b>{mean}</b>, median {median}" in html

    manifest = json.loads((adult / "manifest.json").read_text())
    assert len(data["rules"]) == len(manifest["rules"])
    assert all("with probability above 1/2" in s for s in data["rules"])
    assert data["lineage"] == ["adult-uad-l2"] and data["signature"] == "unsigned"
    grouped = {t["name"]: t["groups"] for t in manifest["tables"] if "groups" in t}
    assert (
        grouped
        and {t["name"]: t["groups"] for t in data["tables"] if t["name"] in grouped} == grouped
    )


def test_the_facts_are_the_files_and_the_source(adult):
    """Anatomy publishes every attribute's distribution exactly: the estimate of each
    value is its true count; every group holds at least l distinct values."""
    facts = release_facts(adult, str(ADULT))
    assert facts.owner is not None
    for a in facts.owner.attributes:
        assert a.true.sum() == facts.manifest["source"]["rows"]
        np.testing.assert_allclose(a.estimate, a.true, rtol=1e-9)
    for t, entry in zip(facts.tables, facts.manifest["tables"], strict=True):
        assert t.sizes.sum() == t.rows
        if t.kind == "projection":
            assert t.distinct is None  # cells, no sensitive values
        else:
            assert (
                t.distinct is not None and t.distinct.min() >= 2 and len(t.sizes) == entry["groups"]
            )


def test_the_readers_view_has_no_owner_section(adult, capsys, tmp_path):
    out = tmp_path / "reader.html"
    code, said, _ = run(capsys, "report", adult, "--out", out)
    html = out.read_text()
    assert code == 0 and "reader's view" in said
    assert OWNER not in html and "utility" not in page_data(html)
    assert all(f"<h2>{s}" in html for s in SECTIONS)
    assert "http://" not in html and "https://" not in html  # nothing to fetch


def test_group_sizes_of_an_st_with_a_suppressed_group():
    st = pa.table(
        {
            GROUP: [0, 0, 0, 1, 1, 2],
            "s": ["a", "b", "b", None, None, "c"],
            "u": ["x", "x", "y", None, None, "x"],
            COUNT: [1, 2, 1, 3, 0, 2],
        }
    )
    sizes, distinct = group_sizes(st, ["s", "u"])
    assert sizes.tolist() == [4, 3, 2] and distinct.tolist() == [3, 0, 1]
    sizes, distinct = group_sizes(st.drop_columns(["u"]), "s")
    assert distinct.tolist() == [2, 0, 1]
    missing = pa.table({GROUP: [0, 0, 1], "s": ["a", "b", "c"], COUNT: [1, None, 2]})
    sizes, distinct = group_sizes(missing, "s")  # a missing count: the row shows nothing
    assert sizes.tolist() == [1, 2] and distinct.tolist() == [1, 1]


@pytest.mark.parametrize("seed", range(6))
def test_group_sizes_of_an_st_that_shows_every_row(seed):
    """Every row shown (positive counts, no missing value): the sizes come from the
    per-group pass itself; equal to pandas' sums and distinct counts per group, in the
    writer's order or not, with a (group, value) cell split over two rows."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    st = pa.table(
        {
            GROUP: np.sort(rng.integers(0, 9, n)) if seed % 2 else rng.integers(0, 9, n),
            "s": [str(v) for v in rng.integers(0, 4, n)],
            COUNT: rng.integers(1, 5, n),
        }
    )
    frame = st.to_pandas()
    want = frame.groupby(GROUP).agg(size=(COUNT, "sum"), distinct=("s", "nunique"))
    sizes, distinct = group_sizes(st, "s")
    assert sizes.tolist() == want["size"].tolist()
    assert distinct.tolist() == want["distinct"].tolist()


def test_bad_input_is_one_line_and_writes_nothing(adult, capsys, tmp_path):
    out = tmp_path / "r.html"
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "report", tmp_path / "empty", "--out", out)
    assert code == 2 and "not a release" in err and len(err.strip().splitlines()) == 1
    part = tmp_path / "part"  # the training file without the test file: other rows
    part.mkdir()
    (part / "adult.data.csv").write_bytes((ADULT / "adult.data.csv").read_bytes())
    code, _, err = run(capsys, "report", adult, "--source", part, "--out", out)
    assert code == 2 and "not the data release adult-uad-l2 was published from" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and not list(tmp_path.glob(".r.html*"))


def test_a_source_with_other_values_is_refused_and_the_owners_secret_is_checked(
    adult, capsys, tmp_path
):
    """The same rows but one value changed: the multisets differ, refused; the true
    source with the owner's run record: the keyed fingerprint is checked and passes."""
    from release_helpers import run_record

    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "adult.test.csv").write_bytes((ADULT / "adult.test.csv").read_bytes())
    lines = (ADULT / "adult.data.csv").read_text().splitlines(keepends=True)
    row = lines[1].split(",")  # the first row after the header
    row[5] = "Widowed" if row[5] != "Widowed" else "Divorced"  # marital-status
    (changed / "adult.data.csv").write_text(lines[0] + ",".join(row) + "".join(lines[2:]))
    out = tmp_path / "r.html"
    code, _, err = run(capsys, "report", adult, "--source", changed, "--out", out)
    assert code == 2 and "not the data release adult-uad-l2 was published from" in err
    assert "equals the source" in err and not out.exists()
    secret = run_record("adult-uad-l2")
    code, _, _ = run(capsys, "report", adult, "--source", ADULT, "--secret", secret, "--out", out)
    assert code == 0
    checks = page_data(out.read_text())["audit"]
    assert checks["passed"] and "source: fingerprint" in out.read_text()


def test_the_sentences_are_as_strong_as_the_release_makes_them():
    """A violated rule, an unsafe option, tables grouped apart and a failed audit each
    weaken the sentence; a plain release states the bound."""
    base = {
        "privacy": {"model": "l-diversity", "l": 3},
        "rules": [{"lhs": ["a"], "rhs": "s"}, {"lhs": ["b"], "rhs": "s"}],
        "gnf": {
            "verdicts": [
                {"rule": 0, "status": "guardian", "reason": "t1 is the guardian table"},
                {"rule": 1, "status": "violated", "reason": "a path b - s"},
            ]
        },
        "tables": [],
    }
    plain = rule_sentences(base)
    assert plain[0].endswith(
        "cannot tell their s with probability above 1/3 (t1 is the guardian table)."
    )
    assert plain[1].startswith("Rule 2, b -> s: NOT guaranteed")
    unsafe = rule_sentences(base | {"method_cost": {"assign": "local-unsafe"}})
    assert "no posterior bound" in unsafe[0] and "above 1/3" not in unsafe[0].split("(")[0]
    assert any(
        "only the audited bound holds" in x
        for x in limits(base | {"method_cost": {"assign": "local-unsafe"}})
    )
    assert "this is not shown" in rule_sentences(base, audited=False)[0]


def test_a_damaged_release_is_reported_as_failed(adult, capsys, tmp_path):
    import shutil

    copy = tmp_path / "releases" / "adult-uad-l2"
    shutil.copytree(adult, copy)
    for f in (copy / "tables").glob("*/st/*.parquet"):
        f.unlink()
    out = tmp_path / "failed.html"
    code, said, _ = run(capsys, "report", copy, "--out", out)
    html = out.read_text()
    assert code == 1 and "audit FAILED" in said
    assert 'Audit <span class="bad">FAILED</span>' in html and "unreadable: " in html
    assert "this is not shown" in html
