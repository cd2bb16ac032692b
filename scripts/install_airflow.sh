#!/usr/bin/env bash
# The scheduled-release test (tests/deploy/test_airflow_dag.py) runs Apache Airflow for
# real, from its own virtual environment (.airflow-venv/, kept between runs): installed
# here from the package registry when missing (about 100 s), before the suite, like the
# browser. Exit non-zero if it cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.airflow-venv
PYTHON=${PYTHON:-python3}
if [ -x "$VENV/bin/airflow" ]; then
  echo "Airflow found: $VENV"
  exit 0
fi
echo "Installing Apache Airflow into $VENV for the scheduled-release test ..."
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q "apache-airflow>=3.0" "apache-airflow-providers-apache-spark>=5.0"
echo "Airflow installed: $VENV"
