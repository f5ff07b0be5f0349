#!/usr/bin/env bash
# Installs Debian's Chromium for the HTML report's browser test
# (tempora-cli/tests/report_browser.rs), unless a chromium is already on PATH.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
chromium --version
