#!/usr/bin/env bash
# A local standalone Spark cluster on 127.0.0.1, started with pyspark's own
# sbin/spark-daemon.sh (the pip package has no start-master.sh; docs/how-to/cluster.md).
#
#   deploy/cluster.sh start [WORKERS]   # master + WORKERS workers (default 2); prints the master URL
#   deploy/cluster.sh status            # the master's view: alive workers, cores, running apps
#   deploy/cluster.sh stop              # stop workers and master
#
# Environment (defaults): CLUSTER_DIR (.cluster: logs, pids, work dirs), MASTER_PORT (7077),
# MASTER_UI_PORT (8080), WORKER_CORES (1), WORKER_MEMORY (2g), PYTHON (.venv/bin/python:
# the interpreter the executors' Python workers run; it must have vpub_spark installed).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || { echo "cluster.sh: no Python at $PYTHON (run make test or set PYTHON)" >&2; exit 2; }
command -v java >/dev/null || [ -n "${JAVA_HOME:-}" ] || { echo "cluster.sh: Java 17 is required (install it or set JAVA_HOME)" >&2; exit 2; }
SPARK_HOME=$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
DIR=$(mkdir -p "${CLUSTER_DIR:-$ROOT/.cluster}" && cd "${CLUSTER_DIR:-$ROOT/.cluster}" && pwd)
MASTER_PORT=${MASTER_PORT:-7077}
MASTER_UI_PORT=${MASTER_UI_PORT:-8080}
WORKER_CORES=${WORKER_CORES:-1}
WORKER_MEMORY=${WORKER_MEMORY:-2g}
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR=$DIR/logs SPARK_PID_DIR=$DIR/pids SPARK_WORKER_DIR=$DIR/work
export SPARK_IDENT_STRING=vpub-$MASTER_PORT PYSPARK_PYTHON=$PYTHON
DAEMON=$SPARK_HOME/sbin/spark-daemon.sh
MASTER_CLASS=org.apache.spark.deploy.master.Master
WORKER_CLASS=org.apache.spark.deploy.worker.Worker
URL=spark://127.0.0.1:$MASTER_PORT

master_json() {
  "$PYTHON" - "$MASTER_UI_PORT" <<'PY'
import json, sys, urllib.request
try:
    print(json.dumps(json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/json/", timeout=2))))
except OSError:
    print("{}")
PY
}

alive_workers() {
  master_json | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin).get("aliveworkers", 0))'
}

case "${1:-}" in
  start)
    workers=${2:-2}
    mkdir -p "$SPARK_LOG_DIR" "$SPARK_PID_DIR" "$SPARK_WORKER_DIR"
    "$DAEMON" start "$MASTER_CLASS" 1 --host 127.0.0.1 --port "$MASTER_PORT" --webui-port "$MASTER_UI_PORT" >/dev/null
    for i in $(seq 1 "$workers"); do
      "$DAEMON" start "$WORKER_CLASS" "$i" --host 127.0.0.1 --cores "$WORKER_CORES" --memory "$WORKER_MEMORY" \
        --webui-port 0 --work-dir "$SPARK_WORKER_DIR/worker-$i" "$URL" >/dev/null
    done
    for _ in $(seq 1 120); do
      [ "$(alive_workers)" = "$workers" ] && { echo "$URL"; exit 0; }
      sleep 0.5
    done
    echo "cluster.sh: $workers worker(s) did not register within 60 s; logs in $SPARK_LOG_DIR" >&2
    exit 1
    ;;
  stop)
    for pidfile in "$SPARK_PID_DIR"/spark-"$SPARK_IDENT_STRING"-"$WORKER_CLASS"-*.pid; do
      [ -e "$pidfile" ] || continue
      i=${pidfile##*-}; i=${i%.pid}
      "$DAEMON" stop "$WORKER_CLASS" "$i" >/dev/null || true
    done
    "$DAEMON" stop "$MASTER_CLASS" 1 >/dev/null || true
    ;;
  status)
    MASTER_STATE=$(master_json) "$PYTHON" - <<'PY'
import json, os, sys
m = json.loads(os.environ["MASTER_STATE"])
if not m:
    sys.exit("no master answers on the UI port")
print(f"{m['url']}: {m['status']}, {m['aliveworkers']} alive worker(s), {m['cores']} cores, {len(m['activeapps'])} running app(s)")
PY
    ;;
  *)
    echo "usage: deploy/cluster.sh start [WORKERS] | status | stop" >&2
    exit 2
    ;;
esac
