#!/bin/bash
# engine_retry.sh SBX: `sbx sandbox pause docker:NAME` against a fake `docker` first on PATH
# that answers `pause` as runc does when cgroup v1's freezer catches a task mid-fork ("unable
# to freeze") a set number of times. sbx tries three times in all for that failure only: two
# such failures then success is a pause; three is unavailable with the engine's line; any other
# failure (and unpause) is one call. The fake logs every call, so the count is checked, not
# guessed. No engine, no root needed.
. "$(dirname "$0")/lib/suite.sh"
suite_begin
sbx=$(realpath "$1")
mkdir -p "$w/bin"
cat >"$w/bin/docker" <<'EOF'
#!/bin/sh
# The fake engine: argv logged; `pause` fails $FAKE_FAILS times with $FAKE_MSG.
echo "$*" >>"$FAKE_DIR/calls"
case "$1" in
pause | unpause)
	n=$(cat "$FAKE_DIR/n" 2>/dev/null || echo 0)
	echo $((n + 1)) >"$FAKE_DIR/n"
	if [ "$n" -lt "$FAKE_FAILS" ]; then
		echo "Error response from daemon: $FAKE_MSG" >&2
		exit 1
	fi
	echo "$2"
	;;
inspect)
	# no state to read: sbx reports the pause's own line
	echo "Error: inspect is not faked" >&2
	exit 1
	;;
*)
	echo "fake docker: $*" >&2
	exit 1
	;;
esac
EOF
chmod 0755 "$w/bin/docker"
export FAKE_DIR=$w PATH="$w/bin:$PATH"
freeze='OCI runtime pause failed: unable to freeze: unknown'
# try pause|resume FAILS MSG: runs sbx sandbox pause|resume docker:c1 afresh; its exit status
# in $r, the engine's pause|unpause calls in $calls, its stderr in $w/err.
try() {
	local e=pause
	[ "$1" = pause ] || e=unpause
	rm -f "$w/calls" "$w/n"
	r=0
	FAKE_FAILS=$2 FAKE_MSG=$3 "$sbx" sandbox "$1" docker:c1 >/dev/null 2>"$w/err" || r=$?
	calls=$(grep -c "^$e c1\$" "$w/calls" || true)
}
try pause 2 "$freeze"
[ "$r" = 0 ] && [ "$calls" = 3 ] || die "two freeze failures: exit $r after $calls pause calls: $(cat "$w/err")"
ok "pause: two 'unable to freeze' answers, then a freeze: exit 0 after 3 calls"
try pause 3 "$freeze"
[ "$r" = 3 ] && [ "$calls" = 3 ] && grep -q "unable to freeze" "$w/err" ||
	die "three freeze failures: exit $r after $calls calls: $(cat "$w/err")"
ok "pause: three 'unable to freeze' answers: unavailable (exit 3) with the engine's line, no fourth call"
try pause 1 "permission denied"
[ "$r" = 3 ] && [ "$calls" = 1 ] && grep -q "permission denied" "$w/err" ||
	die "another failure: exit $r after $calls calls: $(cat "$w/err")"
try resume 1 "$freeze"
[ "$r" = 3 ] && [ "$calls" = 1 ] || die "unpause failure: exit $r after $calls calls: $(cat "$w/err")"
try pause 0 "$freeze"
[ "$r" = 0 ] && [ "$calls" = 1 ] || die "a plain pause: exit $r after $calls calls: $(cat "$w/err")"
ok "pause: any other failure, and resume's unpause, is one call (exit 3, the engine's line); a plain pause is one call"
echo "engine_retry: $pass passed"
