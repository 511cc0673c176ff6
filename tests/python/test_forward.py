"""SbxProvider.forward_ports / validate_port_forwarding / endpoint (docs/forwarding.md, section
1; docs/python.md) on real ns sandboxes, which have only `lo`: BusyBox wget inside reaches a
Python http.server on the host through forward_ports, BusyBox httpd inside is reached from the
host with urllib through endpoint. The first two tests need no sandbox: they play an
impersonated agent (tests/fake/agent.py) for the Python plumbing and an old agent's refusal.
"""
import asyncio
import errno
import hashlib
import http.client
import http.server
import os
import re
import socket
import threading
import time
import urllib.request

import pytest

from conftest import TOP
from sbx import (AsyncSandbox, SandboxEndpoint, SandboxSpec, SandboxTransferError,
                 SandboxUnavailableError, SandboxUsageError, SbxProvider, transfer)
from sbx._lib import lib

FAKE = "python3 %s" % (TOP / "tests" / "fake" / "agent.py")
DATA = os.urandom(16 << 20)
SLOW_BYTES = 1 << 30  # never all sent: the transfer is cut long before
CHUNK = 64 << 10


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self):
        srv = self.server
        srv.requests.append(self.path)
        if self.path == "/data":
            self.send_response(200)
            self.send_header("Content-Length", str(len(DATA)))
            self.end_headers()
            self.wfile.write(DATA)
            return
        if self.path == "/slow":  # 64 KiB every 10 ms, until the client goes away
            self.send_response(200)
            self.send_header("Content-Length", str(SLOW_BYTES))
            self.end_headers()
            block = b"s" * CHUNK
            try:
                while srv.slow_sent < SLOW_BYTES:
                    self.wfile.write(block)
                    srv.slow_sent += CHUNK
                    time.sleep(0.01)
            except OSError:
                srv.slow_broken.set()
            return
        self.send_error(404)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.requests = []
    srv.slow_sent = 0
    srv.slow_broken = threading.Event()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


async def until(cond, seconds=10, what="condition"):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if await cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("%s not met within %s s" % (what, seconds))


async def wait_ready_file(sb, path, task, seconds=10):
    """Until path exists in the sandbox; the forward task's error raised if it ended first."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if task.done():
            task.result()
            raise AssertionError("the forward ended without an error")
        if await transfer.remote_kind(sb, path) == "file":
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no %s within %s s" % (path, seconds))


def refused(port):
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        return False
    except ConnectionRefusedError:
        return True
    finally:
        s.close()


# ---- without a sandbox ----

async def test_plumbing_on_an_impersonated_agent(tmp_path):
    """The ready file made, one connection's bytes both ways, the task cancelled: it ends with
    CancelledError, the C op freed, nothing in flight, the connection still answers.
    Shown able to fail: with Forward.stop freeing the op at once instead of waiting for the
    library to end it, the session still held it (sbx_session_ops 1) when the task ended."""
    got = []
    lsn = socket.socket()
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(4)
    tport = lsn.getsockname()[1]

    def serve():
        c, _ = lsn.accept()
        b = b""
        while True:
            x = c.recv(65536)
            if not x:
                break
            b += x
        got.append(b)
        c.sendall(b"pong\n")
        c.close()

    threading.Thread(target=serve, daemon=True).start()
    p = SbxProvider("local")
    back = tmp_path / "back"
    h = await p.connect({"provider": "sbx", "spec": "via:%s fwd_echo=%s" % (FAKE, back)})
    try:
        p.validate_port_forwarding(h)
        task = asyncio.ensure_future(p.forward_ports(h, "127.0.0.1", {18080: tport},
                                                     str(tmp_path / "ready")))

        async def echoed():
            return back.exists()

        await until(echoed, 10, "the agent's reply")
        assert (tmp_path / "ready").exists()
        assert back.read_bytes() == b"pong\n" and got == [b"ping\n"]
        conn = h.raw.conn
        assert len(conn._forwards) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert conn.in_flight == 0 and lib.sbx_session_ops(conn._s) == 0
        assert not conn._forwards
        assert await conn.ping() > 0
    finally:
        await p.close(h)
        lsn.close()


async def test_closing_the_handle_ends_a_running_forward(tmp_path):
    """close() under a running forward_ports: the task raises SandboxUnavailableError (an
    outage, not a cancellation), and the op was given back before the session closed."""
    p = SbxProvider("local")
    lsn = socket.socket()
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(4)
    h = await p.connect({"provider": "sbx",
                         "spec": "via:%s fwd_echo=%s" % (FAKE, tmp_path / "back")})
    task = asyncio.ensure_future(p.forward_ports(h, "127.0.0.1", {18080: lsn.getsockname()[1]},
                                                 str(tmp_path / "ready")))

    async def ready():
        return (tmp_path / "ready").exists()

    await until(ready, 10, "the ready file")
    conn = h.raw.conn
    await p.close(h)
    with pytest.raises(SandboxUnavailableError, match="connection was closed"):
        await asyncio.wait_for(task, 10)
    assert not conn._forwards and conn.in_flight == 0
    lsn.close()


async def test_endpoint_plumbing_on_an_impersonated_agent():
    """endpoint() through an agent that echoes every inward connection: the URL's port
    reaches it, a second call gives the same endpoint on the same forward, an undeclared port
    is refused, close() closes the host's listener."""
    p = SbxProvider("local")
    h = await p.connect({"provider": "sbx", "spec": "via:%s fwd_in_prefix" % FAKE,
                         "ports": [8080]})
    loop = asyncio.get_running_loop()

    def talk(port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(b"hello")
            c.shutdown(socket.SHUT_WR)
            got = b""
            while True:
                b = c.recv(65536)
                if not b:
                    return got
                got += b

    try:
        ep = await p.endpoint(h, 8080)
        m = re.fullmatch(r"http://127\.0\.0\.1:(\d+)", ep.endpoint)
        assert m and ep.headers == {}, ep
        lport = int(m.group(1))
        assert await loop.run_in_executor(None, talk, lport) == b"echo:hello"
        fw = h.raw.endpoints[8080].forward
        assert await p.endpoint(h, 8080) == ep
        assert h.raw.endpoints[8080].forward is fw
        assert await loop.run_in_executor(None, talk, lport) == b"echo:hello"
        assert fw.counts()[1] == 2
        with pytest.raises(SandboxUsageError, match="not declared"):
            await p.endpoint(h, 8081)
    finally:
        await p.close(h)
    assert refused(lport)


async def test_an_agent_that_cannot_forward_is_refused():
    """Shown able to fail: with the hello's fwd field missing from _lib.Hello, validate read
    0 for every agent (and the ABI test failed)."""
    p = SbxProvider("local")
    p.validate_port_forwarding()  # this libsbx forwards
    h = await p.connect({"provider": "sbx", "spec": "via:%s fwd_none" % FAKE})
    try:
        with pytest.raises(SandboxUsageError, match="cannot forward"):
            p.validate_port_forwarding(h)
        with pytest.raises(SandboxUsageError, match="cannot forward"):
            await p.forward_ports(h, "127.0.0.1", (18080,), None)
        assert h.raw.conn.in_flight == 0
    finally:
        await p.close(h)


async def test_bad_arguments_are_refused_before_anything_starts():
    p = SbxProvider("local")
    h = await p.connect({"provider": "sbx", "spec": "via:%s fwd_none" % FAKE})
    try:
        for ports in [(0,), (70000,), ("80",), (True,), (), {}, {80: 0}]:
            with pytest.raises(SandboxUsageError):
                await p.forward_ports(h, "127.0.0.1", ports, None)
        with pytest.raises(SandboxUsageError, match="absolute"):
            await p.forward_ports(h, "127.0.0.1", (80,), "relative/ready")
        with pytest.raises(SandboxUsageError):
            await p.forward_ports(h, "", (80,), None)
        with pytest.raises(SandboxUsageError, match="not declared"):
            await p.endpoint(h, 80)
    finally:
        await p.close(h)
    with pytest.raises(ValueError):
        SandboxEndpoint(endpoint="127.0.0.1:80")


# ---- out of the sandbox: forward_ports ----

async def test_forward_ports_download_then_cancel_mid_transfer(provider, sandbox, server):
    """wget inside waits for the ready file, then downloads 16 MiB (SHA-256 checked); a slow
    download cut by cancelling the task fails inside with a reset; nothing is left in flight;
    the same forward again as a mapping. Shown able to fail: with forward_ports not passing
    ready_file on, the client waiting for it gave up (exit 99)."""
    sb, h = sandbox, sandbox.handle
    port = server.server_address[1]
    conn = await sb.connection()
    # The client starts first and waits for the ready file: if the file came before the
    # listener, its wget would be refused.
    await sb.exec("rm -f /tmp/fwd.ready")
    client = asyncio.ensure_future(sb.exec(
        "i=0; while [ ! -e /tmp/fwd.ready ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 99; "
        "usleep 10000; done; wget -q -O /tmp/data http://127.0.0.1:%d/data && "
        "sha256sum /tmp/data" % port, timeout_s=60))
    await asyncio.sleep(0.2)
    assert server.requests == []
    fwd = asyncio.ensure_future(provider.forward_ports(h, "127.0.0.1", (port,),
                                                       "/tmp/fwd.ready"))
    done, _ = await asyncio.wait({client, fwd}, timeout=60,
                                 return_when=asyncio.FIRST_COMPLETED)
    if fwd in done:
        fwd.result()  # its error
    r = await asyncio.wait_for(client, 60)
    assert r.return_code == 0, r
    assert r.stdout.split()[0] == hashlib.sha256(DATA).hexdigest()
    assert server.requests == ["/data"]
    assert not fwd.done()

    # A large download in progress when the task is cancelled: the client inside sees the
    # connection reset (an error), never a clean short file; so does the server.
    big = asyncio.ensure_future(sb.exec(
        "wget -q -O /tmp/big http://127.0.0.1:%d/slow; echo rc=$?; stat -c %%s /tmp/big"
        % port, timeout_s=120))

    async def flowing():
        if server.slow_sent < (2 << 20):
            return False
        return await transfer.remote_kind(sb, "/tmp/big") == "file"

    await until(flowing, 30, "the slow download under way")
    t = time.monotonic()
    fwd.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fwd
    assert time.monotonic() - t < 10
    r = await asyncio.wait_for(big, 30)
    rc, size = re.search(r"rc=(\d+)\n(\d+)", r.stdout).groups()
    assert rc != "0" and "reset" in r.stderr, r  # wget failed: the connection was reset
    assert 0 < int(size) < SLOW_BYTES
    assert server.slow_broken.wait(10), "the host's side of the connection was not cut"

    # Nothing left in flight, the session usable, the inside listener gone.
    assert conn.in_flight == 0 and lib.sbx_session_ops(conn._s) == 0 and not conn._forwards
    assert await conn.ping() > 0
    r = await sb.exec("wget -q -O /dev/null http://127.0.0.1:%d/data" % port, timeout_s=30)
    assert r.return_code != 0, r

    # The same forward again, as a mapping {inside: host port}: nothing of the first is left
    # to conflict.
    await sb.exec("rm -f /tmp/fwd.ready")
    fwd = asyncio.ensure_future(provider.forward_ports(h, "127.0.0.1", {8081: port},
                                                       "/tmp/fwd.ready"))

    await wait_ready_file(sb, "/tmp/fwd.ready", fwd)
    r = await sb.exec("wget -q -O - http://127.0.0.1:8081/data | sha256sum", timeout_s=60)
    assert r.stdout.split()[0] == hashlib.sha256(DATA).hexdigest(), r
    fwd.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fwd
    assert conn.in_flight == 0 and lib.sbx_session_ops(conn._s) == 0


async def test_an_inside_port_in_use_raises(provider, sandbox, server):
    sb, h = sandbox, sandbox.handle
    port = server.server_address[1]
    await sb.exec("rm -f /tmp/r1")
    first = asyncio.ensure_future(provider.forward_ports(h, "127.0.0.1", (port,), "/tmp/r1"))

    await wait_ready_file(sb, "/tmp/r1", first)
    with pytest.raises(SandboxTransferError) as e:
        await asyncio.wait_for(provider.forward_ports(h, "127.0.0.1", (port,), None), 20)
    assert e.value.errno == errno.EADDRINUSE and "in use" in str(e.value), e.value
    conn = await sb.connection()
    assert len(conn._forwards) == 1  # the failed one freed
    # The first one is untouched by the second's failure.
    r = await sb.exec("wget -q -O - http://127.0.0.1:%d/data | sha256sum" % port, timeout_s=60)
    assert r.stdout.split()[0] == hashlib.sha256(DATA).hexdigest(), r
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_validate_on_a_real_agent(provider, sandbox):
    provider.validate_port_forwarding()
    await sandbox.connection()
    provider.validate_port_forwarding(sandbox.handle)


# ---- into the sandbox: endpoint ----

def fetch(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


async def fetch_retry(url, seconds=10):
    """httpd may still be starting: its refused connection reaches the client as a reset."""
    loop = asyncio.get_running_loop()
    end = time.monotonic() + seconds
    while True:
        try:
            return await loop.run_in_executor(None, fetch, url)
        except (OSError, http.client.HTTPException):
            if time.monotonic() > end:
                raise
            await asyncio.sleep(0.1)


async def test_endpoint_for_a_declared_port(provider):
    sb = await AsyncSandbox.create(provider, SandboxSpec(
        image="busybox", ports=(8080,), files={"/www/index.html": "hello endpoint\n"},
        entrypoint=["httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/www"]))
    try:
        ep = await sb.endpoint(8080)
        m = re.fullmatch(r"http://127\.0\.0\.1:(\d+)", ep.endpoint)
        assert m and ep.headers == {}, ep
        lport = int(m.group(1))
        assert await fetch_retry(ep.endpoint + "/index.html") == b"hello endpoint\n"
        r = await sb.exec("head -c 8388608 /dev/urandom >/www/big && sha256sum /www/big")
        body = await fetch_retry(ep.endpoint + "/big")
        assert hashlib.sha256(body).hexdigest() == r.stdout.split()[0]
        # Once per handle and port: the same endpoint again, also for calls at once.
        again = await asyncio.gather(*(sb.endpoint(8080) for _ in range(3)))
        assert all(a == ep for a in again)
        fw = sb.handle.raw.endpoints[8080].forward
        assert fw.counts()[1] >= 2
        # A port not declared is refused (a ValueError), and starts nothing.
        with pytest.raises(SandboxUsageError, match="not declared"):
            await sb.endpoint(9090)
        with pytest.raises(ValueError):
            await sb.endpoint("8080")
        assert list(sb.handle.raw.endpoints) == [8080]
        # A pause closes the connection and so the endpoint; after the resume it comes
        # back on the same port.
        await provider.pause(sb.handle)
        assert refused(lport)
        await provider.resume(sb.handle)
        ep2 = await sb.endpoint(8080)
        assert ep2 == ep
        assert await fetch_retry(ep2.endpoint + "/index.html") == b"hello endpoint\n"
    finally:
        await sb.close()
    assert refused(lport)  # closing the sandbox closed the host's listener


async def test_endpoint_survives_a_forward_ports_task_on_the_same_sandbox(provider, server):
    """Both directions on one connection: a forward_ports task cancelled leaves the
    endpoint's forward running."""
    sb = await AsyncSandbox.create(provider, SandboxSpec(
        image="busybox", ports=(8080,), files={"/www/index.html": "both\n"},
        entrypoint=["httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/www"]))
    try:
        ep = await sb.endpoint(8080)
        port = server.server_address[1]
        await sb.exec("rm -f /tmp/r")
        task = asyncio.ensure_future(sb.forward_ports("127.0.0.1", (port,), "/tmp/r"))

        await wait_ready_file(sb, "/tmp/r", task)
        r = await sb.exec("wget -q -O - http://127.0.0.1:%d/data | sha256sum" % port,
                          timeout_s=60)
        assert r.stdout.split()[0] == hashlib.sha256(DATA).hexdigest(), r
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await fetch_retry(ep.endpoint + "/index.html") == b"both\n"
        conn = await sb.connection()
        assert conn.in_flight == 1 and len(conn._forwards) == 1  # the endpoint's only
    finally:
        await sb.close()
