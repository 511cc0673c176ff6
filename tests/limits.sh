#!/bin/bash
# limits.sh SBX: resources on ns (cgroups, v1 here; a tmpfs writable layer for disk), podman
# and docker (their flags; docker when an engine answers). A sandbox made with --memory-mib
# 64 --pids 64 --cpu 0.5 says so in status; a harness that takes 200 MiB is OOM-killed and its
# receipt says so (oom.kills >= 1, attributed to the harness); a fork bomb stops at the
# process limit (pids.events "max" counts refusals) and the supervisor still ends everything
# (termination witnessed, nothing left); a CPU hog gets about half a CPU (its utime+stime over
# 2 s of wall time, measured). disk_gib: ns holds it (writes past it fail), podman and docker
# on this machine's storage (overlay on ext4/tmpfs, no xfs quota) refuse it (exit 2), never
# ignore it. Shown able to fail: with ns_create's limits not passed to sbx_ns_create, status
# shows none and the OOM case exits 0.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root podman
sbx=$(realpath "$1")
export SBX_PODMAN_DIR=$w/hints SBX_NS_DIR=$w/ns
p=li$$
kinds="ns podman"
docker info >/dev/null 2>&1 && kinds="ns podman docker"
cleanup() {
	local k
	for k in $kinds; do "$sbx" sandbox rm "$k:$p-$k" "$k:$p-$k-d" >/dev/null 2>&1; done
}
on_exit cleanup
for k in $kinds; do
	n=$p-$k
	in_k() { "$sbx" --runner "$k:$n" "$@"; }
	# Made from a folder of its own: nothing may land there (podman's conmon, which stays with
	# the container, creates a file "oom" in the folder it started in at each OOM kill; sbx
	# starts it in $SBX_PODMAN_DIR/conmon). Shown able to fail: with `start` run in the
	# caller's folder, "$k: the OOM left files in the folder" fails on podman.
	mkdir -p "$w/cwd-$k"
	(cd "$w/cwd-$k" && "$sbx" sandbox create --runner "$k" --image busybox --name "$n" --memory-mib 64 --pids 64 --cpu 0.5 >/dev/null) ||
		die "$k: create with limits"
	"$sbx" --json sandbox status "$k:$n" >"$w/st"
	[ "$(jget resources.memory_mib "$w/st")" = 64 ] && [ "$(jget resources.pids "$w/st")" = 64 ] &&
		[ "$(jget resources.cpu "$w/st")" = 0.5 ] || die "$k: status: $(cat "$w/st")"
	ok "$k: made with memory_mib 64, pids 64, cpu 0.5; status reads them back"

	in_k run --run-dir /tmp/oom --timeout 30 -- dd if=/dev/zero of=/dev/null bs=200M count=1 >"$w/rec" 2>&1 || true
	[ "$(jget status "$w/rec")" = 137 ] && [ "$(jget oom.attributed "$w/rec")" = harness ] &&
		[ "$(jget oom.kills "$w/rec")" -ge 1 ] && [ "$(jget termination_witnessed "$w/rec")" = true ] ||
		die "$k: OOM: $(cat "$w/rec")"
	[ -z "$(ls -A "$w/cwd-$k")" ] || die "$k: the OOM left files in the folder sbx was run from: $(ls -A "$w/cwd-$k")"
	ok "$k: a harness taking 200 MiB is OOM-killed: status 137, oom {kills $(jget oom.kills "$w/rec"), source $(jget oom.source "$w/rec"), attributed harness}; nothing left in the folder sbx ran in"

	others() { in_k exec -- ps -o args | grep -v -e '^COMMAND' -e sbx-agent -e '^ps -o args' || true; }
	ev0=$(in_k exec -- sh -c 'sed -n "s/^max //p" /sys/fs/cgroup/pids/pids.events')
	in_k run --run-dir /tmp/bomb --timeout 4 -- sh -c 'b() { b | b & }; b; sleep 30' >"$w/rec" 2>&1 || true
	ev1=$(in_k exec -- sh -c 'sed -n "s/^max //p" /sys/fs/cgroup/pids/pids.events')
	left=$(others)
	[ "$(jget termination_witnessed "$w/rec")" = true ] && [ "$(jget residual "$w/rec")" = "[]" ] ||
		die "$k: fork bomb receipt: $(cat "$w/rec")"
	[ "${ev1:-0}" -gt "${ev0:-0}" ] || die "$k: the bomb never met the process limit (pids.events max $ev0 -> $ev1)"
	[ -z "$left" ] || die "$k: processes left after the bomb: $left"
	ok "$k: a fork bomb stops at the process limit ($((ev1 - ev0)) forks refused); the supervisor ends it all (witnessed, no residue in the receipt nor in ps)"

	in_k exec -- sh -c 'while :; do :; done & p=$!; a=$(cut -d" " -f14,15 /proc/$p/stat); sleep 2; b=$(cut -d" " -f14,15 /proc/$p/stat); kill $p; echo $a $b' >"$w/cpu"
	share=$(python3 -c 'import sys,os; a,b,c,d=map(int,open(sys.argv[1]).read().split()); print(round((c+d-a-b)/os.sysconf("SC_CLK_TCK")/2,2))' "$w/cpu")
	calc "0.3 <= $share <= 0.6" | grep -qx True || die "$k: a CPU hog with cpu 0.5 got $share of a CPU"
	echo "  figure: $k: a CPU hog under cpu 0.5 got $share CPU over 2 s"
	ok "$k: a CPU hog is held to its quota ($share CPU, quota 0.5)"
	"$sbx" sandbox rm "$k:$n" >/dev/null || die "$k: rm"

	rc=0
	"$sbx" sandbox create --runner "$k" --image busybox --name "$n-d" --disk-gib 0.01 >/dev/null 2>"$w/err" || rc=$?
	if [ "$k" = ns ]; then
		[ $rc = 0 ] || die "ns: --disk-gib: $(cat "$w/err")"
		rc=0
		"$sbx" --runner "ns:$n-d" exec -- dd if=/dev/zero of=/big bs=1M count=20 2>/dev/null || rc=$?
		[ $rc != 0 ] || die "ns: a 20 MiB write fit in a 10 MiB layer"
		"$sbx" sandbox rm "ns:$n-d" >/dev/null
		ok "ns: disk_gib 0.01: the writable layer is a 10 MiB tmpfs; a 20 MiB write fails"
	else
		[ $rc = 2 ] && grep -q disk_gib "$w/err" || die "$k: --disk-gib: exit $rc $(cat "$w/err")"
		[ -z "$($k ps -a --filter "name=$n-d" -q)" ] || die "$k: a refused create left a container"
		ok "$k: disk_gib on storage that cannot bound it: refused (exit 2, $(cut -c1-60 "$w/err")...), nothing left"
	fi
done
