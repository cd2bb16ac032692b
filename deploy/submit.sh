#!/usr/bin/env bash
# spark-submit a vpub job with its Python environment.
#
#   deploy/submit.sh [--pack] [spark-submit options ...] JOB [job arguments ...]
#   deploy/submit.sh --master spark://127.0.0.1:7077 jobs/publish.py --config conf/adult_uad.yaml
#   deploy/submit.sh --pack --master yarn --deploy-mode cluster jobs/publish.py --config conf/adult_uad.yaml
#
# pyarrow, numpy, pandas and the solvers are native code: they cannot travel in
# --py-files. Two ways, chosen here:
# - default, "environment on the nodes": every node has the same Python environment
#   with vpub_spark installed at the path in $PYTHON (default .venv/bin/python). Right
#   for a local standalone cluster and for Kubernetes, where the image is the
#   environment (deploy/Dockerfile).
# - --pack: build dist/vpub-env.tar.gz once (a fresh virtual environment with
#   vpub_spark installed from this checkout, non-editable, packed by venv-pack) and
#   ship it with --archives; executors unpack it as ./environment and run its Python.
#   Right for YARN or standalone clusters whose nodes have the same OS and base Python
#   (venv-pack keeps the interpreter as a link to the base Python), but not vpub_spark.
# The driver runs the local $PYTHON in client mode; with --deploy-mode cluster and
# --pack, the driver runs the packed Python too.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || { echo "submit.sh: no Python at $PYTHON (run make test or set PYTHON)" >&2; exit 2; }
SPARK_SUBMIT=$(dirname "$PYTHON")/spark-submit
[ -x "$SPARK_SUBMIT" ] || { echo "submit.sh: $SPARK_SUBMIT not found (pyspark is not installed in that environment)" >&2; exit 2; }

pack=0
if [ "${1:-}" = "--pack" ]; then pack=1; shift; fi
[ $# -gt 0 ] || { echo "usage: deploy/submit.sh [--pack] [spark-submit options] JOB [args]" >&2; exit 2; }

export PYSPARK_DRIVER_PYTHON=$PYTHON
if [ "$pack" = 1 ]; then
  ARCHIVE=$ROOT/dist/vpub-env.tar.gz
  newest=$(find "$ROOT/vpub_spark" "$ROOT/pyproject.toml" -newer "$ARCHIVE" -print -quit 2>/dev/null || echo new)
  if [ ! -f "$ARCHIVE" ] || [ -n "$newest" ]; then
    echo "submit.sh: packing the environment into dist/vpub-env.tar.gz ..." >&2
    rm -rf "$ROOT/dist/env" "$ARCHIVE"
    "$PYTHON" -m venv "$ROOT/dist/env"
    "$ROOT/dist/env/bin/pip" install -q "$ROOT" venv-pack
    "$ROOT/dist/env/bin/venv-pack" -q -p "$ROOT/dist/env" -o "$ARCHIVE"
  fi
  driver=(--conf "spark.pyspark.driver.python=$PYTHON")
  case " $* " in *" --deploy-mode cluster "*|*" --deploy-mode=cluster "*) driver=() ;; esac
  exec "$SPARK_SUBMIT" --archives "$ARCHIVE#environment" \
    --conf spark.pyspark.python=./environment/bin/python "${driver[@]}" \
    --conf spark.yarn.appMasterEnv.PYSPARK_PYTHON=./environment/bin/python "$@"
fi
export PYSPARK_PYTHON=$PYTHON
exec "$SPARK_SUBMIT" --conf "spark.pyspark.python=$PYTHON" "$@"
