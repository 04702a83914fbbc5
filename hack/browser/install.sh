#!/usr/bin/env bash
# Chromium for the browser test of `koordpy simulate --html` (tests/simulate/test_html_browser.py),
# from the distribution's packages: a test tool's own browser download needs a network the tests
# should not depend on. Idempotent: does nothing when a Chromium is already on PATH.
#
# Usage: hack/browser/install.sh
#   Installs Debian's or Ubuntu's `chromium` package when running as root with apt-get; anywhere else
#   it says what to install and exits 0 (the test then skips, or fails under CI=true).
set -euo pipefail

for name in chromium chromium-browser google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then
    exit 0
  fi
done

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "koordpy: installing Chromium for the browser test of 'koordpy simulate --html' (about 30 s)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
  exit 0
fi

echo "koordpy: no Chromium on PATH: install the 'chromium' package to run the browser test of 'koordpy simulate --html'"
