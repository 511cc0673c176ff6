#!/bin/bash
# fwd_local.sh SBX: TCP forwarding end to end through `sbx --runner local` (the agent's side,
# agent/fwd.c, against the real host): --out and --in with whole-file checksums and concurrent
# clients, half-close, a refused connect seen as a reset, a stalled reader that must not make
# the agent spin, a bound port refused, and the session's end resetting what is open.
# Inside and outside are the same machine here, so every --out is a mapping P:127.0.0.1:Q.
. "$(dirname "$0")/lib/suite.sh"
suite_begin
sbx=$(realpath "$1")
export SBX_AGENT_DIR=${SBX_AGENT_DIR:-$top/build/agent}
python3 - "$sbx" "$w" <<'PY'
import hashlib, os, signal, socket, subprocess, sys, threading, time
sbx, w = sys.argv[1], sys.argv[2]

def check(cond, what):
    if not cond:
        print("FAIL: " + what, file=sys.stderr)
        sys.exit(1)
    print("  ok: " + what, flush=True)

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

# Targets: a file server (GET -> 8 MiB then close) and an echo server (echo until END, then END).
blob = os.urandom(8 << 20)
digest = hashlib.sha256(blob).hexdigest()
def listener():
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", 0))
    l.listen(128)
    return l
def serve(l, h):
    def run():
        while True:
            c, _ = l.accept()
            threading.Thread(target=h, args=(c,), daemon=True).start()
    threading.Thread(target=run, daemon=True).start()
def file_h(c):
    try:
        c.recv(100)
        c.sendall(blob)
        c.close()
    except OSError:
        pass
def echo_h(c):
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            c.sendall(b)
        c.shutdown(socket.SHUT_WR)
        while c.recv(65536):
            pass
    except OSError:
        pass
    c.close()
fl, el = listener(), listener()
serve(fl, file_h)
serve(el, echo_h)
fport, eport = fl.getsockname()[1], el.getsockname()[1]
dead = free_port()  # nothing listens there

o_file, o_echo, i_file, i_echo, i_dead = (free_port() for _ in range(5))
ready = w + "/ready"
open(ready, "w").write("stale")
p = subprocess.Popen([sbx, "--runner", "local", "forward",
                      "--out", "%d:127.0.0.1:%d" % (o_file, fport),
                      "--out", "%d:127.0.0.1:%d" % (o_echo, eport),
                      "--in", "%d:127.0.0.1:%d" % (i_file, fport),
                      "--in", "%d:127.0.0.1:%d" % (i_echo, eport),
                      "--in", "%d:127.0.0.1:%d" % (i_dead, dead),
                      "--ready-file", ready], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
lines = []
while True:
    l = p.stdout.readline().decode()
    check(l != "", "sbx forward prints ready (%r)" % lines) if l == "" else None
    lines.append(l.strip())
    if l.strip() == "ready":
        break
st = os.stat(ready)
check(st.st_size == 0 and (st.st_mode & 0o777) == 0o644,
      "the ready file is there, remade empty with mode 0644, when ready is printed")
agent = int(subprocess.check_output(["pgrep", "-n", "-P", str(p.pid)]).split()[0])

def fetch(port, out):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"GET\n")
    h = hashlib.sha256()
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        h.update(b)
    s.close()
    out.append(h.hexdigest())

for name, port in (("--out", o_file), ("--in", i_file)):
    got = []
    fetch(port, got)
    check(got == [digest], "%s: 8 MiB arrive whole (SHA-256)" % name)
    got = []
    ts = [threading.Thread(target=fetch, args=(port, got)) for _ in range(16)]
    for t in ts: t.start()
    for t in ts: t.join()
    check(got == [digest] * 16, "%s: 16 concurrent 8 MiB downloads arrive whole" % name)

def half(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    data = os.urandom(3 << 20)
    def send():
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=send)
    t.start()
    got = bytearray()
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        got += b
    t.join()
    s.close()
    return bytes(got) == data
check(half(o_echo), "--out: 3 MiB echoed both ways, half-close (END) in both directions")
check(half(i_echo), "--in: 3 MiB echoed both ways, half-close (END) in both directions")

s = socket.create_connection(("127.0.0.1", i_dead), timeout=10)
try:
    b = s.recv(10)
    check(False, "a refused connect inside is a reset, not %r" % b)
except ConnectionResetError:
    check(True, "a refused connect inside is a reset (ECONNRESET) for the client")
s.close()

def ticks(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
s = socket.create_connection(("127.0.0.1", o_file), timeout=30)
s.sendall(b"GET\n")
time.sleep(0.5)
t0 = ticks(agent)
time.sleep(2)
t1 = ticks(agent)
check(t1 - t0 <= 20, "a client that stops reading: the agent waits, not spins (%d ticks in 2 s)" % (t1 - t0))
h = hashlib.sha256()
while True:
    b = s.recv(1 << 20)
    if not b:
        break
    h.update(b)
s.close()
check(h.hexdigest() == digest, "... and the stalled download then arrives whole")

q = subprocess.run([sbx, "--runner", "local", "forward", "--out", "%d:127.0.0.1:%d" % (o_file, fport)],
                   capture_output=True, timeout=20)
err = q.stderr.decode()
check(q.returncode != 0 and ("listen 127.0.0.1:%d" % o_file) in err,
      "a port already bound inside: forward fails, saying which (%s)" % err.strip())

# The end: an open connection each way is reset, the listeners are gone, the agent exits.
a = socket.create_connection(("127.0.0.1", o_echo), timeout=10)
b = socket.create_connection(("127.0.0.1", i_echo), timeout=10)
for c in (a, b):
    c.sendall(b"x")
    check(c.recv(1) == b"x", "a connection open before the end")
p.send_signal(signal.SIGTERM)
check(p.wait(timeout=10) == 0, "sbx forward stops on SIGTERM (exit 0)")
for c, name in ((a, "--out"), (b, "--in")):
    try:
        got = c.recv(10)
        check(False, "%s: open connection reset at the end, not %r" % (name, got))
    except ConnectionResetError:
        check(True, "%s: an open connection is reset at the end" % name)
for port in (o_file, o_echo, i_file):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2)
        check(False, "listener %d gone" % port)
    except ConnectionRefusedError:
        pass
check(True, "every listener is gone after the end")
for _ in range(50):
    if not os.path.exists("/proc/%d" % agent) or open("/proc/%d/stat" % agent).read().rsplit(")", 1)[1].split()[0] == "Z":
        break
    time.sleep(0.1)
check(not os.path.exists("/proc/%d" % agent) or open("/proc/%d/stat" % agent).read().rsplit(")", 1)[1].split()[0] == "Z",
      "the agent has exited")

# A connect inside that never completes (a listener whose backlog is full drops the SYN): reset
# after 10 s, the reason naming the address; a refused one names it too (--verbose lines).
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(0)
hp = l.getsockname()[1]
fill = []
for _ in range(3):
    f = socket.socket()
    f.setblocking(False)
    try:
        f.connect(("127.0.0.1", hp))
    except BlockingIOError:
        pass
    fill.append(f)
time.sleep(0.3)
lp, rp = free_port(), free_port()
p = subprocess.Popen([sbx, "--runner", "local", "forward", "--verbose",
                      "--in", "%d:127.0.0.1:%d" % (lp, hp), "--in", "%d:127.0.0.1:%d" % (rp, dead)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
while p.stdout.readline().strip() != b"ready":
    pass
c = socket.create_connection(("127.0.0.1", rp), timeout=10)
try:
    c.recv(1)
except ConnectionResetError:
    pass
t = time.time()
c = socket.create_connection(("127.0.0.1", lp), timeout=30)
try:
    c.recv(1)
    reset = False
except ConnectionResetError:
    reset = True
took = time.time() - t
check(reset and 9.5 <= took <= 12, "a connect that hangs inside is reset after 10 s (%.1f s)" % took)
p.send_signal(signal.SIGTERM)
err = p.communicate(timeout=10)[1].decode()
check(("connect 127.0.0.1:%d: timed out after 10 s" % hp) in err, "... its reason names the address")
check(("connect 127.0.0.1:%d: Connection refused" % dead) in err,
      "a refused connect's reason names the address and the errno")

# --max-conn 2: a third connection is reset at once; once one closes, a new one gets through.
mp = free_port()
p = subprocess.Popen([sbx, "--runner", "local", "forward", "--max-conn", "2",
                      "--out", "%d:127.0.0.1:%d" % (mp, eport)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
while p.stdout.readline().strip() != b"ready":
    pass
def echoes(c):
    try:
        c.sendall(b"x")
        c.settimeout(5)
        return c.recv(1) == b"x"
    except (ConnectionResetError, BrokenPipeError):
        return False
cs = [socket.create_connection(("127.0.0.1", mp), timeout=5) for _ in range(2)]
time.sleep(0.3)
try:  # the reset may come before the connect returns (a timeout makes it non-blocking)
    third = echoes(socket.create_connection(("127.0.0.1", mp), timeout=5))
except ConnectionResetError:
    third = False
check([echoes(c) for c in cs] + [third] == [True, True, False],
      "--max-conn 2: the third connection inside is reset, the first two work")
cs[0].shutdown(socket.SHUT_WR)
check(cs[0].recv(1) == b"", "... the first ends cleanly (END both ways)")
cs[0].close()
time.sleep(0.5)
check(echoes(socket.create_connection(("127.0.0.1", mp), timeout=5)),
      "... and its slot is free again for a new connection")
p.send_signal(signal.SIGTERM)
p.communicate(timeout=10)

# An idle connection never times the session out: a 1.5 s session timeout, a connection left
# silent for 4 s (the keepalive PING keeps the channel checked), then it still echoes.
ip = free_port()
p = subprocess.Popen([sbx, "--runner", "local", "--timeout", "1.5", "forward",
                      "--in", "%d:127.0.0.1:%d" % (ip, eport)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
while p.stdout.readline().strip() != b"ready":
    pass
c = socket.create_connection(("127.0.0.1", ip), timeout=5)
c.sendall(b"before")
check(c.recv(100) == b"before", "a connection through --in echoes (session timeout 1.5 s)")
time.sleep(4)
check(p.poll() is None, "... sbx forward is still running after 4 s with the connection idle")
c.sendall(b"after")
check(c.recv(100) == b"after", "... and the idle connection still echoes: idleness times nothing out")
c.close()
p.send_signal(signal.SIGTERM)
_, err = p.communicate(timeout=10)
check(p.returncode == 0, "... and SIGTERM ends it with 0 (%r)" % err[-200:])
PY
ok "fwd_local done"
