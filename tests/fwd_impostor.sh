#!/bin/bash
# fwd_impostor.sh SBX: `sbx forward` against an impersonated agent (tests/fake/modes_fwd.py):
# the host's side of TCP forwarding checked frame by frame, and one check per rule an agent
# could break (docs/forwarding.md, section 7). A TCP server on the host plays the target. Runs
# in a private mount namespace on a tmpfs.
. "$(dirname "$0")/lib/suite.sh"
suite_begin root tmpfs=64m
sbx=$(realpath "$1")

# A target on the host: every connection's bytes (until its END) appended to $w/target.log,
# then "pong" and a clean close. Its port in $tport.
python3 - "$w" <<'PY' &
import socket, sys, threading
w = sys.argv[1]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
open(w + "/tport", "w").write(str(s.getsockname()[1]))
def serve(c):
    got = b""
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            got += b
    except ConnectionResetError:
        got += b"<reset>"
        c.close()
        return
    with open(w + "/target.log", "ab") as f:
        f.write(got + b"|")
    c.sendall(b"pong\n")
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
target_pid=$!
on_exit "kill $target_pid 2>/dev/null"
for _ in $(seq 100); do [ -s "$w/tport" ] && break; sleep 0.05; done
tport=$(cat "$w/tport")

# fwd MODES ARGS...: `sbx forward` through the fake agent in the background, stdout and stderr
# to $w/out and $w/err; its pid in $fpid.
fwd() {
	local modes=$1
	shift
	# Emptied here: the job's own redirection runs in the forked child, and until then a
	# waitfor would read the last case's lines.
	: >"$w/out"
	: >"$w/err"
	"$sbx" --via "$fake_agent $modes" forward --verbose "$@" >"$w/out" 2>"$w/err" &
	fpid=$!
}
# waitfor COND SECONDS: until the shell condition holds (fails after SECONDS).
waitfor() {
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		eval "$1" && return 0
		sleep 0.05
	done
	return 1
}
# ends STATUS: the forward exits by itself within 10 s with STATUS.
ends() {
	local st=0
	waitfor "! kill -0 $fpid 2>/dev/null" 10 || { kill -9 $fpid; die "sbx forward did not end: $(cat "$w/err")"; }
	wait $fpid || st=$?
	[ "$st" = "$1" ] || die "sbx forward exited $st, not $1: $(cat "$w/err")"
}
# stops: SIGINT ends it with status 0.
stops() {
	kill -INT $fpid
	ends 0
}

# ---- the host's side, frame by frame ----
fwd fwd_echo="$w/back" --out 18080:127.0.0.1:$tport --ready-file "$w/ready"
waitfor "[ -s '$w/back' ]" 10 || die "no reply reached the agent: $(cat "$w/err")"
[ "$(cat "$w/back")" = pong ] || die "the agent got $(cat "$w/back"), not pong"
[ "$(cat "$w/target.log")" = "ping
|" ] || die "the target got: $(cat "$w/target.log")"
grep -qx ready "$w/out" || die "no ready line: $(cat "$w/out")"
grep -qx "out 18080 -> 127.0.0.1:$tport" "$w/out" || die "no forward line: $(cat "$w/out")"
waitfor "grep -q 'closed: 5 bytes to the sandbox, 5 from it' '$w/err'" 5 || die "no close line: $(cat "$w/err")"
stops
ok "an agent's connection reaches the target: its bytes and END travel, the reply and END come back, one line each way"
: >"$w/target.log"

# ---- an agent that breaks the rules ----
fwd fwd_none --out 18080:127.0.0.1:$tport
ends 2
grep -q "cannot forward" "$w/err" || die "no reason for an old agent: $(cat "$w/err")"
ok "an agent without FWD in its HELLO: refused with usage (2), 'cannot forward'"
for m in fwd_open_unasked fwd_open_port fwd_open_hostid; do
	fwd $m --out 18080:127.0.0.1:$tport
	ends 6
done
sleep 0.3 # a connect the host made would have reached the target's log by now
# Shown able to fail: with the port check removed, fwd_open_port's OPEN made the host connect.
[ ! -s "$w/target.log" ] || die "a hostile OPEN made the host connect: $(cat "$w/target.log")"
ok "OPEN for a listener never asked for, on a port never asked for, on a host id: protocol errors (6), and the host connected nowhere"
for m in fwd_open_twice fwd_bad_channel fwd_data_unknown; do
	fwd $m --out 18080:127.0.0.1:$tport
	ends 6
done
# The overrun's target is a port nobody listens on: the host writes none of the DATA out, so
# it gives no credit back and 320 KiB pass the 256 KiB window however the frames are read (to
# a target that reads, a grant sent between two reads would make the window enough: a SAN=1
# run was that slow).
dead=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fwd fwd_overrun --out 18080:127.0.0.1:$dead
ends 6
ok "OPEN twice on one id; DATA past the window, on channel 2, on an id never opened: protocol errors (6)"

fwd fwd_evil_reset --out 18080:127.0.0.1:$tport
waitfor "grep -q 'reset in the sandbox' '$w/err'" 10 || die "no reset line: $(cat "$w/err")"
kill -0 $fpid || die "a RESET ended the forward"
! grep -q $'\x1b' "$w/err" || die "an escape reached the terminal: $(od -c "$w/err" | head)"
! grep -q '^sbx: forged line' "$w/err" || die "a forged line: $(cat "$w/err")"
grep -q 'reset in the sandbox: ' "$w/err" || die "no reason shown"
stops
ok "a RESET's reason full of escapes: shown escaped on one line, the forward goes on"

fwd fwd_flood=6 --out 18080:127.0.0.1:$tport --max-conn 2
waitfor "[ \$(grep -c refusing '$w/err') = 4 ]" 10 || die "not 4 refusals: $(cat "$w/err")"
waitfor "[ \$(grep -o hello '$w/target.log' 2>/dev/null | wc -l) = 2 ] || [ \$(grep -c 'opened' '$w/err') = 2 ]" 10 ||
	die "the 2 allowed connections did not open: $(cat "$w/err")"
kill -0 $fpid || die "the flood ended the forward: $(cat "$w/err")"
[ "$(grep -c opened "$w/err")" = 2 ] || die "more than max-conn connections: $(cat "$w/err")"
stops
ok "6 OPENs past --max-conn 2: 4 refused with a reset, their DATA in flight dropped (no protocol error), 2 served"

# ---- the JSON-lines op ----
: >"$w/target.log"
rm -f "$w/back"
python3 - "$sbx" "$fake_agent fwd_echo=$w/back" "$tport" "$w/back" <<'PY' || die "the JSON-lines forward failed"
import base64, json, os, subprocess, sys, time
sbx, via, tport, back = sys.argv[1:5]
p = subprocess.Popen([sbx, "--via", via, "session"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, text=True)
def send(o):
    p.stdin.write(json.dumps(o) + "\n")
    p.stdin.flush()
send({"id": "f", "op": "forward", "out": ["18080:127.0.0.1:" + tport], "stream": True,
      "verbose": True})
events = []
while True:
    line = p.stdout.readline()
    assert line, "the session ended early"
    m = json.loads(line)
    assert m.get("id") == "f", m
    events.append(m.get("event"))
    if m.get("event") == "log" and b"closed" in base64.b64decode(m["data_b64"]):
        break
assert events[0] == "ready", events
for _ in range(100):
    if os.path.exists(back) and open(back).read() == "pong\n":
        break
    time.sleep(0.05)
else:
    sys.exit("no pong reached the agent")
send({"id": "k", "op": "kind", "path": "/"})
send({"op": "cancel", "id": "f"})
got = []
while len(got) < 3:
    m = json.loads(p.stdout.readline())
    if "event" not in m:
        got.append(m)
kind = [m for m in got if m["id"] == "k"]
ack = [m for m in got if m.get("op") == "cancel"]
end = [m for m in got if m["id"] == "f" and m.get("op") != "cancel"]
assert kind and kind[0]["ok"] is True and kind[0]["kind"] == "dir", got
assert ack and ack[0]["ok"] is True, got
assert end and end[0]["ok"] is False and end[0]["error"]["errno"] == 125, got
p.stdin.close()
assert p.wait(10) == 0
PY
ok "sbx session: a forward op streams 'ready' and one 'log' event per connection event, runs beside a probe, ends on cancel (ECANCELED)"
