"""End-to-end releases (in-process engine): 000 Table 1, property tests, failures, bad input."""

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from release_helpers import (
    RULES_1_3,
    TABLE1,
    config,
    contents,
    made_with,
    publish_inprocess,
    run_record,
    same_contents,
    write_table,
)

from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import DataError, PrivacyError, SpecError, VpubError
from vpub_spark.gnf import check_gnf
from vpub_spark.model import PublishedTable, Schema
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.reader import open_release
from vpub_spark.rules import parse_rules


def test_table1_rules_1_to_3_end_to_end(tmp_path):
    data = write_table(TABLE1, tmp_path / "table1")
    result = publish_inprocess(data, tmp_path / "out", RULES_1_3, l=2)
    m = result.manifest
    assert result.audit.passed and (result.path / "_SUCCESS").exists()
    # UAD's choice (seeded): zipcode anonymized in one table with every attribute but race,
    # race published alone. GNF like Table 3, with a larger table: Rule 1 is unreachable
    # (race shares no table), Rules 2 and 3 are guarded by the zipcode table (000 Def. 4).
    tables = {t["name"]: t for t in m["tables"]}
    race = [t for t in tables.values() if "race" in t["attributes"]]
    assert (
        race == [t for t in tables.values() if t["attributes"] == ["race"]]
        and race[0]["kind"] == "projection"
    )
    zip_table = next(t for t in tables.values() if t["sensitive"] == "zipcode")
    assert set(zip_table["attributes"]) == {"hospital", "age", "gender", "icd9", "zipcode"}
    assert [v["status"] for v in m["gnf"]["verdicts"]] == ["unreachable", "guardian", "guardian"]
    schema = Schema(
        tuple(
            PublishedTable(t["name"], tuple(t["attributes"]), t["sensitive"]) for t in m["tables"]
        )
    )
    assert check_gnf(schema, parse_rules(RULES_1_3)).ok
    # anatomy of 6 tuples at l = 2: 3 groups of 2 distinct zipcodes, decoded labels
    rel = open_release(result.path)
    st_ = rel.read(zip_table["name"], "st").to_pandas()
    assert st_.groupby("group_id")["zipcode"].nunique().tolist() == [2, 2, 2]
    assert set(st_["zipcode"].astype(str)) == set(TABLE1["zipcode"])
    qit = rel.read(zip_table["name"], "qit").to_pandas()
    assert (
        sorted(qit.columns) == sorted(["group_id", "hospital", "age", "gender", "icd9"])
        and len(qit) == 6
    )
    assert audit_release(result.path, source=str(data / "data")).passed


@st.composite
def tables_and_rules(draw):
    n_attrs = draw(st.integers(3, 6))
    n = draw(st.integers(12, 300))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    domains = [draw(st.integers(2, 7)) for _ in range(n_attrs)]
    frame = pd.DataFrame(
        {f"a{i}": [f"v{v}" for v in rng.integers(0, d, n)] for i, d in enumerate(domains)}
    )
    l = draw(st.integers(2, 4))
    rules = {
        "random": {
            "c": draw(st.integers(1, 4)),
            "lhs": draw(st.integers(1, n_attrs - 1)),
            "seed": seed,
        }
    }
    return frame, l, rules, draw(st.integers(1, 3)), draw(st.integers(0, 1000))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=tables_and_rules())
def test_every_release_audits_clean_and_is_deterministic(tmp_path_factory, case):
    frame, l, rules, partitions, seed = case
    shares = frame.apply(lambda c: c.value_counts(normalize=True).max())
    assume((shares <= 1 / l).any())  # some attribute can be a rule's RHS
    base = tmp_path_factory.mktemp("prop")
    data = write_table(frame, base / "data")
    try:
        first = publish_inprocess(data, base / "a", rules, l=l, partitions=partitions, seed=seed)
    except SpecError as e:  # e.g. too few attributes for c irreducible rules
        assume("irreducible" not in str(e))
        raise
    report = audit_release(first.path, source=str(data / "data"))
    assert report.passed, report.as_dict()
    for t in first.manifest["tables"]:
        if t["kind"] == "anatomy":
            st_ = open_release(first.path).read(t["name"], "st").to_pandas()
            per = st_.groupby(["group_id", t["sensitive"]], observed=True)["count"].sum()
            assert (per.groupby(level=0).max() * l <= per.groupby(level=0).sum()).all()
    second = publish_inprocess(data, base / "b", rules, l=l, partitions=partitions, seed=seed)
    assert same_contents(contents(first.path), contents(second.path))


def _release(tmp_path, **kw):
    data = write_table(TABLE1, tmp_path / "table1")
    return data, publish_inprocess(data, tmp_path / "out", RULES_1_3, l=2, **kw)


def _tamper(src, dst):
    shutil.copytree(src, dst)
    return dst


def _failed(path, **kw):
    return [c.name for c in audit_release(path, **kw).failures]


def test_tampered_releases_are_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, result = _release(tmp_path)
    assert audit_release(result.path).passed
    zt = next(t for t in result.manifest["tables"] if t["sensitive"] == "zipcode")["name"]

    def rewrite(path, part, change):
        f = next((path / "tables" / zt / part).glob("*.parquet"))
        pq.write_table(
            change(pq.read_table(f).to_pandas()).pipe(pa.Table.from_pandas, preserve_index=False), f
        )

    # 1. every group made to hold one zipcode: no longer 2-diverse
    p = _tamper(result.path, tmp_path / "t1")
    rewrite(p, "st", lambda f: f.assign(zipcode="71000"))
    assert f"{zt}: 2-diverse" in _failed(p)
    # 2. a QIT row removed: group sizes disagree, the table no longer covers every row
    p = _tamper(result.path, tmp_path / "t2")
    rewrite(p, "qit", lambda f: f.iloc[1:])
    assert {f"{zt}: group sizes agree", f"{zt}: covers every row"} <= set(_failed(p))
    # 3. the sensitive value copied into the QIT: a column linking QI and S
    p = _tamper(result.path, tmp_path / "t3")
    rewrite(p, "qit", lambda f: f.assign(zipcode="71000"))
    assert f"{zt}/qit: columns" in _failed(p)
    # 4. the manifest claims a stronger guarantee than the groups give
    p = _tamper(result.path, tmp_path / "t4")
    m = json.loads((p / "manifest.json").read_text())
    m["privacy"]["l"] = 3
    (p / "manifest.json").write_text(json.dumps(m))
    assert f"{zt}: 3-diverse" in _failed(p)
    # 5. the manifest's schema joined: race published beside zipcode -> not GNF
    p = _tamper(result.path, tmp_path / "t5")
    m = json.loads((p / "manifest.json").read_text())
    race = next(t for t in m["tables"] if t["attributes"] == ["race"])
    race["attributes"] = ["race", "age"]
    (p / "manifest.json").write_text(json.dumps(m))
    assert "GNF" in _failed(p)
    # 6. not committed
    p = _tamper(result.path, tmp_path / "t6")
    (p / "_SUCCESS").unlink()
    assert _failed(p) == ["committed"]
    # 7. a table's files removed
    p = _tamper(result.path, tmp_path / "t7")
    shutil.rmtree(p / "tables" / zt / "st")
    assert f"{zt}: readable" in _failed(p)
    # 8. the release is fine but the source is another one: a value changed
    data2 = write_table(
        TABLE1.assign(icd9=TABLE1["icd9"].replace("flu", "HIV")), tmp_path / "other"
    )
    failed = _failed(
        result.path,
        source=str(data2 / "data"),
        secret=str(run_record(result.manifest["release_id"])),
    )
    assert "source: fingerprint" in failed and any(
        "icd9" in f and "equals the source" in f for f in failed
    )


def test_audit_cli_exit_codes(tmp_path, capsys):
    from vpub_spark.cli import main

    _, result = _release(tmp_path)
    assert main(["audit", str(result.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
    (result.path / "_SUCCESS").unlink()
    assert main(["audit", str(result.path)]) == 1
    assert main(["audit", str(tmp_path / "nothing")]) == 1


def test_failure_mid_write_leaves_nothing(tmp_path, monkeypatch):
    data = write_table(TABLE1, tmp_path / "table1")
    out = tmp_path / "out"

    def broken(self, *a, **kw):  # the anatomy tables are written, then a projection fails
        raise OSError("disk full (injected)")

    monkeypatch.setattr(InProcessEngine, "write_projection", broken)
    with pytest.raises(OSError, match="injected"):
        publish_inprocess(data, out, RULES_1_3, l=2)
    assert list(out.iterdir()) == []  # no release, no staging directory


def test_a_dead_runs_staging_directory_is_removed_by_the_next_run(tmp_path):
    import socket
    import subprocess
    import sys

    data = write_table(TABLE1, tmp_path / "table1")
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    for name, pid in (
        ("dead", dead),
        ("alive", str(os.getpid())),
    ):  # a killed driver's, a running one's
        stage = out / f".r.staging-{name}"
        (stage / "tables").mkdir(parents=True)
        (stage / ".owner").write_text(f"{socket.gethostname()} {pid}\n")
    publish_inprocess(data, out, RULES_1_3, l=2, output={"path": str(out), "release_id": "r"})
    assert sorted(p.name for p in out.iterdir() if p.name != "_latest") == [".r.staging-alive", "r"]
    assert not (out / "r" / ".owner").exists()


def test_failed_audit_commits_nothing(tmp_path, monkeypatch):
    from vpub_spark.lake import commit
    from vpub_spark.release.audit.checks import AuditReport, Check

    data = write_table(TABLE1, tmp_path / "table1")
    monkeypatch.setattr(
        commit, "audit_release", lambda *a, **k: AuditReport("x", [Check("injected", False, "bad")])
    )
    with pytest.raises(PrivacyError, match="audit"):
        publish_inprocess(data, tmp_path / "out", RULES_1_3, l=2)
    assert list((tmp_path / "out").iterdir()) == []


def test_committed_release_is_not_overwritten_unless_asked(tmp_path):
    data, first = _release(tmp_path, output={"path": str(tmp_path / "out"), "release_id": "r1"})
    before = (first.path / "manifest.json").read_text()
    with pytest.raises(VpubError, match="--overwrite"):
        publish_inprocess(
            data,
            tmp_path / "out",
            RULES_1_3,
            l=2,
            output={"path": str(tmp_path / "out"), "release_id": "r1"},
        )
    assert (first.path / "manifest.json").read_text() == before
    cfg = config(
        data,
        tmp_path / "out",
        RULES_1_3,
        2,
        output={"path": str(tmp_path / "out"), "release_id": "r1"},
        seed=5,
    )
    from dataclasses import replace

    again = publish(replace(cfg, overwrite=True), InProcessEngine())
    assert again.audit.passed and made_with(
        json.loads((again.path / "manifest.json").read_text()), 5
    )
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.name != "_latest") == ["r1"]


@pytest.mark.parametrize(
    "rules, l, error, match",
    [
        (
            ["hospital, race -> gender"],
            3,
            PrivacyError,
            "only 2 distinct values",
        ),  # l above the distinct values
        (
            ["zipcode -> race"],
            3,
            PrivacyError,
            r"'white' of race covers 3 of 6 rows \(50.00%\), more than 1/l = 33.33%",
        ),  # not l-eligible
        (["zipcode -> race"], 1, SpecError, "l >= 2"),
        (["zipcode -> nationality"], 2, SpecError, "nationality"),
    ],
)
def test_bad_rules_and_parameters(tmp_path, rules, l, error, match):
    data = write_table(TABLE1, tmp_path / "table1")
    with pytest.raises(error, match=match):
        publish_inprocess(data, tmp_path / "out", rules, l=l)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_empty_table_and_unwritable_output(tmp_path):
    data = write_table(TABLE1.iloc[:0], tmp_path / "empty")
    with pytest.raises(DataError, match="empty"):
        publish_inprocess(data, tmp_path / "out", RULES_1_3)
    full = write_table(TABLE1, tmp_path / "table1")
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(VpubError, match="cannot create the output directory"):
        publish_inprocess(full, tmp_path / "a-file" / "releases", RULES_1_3)


def test_read_only_output(tmp_path):
    full = write_table(TABLE1, tmp_path / "table1")
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        if os.access(locked, os.W_OK):
            _read_only_output_as_nobody()  # root writes anywhere: check it as another user
            return
        with pytest.raises(VpubError, match="permission denied"):
            publish_inprocess(full, locked, RULES_1_3)
        assert list(locked.iterdir()) == []
    finally:
        os.chmod(locked, 0o700)


def _read_only_output_as_nobody() -> None:
    """`vpub publish` run as the unprivileged user `nobody` into a directory it may not
    write: exit 2, the error says so, and nothing is written (CI runs as root, for
    whom every directory is writable)."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    import yaml
    from release_helpers import vpub

    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv (util-linux): cannot test as another user")
    work = Path(tempfile.mkdtemp(prefix="vpub-nobody-", dir="/tmp"))  # reachable by nobody
    try:
        os.chmod(work, 0o777)
        data = write_table(TABLE1, work / "table1")
        locked = work / "locked"
        locked.mkdir(mode=0o555)
        os.chmod(locked, 0o555)
        job = {
            "engine": "inprocess",
            "input": {"path": str(data)},
            "privacy": {"l": 2},
            "rules": RULES_1_3,
            "output": {"path": str(locked)},
            "private_dir": str(work / "private"),
        }
        (work / "job.yaml").write_text(yaml.safe_dump(job))
        env = os.environ | {"HOME": str(work), "TMPDIR": str(work)}
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        probe = [*nobody, *vpub("--help")]
        if subprocess.run(probe, env=env, cwd=work, capture_output=True, timeout=120).returncode:
            pytest.skip(
                "the user nobody cannot run vpub from this checkout (a private directory, "
                "such as a 0700 home): the read-only output is not checked here"
            )
        done = subprocess.run(
            [*nobody, *vpub("publish", "--config", str(work / "job.yaml"))],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 2, done.stdout + done.stderr
        assert "permission denied" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert list(locked.iterdir()) == []
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_publish_cli_with_config_and_overrides(tmp_path, capsys):
    import yaml

    from vpub_spark.cli import main

    data = write_table(TABLE1, tmp_path / "table1")
    conf = tmp_path / "job.yaml"
    conf.write_text(
        yaml.safe_dump(
            {
                "engine": "spark",
                "input": {"path": str(data)},
                "privacy": {"l": 2},
                "rules": RULES_1_3,
                "output": {"path": "unused"},
            }
        )
    )
    code = main(
        [
            "publish",
            "--config",
            str(conf),
            "--engine",
            "inprocess",
            "--out",
            str(tmp_path / "rel"),
            "--release-id",
            "cli",
            "--seed",
            "987654321",
        ]
    )
    out = capsys.readouterr()
    assert code == 0 and "release committed" in out.out and "vpub: error" not in out.err
    assert (
        out.out.count("keep it private") == 1 and "987654321" not in out.out + out.err
    )  # told once, never printed
    assert made_with(
        json.loads((tmp_path / "rel" / "cli" / "manifest.json").read_text()), 987654321
    )
    conf.write_text(
        yaml.safe_dump({"input": {"path": str(data)}, "rules": RULES_1_3, "method": "gd2"})
    )
    assert main(["publish", "--config", str(conf)]) == 2
    assert "method must be one of" in capsys.readouterr().err


def test_a_holding_reader_serves_a_part_and_its_columns_from_memory(tmp_path):
    """`holding_parts`: a part read whole is kept; reading it again, or some of its
    columns, gives the same data without the files (removed here), and a column it
    lacks is the same error as from the files."""
    rel = open_release(_release(tmp_path)[1].path).holding_parts()
    entry = next(t for t in rel.tables if t["kind"] == "anatomy")
    whole = rel.read(entry["name"], "st")
    cols = whole.column_names[1:]
    assert rel.read(entry["name"], "st").equals(whole)
    assert open_release(rel.path).read(entry["name"], "st", cols).equals(whole.select(cols))
    shutil.rmtree(rel.part_dir(entry["name"], "st"))
    assert rel.read(entry["name"], "st", cols).equals(whole.select(cols))
    with pytest.raises(DataError, match="files disagree on their columns"):
        rel.read(entry["name"], "st", ["no such column"])


def test_an_audit_given_a_holding_reader_checks_what_it_holds_and_keeps_it(tmp_path):
    """`audit_release` of an open holding reader, as it is (the STs it read whole then
    kept for the caller) or with every part read ahead (as `vpub report` reads them):
    the same checks as of the path."""
    path = _release(tmp_path)[1].path
    want = audit_release(path).as_dict()
    rel = open_release(path).holding_parts()
    assert audit_release(rel).as_dict() == want and rel.holding_parts() is rel
    anatomy = [t["name"] for t in rel.tables if t["kind"] == "anatomy"]
    assert anatomy and all(rel.kept(name, "st") is not None for name in anatomy)
    ahead = open_release(path).holding_parts()
    for t in ahead.tables:
        for part in t["parts"]:
            ahead.read(t["name"], part)
    assert audit_release(ahead).as_dict() == want


@st.composite
def two_tables(draw):
    """Two small tables of (group, a, b): the second a shuffle of the first's rows or
    drawn anew; ids and codes wide enough, at times, that their rows do not pack."""
    wide = draw(st.booleans())
    ints = st.integers(-(2**40), 2**40) if wide else st.integers(0, 3)
    row = st.tuples(ints, st.sampled_from(["x", "y", "z", None]), st.one_of(st.none(), ints))
    first = draw(st.lists(row, max_size=12))
    second = (
        draw(st.permutations(first)) if draw(st.booleans()) else draw(st.lists(row, max_size=12))
    )
    return first, second


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=two_tables(), dictionary=st.booleans())
def test_row_multisets_compare_as_the_rows_multisets_do(case, dictionary):
    """The shared-grouping check's multisets are equal exactly when the rows' multisets
    are (Counter of tuples): over null and non-null integers, strings plain or as
    dictionaries (each table its own), in ranges that pack into one int64 and that do not."""
    from collections import Counter

    import pyarrow as pa

    from vpub_spark.release.audit.checks import row_multisets

    def table(rows):
        columns = list(zip(*rows, strict=True)) if rows else [[], [], []]
        a = pa.array(columns[1], pa.string())
        return pa.table(
            {
                "g": pa.array(columns[0], pa.int64()),
                "a": a.dictionary_encode() if dictionary else a,
                "b": pa.array(columns[2], pa.int64()),
            }
        )

    first, second = case
    seen = row_multisets([table(first), table(second)], ["g", "a", "b"])
    equal = all(np.array_equal(x, y) for x, y in zip(seen[0], seen[1], strict=True))
    assert equal == (Counter(first) == Counter(second))


def test_read_ahead_holds_every_readable_part_and_skips_the_rest(tmp_path):
    """`vpub report`'s read-ahead: every part the manifest lists, held whole; a part
    whose files are gone is left out (the audit reports it), with no error here."""
    from vpub_spark.release.reader import ReadAhead

    data = write_table(TABLE1, tmp_path / "t1")
    release = publish_inprocess(data, tmp_path / "out", RULES_1_3, l=2).path
    whole = ReadAhead(release).result()
    listed = {(t["name"], p) for t in whole.tables for p in t["parts"]}
    assert whole.held is not None and set(whole.held) == listed and len(listed) > 2
    copy = tmp_path / "copy" / release.name
    shutil.copytree(release, copy)
    for f in (copy / "tables").glob("*/st/*.parquet"):
        f.unlink()
    damaged = ReadAhead(copy).result()
    assert damaged.held is not None
    assert set(damaged.held) == {k for k in listed if k[1] != "st"} != listed
    with pytest.raises(ValueError, match="not a holding reader"):
        open_release(release).read_every_part()
