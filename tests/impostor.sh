#!/bin/bash
# impostor.sh SBX: the real host driven through an impersonated agent (tests/fake/agent.py),
# one check per class of hostile behaviour the host must survive: answers that do not match
# their questions, reads that would never end, a slow start, and an agent that cannot prove it
# holds the sandbox's secret. Runs in a private mount namespace on a tmpfs (nothing it writes
# reaches the machine's folders). Each check says how it was shown able to fail.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root tmpfs=1g
sbx=$(realpath "$1")
export SBX_KEY_DIR="$w/keys"
agent=$top/build/agent/x86_64/sbx-agent

# ---- 9: a slow agent is not killed by the keepalive ------------------------------------------
# Shown able to fail: before the fix the host sent a keepalive PING before WELCOME once half the
# timeout had passed, and the agent refused it ("the host sent a frame before WELCOME").
# HELLO past half the timeout, with 1.5 s to spare (a 0.5 s margin failed under a load of 13).
[ "$(via_fake slow_hello=3.5 --timeout 5 kind /)" = dir ] ||
	die "an agent that sends HELLO after 3.5 s of a 5 s timeout is refused"
[ "$("$sbx" --timeout 2 --via "sh -c 'sleep 1.5; exec $agent serve'" kind /)" = dir ] ||
	die "the real agent started 1.5 s late (2 s timeout) is refused"
ok "a slow HELLO (3.5 s of a 5 s timeout) is waited for: no keepalive before WELCOME"
[ "$(rc via_fake slow_hello=3 --timeout 1 kind /)" = 3 ] || die "a HELLO past the deadline is not unavailable"
ok "a HELLO past the session timeout is 'unavailable' (exit 3)"

# ---- 7: answers match questions --------------------------------------------------------------
# Shown able to fail: before the checks, `stat` printed the entries of stat_wrong_path as the
# answers for the paths asked, and `output` printed read_oversize's extra bytes.
for m in stat_wrong_path stat_extra; do
	out=$(rc via_fake $m stat /a /b)
	[ "$out" = 6 ] || die "$m: stat answered with exit $out, not a protocol error (6)"
done
ok "stat entries that name other paths, or more entries than paths asked: protocol errors"
for m in unasked_response pong_for_request data_on_probe; do
	[ "$(rc via_fake $m kind /x)" = 6 ] || die "$m: not a protocol error"
done
# The second answer may come after the CLI has its first: a retained session sees it.
out=$(printf '%s\n' '{"id":1,"op":"kind","path":"/a"}' '{"id":2,"op":"kind","path":"/b"}' |
	via_fake double_response session 2>/dev/null || true)
echo "$out" | grep -q '"class":"protocol"' || die "double_response: no protocol error in: $out"
ok "a RESPONSE on a stream never opened, two answers to one request, a PONG for a request, DATA on a probe: protocol errors"
mkdir -p "$w/dl"
[ "$(rc via_fake download_stderr download-dir /src "$w/dl/a")" = 6 ] || die "download_stderr: not a protocol error"
[ ! -e "$w/dl/a" ] || die "download_stderr: something landed"
[ "$(rc via_fake data_after_end exec -- true)" = 125 ] || die "data_after_end: exec did not fail as sbx itself (125)"
ok "a download with bytes on channel 2, command output after its END: protocol errors, nothing lands"
mkdir -p "$w/up"
echo x >"$w/up/f"
[ "$(rc via_fake upload_early_ok upload-dir "$w/up" /t)" = 6 ] || die "upload_early_ok: not a protocol error"
ok "an upload reported done before its commit was sent: a protocol error"
for m in read_oversize read_past_size; do
	[ "$(rc via_fake $m output --run-dir /s --from 0)" = 6 ] || die "$m: output did not fail as a protocol error"
done
ok "a log read answered with more bytes than asked, or than the file's size: protocol errors"

# ---- 8: the run key never goes to an impostor ------------------------------------------------
# secret_for LINE FROM: the sandbox secret of identity "via:LINE" (the host's key store) set to
# FROM's (another identity's) or, with FROM empty, to 32 fresh bytes: the host then expects the
# program behind LINE to prove it holds that secret.
secret_for() {
	python3 - "$SBX_KEY_DIR" "$1" "$2" <<'PY'
import hashlib, os, sys
d, line, src = sys.argv[1:4]
def path(ident):
    return os.path.join(d, "sandbox-%s.secret" % hashlib.sha256(ident.encode()).hexdigest()[:32])
os.makedirs(d, mode=0o700, exist_ok=True)
data = open(path(src), "rb").read() if src else os.urandom(32)
with open(path("via:" + line), "wb") as f:
    f.write(data)
PY
}
# Shown able to fail: before trust, SUP_RUN carried the run's HMAC key (tag 73) in clear to
# whatever answered; log_requests then showed "73" in the run request.
log=$w/requests.log
line="$fake_agent log_requests=$log"
secret_for "$line" ""
r=$(rc "$sbx" --via "$line" run --run-dir /s --timeout 5 -- true)
[ "$r" = 125 ] || die "an impostor that cannot prove the sandbox's secret launched a run (exit $r)"
out=$("$sbx" --via "$line" run --run-dir /s -- true 2>&1 || true)
echo "$out" | grep -q "authentication failed" ||
	die "the refusal does not say the agent's authentication failed: $out"
grep -q '^24:' "$log" || die "no AUTH challenge was sent"
! grep -qE ' (73|111)( |$)' "$log" || die "a key or the secret went to the impostor: $(cat "$log")"
! grep -q '^10:' "$log" || die "a run request went to an unauthenticated agent"
ok "an impostor (known sandbox) gets an AUTH challenge, fails it, and gets no key, no secret and no run request"
rm -f "$log"
secret_for "$fake_agent auth_guess,log_requests=$log" ""
[ "$(rc "$sbx" --via "$fake_agent auth_guess,log_requests=$log" run --run-dir /s -- true)" = 125 ] ||
	die "an AUTH answered with a made-up MAC was accepted"
! grep -qE ' (73|111)( |$)' "$log" || die "a key or the secret went to the guessing impostor"
ok "an AUTH answered with a made-up MAC is refused, before any run request"

# Trust on first use: with no secret kept for the sandbox, the first run hands a new one to
# the keeper (SETUP); one refused is not kept, so it cannot be mistaken later for a sandbox's.
log=$w/tofu.log
line="$fake_agent log_requests=$log"
[ "$(rc "$sbx" --via "$line" run --run-dir /s -- true)" = 125 ] || die "a refused SETUP let a run through"
grep -q '^25:.* 111' "$log" || die "no SETUP at the first run of an unknown sandbox"
! grep -q '^10:' "$log" || die "a run request followed a refused SETUP"
kept=$(python3 -c 'import hashlib,sys; print("sandbox-%s.secret" % hashlib.sha256(("via:"+sys.argv[1]).encode()).hexdigest()[:32])' "$line")
[ ! -e "$SBX_KEY_DIR/$kept" ] || die "the secret of a refused SETUP was kept"
ok "first contact: the secret goes in a SETUP, and is kept only once the keeper took it"

# Receipts: a real run on an ns sandbox, then an impostor serves a forged receipt for it.
if [ -d "$top/build/images/busybox-x86_64" ]; then
	export SBX_NS_DIR=$w/ns
	nsname=imp$$
	"$sbx" sandbox create --image "$top/build/images/busybox-x86_64" --name $nsname >/dev/null ||
		die "ns create"
	on_exit '"$sbx" sandbox rm $nsname >/dev/null 2>&1'
	out=$("$sbx" --runner ns:$nsname run --run-dir /tmp/s1 --timeout 10 -- true) ||
		die "a run on a fresh ns sandbox failed: $out"
	kf=$w/run.key
	"$sbx" --runner ns:$nsname run --run-dir /tmp/s2 --key-file "$kf" --timeout 10 -- true >/dev/null ||
		die "a run with --key-file failed"
	"$sbx" --runner ns:$nsname receipt --run-dir /tmp/s2 --key-file "$kf" >/dev/null ||
		die "the real receipt does not verify"
	r=$(rc "$sbx" --via "$fake_agent forged_receipt" receipt --run-dir /s --key-file "$kf")
	[ "$r" = 1 ] || die "a receipt forged by an impostor was accepted (exit $r)"
	out=$("$sbx" --via "$fake_agent forged_receipt" receipt --run-dir /s --key-file "$kf" 2>&1 || true)
	echo "$out" | grep -q "does NOT verify" || die "the forged receipt is not reported unverified: $out"
	ok "a receipt an impostor signed with any key it could know does not verify (exit 1, said so)"

	# A relay that passes the AUTH through to the real agent but changes the harness on its
	# way: the keeper refuses the request (its MAC) and nothing runs. The real agent joins the
	# sandbox's user namespace too (--user): its keeper's folder belongs to root in there.
	pid=$("$sbx" --json sandbox status $nsname | jget pid)
	real="nsenter --target $pid --user --mount --uts --ipc --net --pid --root --wd /.sbx/sbx-agent serve"
	export FAKE_LOG=$w/mitm.log
	for action in argv pass; do
		mline="$fake_agent 'mitm=$action:$real'"
		secret_for "$mline" "ns:$nsname"
		out=$("$sbx" --via "$mline" run --run-dir /tmp/m-$action --timeout 10 -- sh -c 'echo real' 2>&1) && r=0 || r=$?
		if [ $action = argv ]; then
			[ "$r" = 125 ] || die "a run request changed on its way was launched (exit $r): $out"
			echo "$out" | grep -q "MAC does not verify" || die "the refusal does not name the MAC: $out"
			[ "$("$sbx" --runner ns:$nsname kind /tmp/sbx-mitm-ran)" = absent ] ||
				die "the relay's harness ran"
		else
			[ "$r" = 0 ] || die "an honest relay's run failed (exit $r): $out"
			echo "$out" | grep -q '"termination_witnessed":true' || die "no receipt through the relay: $out"
		fi
	done
	grep -q '^10:.* 112 113$' "$FAKE_LOG" || die "the run requests did not end with NONCE and MAC"
	! grep -qE ' (73|111)( |$)' "$FAKE_LOG" || die "a key or the secret crossed the relay"
	unset FAKE_LOG
	ok "a relay between host and agent: it cannot change a run (MAC refused, nothing ran), an honest one works, and no key or secret crosses it"
	"$sbx" sandbox rm $nsname >/dev/null
fi
