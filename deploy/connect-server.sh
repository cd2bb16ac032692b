#!/usr/bin/env bash
# A Spark Connect server on 127.0.0.1, started with pyspark's own
# sbin/start-connect-server.sh and spark-connect jar (docs/how-to/spark-connect.md).
#
#   deploy/connect-server.sh start    # prints the server's URL, sc://127.0.0.1:PORT, once it answers
#   deploy/connect-server.sh status   # whether it answers
#   deploy/connect-server.sh stop
#
# Environment (defaults): CONNECT_DIR (.connect: logs, pids), CONNECT_PORT (15002),
# CONNECT_MASTER (local[2]), CONNECT_MEMORY (2g: the server's driver heap), PYTHON
# (.venv/bin/python: the interpreter its Python workers run; it must have vpub_spark installed).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || { echo "connect-server.sh: no Python at $PYTHON (run make test or set PYTHON)" >&2; exit 2; }
command -v java >/dev/null || [ -n "${JAVA_HOME:-}" ] || { echo "connect-server.sh: Java 17 is required (install it or set JAVA_HOME)" >&2; exit 2; }
SPARK_HOME=$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
DIR=$(mkdir -p "${CONNECT_DIR:-$ROOT/.connect}" && cd "${CONNECT_DIR:-$ROOT/.connect}" && pwd)
PORT=${CONNECT_PORT:-15002}
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR=$DIR/logs SPARK_PID_DIR=$DIR/pids
export SPARK_IDENT_STRING=vpub-connect-$PORT PYSPARK_PYTHON=$PYTHON
URL=sc://127.0.0.1:$PORT

answers() {
  "$PYTHON" - "$PORT" <<'PY'
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
except OSError:
    sys.exit(1)
PY
}

case "${1:-}" in
  start)
    mkdir -p "$SPARK_LOG_DIR" "$SPARK_PID_DIR"
    # the server-side settings of vpub's sessions (engines/settings.py DEFAULT_CONF): a
    # Spark Connect client can set only SQL settings
    "$SPARK_HOME/sbin/start-connect-server.sh" \
      --master "${CONNECT_MASTER:-local[2]}" --driver-memory "${CONNECT_MEMORY:-2g}" \
      --conf spark.connect.grpc.binding.address=127.0.0.1 \
      --conf spark.connect.grpc.binding.port="$PORT" \
      --conf spark.ui.enabled=false \
      --conf spark.python.daemon.module=vpub_spark.engines.spark.daemon \
      --conf spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs=false >/dev/null
    for _ in $(seq 1 240); do
      answers && { echo "$URL"; exit 0; }
      sleep 0.5
    done
    echo "connect-server.sh: no answer on $URL within 120 s; logs in $SPARK_LOG_DIR" >&2
    exit 1
    ;;
  stop)
    "$SPARK_HOME/sbin/stop-connect-server.sh" >/dev/null || true
    ;;
  status)
    answers && echo "$URL answers" || { echo "no server answers on $URL" >&2; exit 1; }
    ;;
  *)
    echo "usage: deploy/connect-server.sh start | status | stop" >&2
    exit 2
    ;;
esac
