#!/bin/bash
# forward.sh SBX CUTTER: `sbx forward` with real clients and servers (docs/forwarding.md, issue
# 21), on ns sandboxes of the BusyBox image (their only interface is lo) and on qemu:aarch64,
# as root. One "  ok:" per check:
#  0. first, the host's side alone (host/fwd.c) with the same clients against an impersonated
#     agent (tests/fake/modes_fwdin.py, fwdload.py's server played on OPEN streams):
#     1,000 concurrent connections x 100 echoes, 64 MiB and the count after the half-close, a
#     RESET from the agent reaching the client as ECONNRESET, --max-conn 2, the channel cut
#     while the agent streams (the reading client sees a reset, the port refuses);
#  a. BusyBox wget inside reaches Python's http.server on the host through --out: 100 MiB, the
#     same SHA-256; the harness inside waits for the ready file and connects at once (a
#     listener not yet up when the file appears is a refused wget); SIGINT ends it (exit 0),
#     the inside listener is gone and the ready file stays;
#  b. BusyBox httpd inside reached from the host through --in 0:127.0.0.1:80: curl, then 1,000
#     concurrent connections (all open before the first request) with 0 errors;
#  c. half-close both ways with BusyBox nc inside: the request's end travels (the far side
#     answers only after it) and the reply still comes back;
#  d. a refused port: --in to an inside port nobody listens on gives the host client a reset
#     (ECONNRESET, not EOF, not a hang: 10 s timeout), the reason in the --verbose log; --out to
#     a host port nobody listens on gives wget inside a reset (weaker: wget has sent its
#     request, so even a plain close of the unread socket would be a reset);
#  e. the channel cut (tests/harness/cutter, eof after 16 MiB agent -> host) while a --in and a
#     --out connection stream: the host's client and target and the sandbox's servers (cat
#     writing, cat reading) and client (wget) all see a reset, sbx forward exits non-zero, its --in port refuses; then the
#     channel's process SIGKILLed (cutter kill): the host's client and target see a reset;
#  f. --max-conn 2: a third concurrent connection is reset, the two held ones finish, a new one
#     after them is served; the refusal is logged;
#  g. qemu:aarch64 (the aarch64 agent under QEMU): --out and --in round trips, SHA-256 equal.
# The TCP clients are tests/bench/fwdload.py (standard-library Python). Every server, forward
# and sandbox is removed at exit, failed or not. Shown able to fail, before the agent side
# existed, against a stand-in `sbx forward` (a Python relay setns'd into the sandbox's netns):
# a, b, c, d, f and the last check passed with it; made to close with a FIN instead of a
# reset, d's --in check and f failed (the client saw "eof"); made to create the ready file
# 0.5 s before its listeners, a failed (the harness's wget was refused, the SHA-256 differed).
. "$(dirname "$0")/lib/suite.sh"
suite_begin root
sbx=$(realpath "$1")
cutter=$(realpath "${2:-$top/build/harness/cutter}")
load=$top/tests/bench/fwdload.py
img=$top/build/images/busybox-x86_64
[ -x "$img/bin/busybox" ] || die "no image $img (make images)"
[ -x "$cutter" ] || die "no cutter $cutter (make $top/build/harness/cutter)"
export SBX_NS_DIR=$w/state
on_exit remove_sandboxes
bg=() # host pids killed at exit
on_exit 'for p in "${bg[@]}"; do kill -TERM "$p" 2>/dev/null; done; sleep 0.2; for p in "${bg[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null'

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
init_pid() { sed -n 's/^pid=//p' "$SBX_NS_DIR/$1/state"; }
waitport() { # PORT: until something accepts on 127.0.0.1:PORT (10 s)
	local i
	for i in $(seq 100); do
		python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1",int(sys.argv[1])),1).close()' "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	die "nothing listens on 127.0.0.1:$1"
}
waitfile() { # FILE: until it exists (20 s)
	local i
	for i in $(seq 200); do
		[ -s "$1" ] && return 0
		sleep 0.1
	done
	die "no $1"
}
# fwd OUT SBX-ARGS...: runs sbx SBX-ARGS (a forward) in the background, its stdout in OUT.out
# and stderr in OUT.err; returns once it printed "ready" (20 s); its pid in $fp.
fwd() {
	local o=$1 i r
	shift
	# Emptied here: the job's own redirection runs in the forked child, and until then a
	# reused OUT would show the last forward's "ready".
	: >"$o.out"
	: >"$o.err"
	"$sbx" "$@" >"$o.out" 2>"$o.err" &
	fp=$!
	bg+=("$fp")
	for i in $(seq 200); do
		grep -qx ready "$o.out" && return 0
		if ! kill -0 "$fp" 2>/dev/null; then
			r=0
			wait "$fp" || r=$?
			die "sbx $*: exit $r before ready: $(cat "$o.err")"
			return 1
		fi
		sleep 0.1
	done
	die "sbx $*: no ready in 20 s: $(cat "$o.err")"
}
# stop PID: SIGINT, then its exit status in $r (10 s, or "hung"). Not in $(...): only this
# shell can wait for it.
stop() {
	local i
	r=0
	kill -INT "$1" 2>/dev/null || true
	for i in $(seq 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$1" 2>/dev/null; then
		kill -9 "$1"
		r=hung
		return
	fi
	wait "$1" || r=$?
}
inport() { sed -n "s/^in 127\.0\.0\.1:\([0-9]*\) -> $2\$/\1/p" "$1.out"; } # OUT ADDR:PORT
listening() { in_ns "$1" exec -- netstat -ltn | grep -c " 127\.0\.0\.1:$2 " || true; }

# ---- 0. the host's side alone: real clients against an impersonated agent ----
# tests/fake/modes_fwdin.py serves every inward connection as fwdload.py's server would (and
# refuses port 81 with a RESET): 1,000 concurrent connections x 100 echoes, a sink's count
# after the half-close, the refused port, --max-conn, all through the real host/fwd.c.
fwd "$w/h" --via "python3 $top/tests/fake/agent.py fwd_in_echo" forward --verbose --max-conn 1000 \
	--in 0:127.0.0.1:7000 --in 0:127.0.0.1:81
lport=$(inport "$w/h" 127.0.0.1:7000)
rport=$(inport "$w/h" 127.0.0.1:81)
o=$(timeout 200 python3 "$load" load --port "$lport" --conns 1000 --reqs 100 --size 1024 --timeout 180) ||
	die "impersonated agent: 1,000 x 100: $o"
ok "0: the host's side, an impersonated agent echoing: 1,000 concurrent connections x 100 echoes of 1 KiB: $o"
o=$(timeout 60 python3 "$load" tput --port "$lport" --bytes $((64 << 20))) || die "impersonated agent: tput: $o"
[ "$(python3 "$load" reset --port "$rport" --timeout 10)" = reset ] || die "impersonated agent: port 81 not reset"
ok "0: 64 MiB up and the count back after the half-close ($o); the agent's RESET for port 81 reaches the client as ECONNRESET"
stop "$fp"
[ "$r" = 0 ] || die "sbx forward (impersonated agent) after SIGINT: exit $r"
fwd "$w/h2" --via "python3 $top/tests/fake/agent.py fwd_in_echo" forward --verbose --max-conn 2 --in 0:127.0.0.1:7000
lport=$(inport "$w/h2" 127.0.0.1:7000)
o=$(timeout 30 python3 - "$lport" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port), 5) for _ in range(2)]
for s in held:
    s.sendall(b"E")
time.sleep(0.5)
try:
    # The reset may come before connect() returns (a busy host): a reset all the same.
    extra = socket.create_connection(("127.0.0.1", port), 5)
    extra.settimeout(5)
    third = "data" if extra.recv(10) else "eof"
except ConnectionResetError:
    third = "reset"
except socket.timeout:
    third = "timeout"
for s in held:
    s.settimeout(5)
    s.sendall(b"hello")
    assert s.recv(10) == b"hello", "a held connection's echo"
print(third)
PY
) || die "impersonated agent: max-conn: $o"
[ "$o" = reset ] || die "impersonated agent: --max-conn 2: the third connection saw $o"
sleep 0.3
grep -q refusing "$w/h2.err" || die "impersonated agent: no refusal logged: $(cat "$w/h2.err")"
stop "$fp"
[ "$r" = 0 ] || die "sbx forward (impersonated agent) after SIGINT: exit $r"
ok "0: --max-conn 2 on the host's listener: the third connection is reset, the two held ones still echo; $(grep -m1 refusing "$w/h2.err")"

# The channel cut (the cutter, eof after 16 MiB agent -> host) while the agent streams zeros
# to a client that only reads: the client sees a reset (a plain close would be a clean EOF
# here: it has nothing unread), sbx forward exits non-zero, its port refuses.
fwd "$w/h3" --via "$cutter eof -1 $((16 << 20)) -- python3 $top/tests/fake/agent.py fwd_in_echo" forward --in 0:127.0.0.1:7000
lport=$(inport "$w/h3" 127.0.0.1:7000)
o=$(timeout 30 python3 - "$lport" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.sendall(b"Z")
s.settimeout(10)
got = 0
try:
    while True:
        d = s.recv(1 << 20)
        if not d:
            print("eof", got)
            break
        got += len(d)
except ConnectionResetError:
    print("reset", got)
except socket.timeout:
    print("timeout", got)
PY
)
for _ in $(seq 100); do
	kill -0 "$fp" 2>/dev/null || break
	sleep 0.1
done
r=0
kill -0 "$fp" 2>/dev/null && r=hung
[ $r = hung ] || wait "$fp" || r=$?
[[ $o == reset* ]] || die "impersonated agent, channel cut: the client saw $o"
[ "$r" != 0 ] && [ "$r" != hung ] || die "impersonated agent, channel cut: sbx forward exit $r"
[ "$(python3 "$load" reset --port "$lport" --timeout 5)" = refused ] || die "impersonated agent, channel cut: the port still takes connections"
ok "0: the channel cut mid-stream (cutter eof): the reading client sees ECONNRESET after ${o#reset } bytes, sbx forward exits $r, its port refuses"

"$sbx" sandbox create --image "$img" --name F >/dev/null
fpid=$(init_pid F)

# ---- a. wget inside -> --out -> http.server on the host, 100 MiB ----
mkdir -p "$w/www"
head -c $((100 << 20)) /dev/urandom >"$w/www/f"
fsha=$(sha256sum "$w/www/f" | cut -d' ' -f1)
hport=$(freeport)
python3 -m http.server --bind 127.0.0.1 --directory "$w/www" "$hport" >"$w/http.log" 2>&1 &
bg+=($!)
waitport "$hport"
# The harness, started first: it polls for the ready file (every 2 ms) and connects at once.
in_ns F exec -- rm -f /tmp/ready
timeout 120 "$sbx" --runner ns:F sh 'while [ ! -e /tmp/ready ]; do usleep 2000; done
	wget -q -O - http://127.0.0.1:8080/f | sha256sum' >"$w/a.sha" 2>"$w/a.harness" &
hp=$!
bg+=("$hp")
sleep 0.3 # the harness is polling
fwd "$w/a" --runner ns:F forward --out "8080:127.0.0.1:$hport" --ready-file /tmp/ready
ready_seen=$(stat -c '%a %s' "$SBX_NS_DIR/F/upper/tmp/ready" 2>/dev/null || echo absent)
[ "$ready_seen" = "644 0" ] || die "the ready file when ready was printed: $ready_seen"
[ "$(cat "$w/a.out")" = "out 8080 -> 127.0.0.1:$hport
ready" ] || die "forward's stdout: $(cat "$w/a.out")"
r=0
wait "$hp" || r=$?
[ $r = 0 ] || die "the harness inside: exit $r: $(cat "$w/a.harness")"
[ "$(cut -d' ' -f1 "$w/a.sha")" = "$fsha" ] || die "SHA-256 inside $(cat "$w/a.sha"), host $fsha"
ok "a: wget inside (only lo) -> --out 8080 -> http.server on the host: 100 MiB, SHA-256 equal; the harness waited for the ready file (0644, empty, there when 'ready' was printed) and connected at once"
[ "$(listening F 8080)" = 1 ] || die "no listener on 8080 inside while forwarding"
stop "$fp"
[ "$r" = 0 ] || die "sbx forward after SIGINT: exit $r: $(cat "$w/a.err")"
[ "$(listening F 8080)" = 0 ] || die "the listener on 8080 stays after SIGINT"
[ -e "$SBX_NS_DIR/F/upper/tmp/ready" ] || die "the ready file went with the forward"
ok "a: SIGINT ends sbx forward with exit 0, the inside listener 127.0.0.1:8080 is closed, the ready file stays"

# ---- b. curl and 1,000 concurrent clients -> --in -> BusyBox httpd inside ----
head -c 65536 /dev/urandom >"$w/r"
rsha=$(sha256sum "$w/r" | cut -d' ' -f1)
"$sbx" --runner ns:F exec -i -- sh -c 'mkdir -p /www && cat >/www/r && echo hi >/www/index.html' <"$w/r"
in_ns F exec -- busybox httpd -p 127.0.0.1:80 -h /www # daemonizes
fwd "$w/b" --runner ns:F forward --in 0:127.0.0.1:80
lport=$(inport "$w/b" 127.0.0.1:80)
[ -n "$lport" ] && [ "$lport" != 0 ] && [ "$(wc -l <"$w/b.out")" = 2 ] || die "forward's stdout: $(cat "$w/b.out")"
[ "$(curl -sf --max-time 10 "http://127.0.0.1:$lport/r" | sha256sum | cut -d' ' -f1)" = "$rsha" ] ||
	die "curl through --in: $(curl -sv --max-time 10 "http://127.0.0.1:$lport/r" 2>&1 | tail -5)"
ok "b: curl -> --in 127.0.0.1:$lport (picked) -> httpd inside on 127.0.0.1:80: 64 KiB, SHA-256 equal"
r=0
timeout 60 python3 "$load" http --port "$lport" --path /r --conns 50 --sha256 "$rsha" --timeout 40 >"$w/b.load" 2>&1 || r=$?
[ $r = 0 ] || die "50 concurrent to httpd: exit $r: $(cat "$w/b.load")"
ok "b: 50 concurrent GETs through --in to httpd, every body's SHA-256 equal: $(cat "$w/b.load")"
# 1,000 at once go to a server with a usual backlog: BusyBox httpd listens with a backlog of 9,
# so 1,000 simultaneous connects inside test the kernel's SYN retries (1 s, 3 s, 7 s: the
# 10 s connect deadline), not the forward. The server is a host program (fwdload.py, backlog
# 4096) entered into the sandbox's network namespace: it is reached only through the forward.
fpid=$(sed -n 's/^pid=//p' "$SBX_NS_DIR/F/state")
nsenter "--net=/proc/$fpid/ns/net" python3 "$load" serve --port 7300 --port-file "$w/b.sport" &
bsrv=$!
bg+=($bsrv)
waitfile "$w/b.sport"
stop "$fp"
fwd "$w/b2" --runner ns:F forward --in 0:127.0.0.1:7300
lport=$(inport "$w/b2" 127.0.0.1:7300)
timeout 120 python3 "$load" load --port "$lport" --conns 1000 --reqs 10 --size 1024 --timeout 90 >"$w/b.load" 2>&1 || r=$?
[ $r = 0 ] || die "1,000 concurrent: exit $r: $(cat "$w/b.load"); inside: $(in_ns F exec -- cat /proc/net/netstat |
	python3 -c 'import sys; h, v = sys.stdin.read().split("\n")[:2]; print(" ".join("%s %s" % kv for kv in zip(h.split(), v.split()) if kv[0] in ("ListenOverflows", "ListenDrops", "TCPTimeouts")))')"
ok "b: 1,000 concurrent connections through --in (all open before the first request), 10 echoes each: $(cat "$w/b.load")"
kill $bsrv
wait $bsrv 2>/dev/null || true
stop "$fp"
[ "$r" = 0 ] || die "sbx forward after SIGINT: exit $r: $(tail -5 "$w/b.err")"

# ---- c. half-close both ways, BusyBox nc inside ----
# The host's server answers "got N SHA" only after the request's end.
cat >"$w/hc.py" <<'PY'
import hashlib, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
c, _ = s.accept()
c.settimeout(20)
got = b""
while True:
    b = c.recv(65536)
    if not b:
        break
    got += b
c.sendall(b"got %d %s\n" % (len(got), hashlib.sha256(got).hexdigest().encode()))
c.close()
PY
python3 "$w/hc.py" "$w/hc.port" &
bg+=($!)
waitfile "$w/hc.port"
in_ns F sh 'nc -l -p 7000 -e sh -c "wc -c; echo END" </dev/null >/dev/null 2>&1 &'
fwd "$w/c" --runner ns:F forward --in 0:127.0.0.1:7000 --out "7001:127.0.0.1:$(cat "$w/hc.port")"
lport=$(inport "$w/c" 127.0.0.1:7000)
reply=$(timeout 20 python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 10)
s.settimeout(10)
s.sendall(b"x" * 100000)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
sys.stdout.write(got.decode())' "$lport") || die "half-close --in: the client failed: $reply"
[ "$(tr "\n" " " <<<"$reply")" = "100000 END " ] || die "half-close --in: reply '$reply'"
ok "c: --in: the host client's shutdown(SHUT_WR) reaches nc -e 'wc -c' inside, its reply (100000 END) comes back"
out=$(timeout 20 "$sbx" --runner ns:F sh 'head -c 100000 /dev/urandom >/tmp/hc && nc 127.0.0.1 7001 </tmp/hc; sha256sum /tmp/hc') ||
	die "half-close --out: $out"
[ "$(echo "$out" | head -1)" = "got 100000 $(echo "$out" | sed -n 2p | cut -d' ' -f1)" ] || die "half-close --out: $out"
ok "c: --out: BusyBox nc's half-close at its stdin's end reaches the host's server, which answers only then; the answer (count, SHA-256) comes back"
stop "$fp"
[ "$r" = 0 ] || die "sbx forward after SIGINT: exit $r: $(tail -5 "$w/c.err")"

# ---- d. refused ports give resets ----
dead=$(freeport)
fwd "$w/d" --runner ns:F forward --verbose --in 0:127.0.0.1:81 --out "7002:127.0.0.1:$dead"
lport=$(inport "$w/d" 127.0.0.1:81)
o1=$(timeout 30 python3 "$load" reset --port "$lport" --timeout 10)
o2=$(timeout 30 python3 "$load" reset --port "$lport" --send "GET / HTTP/1.0" --timeout 10)
[ "$o1" = reset ] && [ "$o2" = reset ] || die "--in to a closed inside port: the client saw '$o1', '$o2' (not a reset)"
sleep 0.3
grep -qi 'refused' "$w/d.err" || die "--verbose says nothing refused: $(cat "$w/d.err")"
ok "d: --in to an inside port nobody listens on: the host client gets ECONNRESET (read and write), not EOF or a hang; --verbose: $(grep -i -m1 refused "$w/d.err")"
r=0
o=$(timeout 30 "$sbx" --runner ns:F exec -- wget -O /dev/null http://127.0.0.1:7002/ 2>&1) || r=$?
[ $r != 0 ] && grep -q 'reset by peer' <<<"$o" || die "--out to a closed host port: wget exit $r: $o"
ok "d: --out to a host port nobody listens on: wget inside sees a reset ($(grep -m1 'reset by peer' <<<"$o"))"
kill -0 "$fp" || die "sbx forward died of refused connections: $(cat "$w/d.err")"
stop "$fp"
[ "$r" = 0 ] || die "sbx forward after SIGINT: exit $r"

# ---- e. the channel cut while a --in and a --out connection stream ----
rm -f "$w/e.iport" "$w/e.tport"
timeout 120 python3 "$load" cut --in-port-file "$w/e.iport" --target-port-file "$w/e.tport" --timeout 30 >"$w/e.res" 2>&1 &
cp=$!
bg+=("$cp")
waitfile "$w/e.tport"
# Inside, a server that writes (cat /dev/zero) and one that reads (cat >/dev/null): a reader
# tells a reset (read error) from a clean end (exit 0); a writer blocked on a full buffer when
# the reset comes may see EPIPE (SIGPIPE, rc=141) rather than ECONNRESET, so either counts.
in_ns F sh 'rm -f /tmp/cat.err /tmp/cat2.err /tmp/wget.err
	nc -l -p 9000 -e sh -c "cat /dev/zero 2>/tmp/cat.err; echo rc=\$? >>/tmp/cat.err" </dev/null >/dev/null 2>&1 &
	nc -l -p 9002 -e sh -c "cat >/dev/null 2>/tmp/cat2.err; echo rc=\$? >>/tmp/cat2.err" </dev/null >/dev/null 2>&1 &'
# The exec way into F (the ns runner's own argv, runner/ns.c sbx_ns_argv) through the cutter.
via="$cutter eof -1 $((16 << 20)) -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root $SBX_NS_DIR/F/sbx-enter enter $fpid {agent} serve"
fwd "$w/e" --agent /.sbx/sbx-agent --via "$via" forward --in 0:127.0.0.1:9000 --in 0:127.0.0.1:9002 \
	--out "9001:127.0.0.1:$(cat "$w/e.tport")" --ready-file /tmp/ready-e
lport=$(inport "$w/e" 127.0.0.1:9000)
lport2=$(inport "$w/e" 127.0.0.1:9002)
timeout 60 "$sbx" --runner ns:F sh 'wget -O /dev/null http://127.0.0.1:9001/big 2>/tmp/wget.err; echo rc=$? >>/tmp/wget.err' >/dev/null 2>&1 &
wp=$!
bg+=("$wp")
echo "$lport $lport2" >"$w/e.iport.tmp" && mv "$w/e.iport.tmp" "$w/e.iport"
for _ in $(seq 300); do
	kill -0 "$fp" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$fp" 2>/dev/null && die "sbx forward still runs 30 s after the channel's cut"
r=0
wait "$fp" || r=$?
wait "$cp" || true
wait "$wp" || true
res=$(cat "$w/e.res")
[ $r != 0 ] || die "sbx forward exit 0 after the channel's cut: $(cat "$w/e.err")"
[ "$(jget client "$w/e.res")" = reset ] || die "the host's --in client: $res"
[ "$(jget target "$w/e.res")" = reset ] || die "the host's --out target: $res"
ok "e: channel cut mid-stream: the host's --in client ($(jget client_got "$w/e.res") bytes read) and --out target ($(jget target_sent "$w/e.res") bytes sent) see ECONNRESET; sbx forward exits $r ($(tail -1 "$w/e.err"))"
sleep 0.5
cat_err=$(in_ns F exec -- cat /tmp/cat.err 2>&1 || true)
cat2_err=$(in_ns F exec -- cat /tmp/cat2.err 2>&1 || true)
wget_err=$(in_ns F exec -- cat /tmp/wget.err 2>&1 || true)
grep -q -e 'reset by peer' -e 'rc=141' <<<"$cat_err" || die "the writing server inside (cat /dev/zero into --in 9000): $cat_err"
grep -q 'reset by peer' <<<"$cat2_err" || die "the reading server inside (cat from --in 9002): $cat2_err"
grep -q 'reset by peer' <<<"$wget_err" || die "the client inside (wget through --out): $wget_err"
ok "e: inside, the reading --in server ($(grep -m1 'reset by peer' <<<"$cat2_err")), the writing one ($(tr '\n' ' ' <<<"$cat_err")) and the --out client ($(grep -m1 'reset by peer' <<<"$wget_err")) see a reset"
[ "$(python3 "$load" reset --port "$lport" --timeout 5)" = refused ] || die "the --in port $lport still takes connections"
ok "e: the --in listener 127.0.0.1:$lport is gone (connection refused)"

# The channel's process killed (cutter kill: SIGKILL to its child, sbx-enter and the agent it
# starts, after 16 MiB agent -> host): the host's side alone is checked (what the sandbox's
# peers see depends on how the agent ended): the host's --in client and --out target see a
# reset, sbx forward exits non-zero, the port refuses.
rm -f "$w/e.iport" "$w/e.tport"
timeout 120 python3 "$load" cut --in-port-file "$w/e.iport" --target-port-file "$w/e.tport" --timeout 30 >"$w/e2.res" 2>&1 &
cp=$!
bg+=("$cp")
waitfile "$w/e.tport"
in_ns F sh 'nc -l -p 9000 -e cat /dev/zero </dev/null >/dev/null 2>&1 &
	nc -l -p 9002 -e sh -c "cat >/dev/null" </dev/null >/dev/null 2>&1 &'
fwd "$w/e2" --agent /.sbx/sbx-agent --via "${via/eof/kill}" forward --in 0:127.0.0.1:9000 --in 0:127.0.0.1:9002 \
	--out "9001:127.0.0.1:$(cat "$w/e.tport")"
lport=$(inport "$w/e2" 127.0.0.1:9000)
lport2=$(inport "$w/e2" 127.0.0.1:9002)
timeout 60 "$sbx" --runner ns:F exec -- wget -q -O /dev/null http://127.0.0.1:9001/big >/dev/null 2>&1 &
bg+=($!)
echo "$lport $lport2" >"$w/e.iport.tmp" && mv "$w/e.iport.tmp" "$w/e.iport"
for _ in $(seq 300); do
	kill -0 "$fp" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$fp" 2>/dev/null && die "sbx forward still runs 30 s after the channel was killed"
r=0
wait "$fp" || r=$?
wait "$cp" || true
[ $r != 0 ] || die "sbx forward exit 0 after the channel was killed: $(cat "$w/e2.err")"
[ "$(jget client "$w/e2.res")" = reset ] && [ "$(jget target "$w/e2.res")" = reset ] ||
	die "channel killed: the host's --in client and --out target: $(cat "$w/e2.res")"
[ "$(python3 "$load" reset --port "$lport" --timeout 5)" = refused ] || die "channel killed: the --in port $lport still takes connections"
ok "e: the channel's process SIGKILLed mid-stream: the host's --in client and --out target see ECONNRESET; sbx forward exits $r, its port refuses"

# ---- f. --max-conn 2 ----
fwd "$w/f" --runner ns:F forward --verbose --max-conn 2 --in 0:127.0.0.1:80
lport=$(inport "$w/f" 127.0.0.1:80)
timeout 60 python3 "$load" maxconn --port "$lport" --limit 2 --timeout 10 >"$w/f.res" 2>&1 || die "maxconn: $(cat "$w/f.res")"
[ "$(jget extra "$w/f.res")" = reset ] || die "the third connection: $(cat "$w/f.res")"
for k in held.0 held.1 after; do
	[[ "$(jget $k "$w/f.res")" =~ ^HTTP/1\.[01]\ 200 ]] || die "$k: $(cat "$w/f.res")"
done
sleep 0.3
grep -q 'refusing' "$w/f.err" || die "no refusal logged: $(cat "$w/f.err")"
ok "f: --max-conn 2: the third concurrent connection is reset, the two held ones then get 200, a later one too; logged: $(grep -m1 refusing "$w/f.err")"
stop "$fp"
[ "$r" = 0 ] || die "sbx forward after SIGINT: exit $r"

# ---- g. qemu:aarch64 ----
command -v qemu-aarch64-static >/dev/null || die "no qemu-aarch64-static (toolchain/deps.sh installs qemu-user-static)"
head -c $((8 << 20)) /dev/urandom >"$w/www/g"
gsha=$(sha256sum "$w/www/g" | cut -d' ' -f1)
"$sbx" --runner qemu:aarch64 --json hello | grep -q '"arch":"aarch64"' || die "qemu:aarch64 hello"
gport=$(freeport)
fwd "$w/g" --runner qemu:aarch64 forward --out "$gport:127.0.0.1:$hport" --in "0:127.0.0.1:$hport" --ready-file "$w/g.ready"
[ -e "$w/g.ready" ] || die "qemu: no ready file when ready was printed"
lport=$(inport "$w/g" "127.0.0.1:$hport")
[ "$(curl -sf --max-time 60 "http://127.0.0.1:$gport/g" | sha256sum | cut -d' ' -f1)" = "$gsha" ] || die "qemu: --out round trip"
[ "$(curl -sf --max-time 60 "http://127.0.0.1:$lport/g" | sha256sum | cut -d' ' -f1)" = "$gsha" ] || die "qemu: --in round trip"
stop "$fp"
[ "$r" = 0 ] || die "qemu: sbx forward after SIGINT: exit $r"
ok "g: qemu:aarch64 (the aarch64 agent under QEMU): 8 MiB through --out and through --in, SHA-256 equal, ready file made, SIGINT exit 0"

# ---- nothing left inside ----
# Every forward above has ended: inside, the only listener is httpd's, and the only agents are
# init and the serve of the session asking.
left=$(in_ns F exec -- netstat -ltn | awk 'NR > 2 {print $4}' | sort | tr '\n' ' ')
[ "$left" = "127.0.0.1:80 " ] || die "listeners left inside: $left"
agents=$(in_ns F sh 'for p in /proc/[0-9]*; do tr "\\0" " " <$p/cmdline; echo; done 2>/dev/null | grep -c "^sbx-agent "')
[ "$agents" = 2 ] || die "sbx-agent processes inside: $agents ($(in_ns F exec -- ps))"
ok "after the forwards: no listener left inside but httpd's, no agent but init and this session's serve"

