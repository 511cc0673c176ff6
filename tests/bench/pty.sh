#!/bin/bash
# pty.sh SBX BENCH_PTY: `make bench-pty`: bench_pty on the local runner and on an ns sandbox of
# the BusyBox image (made in a state folder of its own, removed at the end), one run each.
set -euo pipefail
sbx=$(realpath "$1")
bench=$(realpath "$2")
top=$(cd "$(dirname "$0")/../.." && pwd)
export SBX_NS_DIR
SBX_NS_DIR=$(mktemp -d /tmp/sbx-bench-pty-XXXXXX)
trap '"$sbx" sandbox rm --all --runner ns >/dev/null 2>&1 || true; rm -rf "$SBX_NS_DIR"' EXIT
"$bench" local
echo
n=$("$sbx" sandbox create --image "$top/build/images/busybox-x86_64")
"$bench" "ns:$n"
