"""Compare the table contents of two releases, part by part (rows sorted): exit 0 and
one line if they are identical, 1 and the first difference otherwise.

    python scripts/same_release.py RELEASE_A RELEASE_B

Checks that a refactoring changed no release (the same config and seed published
before and after)."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def contents(release: Path) -> dict[str, object]:
    out = {}
    for part in sorted((release / "tables").glob("*/*")):
        table = pa.concat_tables([pq.read_table(f) for f in sorted(part.glob("*.parquet"))])
        frame = table.to_pandas().astype(str)
        frame = frame[sorted(frame.columns)]
        out[str(part.relative_to(release))] = frame.sort_values(list(frame.columns)).reset_index(
            drop=True
        )
    return out


def main(a: str, b: str) -> int:
    left, right = contents(Path(a)), contents(Path(b))
    if left.keys() != right.keys():
        print(f"different parts: {sorted(set(left) ^ set(right))}")
        return 1
    for name, frame in left.items():
        if not frame.equals(right[name]):
            print(f"{name} differs")
            return 1
    print(f"identical: {len(left)} parts, {sum(len(f) for f in left.values())} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
