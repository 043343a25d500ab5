#!/usr/bin/env bash
# Installs a Debian package for a program the tests run, if the program is not there; prints
# the program's path. Used by .ci/run for chromium (headless screenshots of the HTML report:
# tests/render/test_html.py) and node (the Perfetto trace processor that reads exported
# timelines back: tests/export).
#
#   bash .ci/install-debian.sh chromium chromium   # PROGRAM PACKAGE
#   bash .ci/install-debian.sh node nodejs
#
# Idempotent and fast when installed. Needs root (apt). stdout: only the path;
# stderr: one status line, or the failing step's output.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
program=$1 package=$2

works() { command -v "$program" >/dev/null 2>&1 && "$program" --version >/dev/null 2>&1; }

if ! works; then
    [ "$(id -u)" -eq 0 ] || { echo "install-debian: must run as root to install $package (uses apt-get)" >&2; exit 1; }
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    if ! { apt-get update -q && apt-get install -y -q --no-install-recommends "$package"; } >"$log" 2>&1; then
        echo "install-debian: apt-get install $package failed:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
    works || { echo "install-debian: installed $package, but '$program --version' fails" >&2; exit 1; }
    echo "install-debian: $program $("$program" --version 2>/dev/null)" >&2
fi
command -v "$program"
