#!/usr/bin/env python3
"""fwdload.py: the TCP clients and the server of tests/forward.sh and tests/bench/forward.sh
(standard library only). One server speaks two ways, chosen by the first byte a client sends:
  S  sink: counts bytes until the client's half-close, answers the count (8 bytes, big-endian)
     and closes: a throughput run that also proves the half-close travelled;
  E  echo: sends back every byte, closes after the client's half-close.
Subcommands (each prints one result line; exit 0 only when every exchange was right):
  serve [--host H] [--port P] [--port-file F]   the server (asyncio), until killed
  tput --port P --bytes N [-- CMD...]           one connection, N bytes up; "tput BYTES SECONDS MBPS"
  lat --port P --n N --size S [-- CMD...]       N round trips of S bytes; "lat N P50_US P99_US"
  load --port P --conns C --reqs R --size S     C concurrent connections, R echoes each
  http --port P --path X --conns C --sha256 H   C concurrent HTTP/1.0 GETs, all held open first
  reset --port P [--send B] [--timeout T]       connect, send, read: prints refused, reset, eof,
                                                timeout or data
  maxconn --port P --limit N                    N requests held half-sent, one more must be
                                                reset, then the N finish with 200
  cut --in-port-file F --target-port-file F2    the channel-cut check (tests/forward.sh e)
With "-- CMD..." the stream is CMD's stdin and stdout instead of a socket (a relay over an
exec channel: sbx exec -i -- busybox nc ...)."""
import argparse
import asyncio
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time


# ---- the server ----------------------------------------------------------------------------
class Serve(asyncio.Protocol):
    def connection_made(self, t):
        self.t, self.mode, self.n = t, None, 0
        s = t.get_extra_info("socket")
        if s is not None:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, d):
        if self.mode is None:
            self.mode, d = d[:1], d[1:]
        if self.mode == b"S":
            self.n += len(d)
        elif d:
            self.t.write(d)

    def pause_writing(self):  # an echo client that does not read: stop reading it too
        self.t.pause_reading()

    def resume_writing(self):
        self.t.resume_reading()

    def eof_received(self):
        if self.mode == b"S":
            self.t.write(struct.pack(">Q", self.n))
        self.t.close()
        return True

    def connection_lost(self, exc):
        pass


async def serve(a):
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(Serve, a.host, a.port, backlog=4096, reuse_address=True)
    port = srv.sockets[0].getsockname()[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, a.port_file)
    await asyncio.Event().wait()


# ---- a stream: a socket, or a command's stdin and stdout -----------------------------------
class Stream:
    def __init__(self, a):
        self.p = self.s = None
        if a.cmd:
            self.p = subprocess.Popen(a.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
            self.wfd, self.rfd = self.p.stdin.fileno(), self.p.stdout.fileno()
        else:
            self.s = socket.create_connection((a.host, a.port), timeout=a.timeout)
            self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, b):
        if self.s is not None:
            self.s.sendall(b)
            return
        m = memoryview(b)
        while m:
            m = m[os.write(self.wfd, m):]

    def recv_into(self, m):
        if self.s is not None:
            return self.s.recv_into(m)
        return os.readv(self.rfd, [m])

    def recv_exact(self, n):
        buf = bytearray(n)
        m, got = memoryview(buf), 0
        while got < n:
            k = self.recv_into(m[got:])
            if k == 0:
                raise EOFError("end of stream after %d of %d bytes" % (got, n))
            got += k
        return bytes(buf)

    def half_close(self):
        if self.s is not None:
            self.s.shutdown(socket.SHUT_WR)
        else:
            self.p.stdin.close()

    def close(self):
        if self.s is not None:
            self.s.close()
        else:
            if not self.p.stdin.closed:
                self.p.stdin.close()
            self.p.stdout.close()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def tput(a):
    st = Stream(a)
    chunk = memoryview(os.urandom(1 << 20))
    t0 = time.perf_counter()
    st.send(b"S")
    left = a.bytes
    while left > 0:
        k = min(left, len(chunk))
        st.send(chunk[:k])
        left -= k
    st.half_close()
    n = struct.unpack(">Q", st.recv_exact(8))[0]
    dt = time.perf_counter() - t0
    st.close()
    if n != a.bytes:
        print("tput: the sink counted %d of %d bytes" % (n, a.bytes))
        return 1
    print("tput %d %.3f %.1f" % (a.bytes, dt, a.bytes / dt / 1e6))
    return 0


def lat(a):
    st = Stream(a)
    st.send(b"E")
    req = os.urandom(a.size)
    ts = []
    for i in range(a.n + a.n // 10):  # the first tenth warms up and is not counted
        t0 = time.perf_counter_ns()
        st.send(req)
        got = st.recv_exact(a.size)
        dt = time.perf_counter_ns() - t0
        if got != req:
            print("lat: round trip %d came back different" % i)
            return 1
        if i >= a.n // 10:
            ts.append(dt)
    st.half_close()
    st.close()
    ts.sort()
    pct = lambda q: ts[min(len(ts) - 1, int(q * len(ts)))] / 1000
    print("lat %d %.1f %.1f" % (len(ts), pct(0.50), pct(0.99)))
    return 0


# ---- many connections at once --------------------------------------------------------------
class Gate:
    """Every connection waits here until all are open (so they are concurrent). At most 64
    connects are in flight at once: a burst of 1,000 SYNs would overflow a listener's backlog
    (128 is usual) and the dropped handshakes would stall for the kernel's retries."""

    def __init__(self, n):
        self.n, self.ev = n, asyncio.Event()
        self.connecting = asyncio.Semaphore(64)

    async def connect(self, a):
        async with self.connecting:
            return await asyncio.open_connection(a.host, a.port)

    def arrive(self):
        self.n -= 1
        if self.n <= 0:
            self.ev.set()


reqs_done = [0]  # echoes done so far, over every connection


async def load_one(a, gate, errors, payload):
    w = None
    try:
        r, w = await gate.connect(a)
        w.write(b"E")
        gate.arrive()
        await gate.ev.wait()
        for _ in range(a.reqs):
            w.write(payload)
            got = await r.readexactly(len(payload))
            if got != payload:
                raise ValueError("echo differs")
            reqs_done[0] += 1
        w.write_eof()
        if await r.read(1) != b"":
            raise ValueError("data after the echoes")
        return a.reqs
    except Exception as e:  # counted and shown, never raised
        errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
        gate.arrive()
        return 0
    finally:
        if w is not None:
            w.close()


async def load(a):
    gate, errors, payload = Gate(a.conns), {}, os.urandom(a.size)
    t0 = time.perf_counter()
    tasks = [asyncio.ensure_future(load_one(a, gate, errors, payload)) for _ in range(a.conns)]
    try:
        await asyncio.wait_for(gate.ev.wait(), a.timeout)
    except asyncio.TimeoutError:
        pass
    t1 = time.perf_counter()
    fin, pending = await asyncio.wait(tasks, timeout=max(1, a.timeout - (t1 - t0)))
    if pending:
        print("load: not done after %.0f s: %d of %d connections open, %d done, %d echoes, "
              "errors %s" % (a.timeout, a.conns - max(gate.n, 0), a.conns, len(fin), reqs_done[0],
                             json.dumps(errors)))
        for t in pending:
            t.cancel()
        return 1
    t2 = time.perf_counter()
    total = sum(t.result() for t in fin)
    nerr = sum(errors.values())
    print("load conns %d reqs %d done %d errors %d (%s) open %.2fs run %.2fs rps %.0f" % (
        a.conns, a.reqs, total, nerr, json.dumps(errors), t1 - t0, t2 - t1, total / (t2 - t1)))
    return 0 if nerr == 0 else 1


async def http_one(a, gate, errors, sizes):
    w = None
    try:
        r, w = await gate.connect(a)
        gate.arrive()
        await gate.ev.wait()
        w.write(b"GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % a.path.encode())
        data = await r.read()
        head, _, body = data.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.") or head.split()[1] != b"200":
            raise ValueError("status: %r" % head[:40])
        if hashlib.sha256(body).hexdigest() != a.sha256:
            raise ValueError("body of %d bytes differs" % len(body))
        sizes.append(len(body))
        return 1
    except Exception as e:
        errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
        gate.arrive()
        return 0
    finally:
        if w is not None:
            w.close()


async def http(a):
    gate, errors, sizes = Gate(a.conns), {}, []
    t0 = time.perf_counter()
    tasks = [asyncio.ensure_future(http_one(a, gate, errors, sizes)) for _ in range(a.conns)]
    fin, pending = await asyncio.wait(tasks, timeout=a.timeout)
    if pending:
        print("http: not done after %.0f s: %d of %d connections open, %d answered, %d ok, "
              "errors %s" % (a.timeout, a.conns - max(gate.n, 0), a.conns, len(fin),
                             sum(t.result() for t in fin), json.dumps(errors)))
        for t in pending:
            t.cancel()
        return 1
    ok = sum(t.result() for t in fin)
    nerr = sum(errors.values())
    print("http conns %d ok %d errors %d %s in %.2fs" % (a.conns, ok, nerr, json.dumps(errors),
                                                         time.perf_counter() - t0))
    return 0 if nerr == 0 and ok == a.conns else 1


# ---- resets --------------------------------------------------------------------------------
def outcome(s, timeout):
    """What a read on s meets: reset, eof, timeout or data."""
    s.settimeout(timeout)
    try:
        d = s.recv(65536)
        return "data" if d else "eof"
    except ConnectionResetError:
        return "reset"
    except socket.timeout:
        return "timeout"


def reset(a):
    try:
        s = socket.create_connection((a.host, a.port), timeout=a.timeout)
    except ConnectionRefusedError:
        print("refused")
        return 0
    except ConnectionResetError:  # the reset came before connect() returned (a busy host)
        print("reset")
        return 0
    try:
        if a.send:
            s.sendall(a.send.encode())
        print(outcome(s, a.timeout))
    except (ConnectionResetError, BrokenPipeError):
        print("reset")
    return 0


def maxconn(a):
    held = []
    for _ in range(a.limit):
        s = socket.create_connection((a.host, a.port), timeout=a.timeout)
        s.sendall(b"GET /index.html HTTP/1.0\r\n")  # half a request: the server waits
        held.append(s)
    time.sleep(0.5)  # the forward has accepted them: they count
    try:
        extra = socket.create_connection((a.host, a.port), timeout=a.timeout)
        third = outcome(extra, a.timeout)
    except ConnectionResetError:  # the reset came before connect() returned (a busy host)
        third = "reset"
    res = []
    for s in held:
        s.sendall(b"\r\n")
        s.settimeout(a.timeout)
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        res.append(data.split(b"\r\n", 1)[0].decode(errors="replace"))
        s.close()
    time.sleep(0.5)  # their streams end (END both ways) before they stop counting
    after = socket.create_connection((a.host, a.port), timeout=a.timeout)
    after.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
    after.settimeout(a.timeout)
    line = after.recv(65536).split(b"\r\n", 1)[0].decode(errors="replace")
    print(json.dumps({"extra": third, "held": res, "after": line}))
    return 0


def cut(a):
    """The --out target streams a long HTTP reply to the sandbox's wget; once 1 MiB of it has
    gone, a client connects to the first --in port of the file and reads the sandbox's stream,
    and a writer to the second sends zeros for the sandbox's side to read. The channel is cut
    meanwhile (by the test's cutter): each says how its stream ended."""
    res = {}
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    with open(a.target_port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    os.rename(a.target_port_file + ".tmp", a.target_port_file)
    started = threading.Event()

    def target():
        srv.settimeout(a.timeout)
        try:
            c, _ = srv.accept()
        except socket.timeout:
            res["target"] = "no connection"
            started.set()
            return
        c.settimeout(a.timeout)
        sent = 0
        try:
            c.recv(4096)
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 1000000000000\r\n\r\n")
            buf = b"\0" * 65536
            while True:
                sent += c.send(buf)
                if sent >= 1 << 20:
                    started.set()
            res["target"] = "sent all"
        except ConnectionResetError:
            res["target"] = "reset"
        except BrokenPipeError:
            res["target"] = "broken pipe (EPIPE: the peer closed, no reset)"
        except socket.timeout:
            res["target"] = "timeout"
        res["target_sent"] = sent
        started.set()

    th = threading.Thread(target=target)
    th.start()
    started.wait(a.timeout)
    while not os.path.exists(a.in_port_file):
        time.sleep(0.01)
    port, port2 = [int(x) for x in open(a.in_port_file).read().split()]

    def writer():  # the second --in connection: the sandbox's side reads what this sends
        w = socket.create_connection(("127.0.0.1", port2), timeout=a.timeout)
        w.settimeout(a.timeout)
        buf, sent = b"\0" * 65536, 0
        try:
            while True:
                sent += w.send(buf)
        except ConnectionResetError:
            res["writer"] = "reset"
        except BrokenPipeError:
            res["writer"] = "broken pipe"
        except socket.timeout:
            res["writer"] = "timeout"
        res["writer_sent"] = sent

    th2 = threading.Thread(target=writer)
    th2.start()
    s = socket.create_connection(("127.0.0.1", port), timeout=a.timeout)
    s.settimeout(a.timeout)
    got = 0
    try:
        while True:
            d = s.recv(1 << 20)
            if not d:
                res["client"] = "eof"
                break
            got += len(d)
    except ConnectionResetError:
        res["client"] = "reset"
    except socket.timeout:
        res["client"] = "timeout"
    res["client_got"] = got
    th.join()
    th2.join()
    print(json.dumps(res))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("what")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--bytes", type=int, default=1 << 30)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--conns", type=int, default=1000)
    p.add_argument("--reqs", type=int, default=100)
    p.add_argument("--path", default="/")
    p.add_argument("--sha256")
    p.add_argument("--send")
    p.add_argument("--limit", type=int, default=2)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--in-port-file")
    p.add_argument("--target-port-file")
    argv = sys.argv[1:]
    cmd = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    a = p.parse_args(argv)
    a.cmd = cmd
    if a.what == "serve":
        try:
            asyncio.run(serve(a))
        except KeyboardInterrupt:
            pass
        return 0
    if a.what in ("load", "http"):
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return asyncio.run(load(a) if a.what == "load" else http(a))
    f = {"tput": tput, "lat": lat, "reset": reset, "maxconn": maxconn, "cut": cut}.get(a.what)
    if f is None:
        p.error("unknown subcommand " + a.what)
    return f(a)


if __name__ == "__main__":
    sys.exit(main())
