#!/bin/bash
# pause.sh SBX: sbx sandbox pause / resume on ns (cgroup freezer), podman and docker (when a
# docker engine answers: make check starts one). In each sandbox a counter renames a new
# value into /tmp/c as fast as it can; read from outside through /proc/PID/root (no session):
# while paused it does not advance over 1 s, after resume it does, and the files stay. While
# paused a new session fails at once (exit 3, "paused"); status says paused. A supervised
# harness's deadline is wall time: a run with --timeout 2 paused for 3 s ends by its deadline
# right after resume (the supervisor's CLOCK_MONOTONIC timer ran on while frozen).
# Shown able to fail: with the freeze written to a cgroup the processes are not in (the ns
# session's processes outside the sandbox's cgroup, before sbx_ns_argv joined it) the
# counter advanced while paused.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root podman
sbx=$(realpath "$1")
export SBX_PODMAN_DIR=$w/hints SBX_NS_DIR=$w/ns
p=pa$$
kinds="ns podman"
docker info >/dev/null 2>&1 && kinds="ns podman docker"
cleanup() {
	local k
	for k in $kinds; do "$sbx" sandbox rm "$k:$p-$k" >/dev/null 2>&1; done
}
on_exit cleanup
counter='i=0; while :; do i=$((i+1)); echo $i >/tmp/c.new; mv /tmp/c.new /tmp/c; done'
for k in $kinds; do
	n=$p-$k
	"$sbx" sandbox create --runner "$k" --image busybox --name "$n" >/dev/null || die "$k: create"
	"$sbx" --runner "$k:$n" exec -- sh -c "echo kept >/tmp/f; setsid sh -c '$counter' </dev/null >/dev/null 2>&1 &" ||
		die "$k: start the counter"
	pid=$("$sbx" --json sandbox status "$k:$n" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
	[ "$pid" -gt 1 ] || die "$k: no pid"
	[ "$k" = ns ] || pid=$($k inspect --format '{{.State.Pid}}' "$n")
	c() { cat "/proc/$pid/root/tmp/c"; }
	sleep 0.3
	"$sbx" sandbox pause "$k:$n" || die "$k: pause"
	"$sbx" sandbox pause "$k:$n" || die "$k: pause twice"
	a=$(c)
	sleep 1
	b=$(c)
	[ "$a" = "$b" ] && [ "$a" -gt 0 ] || die "$k: the counter ran while paused: $a then $b"
	shown=$k:$n
	[ "$k" = ns ] && shown=$n
	rc=0
	"$sbx" sandbox status "$k:$n" >"$w/st" || rc=$?
	[ $rc = 1 ] && grep -q "^$shown paused " "$w/st" || die "$k: status (exit $rc): $(cat "$w/st")"
	[ "$("$sbx" --json sandbox status "$k:$n" | jget paused)" = true ] || die "$k: JSON paused"
	t0=$(now)
	rc=0
	"$sbx" --runner "$k:$n" hello >/dev/null 2>"$w/err" || rc=$?
	t1=$(now)
	[ $rc = 3 ] && grep -q paused "$w/err" && calc "$t1 - $t0 < 2" | grep -qx True ||
		die "$k: a session while paused: exit $rc, $(cat "$w/err"), $(calc "$t1 - $t0") s"
	"$sbx" sandbox resume "$k:$n" || die "$k: resume"
	"$sbx" sandbox resume "$k:$n" || die "$k: resume twice"
	sleep 0.5
	d=$(c)
	[ "$d" -gt "$b" ] || die "$k: the counter did not run again: $b then $d"
	[ "$("$sbx" --runner "$k:$n" exec -- cat /tmp/f)" = kept ] || die "$k: files after resume"
	ok "$k: paused, the counter stays at $a for 1 s (then $d after resume); a new session while paused: exit 3 at once; files stay; pause and resume twice are no-ops"

	# The deadline is wall time: paused past it, the run ends by it once resumed.
	t0=$(now)
	"$sbx" --runner "$k:$n" run --run-dir /tmp/r1 --timeout 2 -- sleep 30 >"$w/rec" 2>&1 &
	run=$!
	sleep 0.7
	"$sbx" sandbox pause "$k:$n" || die "$k: pause during a run"
	sleep 3
	"$sbx" sandbox resume "$k:$n" || die "$k: resume during a run"
	wait $run || true
	t1=$(now)
	[ "$(jget trigger "$w/rec")" = deadline ] || die "$k: run across a pause: $(cat "$w/rec")"
	calc "3.6 < $t1 - $t0 < 8" | grep -qx True || die "$k: the run took $(calc "$t1 - $t0") s"
	ok "$k: a run with --timeout 2 paused for 3 s ends by its deadline at resume ($(calc "round($t1 - $t0, 1)") s in all): pause does not stop the deadline's clock"
	"$sbx" sandbox rm "$k:$n" || die "$k: rm"
done
[ -z "$(ls "$SBX_NS_DIR")" ] && [ -z "$(ls -d /sys/fs/cgroup/*/sbx/ns-"$p"-* /sys/fs/cgroup/sbx/ns-"$p"-* 2>/dev/null)" ] ||
	die "left: $(ls "$SBX_NS_DIR") $(ls -d /sys/fs/cgroup/*/sbx/ns-"$p"-* 2>/dev/null)"
ok "rm of the paused-and-resumed sandboxes leaves no state folder and no cgroup"
