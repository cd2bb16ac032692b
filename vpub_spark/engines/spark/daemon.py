"""The Python workers' daemon (`spark.python.daemon.module`): pyspark's own
daemon, started so that the workers it forks are ready at once.

- Spark puts `pyspark.zip` first on the workers' path. Python keeps no compiled
  bytecode for a module it imports from a zip, so every daemon and every worker compiled
  pyspark's modules from source: measured 1.0 s against 0.2 s for importing
  `pyspark.daemon` and `pyspark.worker` from an installed pyspark. When that zip is the
  one inside the installed pyspark package (a pip install: local mode, or executors
  running the same environment), the two are the same version by construction, and
  the installed package, with its compiled bytecode, goes first.
- The daemon imports the libraries every task imports (pyspark's worker, NumPy, pandas,
  pyarrow, the encoding and partitioning kernels) before it forks, so a worker forked
  for a later job (a task that chains two Python steps needs two) starts warm.
"""

from __future__ import annotations

import sys
from pathlib import Path


def installed_first(path: list[str]) -> list[str]:
    """`path` with pyspark's zips moved behind the others when they are the installed
    pyspark package's own (`.../site-packages/pyspark/python/lib/*.zip`)."""
    zips = [
        p
        for p in path
        if p.endswith(".zip") and Path(p).parent.parts[-3:-1] == ("pyspark", "python")
    ]
    return [p for p in path if p not in zips] + zips


def main() -> None:
    sys.path[:] = installed_first(sys.path)
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark.worker  # noqa: F401
    from pyspark.daemon import manager

    from ...encoding import Dictionary  # noqa: F401
    from ...kernels import partitioning  # noqa: F401

    manager()


if __name__ == "__main__":
    main()
