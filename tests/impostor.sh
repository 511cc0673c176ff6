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
	"$@" >/dev/null 2>&1 || r=$?
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

# ---- 7: answers match questions --------------------------------------------------------------
# Shown able to fail: before the checks, `stat` printed the entries of stat_wrong_path as the
# answers for the paths asked, and `output` printed read_oversize's extra bytes.
for m in stat_wrong_path stat_extra; do
	out=$(rc F $m stat /a /b)
	[ "$out" = 6 ] || die "$m: stat answered with exit $out, not a protocol error (6)"
done
ok "stat entries that name other paths, or more entries than paths asked: protocol errors"
for m in unasked_response pong_for_request data_on_probe; do
	[ "$(rc F $m kind /x)" = 6 ] || die "$m: not a protocol error"
done
# The second answer may come after the CLI has its first: a retained session sees it.
out=$(printf '%s\n' '{"id":1,"op":"kind","path":"/a"}' '{"id":2,"op":"kind","path":"/b"}' |
	F double_response session 2>/dev/null || true)
echo "$out" | grep -q '"class":"protocol"' || die "double_response: no protocol error in: $out"
ok "a RESPONSE on a stream never opened, two answers to one request, a PONG for a request, DATA on a probe: protocol errors"
mkdir -p "$w/dl"
[ "$(rc F download_stderr download-dir /src "$w/dl/a")" = 6 ] || die "download_stderr: not a protocol error"
[ ! -e "$w/dl/a" ] || die "download_stderr: something landed"
[ "$(rc F data_after_end exec -- true)" = 125 ] || die "data_after_end: exec did not fail as sbx itself (125)"
ok "a download with bytes on channel 2, command output after its END: protocol errors, nothing lands"
for m in read_oversize read_past_size; do
	[ "$(rc F $m output --session /s --from 0)" = 6 ] || die "$m: output did not fail as a protocol error"
done
ok "a log read answered with more bytes than asked, or than the file's size: protocol errors"
