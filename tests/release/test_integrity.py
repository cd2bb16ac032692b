"""Releases that prove their integrity: part checksums in the manifest, an
optional Ed25519 signature, and 20 kinds of tampering, each refused."""

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
from release_helpers import RULES_1_3, TABLE1, publish_inprocess, write_table

from vpub_spark.cli import main
from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError
from vpub_spark.publish.pipeline import publish
from vpub_spark.release.audit import audit_release
from vpub_spark.release.signing import generate_keys, verify

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


def _anatomy_table(path: Path) -> str:
    m = json.loads((path / "manifest.json").read_text())
    return next(t["name"] for t in m["tables"] if t["kind"] == "anatomy")


def _first_sha(m: dict) -> dict:
    return next(iter(m["tables"][0]["parts"].values()))["sha256"]


ANATOMY_EDITS = {
    "a group made to hold one sensitive value": lambda p, t: _rewrite(
        p, t, "st", lambda f: f.assign(**{f.columns[1]: f.iloc[0, 1]})
    ),
    "a QIT row dropped": lambda p, t: _rewrite(p, t, "qit", lambda f: f.iloc[1:]),
    "the sensitive value copied into the QIT": lambda p, t: _rewrite(
        p, t, "qit", lambda f: f.assign(leak="x")
    ),
    "an ST count raised": lambda p, t: _rewrite(
        p, t, "st", lambda f: f.assign(count=f["count"] + 1)
    ),
    "QIT rows moved to other groups": lambda p, t: _rewrite(
        p, t, "qit", lambda f: f.assign(group_id=f["group_id"].to_numpy()[::-1])
    ),
    "a stronger l claimed": lambda p, t: _manifest(p, lambda m: m["privacy"].update(l=3)),
    "the row count edited": lambda p, t: _manifest(p, lambda m: m["source"].update(rows=7)),
    "_SUCCESS removed": lambda p, t: (p / "_SUCCESS").unlink(),
    "a part removed": lambda p, t: shutil.rmtree(p / "tables" / t / "st"),
    "a foreign table added": lambda p, t: shutil.copytree(p / "tables" / t, p / "tables" / "extra"),
    "an unlisted file in a part": lambda p, t: shutil.copy(
        next((p / "tables" / t / "qit").glob("*.parquet")),
        p / "tables" / t / "qit" / "part-09999.parquet",
    ),
    "a checksum edited to match nothing": lambda p, t: _manifest(
        p, lambda m: _first_sha(m).update({k: "0" * 64 for k in _first_sha(m)})
    ),
    "the format version changed": lambda p, t: _manifest(p, lambda m: m.update(format_version=1)),
    "the GNF verdicts edited": lambda p, t: _manifest(
        p, lambda m: m["gnf"]["verdicts"][0].update(status="unreachable")
    ),
    "a table's kind changed": lambda p, t: _manifest(
        p, lambda m: next(x for x in m["tables"] if x["name"] == t).update(kind="projection")
    ),
    "a local path recorded": lambda p, t: _manifest(
        p, lambda m: m["config"].update(input_path="/home/owner/data.csv")
    ),
    "a manifest edited after signing": lambda p, t: _manifest(
        p, lambda m: m.update(created_at="2020-01-01T00:00:00+00:00")
    ),
}


@pytest.mark.parametrize("edit", sorted(ANATOMY_EDITS))
def test_an_edited_anatomy_release_is_refused(anatomy, keys, tmp_path, edit):
    path = tmp_path / "r"
    shutil.copytree(anatomy[0], path)
    ANATOMY_EDITS[edit](path, _anatomy_table(path))
    assert not audit_release(path, verify_key=str(keys[1])).passed


MARGINAL_EDITS = {
    "a box narrowed": lambda f: f.assign(age_max=f["age_min"]),
    "a group's size changed": lambda f: f.assign(size=f["size"] + 1),
    "a group removed": lambda f: f.iloc[1:],
}


@pytest.mark.parametrize("edit", sorted(MARGINAL_EDITS))
def test_an_edited_marginal_is_refused(marginals, tmp_path, edit):
    path = tmp_path / "m"
    shutil.copytree(marginals[0], path)
    _rewrite(path, "age-job", "groups", MARGINAL_EDITS[edit])
    assert not audit_release(path).passed


def test_a_narrowed_box_is_refused_by_the_source_even_with_fresh_checksums(marginals, tmp_path):
    """Without checksums to catch it (recomputed after the edit), the source does: its
    tuples no longer fit the boxes (a maximum flow per sensitive value)."""
    import hashlib

    path = tmp_path / "m"
    shutil.copytree(marginals[0], path)
    audit = audit_release(path, source=str(marginals[1]))
    assert audit.passed and any(
        c.name == "age-job: source tuples fit the boxes" for c in audit.checks
    )
    _rewrite(path, "age-job", "groups", lambda f: f.assign(age_max=f["age_min"]))

    def fresh(m):
        for part in m["tables"][0]["parts"].values():
            for name in part["sha256"]:
                part["sha256"][name] = hashlib.sha256(
                    (path / part["path"] / name).read_bytes()
                ).hexdigest()

    _manifest(path, fresh)
    failed = [c.name for c in audit_release(path, source=str(marginals[1])).failures]
    assert failed == ["age-job: source tuples fit the boxes"]
