"""Supervised harness activations over one retained connection (the reference's
nemo_gym.agents.utils.sandbox_session) on sbx's supervisor.

The supervisor in the sandbox (docs/supervision.md) owns each activation: it launches the
harness in its own session and process group, keeps the deadline even when this process goes
away, kills every process of the run (escapees included) and signs a receipt with a key that
never crossed the channel. SandboxSession keeps the reference's rules on top: artifacts are
collected once, only after termination was witnessed (or nothing launched), even when
execution failed; close is idempotent, retryable, bounded, and fences later activations; a
cancelled execute stops the harness before it returns. The same rules as libsbx's
sbx_harness (host/harness.c), written here over the non-blocking operations.
"""
import asyncio
import ctypes
import dataclasses
import re
from typing import Any, Awaitable, Callable, Mapping, Sequence

from . import _lib
from ._core import parse_receipt
from .errors import (SandboxProtocolError, SandboxTransferError, SandboxUnavailableError,
                     SandboxUsageError, SbxError, from_err)

HARNESS_RUNNER_FAILED = 125
HARNESS_COMMAND_NOT_STARTED = (126, 127)
_SHELL_NAME = re.compile("[A-Za-z_][A-Za-z0-9_]*")
LOG_MAX = 64 << 20
_GRACE_S = 5.0


class ExpiryUnsupportedError(Exception):
    """The reference raises it when stopping a running harness would need an upload that
    can wait behind the harness's own commands. sbx never does: expire is one request on its
    own stream of the retained connection, answered by the agent while any command runs."""


@dataclasses.dataclass
class SandboxCommand:
    """Harness argv, run under the supervisor."""

    argv: list[str]


def shell_assignments(values: Mapping[str, str | Sequence[str] | Mapping[str, str]]) -> str:
    """Bash source assigning each value (libsbx's sbx_shell_assignments): a string becomes a
    scalar, a sequence an array, a mapping an array of KEY=VALUE words; every word quoted."""
    vals = (_lib.ShVal * max(1, len(values)))()
    keep = []
    for i, (name, v) in enumerate(values.items()):
        if not isinstance(name, str) or not _SHELL_NAME.fullmatch(name):
            raise ValueError("not a shell name: %r" % (name,))
        vals[i].name = _lib.enc(name)
        keep.append(vals[i].name)
        if isinstance(v, str):
            vals[i].kind = _lib.SHVAL_SCALAR
            vals[i].scalar = _lib.enc(v)
            keep.append(vals[i].scalar)
            continue
        if isinstance(v, Mapping):
            words, kind = [w for k, x in v.items() for w in (k, x)], _lib.SHVAL_MAP
        else:
            words, kind = list(v), _lib.SHVAL_ARRAY
        if not all(isinstance(w, str) for w in words):
            raise ValueError("%s: words must be strings" % name)
        ptr, arr = _lib.cstr_array(words)
        vals[i].kind = kind
        vals[i].items = ptr
        keep.append(arr)
    err = _lib.Err()
    out = _lib.lib.sbx_shell_assignments(vals, len(values), ctypes.byref(err))
    if not out:
        raise ValueError(err.text())
    return _lib.take_string(out).decode()


@dataclasses.dataclass
class SandboxSession:
    """Execute, stop, capture, then release an owned or borrowed sandbox."""

    sandbox: Any
    session_dir: str
    workdir: str | None
    harness: str
    owns_sandbox: bool = False
    launch_started: bool = dataclasses.field(default=False, init=False)
    cleanup_confirmed: bool = dataclasses.field(default=False, init=False)
    expired: bool = dataclasses.field(default=False, init=False)
    expired_before_launch: bool = dataclasses.field(default=False, init=False)
    expire_reason: str | None = dataclasses.field(default=None, init=False)
    closing: bool = dataclasses.field(default=False, init=False)
    closed: bool = dataclasses.field(default=False, init=False)
    sandbox_stopped: bool = dataclasses.field(default=False, init=False)
    artifacts: Any = dataclasses.field(default=None, init=False)
    capture_error: Exception | None = dataclasses.field(default=None, init=False)
    cleanup: dict | None = dataclasses.field(default=None, init=False)
    execution_oom: dict | None = dataclasses.field(default=None, init=False)
    termination_error: Exception | None = dataclasses.field(default=None, init=False)
    _capture_attempted: bool = dataclasses.field(default=False, init=False)
    _expire_requested: bool = dataclasses.field(default=False, init=False)
    _key: bytes | None = dataclasses.field(default=None, init=False)
    _close_task: Any = dataclasses.field(default=None, init=False)

    @property
    def stop_request_path(self) -> str:
        return self.session_dir.rstrip("/") + "/stop"

    async def _conn(self):
        return await self.sandbox.connection()

    # ---- the receipt ----

    async def _wait_receipt(self, timeout):
        """Waits until the receipt exists and the supervisor has gone, then verifies it."""
        conn = await self._conn()
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout if timeout and timeout > 0 else None
        nap, dead_since = 0.001, None
        while True:
            st = await conn.run_status(self.session_dir)
            state = st.state.decode(errors="replace")
            if st.has_receipt and not st.alive:
                return await self._take_receipt(conn)
            if not st.alive and not st.has_receipt:
                patience = 2.0 if state == "none" else 0.2
                dead_since = dead_since or loop.time()
                if loop.time() - dead_since > patience:
                    raise SandboxTransferError(
                        "the supervisor of %s died without a receipt (state %s): nothing "
                        "is proven about the run's processes" % (self.session_dir, state))
            else:
                dead_since = None
            if end is not None and loop.time() >= end:
                raise SandboxUnavailableError("no receipt in %s within %.1f s (state %s)"
                                              % (self.session_dir, timeout, state), 110)
            await asyncio.sleep(nap)
            nap = min(nap * 2, 0.02)

    async def _take_receipt(self, conn):
        body, size = await conn.run_read(self.session_dir, "receipt.json", 0, 65536)
        sig, _ = await conn.run_read(self.session_dir, "receipt.sig", 0, 256)
        if size > 65536:
            raise SandboxProtocolError("the receipt in %s is %d bytes" % (self.session_dir,
                                                                         size))
        r = parse_receipt(body, sig.strip().decode("ascii", "replace"), self._key or b"")
        if not r["verified"]:
            raise SandboxProtocolError("the receipt in %s does not verify: forged or stale"
                                       % self.session_dir)
        self.cleanup = r
        self.expired = r["timed_out"] and r["trigger"] == "expire"
        self.expired_before_launch = r["expired_before_launch"]
        self.cleanup_confirmed = r["termination_witnessed"] or not r["launched"]
        if r["oom_kills"]:
            self.execution_oom = {"class": "oom", "oom_kills": r["oom_kills"]}
        return r

    async def _collect(self, collect):
        if collect is None or not self.cleanup_confirmed or self._capture_attempted:
            return
        self._capture_attempted = True
        try:
            self.artifacts = await collect()
        except Exception as exc:  # kept apart: a failed capture does not prevent release
            self.capture_error = exc

    # ---- the API ----

    async def execute(self, stage_activation: Callable[[], Awaitable[SandboxCommand]],
                      collect: Callable[[], Awaitable[Any]] | None, timeout: float,
                      close_timeout: float, deadline: float | None = None) -> "SandboxSession":
        """Stage, launch under the supervisor, wait for the verified receipt, then collect
        (even when execution failed, once termination is confirmed). `deadline` is a
        loop.time() by which the harness must end. Cancellation stops the harness first."""
        if self.closing:
            raise SandboxUsageError("the session %s is closing" % self.session_dir)
        if self.launch_started:
            raise SandboxUsageError("this activation already launched: begin_activation first")
        cmd = await stage_activation()
        if self.closing:
            # A close during staging prevents the launch: nothing ran, nothing to confirm.
            self.cleanup_confirmed = True
            raise SandboxUnavailableError("the session %s closed during staging"
                                          % self.session_dir)
        if deadline is not None:
            timeout = min(timeout, max(0.001, deadline - asyncio.get_running_loop().time()))
        conn = await self._conn()
        raw = self.sandbox.handle.raw
        self.launch_started = True
        _, self._key = await conn.run_start(self.session_dir, list(cmd.argv), env=raw.env,
                                            cwd=self.workdir, timeout_s=timeout,
                                            grace_s=_GRACE_S)
        error = None
        try:
            r = await self._wait_receipt(timeout + _GRACE_S + close_timeout)
            if r["status"] == HARNESS_RUNNER_FAILED or r["status"] in HARNESS_COMMAND_NOT_STARTED:
                error = SandboxTransferError(
                    "the harness %s exited %d: %s" % (self.harness, r["status"],
                                                      "the runner failed"
                                                      if r["status"] == HARNESS_RUNNER_FAILED
                                                      else "its command did not start"))
        except asyncio.CancelledError:
            await asyncio.shield(self._stop_quietly(close_timeout))
            raise
        except SbxError as exc:
            error = exc
            if not isinstance(exc, SandboxProtocolError):
                await self._stop_quietly(close_timeout)
        await self._collect(collect)
        if error is not None:
            self.termination_error = error if not self.cleanup_confirmed else None
            raise error
        return self

    async def _stop_quietly(self, timeout):
        try:
            await self.stop_harness(timeout)
        except SbxError as exc:
            self.termination_error = exc

    async def stop_harness(self, timeout: float) -> None:
        """Cancels the activation and confirms termination within timeout."""
        if not self.launch_started:
            self.cleanup_confirmed = True
            return
        if self.cleanup is not None and self.cleanup_confirmed:
            return
        conn = await self._conn()
        await conn.run_stop(self.session_dir)
        await self._wait_receipt(timeout)

    async def expire(self, timeout: float, reason: str | None = None) -> bool:
        """Ends the activation as at its time limit (graded as a timeout); before launch the
        harness never starts. False when it already finished, the session is closing, or
        expiry was already requested."""
        if self.closing or self._expire_requested or self.cleanup is not None:
            return False
        conn = await self._conn()
        placed = await asyncio.wait_for(conn.run_expire(self.session_dir, reason), timeout)
        self._expire_requested = True
        self.expire_reason = reason
        return placed

    async def read_output_log(self) -> str:
        """The combined supervisor/harness log as it is when the call starts."""
        conn = await self._conn()
        data, end = await conn.run_read(self.session_dir, "output.log", 0, 512 * 1024)
        if end > LOG_MAX:
            raise SandboxProtocolError("the output log is %d bytes, more than %d MiB"
                                       % (end, LOG_MAX >> 20))
        parts, have = [data[:end]], min(len(data), end)
        while have < end:
            part, _ = await conn.run_read(self.session_dir, "output.log", have,
                                          min(512 * 1024, end - have))
            if not part:
                break
            parts.append(part[:end - have])
            have += len(parts[-1])
        return b"".join(parts).decode("utf-8", "replace")

    async def begin_activation(self, session_dir: str, timeout: float) -> None:
        """Rearms a finished activation with fresh supervisor files (in session_dir)."""
        if self.closing:
            raise SandboxUsageError("the session %s is closing" % self.session_dir)
        if self.launch_started and self.cleanup is None:
            await self._wait_receipt(timeout)
        if self.launch_started and not self.cleanup_confirmed:
            raise SandboxUsageError("the previous launch is not confirmed cleaned up")
        if self.launch_started:
            await (await self._conn()).run_rearm(self.session_dir)
        self.session_dir = session_dir
        self.launch_started = self.cleanup_confirmed = self.expired = False
        self.expired_before_launch = self._capture_attempted = self._expire_requested = False
        self.cleanup = self.artifacts = self.capture_error = self.execution_oom = None
        self.expire_reason = self.termination_error = None
        self._key = None

    async def close(self, timeout: float) -> None:
        """Stops what runs (bounded by timeout), fences later activations, releases; an owned
        sandbox is removed, and one whose harness could not be confirmed stopped is removed
        as the fallback stop. Idempotent; concurrent closes share one attempt; after a
        failure it may be called again."""
        if self.closed:
            return
        self.closing = True
        if self._close_task is None or self._close_task.done():
            self._close_task = asyncio.ensure_future(self._close(timeout))
        try:
            await asyncio.shield(self._close_task)
        finally:
            if self._close_task.done():
                self._close_task = None if not self.closed else self._close_task

    async def _close(self, timeout):
        if self.launch_started and not (self.cleanup is not None and self.cleanup_confirmed):
            try:
                await asyncio.wait_for(self.stop_harness(timeout), timeout)
            except (SbxError, asyncio.TimeoutError) as exc:
                if not self.owns_sandbox:
                    raise
                self.termination_error = exc
        if self.owns_sandbox:
            await self.sandbox.close()
            self.sandbox_stopped = True
            self.cleanup_confirmed = True
        elif self.launch_started:
            # The run folder exists only once a launch began; before that, closing fences
            # this object's later activations and there is nothing in the sandbox to mark.
            await asyncio.wait_for((await self._conn()).run_close(self.session_dir), timeout)
        self.closed = True
