#!/usr/bin/env bash
# Installs Debian's chromium (for headless screenshots) if it is not there; prints its path.
#
#   CHROMIUM=$(bash .ci/install-chromium.sh)
#   "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
#       --disable-background-networking --disable-component-update --disable-sync \
#       --user-data-dir="$(mktemp -d)" --window-size=800,600 --screenshot=/tmp/shot.png file:///tmp/page.html
#
# Idempotent and fast when installed. Needs root (apt). stdout: only the path;
# stderr: one status line, or the failing step's output.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

works() { command -v chromium >/dev/null 2>&1 && chromium --version >/dev/null 2>&1; }

if ! works; then
    [ "$(id -u)" -eq 0 ] || { echo "install-chromium: must run as root (uses apt-get)" >&2; exit 1; }
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    if ! { apt-get update -q && apt-get install -y -q --no-install-recommends chromium; } >"$log" 2>&1; then
        echo "install-chromium: apt-get failed:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
    works || { echo "install-chromium: installed, but 'chromium --version' fails" >&2; exit 1; }
    echo "install-chromium: $(chromium --version 2>/dev/null)" >&2
fi
command -v chromium
