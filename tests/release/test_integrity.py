"""Releases that prove their integrity: part checksums in the manifest, an
optional Ed25519 signature, and kinds of tampering, each refused by the checks it
breaks: as edited, and again once a forger recomputed the checksums and re-signed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from release_helpers import RULES_1_3, TABLE1, publish_inprocess, rehash, write_table

from vpub_spark.cli import main
from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.signing import generate_keys, sign, verify

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    return generate_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def anatomy(tmp_path_factory, keys):
    tmp = tmp_path_factory.mktemp("anatomy")
    data = write_table(TABLE1, tmp / "t")
    r = publish_inprocess(
        data,
        tmp / "out",
        RULES_1_3,
        output={"path": str(tmp / "out"), "release_id": "r", "sign_key": str(keys[0])},
    )
    return r.path, data


@pytest.fixture(scope="module")
def marginals(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("marginals")
    rng = np.random.default_rng(3)
    n = 600
    age = rng.integers(20, 70, n)
    frame = pd.DataFrame(
        {
            "age": [f"{a:03d}" for a in age],
            "sex": rng.choice(["F", "M"], n),
            "job": [f"j{x:02d}" for x in (age // 9 + rng.integers(0, 6, n)) % 10],
        }
    )
    data = write_table(frame, tmp / "t")
    cfg = config_from_dict(
        {
            "input": {"path": str(data)},
            "method": "marginals",
            "privacy": {"model": "m-invariance", "m": 3},
            "marginals": {
                "sensitive": "job",
                "schemas": [["age"], ["age", "sex"]],
                "state": str(tmp / "private" / "s"),
            },
            "output": {"path": str(tmp / "out"), "release_id": "m"},
            "engine": "inprocess",
        }
    )
    return publish(cfg, InProcessEngine()).path, data


def test_checksums_and_signature_of_a_clean_release(anatomy, keys, tmp_path):
    path, data = anatomy
    m = json.loads((path / "manifest.json").read_text())
    assert m["format_version"] == 3 and len(m["signed_by"]) == 16
    assert all(
        len(d) == 64 for t in m["tables"] for p in t["parts"].values() for d in p["sha256"].values()
    )
    assert audit_release(path, source=str(data), verify_key=str(keys[1])).passed
    other = generate_keys(tmp_path / "other")
    report = audit_release(path, verify_key=str(other[1]))
    assert [c.name for c in report.failures] == ["signature"]
    assert main(["audit", str(path), "--verify-key", str(keys[1])]) == 0


def test_a_key_pair_is_owner_only_and_never_overwritten(tmp_path):
    private, public = generate_keys(tmp_path)
    assert private.stat().st_mode & 0o077 == 0
    with pytest.raises(SpecError, match="already holds a key pair"):
        generate_keys(tmp_path)
    with pytest.raises(SpecError, match="not a readable public key"):
        verify(tmp_path, private)


def _rewrite(
    path: Path, table: str, part: str, change: Callable[[pd.DataFrame], pd.DataFrame]
) -> None:
    f = next((path / "tables" / table / part).glob("*.parquet"))
    pq.write_table(
        pa.Table.from_pandas(change(pq.read_table(f).to_pandas()), preserve_index=False), f
    )


def _manifest(path: Path, change: Callable[[dict], object]) -> None:
    m = json.loads((path / "manifest.json").read_text())
    change(m)
    (path / "manifest.json").write_text(json.dumps(m))


def _first_sha(m: dict) -> dict:
    return next(iter(m["tables"][0]["parts"].values()))["sha256"]


def _guarded_verdict(m: dict) -> dict:
    return next(v for v in m["gnf"]["verdicts"] if v["status"] != "unreachable")


def _forge(path: Path, signing_key: Path) -> None:
    """What a forger holding the owner's signing key does after an edit: every part's
    checksums recomputed and the manifest signed again, so integrity passes and only the
    semantic checks stand between the edit and a passing audit."""
    rehash(path)
    sign(path, signing_key)


# The anatomy release (000 Table 1, rules 1-3) has the anatomy table t1 (QIT and ST, l = 2)
# and the projection t2 (race, counts). Each edit: what it does, the checks that fail as
# it is, and the checks that fail once a forger recomputed every checksum and re-signed
# (None where the edit is to the integrity data itself, which forging undoes).
Edit = tuple[Callable[[Path], object], set[str], set[str] | None]
SUM = "t1/st: checksums"
QIT_SUM = "t1/qit: checksums"
SIG = "signature"
ANATOMY_EDITS: dict[str, Edit] = {
    "a group made to hold one sensitive value": (
        lambda p: _rewrite(p, "t1", "st", lambda f: f.assign(zipcode=f["zipcode"].iloc[0])),
        {SUM, "t1: 2-diverse"},
        {"t1: 2-diverse"},
    ),
    "a QIT row dropped": (
        lambda p: _rewrite(p, "t1", "qit", lambda f: f.iloc[1:]),
        {QIT_SUM, "t1: covers every row", "t1: group sizes agree"},
        {"t1: covers every row", "t1: group sizes agree"},
    ),
    "the sensitive value copied into the QIT": (
        lambda p: _rewrite(p, "t1", "qit", lambda f: f.assign(zipcode="71000")),
        {QIT_SUM, "t1/qit: columns"},
        {"t1/qit: columns"},
    ),
    "a QIT value made missing": (
        lambda p: _rewrite(p, "t1", "qit", lambda f: f.assign(age=[None, *f["age"].iloc[1:]])),
        {QIT_SUM, "t1/qit: no missing values"},
        {"t1/qit: no missing values"},
    ),
    "an ST count raised": (
        lambda p: _rewrite(p, "t1", "st", lambda f: f.assign(count=f["count"] + 1)),
        {SUM, "t1: group sizes agree"},
        {"t1: group sizes agree"},
    ),
    "an ST count moved to zero within its group": (
        lambda p: _rewrite(p, "t1", "st", lambda f: f.assign(count=[0, 2, *f["count"].iloc[2:]])),
        {SUM, "t1: ST counts positive", "t1: 2-diverse"},
        {"t1: ST counts positive", "t1: 2-diverse"},
    ),
    "an ST group the QIT lacks": (
        lambda p: _rewrite(p, "t1", "st", lambda f: pd.concat([f, f.iloc[:2].assign(group_id=99)])),
        {SUM, "t1: same groups in QIT and ST"},
        {"t1: same groups in QIT and ST"},
    ),
    "QIT rows moved to other groups": (
        # re-signed, this is another 2-diverse anatomy of the same QI values: only the
        # integrity data (checksums, signature) can tell it from the owner's release
        lambda p: _rewrite(p, "t1", "qit", lambda f: f.assign(group_id=f["group_id"].iloc[::-1])),
        {QIT_SUM},
        set(),
    ),
    "a projection key counted twice": (
        lambda p: _rewrite(
            p, "t2", "counts", lambda f: pd.concat([f.iloc[:1], f.assign(count=[0, 2, 3])])
        ),
        {"t2/counts: checksums", "t2: aggregated"},
        {"t2: aggregated"},
    ),
    "a stronger l claimed": (
        lambda p: _manifest(p, lambda m: m["privacy"].update(l=3)),
        {SIG, "t1: 3-diverse"},
        {"t1: 3-diverse"},
    ),
    "the row count edited": (
        lambda p: _manifest(p, lambda m: m["source"].update(rows=7)),
        {SIG, "t1: rows", "t1: covers every row", "t2: rows", "t2: covers every row"},
        {"t1: rows", "t1: covers every row", "t2: rows", "t2: covers every row"},
    ),
    "_SUCCESS removed": (lambda p: (p / "_SUCCESS").unlink(), {"committed"}, {"committed"}),
    "a part removed": (
        lambda p: shutil.rmtree(p / "tables" / "t1" / "st"),
        {SUM, "t1: readable"},
        {SUM, "t1: readable"},  # no file left to checksum
    ),
    "a foreign table added": (
        lambda p: shutil.copytree(p / "tables" / "t1", p / "tables" / "extra"),
        {"tables on disk"},
        {"tables on disk"},
    ),
    "an unlisted file in a part": (
        lambda p: shutil.copy(
            p / "tables" / "t1" / "qit" / "part-00000.parquet",
            p / "tables" / "t1" / "qit" / "part-09999.parquet",
        ),
        {
            QIT_SUM,
            "t1: covers every row",
            "t1: group sizes agree",
            "t1: groups within one file",
        },
        {"t1: covers every row", "t1: group sizes agree", "t1: groups within one file"},
    ),
    "a checksum edited to match nothing": (
        lambda p: _manifest(
            p, lambda m: _first_sha(m).update({k: "0" * 64 for k in _first_sha(m)})
        ),
        {SIG, QIT_SUM},
        None,
    ),
    "the format version changed": (
        lambda p: _manifest(p, lambda m: m.update(format_version=1)),
        {SIG, "format version"},
        {"format version"},
    ),
    "the GNF verdicts edited": (
        lambda p: _manifest(p, lambda m: _guarded_verdict(m).update(status="unreachable")),
        {SIG, "GNF verdicts as recorded"},
        {"GNF verdicts as recorded"},
    ),
    "a table's kind changed": (
        lambda p: _manifest(p, lambda m: m["tables"][0].update(kind="projection")),
        {SIG, "t1: kind"},
        {"t1: kind"},
    ),
    "a local path recorded": (
        lambda p: _manifest(p, lambda m: m["config"].update(input_path="/home/owner/data.csv")),
        {SIG, "no local paths"},
        {"no local paths"},
    ),
    "a seed recorded": (
        lambda p: _manifest(p, lambda m: m["config"].update(seed=7)),
        {SIG, "secrecy: no seed in a public file"},
        {"secrecy: no seed in a public file"},
    ),
    "a private store's path recorded": (
        lambda p: _manifest(p, lambda m: m["config"].update(marginals={"state": "private/store"})),
        {SIG, "private store unnamed"},
        {"private store unnamed"},
    ),
    "a manifest edited after signing": (
        lambda p: _manifest(p, lambda m: m.update(created_at="2020-01-01T00:00:00+00:00")),
        {SIG},
        None,
    ),
}


def _failed(path: Path, **kw) -> set[str]:
    return {c.name for c in audit_release(path, **kw).failures}


@pytest.mark.parametrize("edit", sorted(ANATOMY_EDITS))
def test_an_edited_anatomy_release_fails_the_checks_the_edit_breaks(anatomy, keys, tmp_path, edit):
    path = tmp_path / "r"
    shutil.copytree(anatomy[0], path)
    change, failing, _ = ANATOMY_EDITS[edit]
    change(path)
    assert _failed(path, verify_key=str(keys[1])) == failing


FORGED = sorted(e for e, (_, _, forged) in ANATOMY_EDITS.items() if forged is not None)


@pytest.mark.parametrize("edit", FORGED)
def test_a_forged_anatomy_release_fails_its_semantic_checks(anatomy, keys, tmp_path, edit):
    """Checksums recomputed and the manifest re-signed: each semantic check alone
    catches what it guards (deleting it from the auditor turns its case green)."""
    path = tmp_path / "r"
    shutil.copytree(anatomy[0], path)
    change, _, forged = ANATOMY_EDITS[edit]
    change(path)
    if (path / "manifest.json").exists():
        _forge(path, keys[0])
    assert _failed(path, verify_key=str(keys[1])) == forged


# the marginal age-job of the m = 3 store: each edit, the checks failing as it is and once
# its checksums are recomputed (the release is unsigned)
FIT = "age-job: source tuples fit the boxes"
MARGINAL_EDITS = {
    "a box narrowed": (
        lambda f: f.assign(age_max=f["age_min"]),
        {"age-job/groups: checksums", FIT},
        {FIT},
    ),
    "a group's size changed": (
        lambda f: f.assign(size=f["size"] + 1),
        {"age-job/groups: checksums", "age-job: covers every row", "age-job: group sizes agree"},
        {"age-job: covers every row", "age-job: group sizes agree"},
    ),
    "a group removed": (
        lambda f: f.iloc[1:],
        {"age-job/groups: checksums", "age-job: same groups in GROUPS and ST", FIT},
        {"age-job: same groups in GROUPS and ST", FIT},
    ),
}


@pytest.mark.parametrize("forged", [False, True], ids=["as-edited", "checksums-recomputed"])
@pytest.mark.parametrize("edit", sorted(MARGINAL_EDITS))
def test_an_edited_marginal_fails_the_checks_the_edit_breaks(marginals, tmp_path, edit, forged):
    path = tmp_path / "m"
    shutil.copytree(marginals[0], path)
    audit = audit_release(path, source=str(marginals[1]))
    assert audit.passed and any(c.name == FIT for c in audit.checks)
    change, failing, failing_forged = MARGINAL_EDITS[edit]
    _rewrite(path, "age-job", "groups", change)
    if forged:
        m = json.loads((path / "manifest.json").read_text())
        assert not m.get("signed_by")  # nothing to re-sign
        rehash(path)
    assert _failed(path, source=str(marginals[1])) == (failing_forged if forged else failing)
