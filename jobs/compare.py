"""spark-submit entry point: the comparison runs (`vpub compare --config ...`).
The comparison scores schemas with the in-process kernels on the driver."""

import sys

from vpub_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["compare", *sys.argv[1:]]))
