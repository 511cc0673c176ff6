#!/usr/bin/env bash
# make bench-python: tests/bench/bench_python.py with a Docker engine when one can be had
# (tests/lib/docker.sh starts a private dockerd when none answers, and stops it after).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
hostdir=$1 benchdir=$2
. "$top/tests/lib/docker.sh"
d=$(mktemp -d /tmp/sbx-bench-dockerd-XXXXXX)
trap 'docker_down "$d"; rm -rf "$d"' EXIT
docker=none
docker_up "$d" >/dev/null 2>&1 && docker=docker
py_path="$top/python"
python3 -c 'import sys' || exit 1
SBX_LIB="$hostdir/libsbx.so" PYTHONPATH="$py_path" python3 "$top/tests/bench/bench_python.py" \
	"$hostdir" "$benchdir" "$docker"
