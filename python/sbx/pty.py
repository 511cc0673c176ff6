"""Terminal sessions held in the sandbox (docs/pty.md), as the reference's SandboxPtySession.

A session is libsbx's struct sbx_pty: the claim of a session the sandbox's holder keeps, and its
live stream, an operation of the connection driven by the asyncio loop like every other. Output
waits in libsbx's buffers until read (the agent's credit is returned only then); a read with
nothing buffered waits for the connection's next step. Every answer of the agent is checked by
libsbx (host/ptymsg.c) before it reaches here.
"""
import asyncio
import ctypes
from ctypes import byref, c_int

from . import _lib
from ._core import _FAILED  # what a result reader returns on failure
from ._lib import lib
from .errors import SbxError, from_err

EVICTED = 103  # SBX_PTY_EVICTED (ECONNABORTED)
CHUNK = 1 << 16


class SandboxPtyError(RuntimeError):
    """A PTY session failed outside its program's normal exit: evicted by a takeover (errno
    EVICTED), its holder gone, the connection lost."""

    def __init__(self, message, errno=0):
        super().__init__(message)
        self.errno = errno


class PtySession:
    """One live terminal (SandboxPtySession): an async context manager, async iterable over
    its output chunks; close() ends a session this client created and only detaches an
    attached one."""

    def __init__(self, conn, session_id, ptr, mode, created, start=0, lost=0):
        self._conn = conn
        self._p = ptr
        self.session_id = session_id
        self.mode = mode
        self._created = created
        self.closed = False
        self.start = start  # where the replay began
        self.lost = lost  # bytes asked for that had left the window
        self._buf = ctypes.create_string_buffer(CHUNK)

    # ---- output ----

    def _ended(self):
        code = c_int()
        e = _lib.Err()
        if lib.sbx_pty_end_status(self._p, byref(code), byref(e)) == 0:
            return code.value
        raise SandboxPtyError(e.text(), e.errnum)

    async def _wait_step(self, deadline):
        if self._conn._closed:
            raise SandboxPtyError("the connection is closed")
        fut = self._conn._loop.create_future()
        self._conn._wakers.add(fut)
        timeout = None if deadline is None else deadline - self._conn._loop.time()
        if timeout is not None and timeout <= 0:
            raise TimeoutError("no PTY output in time")
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError("no PTY output in time") from None
        finally:
            self._conn._wakers.discard(fut)

    async def _read(self, chan, timeout_s):
        if self.closed:
            raise SandboxPtyError("the PTY session is closed")
        loop = self._conn._loop
        deadline = None if timeout_s is None else loop.time() + timeout_s
        ended = c_int()
        while True:
            n = lib.sbx_pty_take(self._p, chan, self._buf, CHUNK, byref(ended))
            if n > 0:
                return self._buf.raw[:n]
            if ended.value:
                self._ended()
                return b""
            await self._wait_step(deadline)

    async def read(self, timeout_s=None):
        """The next output chunk (all terminal output; stdout in pipe mode); b"" once the
        program exited and the stream is drained."""
        return await self._read(1, timeout_s)

    async def read_stderr(self, timeout_s=None):
        """The next stderr chunk (pipe mode); in PTY mode b"" once the program exited."""
        return await self._read(2, timeout_s)

    def __aiter__(self):
        return self

    async def __anext__(self):
        chunk = await self.read()
        if chunk == b"":
            raise StopAsyncIteration
        return chunk

    # ---- input and control ----

    async def write(self, data):
        """Raw bytes to the program's input, in order."""
        if self.closed:
            raise SandboxPtyError("the PTY session is closed")
        data = bytes(data)
        while data:
            e = _lib.Err()
            n = lib.sbx_pty_put(self._p, data, len(data), byref(e))
            if n < 0:
                raise SandboxPtyError(e.text(), e.errnum)
            data = data[n:]
            self._conn._step()
            if data:
                await self._wait_step(self._conn._loop.time() + 30)

    async def _control(self, start, what):
        await self._conn.call(start, _control_result, what)

    async def resize(self, rows, cols):
        sid = _lib.enc(self.session_id)
        await self._control(lambda e: lib.sbx_pty_resize_async(self._conn._s, sid, int(rows),
                                                               int(cols), byref(e)), "resize")

    async def send_signal(self, signal):
        sid, name = _lib.enc(self.session_id), _lib.enc(signal)
        await self._control(lambda e: lib.sbx_pty_signal_async(self._conn._s, sid, name,
                                                               byref(e)), "send_signal")

    async def wait_exit(self, timeout_s=None):
        """Waits until the program exited (its output stays buffered to be read): its code."""
        loop = self._conn._loop
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while not lib.sbx_op_done(lib.sbx_pty_op(self._p)):
            await self._wait_step(deadline)
        return self._ended()

    async def close(self):
        """Idempotent: detaches; a session this client created is also ended."""
        if self.closed:
            return
        self.closed = True
        lib.sbx_pty_detach(self._p)
        self._p = None
        self._conn._step()
        if self._created:
            sid = _lib.enc(self.session_id)
            try:
                await self._control(lambda e: lib.sbx_pty_close_async(self._conn._s, sid,
                                                                      byref(e)), "close")
            except SbxError:
                pass  # the connection is gone: the holder ends it after an hour idle

    async def run_detached(self, command, poll_interval_s=15.0):
        """Runs command (under /bin/sh -c) in a terminal session of its own, holding the
        connection only for brief polls: between them nothing is attached and the holder keeps
        the output in its window (1 MiB). Returns (the merged output, the exit code, or None
        when a signal ended it). Output past the window raises SandboxPtyError, never
        returned truncated."""
        conn = self._conn
        s = await spawn(conn, command=command)
        sid = s.session_id
        lib.sbx_pty_detach(s._p)  # the session lives on; its output stays in the window
        s._p, s.closed = None, True
        conn._step()
        try:
            while True:
                st = await status(conn, sid)
                if st.base > 0:
                    raise SandboxPtyError("run_detached: %d bytes of output left the %d-byte "
                                          "window" % (st.base, st.retain))
                if st.exited:
                    break
                await asyncio.sleep(poll_interval_s)
            t = await attach(conn, sid, takeover=True, since=0)
            if t.lost:
                raise SandboxPtyError("run_detached: %d bytes of output lost" % t.lost)
            out = bytearray()
            async for chunk in t:
                out += chunk
            t.closed = True
            lib.sbx_pty_detach(t._p)
            t._p = None
            return bytes(out), (None if st.signal else st.code)
        finally:
            try:
                await conn.call(lambda e: lib.sbx_pty_close_async(conn._s, _lib.enc(sid),
                                                                  byref(e)),
                                _control_result, "close")
            except SbxError:
                pass  # the connection is gone: the holder ends it after an hour idle

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()



def _control_result(op, e):
    return None if lib.sbx_pty_op_result(op, byref(e)) == 0 else _FAILED


async def spawn(conn, command=None, argv=None, cwd=None, env=None, user=None, rows=24,
                cols=80, pty=True, retain=0):
    """A new session and its stream: PtySession."""
    spec = _lib.PtySpec()
    keep = []
    spec.command = _lib.enc(command) if command is not None else None
    if argv is not None:
        ptr, arr = _lib.cstr_array(argv)
        spec.argv = ptr
        keep.append(arr)
    if env:
        ptr, arr = _lib.cstr_array(["%s=%s" % kv for kv in env.items()])
        spec.env = ptr
        keep.append(arr)
    spec.cwd = _lib.enc(cwd) if cwd else None
    spec.user = _lib.enc(str(user)) if user is not None else None
    spec.rows, spec.cols, spec.pipe, spec.retain = int(rows), int(cols), 0 if pty else 1, retain
    idbuf = ctypes.create_string_buffer(17)

    def result(op, e):
        return idbuf.value.decode() if lib.sbx_pty_spawn_result(op, idbuf, byref(e)) == 0 \
            else _FAILED

    sid = await conn.call(lambda e: lib.sbx_pty_spawn_async(conn._s, byref(spec), byref(e)),
                          result, "create_pty", keep=(spec, keep))
    try:
        return await attach(conn, sid, takeover=False, since=0, created=True)
    except BaseException:
        await conn.call(lambda e: lib.sbx_pty_close_async(conn._s, _lib.enc(sid), byref(e)),
                        _control_result, "close")
        raise


async def status(conn, session_id):
    """The session's state as the holder reports it (checked by libsbx): a PtyInfo."""
    st = _lib.PtyInfo()
    sid = _lib.enc(session_id)

    def result(op, e):
        return None if lib.sbx_pty_status_result(op, byref(st), byref(e)) == 0 else _FAILED

    await conn.call(lambda e: lib.sbx_pty_status_async(conn._s, sid, byref(e)), result,
                    "pty status %s" % session_id)
    return st


async def attach(conn, session_id, takeover=True, since=None, created=False):
    """Claims session_id (takeover evicts its holder) and opens its stream: PtySession."""
    sid = _lib.enc(session_id)
    ai = _lib.PtyAttachInfo()

    def result(op, e):
        return None if lib.sbx_pty_attach_result(op, byref(ai), byref(e)) == 0 else _FAILED

    try:
        await conn.call(lambda e: lib.sbx_pty_attach_async(conn._s, sid, 1 if takeover else 0,
                                                           int(since or 0), 0, byref(e)),
                        result, "attach_pty %s" % session_id)
    except SbxError as exc:
        raise SandboxPtyError(str(exc), exc.errno) from exc
    e = _lib.Err()
    p = lib.sbx_pty_open(conn._s, sid, byref(ai), byref(e))
    if not p:
        raise from_err(e, "attach_pty %s" % session_id)
    conn._step()
    return PtySession(conn, session_id, p, "pipe" if ai.st.pipe else "pty", created,
                      start=ai.start, lost=ai.lost)
