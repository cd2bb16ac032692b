"""Check that a change publishes the same releases: publish every method on both
engines with one seed, before and after, and compare the releases' tables.

    python scripts/same_release.py publish OUT [--engines inprocess,spark] [--rows N] [--one-process]
    python scripts/same_release.py compare OUT_BEFORE OUT_AFTER
    python scripts/same_release.py compare RELEASE_A RELEASE_B

`publish` runs the code of the checkout the script is in (copy the script into a
worktree of the old commit to make the baseline): it generates a `sal` table, then
runs `vpub publish` for each method and engine into OUT/ENGINE/METHOD. `compare`
compares two such directories release by release, or two releases, part by part
(rows sorted, columns by name): exit 0 and one line per release if identical, 1 and
the first difference otherwise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261128
RULES = ["age, gender -> salary", "education -> occupation", "marital -> salary"]
STREAMLINER = {"sensitive": "salary", "qi": ["age", "gender", "education"], "chunk_rows": 1000}
METHODS: dict[str, dict] = {  # method -> its config's keys besides input, output and engine
    "uad": {"rules": RULES, "privacy": {"l": 3}},
    "gd": {"rules": RULES, "privacy": {"l": 3}},
    "single_attribute": {"rules": RULES, "privacy": {"l": 3}},
    "uad-gda": {"rules": RULES[:1], "privacy": {"l": 3}, "anonymizer": "gda"},
    "multi_sa_bip": {
        "rules": RULES,
        "privacy": {"l": 3},
        "multi_sa": {"mode": "partitioned", "chunk_rows": 1000},
    },
    "marginals": {
        "privacy": {"model": "m-invariance", "m": 3},
        "marginals": {
            "sensitive": "salary",
            "schemas": [["age"], ["age", "gender"], ["education"]],
            "chunk_rows": 1000,
        },
    },
    "rda": {"privacy": {"l": 3}, "streamliner": STREAMLINER},
    "gda": {"privacy": {"l": 3}, "streamliner": STREAMLINER},
    "ria": {"privacy": {"l": 3}, "streamliner": STREAMLINER},
}


ONE_PROCESS: list[bool] = []  # --one-process: every command through `main`, in this process


def vpub(*args: str) -> None:
    """Run this checkout's command line (its code, not an installed one): a new process
    per command, or with --one-process `vpub_spark.cli.main` here (one Spark session,
    one Spark Connect client, for all of them)."""
    if ONE_PROCESS:
        from vpub_spark.cli import main

        if main(list(args)) != 0:
            raise SystemExit(f"vpub {' '.join(args)} failed")
        return
    done = subprocess.run(
        [sys.executable, "-m", "vpub_spark.cli", *args], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"vpub {' '.join(args)} failed:\n{done.stderr.strip()}")


def publish_all(out: Path, engines: list[str], rows: int) -> None:
    """Every method on every engine into OUT/ENGINE/METHOD, from one generated table."""
    data = out / "data"
    vpub("datasets", "generate", "sal", "--rows", str(rows), "--seed", "7", "--out", str(data))
    for engine in engines:
        for name, keys in METHODS.items():
            method = name.split("-")[0]
            config = {
                "input": {"path": str(data)},
                "method": method,
                "engine": engine,
                "output": {"path": str(out / engine), "release_id": name},
                "private_dir": str(out / "private" / engine / name),
                "seed": SEED,
            } | keys
            if "marginals" in keys:
                state = str(out / "private" / engine / "marginals-store")
                config["marginals"] = keys["marginals"] | {"state": state}
            path = out / "configs" / f"{engine}-{name}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.safe_dump(config))
            vpub("publish", "--config", str(path))
            print(f"published {engine}/{name}", flush=True)


def contents(release: Path) -> dict[str, object]:
    """A release's tables, part by part, as frames of strings, rows and columns sorted."""
    out = {}
    for part in sorted((release / "tables").glob("*/*")):
        table = pa.concat_tables([pq.read_table(f) for f in sorted(part.glob("*.parquet"))])
        frame = table.to_pandas().astype(str)
        frame = frame[sorted(frame.columns)]
        out[str(part.relative_to(release))] = frame.sort_values(list(frame.columns)).reset_index(
            drop=True
        )
    return out


def same(a: Path, b: Path) -> bool:
    """Whether two releases hold the same tables; prints one line either way."""
    left, right = contents(a), contents(b)
    if left.keys() != right.keys():
        print(f"{a.name}: different parts: {sorted(set(left) ^ set(right))}")
        return False
    for name, frame in left.items():
        if not frame.equals(right[name]):
            print(f"{a.name}: {name} differs")
            return False
    print(f"{a.name}: identical, {len(left)} parts, {sum(len(f) for f in left.values())} rows")
    return True


def compare(a: Path, b: Path) -> bool:
    """Two releases, or two `publish` directories release by release."""
    if (a / "tables").is_dir():
        return same(a, b)
    releases = sorted(p.parent.relative_to(a) for p in a.rglob("tables") if p.is_dir())
    if not releases:
        raise SystemExit(f"{a} holds no release")
    return all([same(a / r, b / r) for r in releases])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("publish")
    run.add_argument("out", type=Path)
    run.add_argument("--engines", default="inprocess,spark")
    run.add_argument("--rows", type=int, default=6000)
    run.add_argument("--one-process", action="store_true", help="every command in this process")
    check = sub.add_parser("compare")
    check.add_argument("a", type=Path)
    check.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "publish":
        ONE_PROCESS.extend([True] if args.one_process else [])
        publish_all(args.out, args.engines.split(","), args.rows)
        return 0
    return 0 if compare(args.a, args.b) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
