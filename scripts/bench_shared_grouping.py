"""The cost of one grouping shared by several anatomy tables
(`vpub_spark/kernels/shared_grouping.py`) on this machine: `shared_groups` on random
rows of three sensitive attributes (7 values with Adult's marital-status shares, 14 and
16 uniform) and of two correlated ones, at l = 2, the median of 3 runs, with the
number of groups and the largest group. Prints a Markdown table, its command, date and
machine.

Usage: python scripts/bench_shared_grouping.py [ROWS ...]   (default: 45000 1000000)
"""

import statistics
import sys
import time

import numpy as np

from vpub_bench.common import run_record
from vpub_spark.kernels.shared_grouping import shared_groups

SHARES = [0.46, 0.33, 0.13, 0.03, 0.03, 0.01, 0.01]


def tables(n: int, rng: np.random.Generator) -> dict[str, list[np.ndarray]]:
    """The two tables of n rows: three independent attributes, two correlated ones."""
    a = rng.choice(7, n, p=SHARES)
    return {
        "three attributes": [a, rng.integers(0, 14, n), rng.integers(0, 16, n)],
        "two, correlated": [a, (2 * a + rng.integers(0, 3, n)) % 14],
    }


def main(sizes: list[int]) -> None:
    rng = np.random.default_rng(1)
    print("| rows | attributes | median s | groups | largest group |")
    print("|---:|---|---:|---:|---:|")
    for n in sizes:
        for name, columns in tables(n, rng).items():
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                group = shared_groups(columns, 2, 7)
                times.append(time.perf_counter() - t0)
            sizes_of = np.bincount(group)
            print(
                f"| {n:,} | {name} | {statistics.median(times):.2f} | {len(sizes_of):,} "
                f"| {int(sizes_of.max())} |"
            )
    record = run_record()
    m = record["machine"]
    print(
        f"\nCommand: `python scripts/bench_shared_grouping.py {' '.join(map(str, sizes))}`; "
        f"{record['date']}; {m['cores']} cores, {m['memory_gib']} GiB ({m['cpu']}; "
        f"Python {m['python']})."
    )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [45_000, 1_000_000])
