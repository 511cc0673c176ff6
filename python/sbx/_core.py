"""libsbx sessions on the asyncio event loop: no thread per sandbox.

A Connection owns one struct sbx_session. Every operation starts with libsbx's _async call
and is awaited as a future; the loop waits on the fds the session names (sbx_session_fds,
through loop.add_reader / add_writer) and on its next deadline (loop.call_at), and each time one
is due it calls sbx_session_step, which never blocks, then settles the futures of the
operations that ended (sbx_session_next_done). Many operations run at once on one connection
and any number of connections on one loop. Opening and closing a session (a handshake, a
channel process to reap) and making a sandbox are blocking library calls: they run in the
loop's default executor, which never touches a session the loop drives.
"""
import asyncio
import ctypes
import itertools
from ctypes import byref, c_double, c_int, c_int64, c_size_t, c_uint8, c_void_p

from . import _lib
from ._lib import lib
from .errors import SandboxUnavailableError, SandboxUsageError, SbxError, from_err

INT64_MAX = (1 << 63) - 1
MAX_FDS = 72


class ExecOutput:
    """A command's stdout and stderr as it ran, each kept up to `cap` bytes (the rest counted
    and dropped: a sandbox that floods its output cannot fill the host's memory)."""

    def __init__(self, cap, on_chunk=None):
        self.cap = cap
        self.parts = {1: [], 2: []}
        self.kept = {1: 0, 2: 0}
        self.dropped = {1: 0, 2: 0}
        self.on_chunk = on_chunk
        self.cancelled = False
        self.fn = _lib.OUTPUT_FN(self._take)

    def _take(self, ctx, chan, data, length):
        if self.cancelled:
            return -1
        if chan not in self.parts:
            return 0
        chunk = ctypes.string_at(data, length)
        if self.on_chunk is not None:
            try:
                self.on_chunk(chan, chunk)
            except Exception:  # a consumer's failure cancels the command, never the loop
                return -1
        room = self.cap - self.kept[chan]
        if room > 0:
            self.parts[chan].append(chunk[:room])
            self.kept[chan] += min(room, length)
        self.dropped[chan] += max(0, length - max(room, 0))
        return 0

    def stdout(self):
        return b"".join(self.parts[1])

    def stderr(self):
        return b"".join(self.parts[2])


class Connection:
    """One retained connection to a sandbox's agent, driven by the running loop."""

    _tags = itertools.count(1)

    def __init__(self, ptr, spec):
        self._s = ptr
        self.spec = spec
        self._loop = asyncio.get_running_loop()
        self._ops = {}  # tag -> (future, kept objects)
        self._orphans = []  # what cancelled operations may still use until they end
        self._readers = set()
        self._writers = set()
        self._timer = None
        self._timer_at = None
        self._closed = False
        self._wakers = set()  # futures of readers waiting for the next step (sbx.pty)
        self._forwards = set()  # Forward objects whose op is not freed yet
        self._fds = (_lib.PollFd * MAX_FDS)()
        self._deadline = c_int64()

    # ---- opening and closing ----

    @classmethod
    async def open(cls, spec, timeout_s=30.0, agent_dir=None, agent=None):
        oo = _lib.OpenOpts(agent_dir=_lib.enc(agent_dir), agent=_lib.enc(agent),
                           timeout_s=float(timeout_s), brief=0)
        ptr = c_void_p()
        err = _lib.Err()

        def work():
            return lib.sbx_open(_lib.enc(spec), byref(oo), byref(ptr), byref(err))

        rc = await asyncio.get_running_loop().run_in_executor(None, work)
        if rc != 0:
            raise from_err(err, "open %s" % spec)
        return cls(ptr, spec)

    @property
    def channel(self):
        return lib.sbx_session_channel(self._s).decode()

    def hello(self):
        return lib.sbx_session_hello(self._s).contents

    def stderr_text(self):
        return (lib.sbx_session_stderr(self._s) or b"").decode("utf-8", "replace")

    @property
    def in_flight(self):
        return len(self._ops)

    async def close(self):
        """Ends every operation in flight (unavailable) and closes the channel. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._disarm()
        # Forwards are given back to the library before the session is closed in the
        # executor: freed here (a running one is cancelled and left to the session, which
        # frees it as it closes), so no coroutine of the loop touches them while it closes.
        for fw in list(self._forwards):
            fw._drop("forward: the connection was closed")
        for tag, (fut, _) in list(self._ops.items()):
            if not fut.done():
                fut.set_exception(SandboxUnavailableError("the connection was closed"))
        self._ops.clear()
        self._wake()
        ptr, self._s = self._s, None
        await self._loop.run_in_executor(None, lib.sbx_session_close, ptr)
        self._orphans.clear()

    # ---- the loop's side ----

    def _disarm(self):
        for fd in self._readers:
            self._loop.remove_reader(fd)
        for fd in self._writers:
            self._loop.remove_writer(fd)
        self._readers.clear()
        self._writers.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_at = None

    def _arm(self):
        """Registers what the session waits on now. Every fd is registered afresh: an fd the
        library closed and reopened under the same number between two steps must not be
        left with a stale registration."""
        if self._closed:
            return
        n = lib.sbx_session_fds(self._s, self._fds, MAX_FDS, byref(self._deadline))
        want_r, want_w = set(), set()
        for i in range(n):
            if self._fds[i].events & _lib.POLLIN:
                want_r.add(self._fds[i].fd)
            if self._fds[i].events & _lib.POLLOUT:
                want_w.add(self._fds[i].fd)
        for fd in self._readers:
            self._loop.remove_reader(fd)
        for fd in self._writers:
            self._loop.remove_writer(fd)
        for fd in want_r:
            self._loop.add_reader(fd, self._step)
        for fd in want_w:
            self._loop.add_writer(fd, self._step)
        self._readers, self._writers = want_r, want_w
        d = self._deadline.value
        if d == INT64_MAX:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = self._timer_at = None
            return
        if self._timer is not None and self._timer_at == d:
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, (d - lib.sbx_now_ns()) / 1e9)
        self._timer_at = d
        self._timer = self._loop.call_later(delay, self._on_timer)

    def _on_timer(self):
        self._timer = self._timer_at = None
        self._step()

    def _step(self):
        if self._closed:
            return
        lib.sbx_session_step(self._s)
        while True:
            op = lib.sbx_session_next_done(self._s)
            if not op:
                break
            entry = self._ops.pop(lib.sbx_op_tag(op), None)
            if entry is not None and not entry[0].done():
                entry[0].set_result(op)
        self._wake()
        self._arm()

    def _wake(self):
        for fut in self._wakers:
            if not fut.done():
                fut.set_result(None)
        self._wakers.clear()

    async def run(self, op, keep, err, what, timeout_s=None):
        """Awaits op (an _async call's result); returns it, ended, for its _result reader.
        Cancelling the await cancels the operation in the sandbox (CANCEL; an exec's group is
        killed; an upload leaves the old tree)."""
        if not op:
            raise from_err(err, what)
        if self._closed:
            lib.sbx_op_free(op)
            raise SandboxUnavailableError("%s: the connection is closed" % what)
        tag = next(self._tags)
        fut = self._loop.create_future()
        self._ops[tag] = (fut, keep)
        lib.sbx_op_set_tag(op, tag)
        if timeout_s:
            lib.sbx_op_set_deadline(op, float(timeout_s))
        self._step()  # the request may already be complete (a broken session) or writable
        try:
            return await fut
        except asyncio.CancelledError:
            self._ops.pop(tag, None)
            if not self._closed:
                for k in keep:
                    if isinstance(k, ExecOutput):
                        k.cancelled = True
                self._orphans.append(keep)
                lib.sbx_op_free(op)
                self._arm()
            raise

    async def call(self, start, result, what, keep=(), timeout_s=None):
        """Starts an operation with start(err), awaits it, reads it with result(op, err) and
        frees it: result's return value, or the error as an exception."""
        if self._closed:
            raise SandboxUnavailableError("%s: the connection is closed" % what)
        err = _lib.Err()
        op = start(err)
        op = await self.run(op, keep, err, what, timeout_s)
        try:
            err = _lib.Err()
            value = result(op, err)
            if value is _FAILED:
                raise from_err(err, what)
            return value
        finally:
            lib.sbx_op_free(op)

    # ---- operations ----

    async def ping(self, timeout_s=None):
        rtt = c_double()
        return await self.call(
            lambda e: lib.sbx_ping_async(self._s, byref(e)),
            lambda op, e: rtt.value if lib.sbx_ping_result(op, byref(rtt), byref(e)) == 0
            else _FAILED, "ping", timeout_s=timeout_s)

    async def kind(self, path, timeout_s=None):
        k = c_int()
        p = _lib.enc(path)
        return await self.call(
            lambda e: lib.sbx_kind_async(self._s, p, byref(e)),
            lambda op, e: _lib.KIND_NAMES[k.value]
            if lib.sbx_kind_result(op, byref(k), byref(e)) == 0 else _FAILED,
            "kind %s" % path, keep=(p,), timeout_s=timeout_s)

    async def exec(self, argv=None, shell=None, cwd=None, env=None, user=None, timeout_s=None,
                   stdin=None, env_clear=False, output_cap=64 << 20, on_chunk=None,
                   linger_ms=0):
        """Runs a command to its end: (struct sbx_exec_result, ExecOutput)."""
        o = _lib.ExecOpts()
        lib.sbx_exec_opts_init(byref(o))
        keep = [o]
        if argv is not None:
            ptr, arr = _lib.cstr_array(argv)
            o.argv = ptr
            keep.append(arr)
        if shell is not None:
            o.shell = _lib.enc(shell)
            keep.append(o.shell)
        o.cwd = _lib.enc(cwd)
        if env:
            ptr, arr = _lib.cstr_array(["%s=%s" % (k, v) for k, v in env.items()])
            o.env = ptr
            keep.append(arr)
        o.env_clear = 1 if env_clear else 0
        o.user = _lib.enc(None if user is None else str(user))
        o.timeout_s = float(timeout_s or 0)
        o.linger_ms = linger_ms
        if stdin is not None:
            buf = ctypes.create_string_buffer(bytes(stdin), len(stdin))
            o.stdin_data = ctypes.cast(buf, c_void_p)
            o.stdin_len = len(stdin)
            keep.append(buf)
        out = ExecOutput(output_cap, on_chunk)
        o.on_output = out.fn
        keep.append(out)
        r = _lib.ExecResult()
        # The call's own deadline: the command's, plus room for the answer.
        limit = (float(timeout_s) + 30.0) if timeout_s else None
        await self.call(lambda e: lib.sbx_exec_async(self._s, byref(o), byref(e)),
                        lambda op, e: None if lib.sbx_exec_result(op, byref(r), byref(e)) == 0
                        else _FAILED, "exec", keep=keep, timeout_s=limit)
        return r, out

    def _xfer_opts(self, keep, make_readable=False, names=None, skip_unsafe=False, links="data",
                   exclude=(), archive_copy=None):
        o = _lib.XferOpts()
        lib.sbx_xfer_opts_init(byref(o))
        keep.append(o)
        o.make_readable = 1 if make_readable else 0
        if names is not None:
            ptr, arr = _lib.cstr_array(list(names))
            o.names = ptr
            keep.append(arr)
        o.skip_unsafe = 1 if skip_unsafe else 0
        if links not in ("data", "keep"):
            raise SandboxUsageError("links must be 'data' or 'keep', not %r" % (links,))
        o.links = _lib.LINKS_KEEP if links == "keep" else _lib.LINKS_DATA
        if exclude:
            ptr, arr = _lib.cstr_array(list(exclude))
            o.exclude = ptr
            keep.append(arr)
        if archive_copy is not None:
            o.archive_copy = _lib.enc(str(archive_copy))
            keep.append(o.archive_copy)
        return o

    async def upload(self, which, source, target, timeout_s=600, make_readable=False):
        keep = [_lib.enc(str(source)), _lib.enc(target)]
        o = self._xfer_opts(keep, make_readable=make_readable)
        fn = lib.sbx_upload_dir_async if which == "dir" else lib.sbx_upload_path_async
        st = _lib.XferStats()
        await self.call(lambda e: fn(self._s, keep[0], keep[1], byref(o), byref(e)),
                        lambda op, e: None if lib.sbx_upload_result(op, byref(st), byref(e)) == 0
                        else _FAILED, "upload %s" % target, keep=keep, timeout_s=timeout_s)
        return st

    async def download(self, which, source, target, timeout_s=600, **kw):
        keep = [_lib.enc(source), _lib.enc(str(target))]
        o = self._xfer_opts(keep, **kw)
        fn = lib.sbx_download_dir_async if which == "dir" else lib.sbx_download_path_async
        st = _lib.XferStats()
        k = c_int()
        await self.call(lambda e: fn(self._s, keep[0], keep[1], byref(o), byref(e)),
                        lambda op, e: None
                        if lib.sbx_download_result(op, byref(k), byref(st), byref(e)) == 0
                        else _FAILED, "download %s" % source, keep=keep, timeout_s=timeout_s)
        return _lib.KIND_NAMES[k.value], st

    async def upload_archive(self, archive, kind, target, keep_out=(), timeout_s=600):
        keep = [_lib.enc(str(archive)), _lib.enc(target)]
        o = self._xfer_opts(keep)
        ko = _lib.cstr_array(list(keep_out)) if keep_out else (None, None)
        keep.append(ko[1])
        k = {"dir": _lib.KIND_DIR, "file": _lib.KIND_FILE}.get(kind)
        if k is None:
            raise SandboxUsageError("upload_archive: kind must be 'dir' or 'file', not %r"
                                    % (kind,))
        st = _lib.XferStats()
        landed = c_int()
        warning = c_void_p()

        def result(op, e):
            if lib.sbx_upload_archive_result(op, byref(landed), byref(warning), byref(st),
                                             byref(e)) != 0:
                return _FAILED
            w = _lib.take_string(warning.value)
            return bool(landed.value), (w.decode("utf-8", "replace") if w else None), st

        return await self.call(
            lambda e: lib.sbx_upload_archive_async(self._s, keep[0], k, keep[1], ko[0],
                                                   len(keep_out), byref(o), byref(e)),
            result, "upload_archive %s" % target, keep=keep, timeout_s=timeout_s)

    # ---- supervision ----

    async def run_start(self, run_dir, argv, env=None, cwd=None, user=None, timeout_s=0,
                        grace_s=-1, log_max=0):
        o = _lib.RunOpts()
        lib.sbx_run_opts_init(byref(o))
        keep = [o, _lib.enc(run_dir)]
        o.run_dir = keep[1]
        ptr, arr = _lib.cstr_array(argv)
        o.argv = ptr
        keep.append(arr)
        if env:
            ptr, arr = _lib.cstr_array(["%s=%s" % (k, v) for k, v in env.items()])
            o.env = ptr
            keep.append(arr)
        o.cwd = _lib.enc(cwd)
        o.user = _lib.enc(None if user is None else str(user))
        o.timeout_s = float(timeout_s or 0)
        o.grace_s = float(grace_s)
        o.log_max = int(log_max)
        pid = c_int64()
        key = (c_uint8 * 32)()
        await self.call(lambda e: lib.sbx_run_start_async(self._s, byref(o), byref(e)),
                        lambda op, e: None
                        if lib.sbx_run_start_result(op, byref(pid), byref(key), byref(e)) == 0
                        else _FAILED, "run %s" % run_dir, keep=keep)
        return pid.value, bytes(key)

    async def run_stop(self, run_dir):
        d = _lib.enc(run_dir)
        await self.call(lambda e: lib.sbx_run_stop_async(self._s, d, byref(e)),
                        lambda op, e: None if lib.sbx_op_status(op, byref(e)) == 0 else _FAILED,
                        "stop %s" % run_dir, keep=(d,))

    async def run_expire(self, run_dir, reason=None):
        d, r = _lib.enc(run_dir), _lib.enc(reason)
        placed = c_int()
        return await self.call(
            lambda e: lib.sbx_run_expire_async(self._s, d, r, byref(e)),
            lambda op, e: bool(placed.value)
            if lib.sbx_run_expire_result(op, byref(placed), byref(e)) == 0 else _FAILED,
            "expire %s" % run_dir, keep=(d, r))

    async def run_rearm(self, run_dir):
        d = _lib.enc(run_dir)
        await self.call(lambda e: lib.sbx_run_rearm_async(self._s, d, byref(e)),
                        lambda op, e: None if lib.sbx_op_status(op, byref(e)) == 0 else _FAILED,
                        "rearm %s" % run_dir, keep=(d,))

    async def run_close(self, run_dir):
        d = _lib.enc(run_dir)
        await self.call(lambda e: lib.sbx_run_close_async(self._s, d, byref(e)),
                        lambda op, e: None if lib.sbx_op_status(op, byref(e)) == 0 else _FAILED,
                        "close %s" % run_dir, keep=(d,))

    async def run_status(self, run_dir):
        d = _lib.enc(run_dir)
        st = _lib.RunStatus()
        return await self.call(
            lambda e: lib.sbx_run_status_async(self._s, d, byref(e)),
            lambda op, e: st if lib.sbx_run_status_result(op, byref(st), byref(e)) == 0
            else _FAILED, "status %s" % run_dir, keep=(d,))

    async def run_read(self, run_dir, name, offset=0, max_bytes=1 << 20):
        """(bytes, the file's size now) of output.log, receipt.json or receipt.sig."""
        d, n = _lib.enc(run_dir), _lib.enc(name)
        data, length, size = c_void_p(), c_size_t(), c_int64()

        def result(op, e):
            if lib.sbx_run_read_result(op, byref(data), byref(length), byref(size),
                                       byref(e)) != 0:
                return _FAILED
            return _lib.take_string(data.value, length.value) or b"", size.value

        return await self.call(
            lambda e: lib.sbx_run_read_async(self._s, d, n, int(offset), int(max_bytes),
                                             byref(e)),
            result, "read %s/%s" % (run_dir, name), keep=(d, n))


    # ---- TCP forwarding ----

    def forward(self, out=(), in_=(), target=None, ready_file=None, max_conn=0,
                on_event=None):
        """Starts a forward operation (sbx_forward_async: out specs "PORT[:HOST:HPORT]", in
        specs "LPORT:ADDR:PORT"): a Forward, running until stopped or the session breaks.
        Inward listeners are bound when this returns; a bad spec or a listener that cannot be
        bound raises here."""
        if self._closed:
            raise SandboxUnavailableError("forward: the connection is closed")
        if not _lib.HAVE_FORWARD:
            raise SandboxUsageError("forward: this libsbx has no TCP forwarding (%s)"
                                    % _lib.LIB_PATH)
        o = _lib.ForwardOpts()
        keep = [o]
        out, in_ = list(out), list(in_)
        if out:
            ptr, arr = _lib.cstr_array(out)
            o.out, o.n_out = ptr, len(out)
            keep.append(arr)
        if in_:
            ptr, arr = _lib.cstr_array(in_)
            setattr(o, "in", ptr)
            o.n_in = len(in_)
            keep.append(arr)
        o.target = _lib.enc(target)
        o.ready_file = _lib.enc(ready_file)
        keep += [o.target, o.ready_file]
        o.max_conn = int(max_conn or 0)
        if on_event is not None:
            def event(ctx, line, fn=on_event):
                try:
                    fn((line or b"").decode("utf-8", "replace"))
                except Exception:  # a logger's failure never reaches the library's step
                    pass
            o.on_event = _lib.EVENT_FN(event)
            keep.append(o.on_event)  # called as long as the op lives: kept with it
        err = _lib.Err()
        op = lib.sbx_forward_async(self._s, byref(o), byref(err))
        if not op:
            raise from_err(err, "forward")
        tag = next(self._tags)
        fut = self._loop.create_future()
        self._ops[tag] = (fut, keep)
        lib.sbx_op_set_tag(op, tag)
        fw = Forward(self, op, fut, keep, tag)
        self._forwards.add(fw)
        self._step()
        return fw


class Forward:
    """One forward operation of a Connection (host/sbx.h, "TCP forwarding over the session").
    It never ends on its own while it works: wait() returns only by raising (the session
    broke, the agent refused a listener), stop() cancels it (FWD_UNLISTEN, every connection
    reset, the inward listeners closed) and frees it once the library has ended it."""

    def __init__(self, conn, op, fut, keep, tag):
        self._conn = conn
        self._op = op
        self._fut = fut
        self._keep = keep
        self._tag = tag

    @property
    def ready(self):
        """Every listener is up (the inside ones answered, the ready file made)."""
        return bool(self._op) and bool(lib.sbx_forward_ready(self._op))

    @property
    def running(self):
        return self._op is not None and not self._fut.done()

    def port(self, i=0):
        """The host port of in forward i (the one bound when LPORT was 0), or -1."""
        return lib.sbx_forward_port(self._op, i) if self._op else -1

    def counts(self):
        """(connections open now, connections since the start)."""
        if not self._op:
            return 0, 0
        n, total = c_size_t(), ctypes.c_uint64()
        lib.sbx_forward_counts(self._op, byref(n), byref(total))
        return n.value, total.value

    def _error(self, what="forward"):
        """The exception of an op that ended."""
        if self._fut.done() and self._fut.exception() is not None:
            return self._fut.exception()
        e = _lib.Err()
        if self._op and lib.sbx_op_status(self._op, byref(e)) != 0:
            return from_err(e, what)
        return SandboxUnavailableError("%s: ended" % what)

    async def wait_ready(self, timeout_s=None):
        """Until every listener is up; raises the op's error when it ended first."""
        loop = self._conn._loop
        end = None if timeout_s is None else loop.time() + timeout_s
        while not self.ready:
            if self._op is None or self._fut.done():
                raise self._error()
            waker = loop.create_future()
            self._conn._wakers.add(waker)
            try:
                await asyncio.wait({waker, self._fut},
                                   timeout=None if end is None else max(0, end - loop.time()),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                self._conn._wakers.discard(waker)
            if end is not None and loop.time() >= end and not self.ready:
                raise SandboxUnavailableError("forward: not ready within %s s" % timeout_s)

    async def wait(self):
        """Until the op ends, then its error raised. Cancelling the await leaves the op
        running (stop() ends it)."""
        if self._op is None:
            raise SandboxUnavailableError("forward: stopped")
        try:
            await asyncio.shield(self._fut)
        except asyncio.CancelledError:
            if not self._fut.done():
                raise
        raise self._error()

    async def stop(self):
        """Cancels the op, waits until the library ended it (its listeners closed, its
        connections reset: bounded by the session's timeout) and frees it. Idempotent; a
        second cancellation while it waits leaves the op to the library, which frees it once
        ended."""
        op = self._op
        if op is None:
            return
        if not self._fut.done():
            lib.sbx_op_cancel(op)
            self._conn._step()
            try:
                await asyncio.shield(self._fut)
            except asyncio.CancelledError:
                if not self._fut.done():
                    self._drop()
                    raise
            except SbxError:
                pass  # the connection was closed under it: _drop has run
        self._drop()

    def _drop(self, why="forward: stopped"):
        """Frees the op now (one still running is cancelled and freed by the library once it
        ended) and forgets it; a wait() still waiting raises SandboxUnavailableError(why)."""
        op, self._op = self._op, None
        if op is None:
            return
        self._conn._forwards.discard(self)
        self._conn._ops.pop(self._tag, None)
        if not lib.sbx_op_done(op):
            self._conn._orphans.append(self._keep)  # its on_event may still be called
        if not self._fut.done():
            self._fut.set_exception(SandboxUnavailableError(why))
            self._fut.exception()  # retrieved: no "never retrieved" warning
        lib.sbx_op_free(op)
        if not self._conn._closed:
            self._conn._arm()


_FAILED = object()


def parse_receipt(json_bytes, sig_hex, key):
    """Verifies a receipt's bytes with the run's key: a dict of its fields and `verified`."""
    r = _lib.Receipt()
    err = _lib.Err()
    k = (c_uint8 * len(key)).from_buffer_copy(key)
    if lib.sbx_receipt_parse(json_bytes, len(json_bytes), _lib.enc(sig_hex), k, len(key),
                             byref(r), byref(err)) != 0:
        raise from_err(err, "receipt")
    try:
        return {"verified": bool(r.verified), "trigger": r.trigger.decode(errors="replace"),
                "status": r.status, "timed_out": bool(r.timed_out),
                "cancelled": bool(r.cancelled),
                "expired_before_launch": bool(r.expired_before_launch),
                "launched": bool(r.launched),
                "termination_witnessed": bool(r.termination_witnessed),
                "exit_code": r.exit_code, "exit_signal": r.exit_signal,
                "kill_rounds": r.kill_rounds, "activation": r.activation,
                "oom_kills": r.oom_kills, "json": json_bytes.decode("utf-8", "replace")}
    finally:
        lib.sbx_receipt_free(byref(r))
