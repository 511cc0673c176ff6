#!/usr/bin/env python3
"""fwd_ping.py SBX RUNNER PORT BYTES: control frames beside a forwarded bulk stream (issue 21,
point 3). One `sbx --runner RUNNER session` holds an inward forward to PORT inside, where a
server sends BYTES and closes; a host client reads them all through the forward while the same
session is pinged (one ping in flight, a new one each millisecond). Prints the pings' p50/p99
alone (before the stream) and during it, the stream's throughput, and whether the p99 during
the stream is within 10 ms. Standard library only."""
import base64
import json
import socket
import subprocess
import sys
import threading
import time


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))] if xs else float("nan")


def main():
    sbx, runner, port, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    p = subprocess.Popen([sbx, "--runner", runner, "session"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    lock = threading.Lock()
    replies = {}
    cond = threading.Condition(lock)

    def reader():
        for line in p.stdout:
            m = json.loads(line)
            with cond:
                replies.setdefault(m.get("id"), []).append(m)
                cond.notify_all()

    threading.Thread(target=reader, daemon=True).start()

    def send(o):
        p.stdin.write(json.dumps(o) + "\n")
        p.stdin.flush()

    def wait(i, timeout=30):
        end = time.time() + timeout
        with cond:
            while i not in replies:
                left = end - time.time()
                if left <= 0:
                    sys.exit("no answer for %s" % i)
                cond.wait(left)
            return replies.pop(i)

    send({"id": "f", "op": "forward", "in": ["0:127.0.0.1:%d" % port], "stream": True})
    ev = wait("f")[0]
    assert ev.get("event") == "ready", ev
    text = base64.b64decode(ev["data_b64"]).decode()
    lport = int(text.split()[1].split(":")[1])  # "in 127.0.0.1:LPORT -> ..."

    def pings(n=None, until=None):
        rtts, k = [], 0
        while (n is None or k < n) and (until is None or not until.is_set()):
            t = time.monotonic()
            i = "p%d" % k
            send({"id": i, "op": "ping"})
            m = wait(i)[0]
            assert m.get("ok"), m
            rtts.append((time.monotonic() - t) * 1000)
            k += 1
            time.sleep(max(0, 0.001 - (time.monotonic() - t)))
        return rtts

    alone = pings(n=500)
    done = threading.Event()
    got = [0, 0.0]

    def client():
        c = socket.create_connection(("127.0.0.1", lport))
        t = time.monotonic()
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            got[0] += len(b)
        got[1] = time.monotonic() - t
        c.close()
        done.set()

    th = threading.Thread(target=client)
    th.start()
    during = pings(until=done)
    th.join()
    send({"op": "cancel", "id": "f"})
    p.stdin.close()
    p.wait(30)
    ok = got[0] == total
    p99 = pct(during, 99)
    print("forward ping  alone: p50 %.2f ms, p99 %.2f ms (%d pings)" % (pct(alone, 50), pct(alone, 99), len(alone)))
    print("forward ping  during %d MiB through --in: p50 %.2f ms, p99 %.2f ms (%d pings); stream %.0f MiB/s%s"
          % (total >> 20, pct(during, 50), p99, len(during), got[0] / got[1] / 2**20 if got[1] else 0,
             "" if ok else ", SHORT: %d bytes" % got[0]))
    print("  target: ping p99 <= 10 ms during the stream: %s" % ("met" if p99 <= 10 and ok else "not met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
