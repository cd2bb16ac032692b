"""The integrity of a private bucket store (release/stores/integrity.py): every tamper of a
real store (a QI code edited, a code outside its domain, two sensitive values swapped
inside one bucket, a truncated, deleted or extra file, an edited store.json) is refused
at `StatDB.open` with one line naming the problem and the file, and reported by
`verify_store`; a signed store verifies with its key only; a store keeps and serves the
QI and sensitive attributes only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from release_helpers import job_table, write_table

from vpub_spark.cli import main
from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError, VpubError
from vpub_spark.publishing.marginals_add import add_marginal
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.signing import generate_keys
from vpub_spark.release.stores.audit import audit_store
from vpub_spark.release.stores.integrity import verify_store
from vpub_spark.release.stores.store import (
    BUCKET,
    SIGNATURE,
    STORE_FILE,
    bucket_files,
    file_digests,
    read_store,
    write_store,
)
from vpub_spark.statdb.db import StatDB


@pytest.fixture
def copy(store, tmp_path):
    """A private copy of the shared store (owner-only, as copied)."""
    out = tmp_path / "store"
    shutil.copytree(store[0], out)
    return out


def _rewrite(f, edit) -> None:
    """Read a bucket file with pyarrow, edit its frame, write it back as valid Parquet."""
    t = pq.read_table(f)
    frame = edit(t.to_pandas())
    pq.write_table(pa.Table.from_pandas(frame, schema=t.schema, preserve_index=False), f)
    f.chmod(0o600)


def _reseal(state) -> None:
    """What someone who can write the store can do: recompute every digest."""
    write_store(state, read_store(state) | {"files": file_digests(state)})


def _edit_qi(f):
    def edit(b):
        b.loc[b.index[0], "age"] = (b["age"].iloc[0] + 1) % 5  # still inside the domain
        return b

    _rewrite(f, edit)


def _out_of_domain(f):
    def edit(b):
        b.loc[b.index[0], "age"] = 200
        return b

    _rewrite(f, edit)


def _swap(f):
    """Two tuples of one bucket with different sensitive values exchange them: every
    bucket keeps its counts, so the bucket checks alone pass."""

    def edit(b):
        for _, g in b.groupby(BUCKET):
            if g["job"].nunique() > 1:
                i = g.index[0]
                j = g.index[g["job"] != g["job"].iloc[0]][0]
                b.loc[[i, j], "job"] = b.loc[[j, i], "job"].to_numpy()
                return b
        raise AssertionError("no bucket with two values")

    _rewrite(f, edit)


def _truncate(f):
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _extra(f):
    """A copy of a bucket file under a name store.json does not list."""
    shutil.copy(bucket_files(f.parent.parent)[0], f)
    f.chmod(0o600)


def _edit_store_json(state):
    p = state / STORE_FILE
    p.write_text(p.read_text().replace('"m": 4', '"m": 2'))


def _links(state):
    return sorted((state / "groups").rglob("*.parquet"))[0]


# fmt: off
CASES = {  # what is done, to which file, the failed check, what its message says
    "a QI code edited": (_edit_qi, "bucket", "SHA-256 of every file", "SHA-256 differs"),
    "a code out of its domain": (_out_of_domain, "bucket", "codes in their domains", "age code 200 outside its domain 0..49"),
    "two sensitive values swapped in a bucket": (_swap, "bucket", "SHA-256 of every file", "SHA-256 differs"),
    "a truncated bucket file": (_truncate, "bucket", "bucket files readable", "not a readable Parquet file"),
    "a deleted bucket file": (Path.unlink, "bucket", "every file listed", "missing buckets/part-"),
    "a deleted links file": (Path.unlink, "links", "every file listed", "missing groups/r/"),
    "an extra bucket file": (_extra, "new bucket", "every file listed", "not listed in store.json: buckets/part-09999.parquet"),
    "an edited links file": (lambda f: _rewrite(f, lambda x: x.iloc[::-1]), "links", "SHA-256 of every file", "SHA-256 differs"),
    "an edited store.json": (_edit_store_json, "store", "store.json unchanged", "store.json was edited after it was written"),
}
# fmt: on


def _target(state, which):
    return {
        "bucket": lambda: bucket_files(state)[1],
        "links": lambda: _links(state),
        "new bucket": lambda: state / "buckets" / "part-09999.parquet",
        "store": lambda: state,
    }[which]()


@pytest.mark.parametrize("case", CASES)
def test_every_tamper_is_refused_at_open_and_reported(copy, case):
    tamper, which, check, says = CASES[case]
    target = _target(copy, which)
    name = "store.json" if which == "store" else target.relative_to(copy).as_posix()
    tamper(target)
    with pytest.raises(VpubError) as e:
        StatDB.open(copy)
    message = str(e.value)
    assert "\n" not in message and "changed or damaged, refused" in message
    assert says in message and name in message, message
    failures = verify_store(copy).as_dict()["failures"]
    assert any(f.startswith(f"store: {check}: ") and says in f for f in failures), failures


def test_an_intact_store_verifies_and_opens(store):
    report = verify_store(store[0])
    assert report.passed and not report.warnings, report.as_dict()
    names = {c.name for c in report.checks}
    assert {
        "store: SHA-256 of every file",
        "store: codes in their domains",
        "store: every file listed",
    } <= names
    assert StatDB.open(store[0]).values.size == 1500


def test_an_out_of_domain_code_is_refused_even_when_resealed(copy):
    """An age code outside its domain would answer two different totals: refused even
    with the store's digests recomputed."""
    _out_of_domain(bucket_files(copy)[0])
    _reseal(copy)
    with pytest.raises(
        VpubError, match=r"buckets/part-\d+\.parquet: age code 200 outside its domain 0\.\.49"
    ):
        StatDB.open(copy)


def test_a_resealed_swap_is_caught_by_the_signature_only(copy, tmp_path):
    """Whoever can write the store can recompute its digests: the swap then passes the
    checks without a key, and fails with the verify key of the store's signature."""
    private, public = generate_keys(tmp_path / "keys")
    write_store(copy, read_store(copy), str(private))  # the owner signs the intact store
    assert verify_store(copy, str(public)).passed
    _swap(bucket_files(copy)[0])
    _reseal(copy)  # without the signing key: the signature is gone
    assert verify_store(copy).passed
    failures = verify_store(copy, str(public)).as_dict()["failures"]
    assert failures == [f"store: signature: no {SIGNATURE}: the store is not signed"]
    with pytest.raises(VpubError, match="store: signature: no store.json.sig"):
        StatDB.open(copy, verify_key=str(public))


def test_the_cli_refuses_a_truncated_store_in_one_line(copy, capsys):
    _truncate(bucket_files(copy)[0])
    assert main(["statdb", "query", str(copy), "--where", "age between 30 and 40"]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a readable Parquet file" in err and "buckets/part-" in err
    assert err.startswith("vpub: error:") and len(err.splitlines()) == 1


def test_a_broken_or_old_store_json_is_refused_in_one_line(copy):
    p = copy / STORE_FILE
    text = p.read_text()
    p.write_text(text[: len(text) // 2])
    with pytest.raises(VpubError, match="store.json: not valid JSON") as e:
        StatDB.open(copy)
    assert "\n" not in str(e.value)
    p.write_text(json.dumps(json.loads(text) | {"format": 1}))
    with pytest.raises(
        VpubError, match="store format 1 lists no digests.*rebuild it with `vpub statdb build`"
    ):
        StatDB.open(copy)
    assert not verify_store(copy).passed


# --- a signed store with an attribute that is neither QI nor sensitive ------------------


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A marginals store (QI age and zip; sex is neither QI nor sensitive), signed."""
    tmp = tmp_path_factory.mktemp("signed")
    data = write_table(job_table(6, 1200), tmp / "t")
    private, public = generate_keys(tmp / "keys")
    cfg = config_from_dict(
        {
            "input": {"path": str(data)},
            "method": "marginals",
            "privacy": {"model": "m-invariance", "m": 3},
            "marginals": {
                "sensitive": "job",
                "schemas": [["age", "zip"]],
                "qi": ["age", "zip"],
                "state": str(tmp / "private" / "s"),
            },
            "output": {"path": str(tmp / "out"), "release_id": "g", "sign_key": str(private)},
            "engine": "inprocess",
            "seed": 5,
        }
    )
    publish(cfg, InProcessEngine())
    return tmp / "private" / "s", tmp / "out", str(private), str(public), tmp


def test_a_store_keeps_and_serves_only_the_qi_and_sensitive_attributes(signed):
    state = signed[0]
    assert set(read_store(state)["domains"]) == {"age", "zip", "job"}  # not sex
    db = StatDB.open(state)
    assert set(db.domains) == set(db.meta["domains"]) == {"age", "zip", "job"}
    with pytest.raises(SpecError, match="unknown attribute 'sex'; there are: age, zip, job$"):
        db.query("sex = F")


def test_a_signed_store_verifies_with_its_key_only_and_marginals_add_keeps_it_signed(
    signed, tmp_path
):
    state, out, private, public, tmp = signed
    report = verify_store(state)
    assert report.passed and "signature was not checked" in report.warnings[0]
    assert verify_store(state, public).passed and StatDB.open(state, public)
    _, wrong = generate_keys(tmp_path / "other")
    failures = verify_store(state, str(wrong)).as_dict()["failures"]
    assert len(failures) == 1 and "store.json is not what key" in failures[0]
    copy = tmp_path / "s"
    shutil.copytree(state, copy)
    r = add_marginal(copy, ["zip"], out, "later", sign_key=private)  # from the served domains
    assert r.audit.passed and verify_store(copy, public).passed
    assert audit_store(copy, public).passed
    assert any(f.startswith("groups/later/zip-job/") for f in read_store(copy)["files"])
    with pytest.raises(VpubError, match="the store is signed .*give its signing key"):
        add_marginal(copy, ["age"], out, "unsigned")  # a signed store is never silently unsigned
    assert not (out / "unsigned").exists() and verify_store(copy, public).passed
    other, _ = generate_keys(tmp_path / "third")
    before = (copy / STORE_FILE).read_bytes()
    with pytest.raises(VpubError, match="signature does not verify with this signing key"):
        add_marginal(
            copy, ["age"], out, "resigned", sign_key=str(other)
        )  # nor re-signed by another key
    assert (copy / STORE_FILE).read_bytes() == before and verify_store(copy, public).passed


def test_marginals_add_refuses_a_damaged_store_and_publishes_nothing(signed, tmp_path):
    copy = tmp_path / "s"
    shutil.copytree(signed[0], copy)
    _swap(bucket_files(copy)[0])
    with pytest.raises(VpubError, match="SHA-256 differs"):
        add_marginal(copy, ["zip"], tmp_path / "out", "bad")
    assert not (tmp_path / "out" / "bad").exists()
    assert not (copy / "groups" / "bad").exists()


def test_the_private_audit_runs_the_integrity_checks(copy):
    assert audit_store(copy).passed
    _swap(bucket_files(copy)[0])
    failures = audit_store(copy).as_dict()["failures"]
    assert any(f.startswith("store: SHA-256 of every file") for f in failures), failures


def test_statdb_verify_passes_an_intact_store_and_fails_a_swapped_one(copy, capsys):
    assert main(["statdb", "verify", str(copy), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True
    _swap(bucket_files(copy)[0])
    assert main(["statdb", "verify", str(copy), "--json"]) == 1
    failures = json.loads(capsys.readouterr().out)["failures"]
    assert any(
        f.startswith("store: SHA-256 of every file") and "buckets/part-" in f for f in failures
    ), failures


def test_serve_opens_a_signed_store_only_with_its_verify_key(signed, tmp_path):
    from vpub_spark.serve.app import ServeSettings, build_app

    state, _, _, public, _ = signed
    app = build_app(ServeSettings(str(state), verify_key=public))
    assert app.state.signed_by == read_store(state)["signed_by"]
    _, wrong = generate_keys(tmp_path / "other")
    with pytest.raises(VpubError, match="store.json is not what key"):
        build_app(ServeSettings(str(state), verify_key=str(wrong)))
