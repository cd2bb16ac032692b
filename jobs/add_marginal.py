"""spark-submit entry point: a marginal from a store's version
(`vpub marginals add --state STORE --attributes A,B --out DIR [--version N]`)."""

import sys

from vpub_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["marginals", "add", *sys.argv[1:]]))
