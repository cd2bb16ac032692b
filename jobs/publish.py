"""spark-submit entry point: publish a release.

    spark-submit --master spark://host:7077 jobs/publish.py --config conf/adult_uad.yaml [--out ...]

Takes the same arguments as `vpub publish`; the settings given to spark-submit
(master, memory, conf) win over conf/spark.yaml. vpub_spark must be installed in the
Python environment of the driver and the executors.
"""

import sys

from vpub_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["publish", *sys.argv[1:]]))
