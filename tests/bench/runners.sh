#!/bin/bash
# make bench-runners (the ns part): 32 namespace sandboxes at once, each: create from the
# BusyBox image, upload a 10 MiB tree, run a harness under the supervisor, download its
# output, remove. Prints failures and the wall time; plus the medians of create / first HELLO
# / rm over 10 sandboxes one at a time. Needs root and `make images`.
set -euo pipefail
sbx=$(realpath "$1")
top=$(cd "$(dirname "$0")/../.." && pwd)
img=$top/build/images/busybox-x86_64
n=${SANDBOXES:-32}
w=$(mktemp -d /tmp/sbx-bench-runners-XXXXXX)
export SBX_NS_DIR=$w/state
trap 'for s in $("$sbx" sandbox ls 2>/dev/null); do "$sbx" sandbox rm "$s" >/dev/null 2>&1; done; rm -rf "$w"' EXIT
now() { date +%s.%N; }
mkdir -p "$w/tree"
for i in $(seq 10); do head -c $((1 << 20)) /dev/urandom >"$w/tree/f$i"; done

one() { # one sandbox's whole life; exit 0 only when everything worked and checked
	local i=$1 name
	name=$("$sbx" sandbox create --image "$img") || return 1
	"$sbx" --runner "ns:$name" upload-dir "$w/tree" /data >/dev/null || return 1
	"$sbx" --runner "ns:$name" run --session /tmp/s --timeout 30 -- \
		/bin/sh -c 'mkdir -p /out; cat /data/* | wc -c >/out/bytes; setsid sleep 1000 </dev/null >/dev/null 2>&1 &' \
		>"$w/rec.$i" || return 1
	grep -q '"termination_witnessed":true' "$w/rec.$i" || return 1
	"$sbx" --runner "ns:$name" download-dir /out "$w/out.$i" >/dev/null || return 1
	[ "$(cat "$w/out.$i/bytes")" = $((10 << 20)) ] || return 1
	"$sbx" sandbox rm "$name" || return 1
}
t0=$(now)
pids=()
for i in $(seq "$n"); do
	one "$i" >"$w/log.$i" 2>&1 &
	pids+=($!)
done
fails=0
for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
t1=$(now)
left=$("$sbx" sandbox ls | wc -l)
printf '%d ns sandboxes at once (create, upload 10 MiB, supervised harness, download, rm): %d failures, %d left, wall %.2f s\n' \
	"$n" "$fails" "$left" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}')"
[ "$fails" = 0 ] || { for i in $(seq "$n"); do [ -s "$w/log.$i" ] && sed "s/^/  $i: /" "$w/log.$i"; done; }

# One at a time: create, first HELLO, rm.
: >"$w/c" && : >"$w/h" && : >"$w/r"
for i in $(seq 10); do
	a=$(now); s=$("$sbx" sandbox create --image "$img"); b=$(now)
	"$sbx" --runner "ns:$s" hello >/dev/null; c=$(now)
	"$sbx" sandbox rm "$s"; d=$(now)
	awk -v a="$a" -v b="$b" 'BEGIN{print (b - a) * 1000}' >>"$w/c"
	awk -v a="$b" -v b="$c" 'BEGIN{print (b - a) * 1000}' >>"$w/h"
	awk -v a="$c" -v b="$d" 'BEGIN{print (b - a) * 1000}' >>"$w/r"
done
med() { sort -g "$1" | awk '{a[NR]=$1} END{printf "%.1f", a[int((NR+1)/2)]}'; }
printf 'one at a time, median of 10: create %s ms, first HELLO %s ms, rm %s ms\n' "$(med "$w/c")" "$(med "$w/h")" "$(med "$w/r")"
[ "$fails" = 0 ] && [ "$left" = 0 ]
