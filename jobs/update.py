"""spark-submit entry point: a store's next version from a new snapshot
(`vpub statdb update STORE --input SNAPSHOT`; it runs in the driver's process)."""

import sys

from vpub_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["statdb", "update", *sys.argv[1:]]))
