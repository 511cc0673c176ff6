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
from .errors import SandboxUnavailableError, SandboxUsageError, from_err

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
