# shellcheck shell=bash
# Sourced by ns_suites.sh and podman_suites.sh (after suite.sh). check_escapes RUN SANDBOX LABEL
# REC runs four harnesses that leave processes behind (setsid, a double fork, TERM ignored,
# SIGSTOP) under the supervisor through `RUN SANDBOX run ...` (RUN: the caller's sbx wrapper),
# writing each receipt to REC, and dies unless every receipt verifies, names the expected
# trigger, says termination was witnessed, and nothing of the run is left in the sandbox: no
# process but init, the agent and the check itself (and its own children). Under binfmt_misc a
# process's cmdline starts with the interpreter, so the agent matches anywhere; a session's
# serve forked by an ns sandbox's init (the resident agent) carries init's command line.
escape_cases=(
	"setsid sh -c 'sleep 1000' </dev/null >/dev/null 2>&1 & exit 0"
	"( sh -c 'sleep 1000' & ) ; exit 3"
	"trap '' TERM; setsid sh -c 'trap \"\" TERM; while :; do sleep 1; done' & sleep 1000"
	"sh -c 'kill -STOP \$\$' & sleep 0.2; exit 0"
)
escape_want=(exit exit deadline exit)
escape_survivors='for p in /proc/[0-9]*; do i=${p#/proc/}; [ "$i" = 1 ] || [ "$i" = $$ ] && continue
	pp=$(sed "s/.*) . //" $p/stat 2>/dev/null | cut -d" " -f1); [ "$pp" = $$ ] && continue
	c=$(tr "\0" " " <$p/cmdline 2>/dev/null)
	case "$c" in */.sbx/*|*/.sbx-agent-*|*/.sbx-init*|"sbx-agent init "*|"") continue;; esac
	echo "$i $c"; done'

check_escapes() {
	local run=$1 sb=$2 label=$3 rec=$4 i left
	for i in "${!escape_cases[@]}"; do
		"$run" "$sb" run --run-dir "/tmp/s$i" --timeout 1 --grace 0.2 -- /bin/sh -c "${escape_cases[$i]}" >"$rec" || true
		[ "$(jget termination_witnessed "$rec")" = true ] || die "$label case $i: $(cat "$rec")"
		[ "$(jget trigger "$rec")" = "${escape_want[$i]}" ] || die "$label case $i trigger: $(cat "$rec")"
		"$run" "$sb" receipt --run-dir "/tmp/s$i" >/dev/null || die "$label case $i: the receipt does not verify"
		left=$("$run" "$sb" sh "$escape_survivors")
		[ -z "$left" ] || die "$label case $i: left behind: $left"
	done
}
