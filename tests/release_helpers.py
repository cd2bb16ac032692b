"""Small helpers for release tests: write a table and its spec, publish in-process."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from vpub_spark.config import config_from_dict
from vpub_spark.engines.inprocess import InProcessEngine
from vpub_spark.publishing.pipeline import publish
from vpub_spark.release.reader import open_release

TABLE1 = pd.DataFrame(  # 000 Table 1
    {
        "hospital": ["111111", "111111", "222222", "222222", "333333", "333333"],
        "age": ["37", "71", "55", "37", "23", "37"],
        "gender": ["F", "M", "F", "F", "M", "M"],
        "zipcode": ["71000", "72000", "73000", "74000", "71000", "72000"],
        "race": ["asian", "white", "black", "white", "black", "white"],
        "icd9": ["HIV", "diabetes", "diabetes", "flu", "alcoholism", "HIV"],
    }
)
RULES_1_3 = ["age, icd9 -> race", "gender, icd9 -> zipcode", "hospital, race -> zipcode"]


def write_table(frame: pd.DataFrame, directory: Path, name: str = "t") -> Path:
    """DIR/data/part.csv and DIR/table.yaml (every attribute categorical)."""
    (directory / "data").mkdir(parents=True)
    frame.to_csv(directory / "data" / "part.csv", index=False)
    spec = {"name": name, "attributes": [{"name": c} for c in frame.columns]}
    (directory / "table.yaml").write_text(yaml.safe_dump(spec))
    return directory


def config(data: Path, out: Path, rules, l: int = 2, **kw):
    d = {
        "input": {"path": str(data)},
        "privacy": {"l": l},
        "rules": rules,
        "output": {"path": str(out)},
        "engine": "inprocess",
        "seed": 1,  # an explicit private seed: determinism tests compare two runs
    }
    d.update(kw)
    return config_from_dict(d)


def publish_inprocess(data: Path, out: Path, rules, l: int = 2, **kw):
    return publish(config(data, out, rules, l, **kw), InProcessEngine())


def contents(path: Path) -> dict:
    """Every part of every table as a sorted pandas frame of strings."""
    rel = open_release(path)
    out = {}
    for t in rel.tables:
        for part in t["parts"]:
            f = rel.read(t["name"], part).to_pandas().astype(str)
            out[(t["name"], part)] = f.sort_values(sorted(f.columns)).reset_index(drop=True)[
                sorted(f.columns)
            ]
    return out


def same_contents(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].equals(b[k]) for k in a)


def run_record(release_id: str) -> Path:
    """The owner's run record of a release (the test run's private directory, conftest)."""
    import os

    return Path(os.environ["VPUB_PRIVATE_DIR"]) / "runs" / f"{release_id}.json"


def made_with(manifest: dict, seed: int) -> bool:
    """Whether `seed` made this release (its keyed proof; the seed itself is secret)."""
    from vpub_spark.release.secret import proves

    return proves(seed, manifest)


def vpub(*args: str) -> list[str]:
    """The command line that runs `vpub ARGS` in a fresh process (this interpreter)."""
    return [sys.executable, "-m", "vpub_spark.cli", *args]


def job_table(seed: int, n: int) -> pd.DataFrame:
    """A small table (age, zip, sex, job) whose job follows age: l-eligible for l <= 4."""
    rng = np.random.default_rng(seed)
    age = rng.integers(20, 70, n)
    return pd.DataFrame(
        {
            "age": age.astype(str),
            "zip": rng.integers(10, 40, n).astype(str),
            "sex": rng.choice(["F", "M"], n),
            "job": [f"j{x:02d}" for x in (age // 5 + rng.integers(0, 7, n)) % 12],
        }
    )


def marginal_release(tmp: Path, seed: int, n: int, m: int = 3, also: dict | None = None):
    """A published m-invariant marginal (age, zip -> job) of `job_table(seed, n)`."""
    data = write_table(job_table(seed, n), tmp / "t")
    cfg = config_from_dict(
        {
            "input": {"path": str(data)},
            "privacy": {"model": "m-invariance", "m": m} | ({"also": also} if also else {}),
            "method": "marginals",
            "marginals": {
                "sensitive": "job",
                "schemas": [["age", "zip"]],
                "state": str(tmp / "private" / "s"),
                "qi": ["age", "zip"],
            },
            "output": {"path": str(tmp / "out"), "release_id": "g"},
            "engine": "inprocess",
        }
    )
    return publish(cfg, InProcessEngine())


def marginals_store(
    frame: pd.DataFrame,
    tmp: Path,
    schema: list[str],
    sensitive: str,
    m: int,
    seed: int,
    sign_key: str | None = None,
):
    """(store, release): a marginals store of `frame` (CSV, every attribute categorical)
    with one published marginal `schema -> sensitive`, in process (signed by `sign_key`)."""
    data = write_table(frame, tmp / "t")
    cfg = config_from_dict(
        {
            "input": {"path": str(data)},
            "method": "marginals",
            "privacy": {"model": "m-invariance", "m": m},
            "marginals": {
                "sensitive": sensitive,
                "schemas": [schema],
                "state": str(tmp / "private" / "store"),
            },
            "output": {"path": str(tmp / "out"), "release_id": "r", "sign_key": sign_key},
            "engine": "inprocess",
            "seed": seed,
        }
    )
    return tmp / "private" / "store", publish(cfg, InProcessEngine()).path


def rehash(path: Path) -> None:
    """Recompute a release's part checksums in its manifest, as a careful forger would."""
    import hashlib
    import json

    m = json.loads((path / "manifest.json").read_text())
    for t in m["tables"]:
        for meta in t["parts"].values():
            files = sorted((path / meta["path"]).glob("*.parquet"))
            meta["sha256"] = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    (path / "manifest.json").write_text(json.dumps(m))


def workload_truths(db, frame: pd.DataFrame, lam: int, ql: float, count: int, seed: int):
    """[(where text, true count)] of a store's 004 §9 workload, the true count taken from
    the source table `frame` (labels as written), never from the store."""
    import numpy as np

    from vpub_spark.statdb.db import where_text
    from vpub_spark.statdb.workload import workload
    from vpub_spark.utility.where import parse_where

    sizes = {a: len(v) for a, v in db.domains.items()}
    out = []
    for q in workload(sizes, db.qi, db.sensitive, lam, ql, count, seed):
        text = where_text(db.meta, q)
        kept = np.ones(len(frame), dtype=bool)
        for a, codes in parse_where(text, db.domains).items():
            kept &= frame[a].isin([db.domains[a][c] for c in codes]).to_numpy()
        out.append((text, int(kept.sum())))
    return out
