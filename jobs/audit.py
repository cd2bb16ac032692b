"""spark-submit entry point: audit a release (`vpub audit RELEASE [--source DATA]`)."""

import sys

from vpub_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["audit", *sys.argv[1:]]))
