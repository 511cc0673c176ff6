#!/bin/bash
# impostor.sh SBX: the real host driven through an impersonated agent (tests/fake/agent.py),
# one check per class of hostile behaviour the host must survive: answers that do not match
# their questions, reads that would never end, a slow start, and an agent that cannot prove it
# holds the sandbox's secret. Runs in a private mount namespace on a tmpfs (nothing it writes
# reaches the machine's folders). Each check says how it was shown able to fail.
set -euo pipefail
sbx=$(realpath "$1")
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "${SBX_IN_NS:-}" != 1 ]; then
	exec unshare -m env SBX_IN_NS=1 bash "$0" "$@"
fi
mount --make-rprivate /
w=$(mktemp -d /tmp/sbx-impostor-XXXXXX)
mount -t tmpfs -o size=1g tmpfs "$w"
trap 'cd /; umount -l "$w"; rmdir "$w"' EXIT
. "$top/tests/lib/check.sh"
export SBX_KEY_DIR="$w/keys"
fake="python3 $top/tests/fake/agent.py"
# F MODES SBX-ARGS...: sbx through the fake agent in MODES (comma-separated).
F() {
	local m=$1
	shift
	"$sbx" --via "$fake $m" "$@"
}
# rc COMMAND...: its exit status, without tripping set -e.
rc() {
	local r=0
	"$@" || r=$?
	echo $r
}

# ---- 9: a slow agent is not killed by the keepalive ------------------------------------------
# Shown able to fail: before the fix the host sent a keepalive PING before WELCOME once half the
# timeout had passed, and the agent refused it ("the host sent a frame before WELCOME").
[ "$(F slow_hello=1.5 --timeout 2 kind /)" = dir ] ||
	die "an agent that sends HELLO after 1.5 s of a 2 s timeout is refused"
A=$top/build/agent/x86_64/sbx-agent
[ "$("$sbx" --timeout 2 --via "sh -c 'sleep 1.5; exec $A serve'" kind /)" = dir ] ||
	die "the real agent started 1.5 s late (2 s timeout) is refused"
ok "a slow HELLO (1.5 s of a 2 s timeout) is waited for: no keepalive before WELCOME"
[ "$(rc F slow_hello=3 --timeout 1 kind /)" = 3 ] || die "a HELLO past the deadline is not unavailable"
ok "a HELLO past the session timeout is 'unavailable' (exit 3)"
