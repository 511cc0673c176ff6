"""The provider protocol (the reference's nemo_gym.sandbox.providers.base) on libsbx.

SbxProvider(runner=...) makes sandboxes with sbx's runners ("ns", the embedded default;
"podman"; "docker") or reaches existing ones ("kubectl", "ssh": the sandbox is named by
provider_options["target"], and close leaves it running; "local": this machine as the
calling user, for tests and tools), and drives each through one
retained connection on the running event loop (sbx._core). docs/python.md has the differences
from the reference.
"""
import asyncio
import ctypes
import dataclasses
import enum
import os
import pathlib
import shutil
import logging
import subprocess
import sys
import tempfile
from ctypes import byref
from typing import Any, Mapping

from . import _lib
from . import pty as _pty
from ._core import Connection
from ._lib import lib
from .errors import (SandboxProbeError, SandboxTransferError, SandboxUnavailableError,
                     SandboxUsageError, SbxError, from_err)

CREATING_RUNNERS = ("ns", "podman", "docker")
fwd_log = logging.getLogger("sbx.forward")
ATTACHING_RUNNERS = ("kubectl", "ssh", "local")


class SandboxCreateError(RuntimeError):
    """Raised when a provider cannot create a sandbox."""


class SandboxCreateVerificationError(SandboxCreateError):
    """Raised when a newly-created sandbox fails provider readiness checks."""


@dataclasses.dataclass
class SandboxResources:
    """Provider-neutral resource request. `cpu` is a quota (0.5: half of one CPU),
    `memory_mib` the memory of every process together, `disk_gib` the writable layer's size.
    sbx refuses what a runner cannot hold (a GPU, a disk bound on a runner without one) with
    SandboxCreateError: never ignored."""

    cpu: float | None = None
    memory_mib: int | None = None
    disk_gib: int | None = None
    gpu: int | None = None
    gpu_type: str | None = None

    @classmethod
    def from_mapping(cls, resources: Mapping[str, Any] | None) -> "SandboxResources":
        if resources is None:
            return cls()
        if isinstance(resources, cls):
            return resources
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(resources) - known
        if unknown:
            raise ValueError("unknown resources: %s" % ", ".join(sorted(unknown)))
        return cls(**dict(resources))


@dataclasses.dataclass
class SandboxSpec:
    """Sandbox creation request (see docs/python.md for how sbx reads each field)."""

    image: str | None = None
    ttl_s: int | float | None = None
    ready_timeout_s: int | float | None = None
    workdir: str | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    resources: Any = dataclasses.field(default_factory=SandboxResources)
    entrypoint: list[str] | None = None
    provider_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    ports: tuple[int, ...] | list[int] = dataclasses.field(default_factory=tuple)

    def __post_init__(self) -> None:
        self.resources = SandboxResources.from_mapping(self.resources)


@dataclasses.dataclass
class SandboxHandle:
    """Provider-neutral handle to a created sandbox; `raw` is the provider's own state."""

    sandbox_id: str
    provider_name: str
    raw: Any


@dataclasses.dataclass
class SandboxExecResult:
    """A command's result: stdout and stderr decoded as UTF-8 with replacement. A command the
    sandbox could not run at all has `error_type` set ("unavailable", "protocol", "usage")
    and return_code -1; one killed at its timeout has return_code 124 and error_type
    "timeout"."""

    stdout: str | None
    stderr: str | None
    return_code: int
    error_type: str | None = None


ExecResult = SandboxExecResult


@dataclasses.dataclass
class SandboxEndpoint:
    """Route to a service inside a sandbox: `endpoint` an absolute URL, `headers` what a
    client must send with it (sbx's endpoints need none)."""

    endpoint: str
    headers: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if "://" not in str(self.endpoint):
            raise ValueError("SandboxEndpoint.endpoint must be an absolute URL, not %r"
                             % (self.endpoint,))


class SandboxStatus(enum.Enum):
    ERROR = "error"
    PAUSED = "paused"
    RUNNING = "running"
    STARTING = "starting"
    STOPPED = "stopped"
    UNKNOWN = "unknown"


@dataclasses.dataclass
class _Raw:
    """What SbxProvider keeps per sandbox."""

    spec: str  # the runner spec: "ns:sbx-ab12cd"
    owned: bool  # made by this provider: close removes it
    env: dict
    workdir: str | None
    metadata: dict
    open_timeout_s: float
    conn: Connection | None = None
    conn_loop: Any = None
    reaper: int | None = None  # the ttl reaper's pid
    closed: bool = False
    lock: Any = None
    ports: tuple = ()  # SandboxSpec.ports: what endpoint() serves
    endpoints: dict = dataclasses.field(default_factory=dict)  # port -> _Endpoint
    endpoint_lock: Any = None


@dataclasses.dataclass
class _Endpoint:
    """An inward forward endpoint() keeps running for one declared port."""

    conn: Connection
    forward: Any  # sbx._core.Forward
    lport: int


TARBALLS = (".tar", ".tar.gz", ".tgz", ".tar.xz")


def ns_image_folder(tarball: str) -> str:
    """The ns runner's image for a root filesystem tarball: unpacked once (GNU tar, numeric
    owners, modes kept) into $SBX_IMAGE_CACHE/SHA16 (default /var/cache/sbx/images), named by
    the tarball's SHA-256, and reused. The tarball is the operator's, as for an engine's
    import; a concurrent unpack of the same one loses the rename and is removed."""
    import hashlib
    h = hashlib.sha256()
    try:
        with open(tarball, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise SandboxCreateError("image %s: %s" % (tarball, exc)) from exc
    cache = os.environ.get("SBX_IMAGE_CACHE") or "/var/cache/sbx/images"
    final = os.path.join(cache, h.hexdigest()[:16])
    if os.path.isdir(final):
        return final
    os.makedirs(cache, mode=0o755, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".unpack-", dir=cache)
    try:
        os.chmod(tmp, 0o755)
        p = subprocess.run(["tar", "--numeric-owner", "-xpf", tarball, "-C", tmp],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SandboxCreateError("image %s: tar: %s" % (tarball, p.stderr.strip()[-300:]))
        try:
            os.rename(tmp, final)
        except OSError:
            if not os.path.isdir(final):
                raise
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _sbx_cli():
    """The sbx command beside the library (the ttl reaper runs it)."""
    path = os.path.join(os.path.dirname(_lib.LIB_PATH), "sbx")
    return path if os.access(path, os.X_OK) else shutil.which("sbx")


class SbxProvider:
    """The provider protocol over sbx's runners. Implements SandboxProvider,
    ConnectableProvider, SupportsSandboxPauseResume, SupportsSandboxPortForwarding and
    SupportsSandboxEndpoint."""

    def __init__(self, runner: str = "ns", agent_dir: str | None = None,
                 open_timeout_s: float = 30.0):
        kind = runner.split(":", 1)[0]
        if kind not in CREATING_RUNNERS + ATTACHING_RUNNERS:
            raise ValueError("runner %r: one of %s" % (runner, ", ".join(
                CREATING_RUNNERS + ATTACHING_RUNNERS)))
        self.runner = kind
        self.name = "sbx-" + kind
        self.agent_dir = agent_dir
        self.open_timeout_s = open_timeout_s
        self._handles = set()

    # ---- create ----

    def _create_opts(self, spec: SandboxSpec, keep: list):
        po = dict(spec.provider_options or {})
        allowed = {"name", "arch", "engine_args", "privileged", "pids", "agent"}
        unknown = set(po) - allowed - {"target"}
        if unknown:
            raise SandboxCreateError("provider_options not known to sbx: %s"
                                     % ", ".join(sorted(unknown)))
        res = spec.resources
        if res.gpu:
            raise SandboxCreateError("resources.gpu: sbx's runners give no GPUs")
        if spec.image is None:
            raise SandboxCreateError("SandboxSpec.image is required")
        image = str(spec.image)
        co = _lib.CreateOpts()
        for field in ("name", "arch", "agent"):
            v = po.get(field)
            if v is not None:
                setattr(co, field, _lib.enc(str(v)))
                keep.append(getattr(co, field))
        co.image = _lib.enc(image)
        keep.append(co.image)
        if self.agent_dir:
            co.agent_dir = _lib.enc(self.agent_dir)
            keep.append(co.agent_dir)
        if po.get("engine_args"):
            ptr, arr = _lib.cstr_array([str(w) for w in po["engine_args"]])
            co.engine_args = ptr
            keep.append(arr)
        co.privileged = 1 if po.get("privileged") else 0
        co.resources = _lib.Resources(cpu=float(res.cpu or 0),
                                      memory_mib=int(res.memory_mib or 0),
                                      pids=int(po.get("pids") or 0),
                                      disk_gib=float(res.disk_gib or 0))
        return co

    async def create(self, spec: SandboxSpec) -> SandboxHandle:
        """A ready sandbox: made, its session open and answering, `workdir` made, `files`
        written, the `entrypoint` started under the supervisor. A failure after the sandbox
        was made removes it again."""
        loop = asyncio.get_running_loop()
        ready = float(spec.ready_timeout_s or 0) or None
        try:
            declared = tuple(_port(p, "SandboxSpec.ports") for p in (spec.ports or ()))
        except SandboxUsageError as exc:
            raise SandboxCreateError(str(exc)) from exc
        if self.runner == "local":
            sbx_spec, owned = "local", False  # this machine, as the calling user
        elif self.runner in ATTACHING_RUNNERS:
            target = spec.provider_options.get("target")
            if not target:
                raise SandboxCreateError("the %s runner reaches an existing sandbox: give "
                                         "provider_options['target']" % self.runner)
            sbx_spec, owned = "%s:%s" % (self.runner, target), False
        else:
            keep = []
            if self.runner == "ns" and str(spec.image or "").endswith(TARBALLS):
                spec = dataclasses.replace(spec, image=await loop.run_in_executor(
                    None, ns_image_folder, str(spec.image)))
            try:
                co = self._create_opts(spec, keep)
            except ValueError as exc:
                raise SandboxCreateError(str(exc)) from exc
            out = ctypes.create_string_buffer(192)
            err = _lib.Err()

            def make():
                return lib.sbx_sandbox_create(_lib.enc(self.runner), byref(co), out, 192,
                                              byref(err))

            made = loop.run_in_executor(None, make)
            try:
                rc = await asyncio.wait_for(asyncio.shield(made), ready)
            except asyncio.TimeoutError as exc:
                # The create goes on in its thread: what it made is removed, not leaked.
                if await made == 0:
                    await loop.run_in_executor(None, lambda: lib.sbx_sandbox_remove(
                        out.value, byref(_lib.Err())))
                raise SandboxCreateError("create: not ready within %s s" % ready) from exc
            if rc != 0:
                raise SandboxCreateError("create (%s, %s): %s" % (self.runner, spec.image,
                                                                  err.text()))
            sbx_spec, owned = out.value.decode(), True
        raw = _Raw(spec=sbx_spec, owned=owned, env=dict(spec.env or {}), workdir=spec.workdir,
                   metadata=dict(spec.metadata or {}), open_timeout_s=self.open_timeout_s,
                   lock=asyncio.Lock(), ports=declared)
        handle = SandboxHandle(sandbox_id=sbx_spec, provider_name=self.name, raw=raw)
        try:
            if owned and spec.ttl_s:
                raw.reaper = self._start_reaper(sbx_spec, float(spec.ttl_s))
            await asyncio.wait_for(self._ready(handle, spec), ready)
        except BaseException as exc:
            await self._teardown(handle)
            if isinstance(exc, asyncio.TimeoutError):
                raise SandboxCreateVerificationError("%s: not ready within %s s"
                                                     % (sbx_spec, ready)) from exc
            if isinstance(exc, SbxError):
                raise SandboxCreateVerificationError("%s: %s" % (sbx_spec, exc)) from exc
            raise
        self._handles.add(id(handle))
        return handle

    async def _ready(self, handle, spec):
        conn = await self._conn(handle)
        await conn.ping()
        if await conn.kind("/") != "dir":
            raise SandboxProbeError("the sandbox's / is not a folder")
        if spec.workdir:
            with tempfile.TemporaryDirectory() as empty:
                os.chmod(empty, 0o755)
                await conn.upload("dir", empty, spec.workdir)
        if spec.files:
            with tempfile.TemporaryDirectory() as tmp:
                for path, text in spec.files.items():
                    local = os.path.join(tmp, "f")
                    with open(local, "w", encoding="utf-8") as f:
                        f.write(text)
                    await self._put_file(conn, local, path)
        if spec.entrypoint:
            await conn.run_start("/tmp/.sbx-entrypoint", list(spec.entrypoint),
                                 env=handle.raw.env, cwd=spec.workdir)

    def _start_reaper(self, sbx_spec, ttl_s):
        """A process of its own session that removes the sandbox when ttl_s has passed, even
        if this one dies; close() kills it."""
        cli = _sbx_cli()
        if cli is None:
            raise SandboxCreateError("ttl_s needs the sbx command beside libsbx")
        code = ("import os,sys,time\ntime.sleep(float(sys.argv[1]))\n"
                "os.execv(sys.argv[2], [sys.argv[2], 'sandbox', 'rm', sys.argv[3]])\n")
        p = subprocess.Popen([sys.executable, "-c", code, str(ttl_s), cli, sbx_spec],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        return p.pid

    # ---- the connection ----

    async def _conn(self, handle: SandboxHandle) -> Connection:
        raw = self._raw(handle)
        loop = asyncio.get_running_loop()
        async with raw.lock:
            if raw.conn is not None and raw.conn_loop is not loop:
                raw.conn = None  # a connection of another loop is that loop's to close
            if raw.conn is None:
                raw.conn = await Connection.open(raw.spec, timeout_s=raw.open_timeout_s,
                                                 agent_dir=self.agent_dir)
                raw.conn_loop = loop
            return raw.conn

    def _raw(self, handle):
        raw = handle.raw
        if not isinstance(raw, _Raw):
            raise SandboxUsageError("not a handle of an sbx provider")
        if raw.closed:
            raise SandboxUnavailableError("%s is closed" % raw.spec)
        return raw

    # ---- the protocol ----

    async def exec(self, handle: SandboxHandle, command, cwd: str | None = None,
                   env: dict[str, str] | None = None, timeout_s: int | float | None = None,
                   user: str | int | None = None) -> SandboxExecResult:
        """Runs command (a shell line under /bin/sh -c, or an argv list for an image without
        a shell) with the sandbox's env under env, in cwd (else the sandbox's workdir)."""
        raw = self._raw(handle)
        merged = dict(raw.env)
        merged.update(env or {})
        argv, shell = (list(command), None) if isinstance(command, (list, tuple)) \
            else (None, command)
        try:
            conn = await self._conn(handle)
            r, out = await conn.exec(argv=argv, shell=shell, cwd=cwd or raw.workdir,
                                     env=merged, user=user, timeout_s=timeout_s)
        except SbxError as exc:
            return SandboxExecResult(stdout=None, stderr=str(exc), return_code=-1,
                                     error_type=exc.cls)
        stdout = out.stdout().decode("utf-8", "replace")
        stderr = out.stderr().decode("utf-8", "replace")
        if r.outcome == _lib.OUT_NOT_STARTED and r.message:
            stderr += r.message.decode("utf-8", "replace")
        return SandboxExecResult(stdout=stdout, stderr=stderr, return_code=r.code,
                                 error_type="timeout" if r.outcome == _lib.OUT_TIMED_OUT
                                 else None)

    async def _put_file(self, conn, source, target):
        """One local file at target, its parent created when missing (0755) and otherwise
        left as it is."""
        target = str(target)
        if not target.startswith("/") or target.endswith("/"):
            raise SandboxUsageError("upload_file: %r is not an absolute file path" % target)
        parent, name = os.path.split(target)
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            shutil.copy2(source, os.path.join(tmp, name))
            await conn.upload("dir", tmp, parent or "/")

    async def upload_file(self, handle: SandboxHandle, source_path: pathlib.Path,
                          target_path: str) -> None:
        if not os.path.isfile(source_path):
            raise SandboxUsageError("upload_file: %s is not a file" % source_path)
        await self._put_file(await self._conn(handle), source_path, target_path)

    async def download_file(self, handle: SandboxHandle, source_path: str,
                            target_path: pathlib.Path) -> None:
        conn = await self._conn(handle)
        kind, _ = await conn.download("path", source_path, target_path)
        if kind != "file":
            raise SandboxTransferError("download_file: %s is %s, not a file"
                                       % (source_path, kind or "absent"))

    async def status(self, handle: SandboxHandle) -> SandboxStatus:
        raw = handle.raw
        if raw.closed:
            return SandboxStatus.STOPPED
        sb = _lib.Sandbox()
        err = _lib.Err()
        rc = await asyncio.get_running_loop().run_in_executor(
            None, lambda: lib.sbx_sandbox_status(_lib.enc(raw.spec), byref(sb), byref(err)))
        if rc != 0:
            if raw.spec.split(":", 1)[0] in ATTACHING_RUNNERS:
                return SandboxStatus.UNKNOWN
            raise from_err(err, "status %s" % raw.spec)
        if sb.paused:
            return SandboxStatus.PAUSED
        if sb.running:
            return SandboxStatus.RUNNING
        state = sb.state.decode(errors="replace")
        if state in ("absent", "stopped", "exited", "dead"):
            return SandboxStatus.STOPPED
        if state in ("created", "starting", "configured"):
            return SandboxStatus.STARTING
        return SandboxStatus.UNKNOWN

    async def _teardown(self, handle):
        raw = handle.raw
        raw.endpoints.clear()  # their forwards end with the connection
        conn, raw.conn = raw.conn, None
        if conn is not None:
            await conn.close()
        if raw.reaper:
            try:
                os.kill(raw.reaper, 9)
                os.waitpid(raw.reaper, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            raw.reaper = None
        if raw.owned:
            err = _lib.Err()
            rc = await asyncio.get_running_loop().run_in_executor(
                None, lambda: lib.sbx_sandbox_remove(_lib.enc(raw.spec), byref(err)))
            if rc != 0:
                raise from_err(err, "remove %s" % raw.spec)

    async def close(self, handle: SandboxHandle) -> None:
        """Ends the sandbox's life: its connection closed and, when this provider made it,
        the sandbox removed. Idempotent."""
        raw = handle.raw
        if raw.closed:
            return
        await self._teardown(handle)
        raw.closed = True
        self._handles.discard(id(handle))

    async def aclose(self) -> None:
        """Nothing provider-wide to release: each sandbox is closed by close()."""

    async def pause(self, handle: SandboxHandle) -> None:
        await self._engine_call(handle, lib.sbx_sandbox_pause, "pause")

    async def resume(self, handle: SandboxHandle) -> None:
        await self._engine_call(handle, lib.sbx_sandbox_resume, "resume")

    async def _engine_call(self, handle, fn, what):
        raw = self._raw(handle)
        if what == "pause" and raw.conn is not None:
            # A paused sandbox answers nothing: the connection would only time out.
            conn, raw.conn = raw.conn, None
            await conn.close()
        err = _lib.Err()
        rc = await asyncio.get_running_loop().run_in_executor(
            None, lambda: fn(_lib.enc(raw.spec), byref(err)))
        if rc != 0:
            raise from_err(err, "%s %s" % (what, raw.spec))

    # ---- ConnectableProvider ----

    async def serialize_handle(self, handle: SandboxHandle, scope: str | None = None) -> dict:
        """A JSON descriptor another process rebuilds the handle from (connect). The sandbox's
        secret is not in it: it stays in this machine's key store (docs/supervision.md)."""
        raw = self._raw(handle)
        return {"provider": "sbx", "runner": self.runner, "spec": raw.spec,
                "env": raw.env, "workdir": raw.workdir, "metadata": raw.metadata,
                "ports": list(raw.ports)}

    async def connect(self, descriptor: Mapping[str, Any]) -> SandboxHandle:
        """A live handle from serialize_handle's descriptor. The handle does not own the
        sandbox: its close() closes the connection and leaves the sandbox to its maker."""
        if descriptor.get("provider") != "sbx" or "spec" not in descriptor:
            raise SandboxUsageError("not a descriptor of an sbx provider")
        raw = _Raw(spec=str(descriptor["spec"]), owned=False,
                   env=dict(descriptor.get("env") or {}), workdir=descriptor.get("workdir"),
                   metadata=dict(descriptor.get("metadata") or {}),
                   open_timeout_s=self.open_timeout_s, lock=asyncio.Lock(),
                   ports=tuple(_port(p, "ports") for p in descriptor.get("ports") or ()))
        handle = SandboxHandle(sandbox_id=raw.spec, provider_name=self.name, raw=raw)
        await (await self._conn(handle)).ping()
        return handle


    # ---- SupportsSandboxPortForwarding, SupportsSandboxEndpoint (docs/forwarding.md) ----

    def validate_port_forwarding(self, handle: SandboxHandle | None = None) -> None:
        """Raises SandboxUsageError when forwarding cannot work: this libsbx has no
        forwarding API, or (given a handle whose connection is open) its agent did not say
        HELLO FWD = 1. Nothing is opened: an agent not yet met is checked by forward_ports,
        which raises the same error."""
        if not _lib.HAVE_FORWARD:
            raise SandboxUsageError("port forwarding: %s has no sbx_forward_async; rebuild it"
                                    % _lib.LIB_PATH)
        if handle is not None:
            raw = self._raw(handle)
            if raw.conn is not None and not raw.conn._closed and not raw.conn.hello().fwd:
                raise SandboxUsageError("port forwarding: the agent of %s cannot forward; "
                                        "update it" % raw.spec)

    async def forward_ports(self, handle: SandboxHandle, target_address: str,
                            ports: tuple[int, ...] | Mapping[int, int],
                            ready_file: str | None) -> None:
        """Loopback TCP forwarding out of the sandbox, running until cancelled: for each port
        P a listener on 127.0.0.1:P inside, each connection carried to target_address:P from
        the host; ports may also be a mapping {inside port: host port}. ready_file (an
        absolute path inside, or None) is created once every listener is up. Cancelling
        closes the listeners and resets every connection, then CancelledError goes on; a
        failure raises: an inside port in use is SandboxTransferError with errno
        EADDRINUSE (the agent's refusal), an agent that cannot forward SandboxUsageError, a
        lost sandbox SandboxUnavailableError."""
        self._raw(handle)
        if not isinstance(target_address, str) or not target_address:
            raise SandboxUsageError("forward_ports: target_address must be a host name or "
                                    "an address")
        host = target_address
        if ":" in host and not host.startswith("["):
            host = "[%s]" % host  # IPv6 in brackets, as the specs want
        if isinstance(ports, Mapping):
            pairs = [(_port(i, "ports"), _port(o, "ports")) for i, o in ports.items()]
        else:
            pairs = [(_port(p, "ports"),) * 2 for p in ports]
        if not pairs:
            raise SandboxUsageError("forward_ports: no ports")
        if ready_file is not None and not str(ready_file).startswith("/"):
            raise SandboxUsageError("forward_ports: ready_file %r is not an absolute path"
                                    % (ready_file,))
        specs = ["%d:%s:%d" % (i, host, o) for i, o in pairs]
        conn = await self._conn(handle)
        fw = conn.forward(out=specs, ready_file=None if ready_file is None else str(ready_file),
                          on_event=_log_event("forward_ports %s" % ",".join(specs)))
        try:
            await fw.wait()  # raises: the op ends only by failing
        finally:
            await fw.stop()

    async def endpoint(self, handle: SandboxHandle, port: int) -> SandboxEndpoint:
        """http://127.0.0.1:LPORT reaching 127.0.0.1:port inside, for a port declared in
        SandboxSpec.ports (another raises SandboxUsageError, a ValueError). The inward
        forward is started once per handle and port and kept until the connection closes
        (close, pause); the next call after that starts it again, on the same LPORT when it
        is still free."""
        raw = self._raw(handle)
        port = _port(port, "endpoint")
        if port not in raw.ports:
            raise SandboxUsageError("endpoint: port %d is not declared in SandboxSpec.ports "
                                    "(declared: %s)" % (port, ", ".join(map(str, raw.ports))
                                                        or "none"))
        if raw.endpoint_lock is None:
            raw.endpoint_lock = asyncio.Lock()
        async with raw.endpoint_lock:
            conn = await self._conn(handle)
            ep = raw.endpoints.get(port)
            if ep is not None and ep.conn is conn and ep.forward.running:
                return SandboxEndpoint(endpoint="http://127.0.0.1:%d" % ep.lport, headers={})
            last = 0
            if ep is not None:
                last = ep.lport
                del raw.endpoints[port]
                if ep.conn is conn:
                    await ep.forward.stop()
            log = _log_event("endpoint %d" % port)
            try:
                fw = conn.forward(in_=["%d:127.0.0.1:%d" % (last, port)], on_event=log)
            except SandboxUnavailableError:
                if not last:
                    raise
                fw = conn.forward(in_=["0:127.0.0.1:%d" % port], on_event=log)  # taken now
            try:
                await fw.wait_ready()
            except BaseException:
                await fw.stop()
                raise
            raw.endpoints[port] = _Endpoint(conn=conn, forward=fw, lport=fw.port(0))
            return SandboxEndpoint(endpoint="http://127.0.0.1:%d" % fw.port(0), headers={})


def _port(p, what):
    if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 65535:
        raise SandboxUsageError("%s: %r is not a TCP port (1..65535)" % (what, p))
    return p


def _log_event(prefix):
    """The forward's connection events as lines of the "sbx.forward" logger (DEBUG), or
    None (the library then makes none) when that level is off."""
    if not fwd_log.isEnabledFor(logging.DEBUG):
        return None
    return lambda line: fwd_log.debug("%s: %s", prefix, line)


class AsyncSandbox:
    """A provider and one of its handles: the object sbx.transfer and sbx.session take."""

    def __init__(self, provider: SbxProvider, handle: SandboxHandle):
        self.provider = provider
        self.handle = handle

    @classmethod
    async def create(cls, provider: SbxProvider, spec: SandboxSpec) -> "AsyncSandbox":
        return cls(provider, await provider.create(spec))

    @property
    def sandbox_id(self) -> str:
        return self.handle.sandbox_id

    async def exec(self, command, cwd=None, env=None, timeout_s=None, user=None):
        return await self.provider.exec(self.handle, command, cwd=cwd, env=env,
                                        timeout_s=timeout_s, user=user)

    async def upload_file(self, source_path, target_path):
        await self.provider.upload_file(self.handle, source_path, target_path)

    async def download_file(self, source_path, target_path):
        await self.provider.download_file(self.handle, source_path, target_path)

    async def status(self):
        return await self.provider.status(self.handle)

    async def close(self):
        await self.provider.close(self.handle)

    async def forward_ports(self, target_address, ports, ready_file):
        await self.provider.forward_ports(self.handle, target_address, ports, ready_file)

    async def endpoint(self, port):
        return await self.provider.endpoint(self.handle, port)

    async def connection(self) -> Connection:
        """The native connection (sbx._core.Connection) the transfers use."""
        return await self.provider._conn(self.handle)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


# ---- terminal sessions (the reference's SupportsSandboxPty and SupportsSandboxPtyAttach) ----

@dataclasses.dataclass
class SandboxPtySpec:
    """Interactive PTY session request: command under /bin/sh -c (None: the shell itself);
    pty=False selects pipe mode (stdout and stderr apart, rows/cols ignored)."""

    command: str | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None
    rows: int = 24
    cols: int = 80
    user: str | int | None = None
    pty: bool = True


async def _create_pty(self, handle: SandboxHandle, spec: SandboxPtySpec):
    """A new terminal session held in the sandbox (docs/pty.md): a PtySession, attached."""
    raw = self._raw(handle)
    env = dict(raw.env)
    env.update(spec.env or {})
    conn = await self._conn(handle)
    return await _pty.spawn(conn, command=spec.command, cwd=spec.cwd or raw.workdir, env=env,
                            user=spec.user, rows=spec.rows, cols=spec.cols, pty=spec.pty)


async def _attach_pty(self, handle: SandboxHandle, session_id: str, takeover: bool = True,
                      since: int | None = None):
    """Re-attaches to a session by id: takeover evicts its holder (whose reads then raise
    SandboxPtyError); since replays from that byte offset (0: all that is retained)."""
    self._raw(handle)
    conn = await self._conn(handle)
    return await _pty.attach(conn, session_id, takeover=takeover, since=since)


SbxProvider.create_pty = _create_pty
SbxProvider.attach_pty = _attach_pty
