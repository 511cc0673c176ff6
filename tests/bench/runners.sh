#!/bin/bash
# make bench-runners. The ns part: 32 namespace sandboxes at once, each: create from the
# BusyBox image, upload a 10 MiB tree, run a harness under the supervisor, download its
# output, remove. Prints failures and the wall time; plus the medians of create / first HELLO
# / rm over 10 sandboxes one at a time.
# The engine part, for podman and then Docker (each skipped with a note when missing; PODMAN=0
# or DOCKER=0 skips one; a private dockerd is started when none answers, tests/lib/docker.sh),
# on the BusyBox x86_64 image, each figure against the plain engine way in the same run (shown
# here for podman; the same rows with docker):
# - sbx sandbox create / rm against `podman run -d IMAGE sleep` / `podman rm -f`, median of
#   INJECT_RUNS;
# - injection + first HELLO (`sbx --runner podman:N hello` on a fresh container, one sbx did
#   not create, so the agent is delivered) against `podman exec N true` on the same container
#   just before, median of INJECT_RUNS (5); the same on containers sbx created;
# - 1000 `kind` probes over one retained session through libsbx (build/bench/bench_probe;
#   opened with a HELLO first; only the probes are timed, one request and its answer at a
#   time), on the resident agent (a container sbx made), with SBX_RESIDENT=0 (podman exec, then
#   the direct socket) and with SBX_DIRECT=0 (podman exec only), and through the CLI's JSON
#   lines, against `podman exec N sh -c '[ -d /tmp ]'` (20 of them): the per-probe ratio;
# - upload and download of the transfer bench's data sets, (a) 1 GiB in 8 files and
#   (b) 50,000 files of 1 KiB in 500 folders, against `tar -cf - . | podman exec -i N tar -xf -
#   -C DST` and `podman exec N tar -cf - -C SRC . | tar -xf - -C DST`, interleaved (each sbx
#   figure one CLI run on the resident agent, and the same the exec way), median of
#   RUNS (5). Both ends in RAM so no disk enters the figures (as in the transfer bench): the
#   host's data in /dev/shm, the container's in a tmpfs mounted at /x (`--tmpfs`).
# Needs root and `make images`. Every sandbox, container and image made here is removed.
set -euo pipefail
sbx=$(realpath "$1")
top=$(cd "$(dirname "$0")/../.." && pwd)
bench_probe=$top/build/bench/bench_probe
img=$top/build/images/busybox-x86_64
n=${SANDBOXES:-32}
runs=${RUNS:-5}
inject_runs=${INJECT_RUNS:-5}
w=$(mktemp -d /tmp/sbx-bench-runners-XXXXXX)
export SBX_NS_DIR=$w/state SBX_PODMAN_DIR=$w/hints
p=bench$$ # prefix of every container and image made here
cleanup() {
	local s c i
	for s in $("$sbx" sandbox ls --runner ns 2>/dev/null); do "$sbx" sandbox rm "$s" >/dev/null 2>&1; done
	for e in podman docker; do
		command -v $e >/dev/null && $e info >/dev/null 2>&1 || continue
		for c in $($e ps -a --format '{{.Names}}' | grep "^$p-" || true); do
			E=$e eng_rm "$c" >/dev/null 2>&1 || true
		done
		for i in $($e images --format '{{.Repository}}:{{.Tag}}' | grep "sbx-$p-" || true); do
			$e rmi -f "$i" >/dev/null 2>&1 || true
		done
	done
	rm -rf "$w" "${hd:-}"
	[ -z "${docker_dir:-}" ] || docker_down "$docker_dir" || true
}
trap cleanup EXIT
now() { date +%s.%N; }
mkdir -p "$w/tree"
for i in $(seq 10); do head -c $((1 << 20)) /dev/urandom >"$w/tree/f$i"; done

one() { # one sandbox's whole life; exit 0 only when everything worked and checked
	local i=$1 name
	name=$("$sbx" sandbox create --image "$img") || return 1
	"$sbx" --runner "ns:$name" upload-dir "$w/tree" /data >/dev/null || return 1
	"$sbx" --runner "ns:$name" run --run-dir /tmp/s --timeout 30 -- \
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
for q in "${pids[@]}"; do wait "$q" || fails=$((fails + 1)); done
t1=$(now)
left=$("$sbx" sandbox ls --runner ns | wc -l)
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
ns_ok=0
[ "$fails" = 0 ] && [ "$left" = 0 ] || ns_ok=1

# ---- podman and docker-------------------------------------------------------------------------
[ -f "$img.tar" ] || { echo "no $img.tar (make images)" >&2; exit 1; }
# Our own name for the tarball and its .sbx-image folder: the import is sbx-$p-busybox-x86_64.
ln -s "$img.tar" "$w/$p-busybox-x86_64.tar"
ln -s "$img" "$w/$p-busybox-x86_64"
lim() { local n; n=$(ulimit "$1"); [ "$n" = unlimited ] || [ "$n" -gt "$2" ] && n=$2; echo "$n"; }
eng_run() { # NAME IMAGE ARGS...: a container sbx did not make, the engine's own way
	if [ "$E" = podman ]; then
		podman --runtime runc --cgroup-manager cgroupfs run -d --name "$1" --network none \
			--ulimit "nofile=$(lim -n 20000):$(lim -n 20000)" --ulimit "nproc=$(lim -u 1000):$(lim -u 1000)" \
			"${@:2}" >/dev/null
	else
		docker run -d --name "$1" --network none "${@:2}" >/dev/null
	fi
}
eng_rm() { if [ "$E" = podman ]; then podman rm -f -t 0 "$1"; else docker rm -f "$1"; fi; }
engine_bench() { # ENGINE: the rows of one engine
E=$1
P() { "$sbx" --runner "$E:$1" "${@:2}"; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f\n", (b - a) * 1000}'; }
medf() { sort -g "$1" | awk '{a[NR]=$1} END{m=a[int((NR+1)/2)]; printf "%.3f", m}'; }
verdict() { awk -v r="$1" -v t="$2" -v dir="$3" 'BEGIN{ok = dir == "le" ? r <= t : r >= t; print ok ? "met" : "NOT met"}'; }
eng_fail=0
fail() { echo "$E bench: FAIL: $*" >&2; eng_fail=1; }

base=$p-$E-x
"$sbx" sandbox create --runner "$E" --image "$w/$p-busybox-x86_64.tar" --name "$base" \
	--engine-arg --tmpfs=/x:rw,exec,size=4g >/dev/null
image=sbx-$p-busybox-x86_64

# 0. create and rm, one at a time, against the engine's run -d and rm -f.
: >"$w/ec" && : >"$w/er" && : >"$w/sc" && : >"$w/sr"
for i in $(seq "$inject_runs"); do
	a=$(now); eng_run "$p-r$i" "$image" sleep 1000000; b=$(now)
	eng_rm "$p-r$i" >/dev/null; c=$(now)
	ms "$a" "$b" >>"$w/ec"; ms "$b" "$c" >>"$w/er"
	a=$(now); "$sbx" sandbox create --runner "$E" --image "$image" --name "$p-s$i" >/dev/null; b=$(now)
	"$sbx" sandbox rm "$E:$p-s$i" >/dev/null; c=$(now)
	ms "$a" "$b" >>"$w/sc"; ms "$b" "$c" >>"$w/sr"
done
echo "$E, median of $inject_runs, one at a time: $E run -d %s ms, sbx sandbox create %s ms; $E rm -f %s ms, sbx sandbox rm %s ms" |
	sed "s/%s/$(medf "$w/ec")/; s/%s/$(medf "$w/sc")/; s/%s/$(medf "$w/er")/; s/%s/$(medf "$w/sr")/"

# 1. injection + first HELLO on a fresh container, against podman exec N true on it. Two
# kinds of container: one sbx did not create (`podman run IMAGE sleep`: the agent is not
# there and is delivered), and one `sbx sandbox create` made (its init is the agent already).
want_sha=$(sha256sum "$top/build/agent/x86_64/sbx-agent" | cut -d' ' -f1)
: >"$w/pe" && : >"$w/pi" && : >"$w/pl" && : >"$w/ce" && : >"$w/ci"
for i in $(seq "$inject_runs"); do
	c=$p-$E-i$i
	eng_run "$c" "$image" sleep 1000000
	a=$(now); $E exec "$c" true; b=$(now)
	P "$c" hello >"$w/hello"; d=$(now)
	P "$c" hello >/dev/null; e=$(now)
	grep -qx "sha256 $want_sha" "$w/hello" || fail "injection: HELLO's digest"
	[ "$($E exec "$c" sha256sum "/tmp/.sbx-agent-${want_sha:0:12}" | cut -d' ' -f1)" = "$want_sha" ] ||
		fail "injection: the agent is not in the container's /tmp"
	ms "$a" "$b" >>"$w/pe"; ms "$b" "$d" >>"$w/pi"; ms "$d" "$e" >>"$w/pl"
	"$sbx" sandbox rm "$E:$c" >/dev/null
	"$sbx" sandbox create --runner "$E" --image "$image" --name "$c" >/dev/null
	a=$(now); $E exec "$c" true; b=$(now)
	P "$c" hello >"$w/hello"; d=$(now)
	grep -qx "sha256 $want_sha" "$w/hello" || fail "created: HELLO's digest"
	ms "$a" "$b" >>"$w/ce"; ms "$b" "$d" >>"$w/ci"
	"$sbx" sandbox rm "$E:$c" >/dev/null
done
pe=$(medf "$w/pe") pi=$(medf "$w/pi") pl=$(medf "$w/pl") ce=$(medf "$w/ce") ci=$(medf "$w/ci")
r=$(awk -v a="$pi" -v b="$pe" 'BEGIN{printf "%.2f", a / b}')
r2=$(awk -v a="$ci" -v b="$ce" 'BEGIN{printf "%.2f", a / b}')
echo "$E, median of $inject_runs fresh BusyBox containers each way:"
printf "  not made by sbx ($E run ... sleep): $E exec N true %.0f ms; injection (agent delivered) + first HELLO %.0f ms: x%s (target <= 1.5: %s); a later HELLO %.0f ms\n" \
	"$pe" "$pi" "$r" "$(verdict "$r" 1.5 le)" "$pl"
printf "  made by sbx sandbox create (init is the agent): $E exec N true %.0f ms; first HELLO %.0f ms: x%s\n" \
	"$ce" "$ci" "$r2"

# 2. 1000 kind probes over one retained session (opened and HELLOed first; only the probes
# are timed, each request waiting for its answer) through libsbx (bench_probe), on the direct socket
# and, for the record, with SBX_DIRECT=0 (the session stays on podman exec), and through the sbx
# CLI's JSON lines (a Python driver's view); against podman exec N sh -c '[ -d /tmp ]' (20).
P "$base" hello >/dev/null # injection outside the figure
probe() { # env...: "channel mean_us"
	local out
	out=$(env "$@" "$bench_probe" "$E:$base" 1000) || { fail "bench_probe $*"; echo "? 0"; return; }
	echo "$(echo "$out" | sed -n 's/^channel //p') $(echo "$out" | tail -1 | cut -d' ' -f2)"
}
read -r ch_res us_res < <(probe SBX_DIRECT=1)
read -r ch_direct us_direct < <(probe SBX_RESIDENT=0)
read -r ch_exec us_exec < <(probe SBX_DIRECT=0)
[ "$ch_res" = resident ] && [ "$ch_direct" = direct ] && [ "$ch_exec" = exec ] ||
	fail "probes: channels $ch_res / $ch_direct / $ch_exec"
[ -f "$w/probe.py" ] || cat >"$w/probe.py" <<'PY'
import json, subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
out = p.stdout
def ask(req):
    p.stdin.write((json.dumps(req) + "\n").encode())
    return json.loads(out.readline())
assert ask({"id": 0, "op": "hello"})["ok"]
n, dirs = 1000, 0
t0 = time.perf_counter()
for i in range(1, n + 1):
    a = ask({"id": i, "op": "kind", "path": "/tmp"})
    dirs += a.get("id") == i and a.get("kind") == "dir"
t1 = time.perf_counter()
p.stdin.close()
p.wait()
print((t1 - t0) / n * 1e6, dirs)
PY
read -r us_cli dirs < <(python3 "$w/probe.py" "$sbx" --runner "$E:$base" session)
[ "$dirs" = 1000 ] || fail "probes: $dirs of 1000 answered dir"
a=$(now)
for i in $(seq 20); do $E exec "$base" sh -c '[ -d /tmp ]' || fail "$E exec probe"; done
b=$(now)
awk -v E="$E" -v l="$us_res" -v d="$us_direct" -v x="$us_exec" -v c="$us_cli" -v a="$a" -v b="$b" 'BEGIN{
	pp = (b - a) / 20 * 1e6; r = pp / l
	printf "  %s exec N sh -c %s: %.1f ms each (20)\n", E, "\"[ -d /tmp ]\"", pp / 1e3
	printf "  1000 kind probes over one session (libsbx, one at a time), on the resident agent (no exec): %.0f us each: x%.0f (target >= 1000: %s)\n", l, r, (r >= 1000 ? "met" : "NOT met")
	printf "  the same with SBX_RESIDENT=0 (%s exec, then the direct socket): %.0f us each: x%.0f\n", E, d, pp / d
	printf "  the same with SBX_DIRECT=0 (frames through %s exec): %.0f us each: x%.0f\n", E, x, pp / x
	printf "  the same through the sbx CLI (JSON lines from Python, on the resident agent): %.0f us each: x%.0f\n", c, pp / c }'

# 3. transfers: the transfer bench's two data sets, against tar through podman exec.
hd=$(mktemp -d /dev/shm/sbx-bench-runners-XXXXXX)
mkdir -p "$hd/big" "$hd/small"
for i in $(seq 8); do head -c $((128 << 20)) /dev/urandom >"$hd/big/f$i"; done
for d in $(seq 500); do
	mkdir "$hd/small/d$d"
	head -c $((100 * 1024)) /dev/urandom | split -b 1024 -a 2 - "$hd/small/d$d/f"
done
[ "$(find "$hd/small" -type f | wc -l)" = 50000 ] || { echo "small set is not 50,000 files" >&2; exit 1; }
secs() { # command...: prints its wall time
	local t0 t1
	t0=$(now)
	"$@" >/dev/null
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}'
}
# What a tree holds, as "files bytes", on the host and in the container (for the checks).
host_sum() { find "$1" -type f -printf '%s\n' | awk '{n++; s+=$1} END{print n+0, s+0}'; }
cont_sum() { $E exec "$base" sh -c "find '$1' -type f | wc -l; find '$1' -type f -exec cat {} + | wc -c" | paste -sd' '; }
tar_up() { tar -C "$1" -cf - . | $E exec -i "$base" tar -xf - -C "$2"; }
tar_down() { $E exec "$base" tar -cf - -C "$1" . | tar -xf - -C "$2"; }
sbx_up() { P "$base" upload-dir "$1" "$2"; }
sbx_down() { P "$base" download-dir "$1" "$2"; }
exec_up() { SBX_RESIDENT=0 P "$base" upload-dir "$1" "$2"; }
exec_down() { SBX_RESIDENT=0 P "$base" download-dir "$1" "$2"; }
echo "  transfers into/out of a $E BusyBox container sbx made, median of $runs (ratio = tar pipe s / sbx s; target >= 1.5); each sbx figure is one CLI run, session included (the resident agent; the exec way below it: SBX_RESIDENT=0):"
printf '  %-22s %9s %9s %7s %9s %9s %7s  %s\n' set "tar up" "sbx up" ratio "tar down" "sbx down" ratio "(target >= 1.5)"
for set in big small; do
	want=$(host_sum "$hd/$set")
	P "$base" upload-dir "$hd/$set" "/x/src/$set" >/dev/null # the download source (and a warm-up)
	: >"$w/t.tu" && : >"$w/t.su" && : >"$w/t.td" && : >"$w/t.sd" && : >"$w/t.xu" && : >"$w/t.xd"
	for r in $(seq "$runs"); do
		last=$([ "$r" = "$runs" ] && echo 1 || echo 0)
		$E exec "$base" mkdir /x/dst
		secs tar_up "$hd/$set" /x/dst >>"$w/t.tu"
		[ $last = 1 ] && { [ "$(cont_sum /x/dst)" = "$want" ] || fail "$set: tar up: $(cont_sum /x/dst) != $want"; }
		$E exec "$base" rm -rf /x/dst
		secs sbx_up "$hd/$set" /x/dst >>"$w/t.su"
		[ $last = 1 ] && { [ "$(cont_sum /x/dst)" = "$want" ] || fail "$set: sbx up: $(cont_sum /x/dst) != $want"; }
		$E exec "$base" rm -rf /x/dst
		mkdir "$hd/dst"
		secs tar_down "/x/src/$set" "$hd/dst" >>"$w/t.td"
		[ $last = 1 ] && { [ "$(host_sum "$hd/dst")" = "$want" ] || fail "$set: tar down"; }
		rm -rf "$hd/dst"
		secs sbx_down "/x/src/$set" "$hd/dst" >>"$w/t.sd"
		[ $last = 1 ] && { diff -rq "$hd/$set" "$hd/dst" >/dev/null || fail "$set: sbx down differs"; }
		rm -rf "$hd/dst"
		# The exec way ($E exec, then the direct socket), for the record.
		$E exec "$base" mkdir /x/dst
		secs exec_up "$hd/$set" /x/dst >>"$w/t.xu"
		$E exec "$base" rm -rf /x/dst
		secs exec_down "/x/src/$set" "$hd/dst" >>"$w/t.xd"
		rm -rf "$hd/dst"
	done
	$E exec "$base" rm -rf "/x/src/$set"
	tu=$(medf "$w/t.tu") su=$(medf "$w/t.su") td=$(medf "$w/t.td") sd=$(medf "$w/t.sd")
	name=$([ $set = big ] && echo "(a) 1 GiB in 8 files" || echo "(b) 50,000 x 1 KiB")
	ru=$(awk -v a="$tu" -v b="$su" 'BEGIN{print a / b}')
	rd=$(awk -v a="$td" -v b="$sd" 'BEGIN{print a / b}')
	# The verdicts on the unrounded ratios (1.4993 prints as 1.50).
	printf '  %-22s %8ss %8ss %6.3fx %8ss %8ss %6.3fx  (up %s, down %s)\n' "$name" "$tu" "$su" \
		"$ru" "$td" "$sd" "$rd" "$(verdict "$ru" 1.5 ge)" "$(verdict "$rd" 1.5 ge)"
	xu=$(medf "$w/t.xu") xd=$(medf "$w/t.xd")
	printf '  %-22s %9s %8ss %6.3fx %9s %8ss %6.3fx\n' "  the exec way" "" "$xu" \
		"$(awk -v a="$tu" -v b="$xu" 'BEGIN{print a / b}')" "" "$xd" \
		"$(awk -v a="$td" -v b="$xd" 'BEGIN{print a / b}')"
	rm -rf "$hd/$set"
done
rm -rf "$hd"
"$sbx" sandbox rm "$E:$base" >/dev/null
[ $eng_fail = 0 ] || ns_ok=1
}

if [ "${PODMAN:-1}" = 0 ]; then
	echo "podman part skipped: PODMAN=0"
elif ! command -v podman >/dev/null; then
	echo "podman part skipped: no podman"
else
	engine_bench podman
fi
. "$top/tests/lib/docker.sh"
if [ "${DOCKER:-1}" = 0 ]; then
	echo "docker part skipped: DOCKER=0"
else
	docker_dir=$(mktemp -d /tmp/sbx-bench-dockerd-XXXXXX)
	if docker_up "$docker_dir" >/dev/null 2>&1; then
		engine_bench docker
	else
		echo "docker part skipped: no Docker engine (toolchain/deps.sh installs docker.io)"
	fi
fi
exit $ns_ok
