#!/usr/bin/env bash
# The page's end-to-end test needs Debian's chromium and chromium-driver.
# Installs them with apt when missing; if that is impossible, says so loudly and goes on:
# the browser test then skips with the same message.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  echo "Browser found: $(chromium --version 2>/dev/null | head -n1)"
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  echo "Installing chromium and chromium-driver (apt) for the page's browser test ..."
  export DEBIAN_FRONTEND=noninteractive
  if apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
     || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; }; then
    echo "Browser installed: $(chromium --version 2>/dev/null | head -n1)"
    exit 0
  fi
fi
echo "WARNING: no browser could be installed (need root and apt-get for chromium, chromium-driver);" >&2
echo "WARNING: the page's end-to-end test (tests/serve/test_page.py) will be SKIPPED." >&2
exit 0
