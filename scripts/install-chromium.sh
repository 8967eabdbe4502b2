#!/usr/bin/env bash
# Install headless Chromium and its WebDriver from Debian's packages when missing: the test
# of the sweep report's HTML page opens it in a real browser. Run by scripts/test.sh in its
# set-up (never by a test). Idempotent; never downloads browsers any other way.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
echo "install-chromium: installing Chromium for the report page's browser test:" \
    "apt-get install chromium chromium-driver (system packages, with their dependencies)" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
