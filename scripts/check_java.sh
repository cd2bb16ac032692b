#!/usr/bin/env bash
# Spark 4 needs Java 17 or newer: stop early, with a clear message, if it is missing.
set -euo pipefail
java_bin="${JAVA_HOME:+$JAVA_HOME/bin/}java"
if ! command -v "$java_bin" >/dev/null 2>&1; then
  echo "error: Java was not found. Install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME." >&2
  exit 1
fi
version=$("$java_bin" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)\(\.\([0-9]*\)\)\{0,1\}.*/\1 \3/p' | head -n1)
major=${version%% *}
[ "$major" = "1" ] && major=${version##* }
if [ -z "$major" ] || [ "$major" -lt 17 ]; then
  echo "error: Java ${major:-unknown} found; Spark 4 needs Java 17 or newer (set JAVA_HOME)." >&2
  exit 1
fi
echo "Java $major found."
