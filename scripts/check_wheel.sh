#!/usr/bin/env bash
# The package as a user gets it: build the wheel, install it into a new virtual
# environment (no checkout on the path), and run `vpub demo` in process from an empty
# temporary directory. Exit non-zero if any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m pip wheel --quiet --no-deps -w "$work/dist" .
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet "$work"/dist/vpub_spark-*.whl
cd "$work"
mkdir -m 700 private
export VPUB_PRIVATE_DIR="$work/private"
"$work/venv/bin/vpub" --version
# vpub_bench's commands join `vpub` through their entry point; their load generator
# is the bench extra's, not the library's
"$work/venv/bin/vpub" compare --help > /dev/null
for module in aiohttp; do
  if "$work/venv/bin/python" -c "import $module" 2> /dev/null; then
    echo "wheel: $module is installed without the bench extra" >&2
    exit 1
  fi
done
"$work/venv/bin/vpub" demo --engine inprocess --rows 20000 --out demo
test -f demo/releases/sal-uad-l10/_SUCCESS
# the report's plots come with the library (matplotlib is a dependency)
"$work/venv/bin/vpub" report demo/releases/sal-uad-l10 --out report.html > /dev/null
grep -q '<svg\|data:image/svg' report.html
echo "wheel: installed in a new venv, vpub demo and vpub report ran in process"
