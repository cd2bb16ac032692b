"""The release seed is a secret (release/secret.py; 003 §1's adversary must not have it).

Every method publishes with a seed, and every public file (the release, the catalog,
an export and its data dictionary) is searched for it in decimal, hex and as raw
64-bit bytes; a drawn seed is found only in the owner's run record or private store.
The auditor fails a release whose public files name a seed, and checks the owner's
proof when given the run record."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from release_helpers import contents, job_table, same_contents, write_table

from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.errors import SpecError, VpubError
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.audit.release import audit_release
from vpub_spark.release.export import export
from vpub_spark.release.reader import open_release
from vpub_spark.release.secret import proves, read_secret

SEED = 0x5EED_C0FFEE_1234  # distinctive in decimal, hex and bytes
RULE = ["age, sex -> job", "sex -> zip"]
METHODS = {  # method -> its config's extra keys
    "uad": {"rules": RULE},
    "gd": {"rules": RULE},
    "single_attribute": {"rules": RULE},
    "multi_sa_bip": {"rules": RULE, "multi_sa": {"mode": "partitioned", "chunk_rows": 200}},
    "rda": {"streamliner": {"sensitive": "job", "chunk_rows": 200}},
    "gda": {"streamliner": {"sensitive": "job", "chunk_rows": 200}},
    "ria": {"streamliner": {"sensitive": "job", "chunk_rows": 200}},
    "marginals": {
        "privacy": {"model": "m-invariance", "m": 3},
        "marginals": {"sensitive": "job", "schemas": [["age"], ["age", "sex"]], "chunk_rows": 200},
    },
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_table(job_table(3, 600), tmp_path_factory.mktemp("secret") / "t")


def _config(data: Path, tmp: Path, method: str, **kw):
    extra = METHODS[method]
    d = (
        {
            "input": {"path": str(data)},
            "method": method,
            "privacy": {"l": 3},
            "engine": "inprocess",
            "output": {"path": str(tmp / "out")},
            "private_dir": str(tmp / "private"),
        }
        | {k: v for k, v in extra.items() if k != "marginals"}
        | kw
    )
    if "marginals" in extra:
        d["marginals"] = extra["marginals"] | {"state": str(tmp / "private-store")}
    return config_from_dict(d)


def _forms(seed: int) -> list[bytes]:
    """How a seed could be written: decimal, hex (both cases), 64-bit little/big endian."""
    h = f"{seed:x}"
    raw = [seed.to_bytes(8, order) for order in ("little", "big")]
    return [str(seed).encode(), h.encode(), h.upper().encode(), *raw]


def _public_files(tmp: Path) -> list[Path]:
    return [p for p in (tmp / "out").rglob("*") if p.is_file()] + [
        p for p in tmp.glob("export*") if p.is_file()
    ]


def _leaks(tmp: Path, seed: int) -> list[str]:
    forms = _forms(seed)
    return [f"{p.name}: {f!r}" for p in _public_files(tmp) for f in forms if f in p.read_bytes()]


@pytest.mark.parametrize("method", sorted(METHODS))
def test_no_public_file_holds_the_seed_given_or_drawn(data, tmp_path, method):
    given = publish(_config(data, tmp_path / "a", method, seed=SEED), InProcessEngine())
    drawn = publish(_config(data, tmp_path / "b", method), InProcessEngine())
    for tmp, result in ((tmp_path / "a", given), (tmp_path / "b", drawn)):
        rel = open_release(result.path)
        for t in rel.tables:  # the export and its data dictionary are public too
            if t["kind"] in ("anatomy", "generalized"):
                export(rel, t["name"], tmp / f"export-{t['name']}.csv")
        assert len(_public_files(tmp)) > 4
        assert rel.manifest["randomness"]["seed"] == "secret"
        assert "seed" not in result.path.name and "seed" not in json.dumps(rel.manifest["config"])
        private = (
            tmp / "private-store"
            if method == "marginals"
            else tmp / "private" / "runs" / f"{rel.manifest['release_id']}.json"
        )
        seed = read_secret(private)  # kept where the owner keeps private state
        assert _leaks(tmp, seed) == [], method
        assert proves(seed, rel.manifest) and not proves(seed + 1, rel.manifest)
        report = audit_release(result.path, secret=str(private))
        assert report.passed and any(
            c.name == "secrecy: the owner's proof" and c.ok for c in report.checks
        )
    assert (
        read_secret(
            tmp_path
            / "a"
            / (
                "private-store"
                if method == "marginals"
                else f"private/runs/{given.manifest['release_id']}.json"
            )
        )
        == SEED
    )
    assert not (tmp_path / "b" / "private").exists() or method != "marginals"  # a store keeps it


def test_two_default_runs_draw_different_secret_seeds(data, tmp_path):
    a = publish(
        _config(data, tmp_path, "rda", output={"path": str(tmp_path / "o1"), "release_id": "x"}),
        InProcessEngine(),
    )
    b = publish(
        _config(data, tmp_path, "rda", output={"path": str(tmp_path / "o2"), "release_id": "y"}),
        InProcessEngine(),
    )
    sa, sb = (read_secret(tmp_path / "private" / "runs" / f"{r}.json") for r in ("x", "y"))
    assert sa != sb and proves(sa, a.manifest) and proves(sb, b.manifest)
    record = tmp_path / "private" / "runs" / "x.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o700


def test_a_seed_file_must_be_owner_only_and_reproduces_the_release(data, tmp_path):
    f = tmp_path / "seed"
    f.write_text(f"{SEED:#x}\n")
    os.chmod(f, 0o644)
    cfg = _config(
        data,
        tmp_path,
        "rda",
        seed_file=str(f),
        output={"path": str(tmp_path / "o"), "release_id": "r"},
    )
    with pytest.raises(VpubError, match="must be owner-only"):
        publish(cfg, InProcessEngine())
    assert not (tmp_path / "o" / "r").exists()
    os.chmod(f, 0o600)
    a = publish(cfg, InProcessEngine())
    b = publish(
        _config(
            data,
            tmp_path,
            "rda",
            seed=SEED,
            output={"path": str(tmp_path / "o2"), "release_id": "r"},
        ),
        InProcessEngine(),
    )
    assert same_contents(contents(a.path), contents(b.path))  # every part of every table
    assert proves(SEED, open_release(a.path).manifest)


def test_private_directories_are_refused_where_others_could_read_them(data, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(SpecError, match="private directory must not be inside the output"):
        publish(_config(data, tmp_path, "rda", private_dir=str(out / "p")), InProcessEngine())
    (tmp_path / "open").mkdir(mode=0o755)
    os.chmod(tmp_path / "open", 0o755)
    with pytest.raises(VpubError, match="must be owner-only"):
        publish(
            _config(data, tmp_path, "rda", private_dir=str(tmp_path / "open")), InProcessEngine()
        )
    assert not out.exists() or not any(out.iterdir())  # refused before any work
    with pytest.raises(SpecError, match="give seed or seed_file"):
        _config(data, tmp_path, "rda", seed=1, seed_file="f")


def _tampered(result, tmp: Path, change) -> list[str]:
    import shutil

    p = tmp / "copy"
    shutil.copytree(result.path, p)
    change(p)
    return [f"{c.name}: {c.detail}" for c in audit_release(p).failures]


def test_the_auditor_fails_a_release_that_names_a_seed(data, tmp_path):
    result = publish(_config(data, tmp_path, "uad", seed=SEED), InProcessEngine())

    def manifest(edit):
        def change(p):
            m = json.loads((p / "manifest.json").read_text())
            edit(m)
            (p / "manifest.json").write_text(json.dumps(m))

        return change

    cases = {
        "top-level seed": manifest(lambda m: m.update(seed=5)),
        "config seed": manifest(lambda m: m["config"].update(seed="0x1f")),
        "nested seed": manifest(lambda m: m["source"].update(shard_seed=7)),
        "release id": manifest(lambda m: m.update(release_id="t-uad-l3-seed0")),
        "a text file": lambda p: (p / "README.txt").write_text("made with seed = 42\n"),
    }
    for name, change in cases.items():
        failed = _tampered(result, tmp_path / name.replace(" ", "-"), change)
        assert [f for f in failed if f.startswith("secrecy: no seed in a public file")], (
            name,
            failed,
        )
    assert audit_release(result.path).passed


def test_the_auditor_warns_when_a_signed_release_is_not_verified(data, tmp_path):
    from dataclasses import replace

    from vpub_spark.release.signing import generate_keys

    private, public = generate_keys(tmp_path / "keys")
    cfg = replace(_config(data, tmp_path, "uad"), sign_key=str(private))
    result = publish(cfg, InProcessEngine())
    unverified = audit_release(result.path)
    assert unverified.passed and any("no --verify-key" in w for w in unverified.warnings)
    verified = audit_release(result.path, verify_key=str(public))
    assert verified.passed and verified.warnings == []


def _seed_free(m: dict) -> dict:
    """A manifest less what is keyed by the seed or is the files' bytes: the proof, the
    keyed source fingerprint, file digests, the time, the timings and a store's opaque
    id (a fresh uuid4, not the seed), and a store's bucket count."""
    m = json.loads(json.dumps(m))
    for key in ("created_at", "randomness", "timings_s", "store"):
        m.pop(key, None)
    m["source"].pop("fingerprint")
    (m.get("audit") or {}).pop("timings", None)
    for t in m["tables"]:
        for part in t["parts"].values():
            part.pop("sha256")
    # a marginal store's bucket count: the leftovers' draws can take a bucket's last
    # tuples (minvariance.place_leftovers); the groups show as much
    (m.get("method_cost") or {}).pop("buckets", None)
    return m


@pytest.mark.parametrize("method", ["rda", "marginals"])
def test_the_manifest_narrows_no_seed(data, tmp_path, method):
    """The known-seed adversary's first step is to read the seed; beyond the table
    contents, which the random choices make, two runs with different seeds publish the
    same manifest but for keyed values and file digests: nothing there narrows it."""
    a = publish(_config(data, tmp_path / "a", method, seed=1), InProcessEngine())
    b = publish(_config(data, tmp_path / "b", method, seed=2), InProcessEngine())
    assert a.manifest["randomness"]["proof"] != b.manifest["randomness"]["proof"]
    assert _seed_free(a.manifest) == _seed_free(b.manifest)
