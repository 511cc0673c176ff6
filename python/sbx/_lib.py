"""libsbx through ctypes: the library found and loaded, its structs and prototypes.

Nothing here waits or decides: _core.py drives sessions on the event loop, the public modules
(providers, transfer, session) are built on it. The structs mirror host/sbx.h and
runner/sbx_runner.h field by field; tests/python/test_abi.py compares their sizes and offsets
with the C compiler's, so a header change that is not made here fails the tests.
"""
import ctypes
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int64, c_size_t,
                    c_uint8, c_uint64, c_void_p)

c_uintptr_t = c_size_t

HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("SBX_LIB")
    if env:
        yield env
    try:  # make install-python: the build it was installed from
        from . import _installed
        yield _installed.LIB
    except ImportError:
        pass
    # python/sbx/ in a built tree: ../../build/host/libsbx.so; installed: beside the package.
    yield os.path.join(HERE, "libsbx.so")
    yield os.path.normpath(os.path.join(HERE, "..", "..", "build", "host", "libsbx.so"))


def _load():
    tried = []
    for path in _candidates():
        if os.path.exists(path):
            return ctypes.CDLL(path), path
        tried.append(path)
    raise ImportError("libsbx.so not found (set SBX_LIB, or run make): tried " + ", ".join(tried))


lib, LIB_PATH = _load()

# libsbx finds the agents (and the bundled images beside them) from the running program's
# folder; in Python the program is the interpreter, so the folder beside the library is named
# instead (build/host/libsbx.so: build/agent), unless the caller chose one.
if not os.environ.get("SBX_AGENT_DIR"):
    try:
        from ._installed import AGENT_DIR as _agents
    except ImportError:
        _agents = os.path.normpath(os.path.join(os.path.dirname(LIB_PATH), "..", "agent"))
    if os.path.isdir(_agents):
        os.environ["SBX_AGENT_DIR"] = _agents

# Classes of struct sbx_err (shared/err.h).
OK, ETRANSFER, EPROBE, EUNAVAILABLE, EPROTOCOL, EUSAGE = range(6)
CLASS_NAMES = {OK: "ok", ETRANSFER: "transfer", EPROBE: "probe", EUNAVAILABLE: "unavailable",
               EPROTOCOL: "protocol", EUSAGE: "usage"}

KIND_ABSENT, KIND_FILE, KIND_DIR = 0, 1, 2
KIND_NAMES = {KIND_ABSENT: None, KIND_FILE: "file", KIND_DIR: "dir"}
OUT_EXITED, OUT_SIGNALED, OUT_TIMED_OUT, OUT_NOT_STARTED = range(4)
LINKS_DATA, LINKS_KEEP = 0, 1
TRUST_CHECK, TRUST_KEEPER, TRUST_SESSION = range(3)
POLLIN, POLLOUT = 0x001, 0x004


class Err(Structure):
    _fields_ = [("cls", c_int), ("errnum", c_int), ("msg", c_char * 256)]

    def text(self):
        return self.msg.decode("utf-8", "replace")


class PollFd(Structure):
    _fields_ = [("fd", c_int), ("events", ctypes.c_short), ("revents", ctypes.c_short)]


OUTPUT_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_int, c_void_p, c_size_t)
PROGRESS_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint64)


class ExecOpts(Structure):
    _fields_ = [("argv", POINTER(c_char_p)), ("shell", c_char_p), ("cwd", c_char_p),
                ("env", POINTER(c_char_p)), ("env_clear", c_int), ("user", c_char_p),
                ("timeout_s", c_double), ("linger_ms", c_int), ("stdin_data", c_void_p),
                ("stdin_len", c_size_t), ("stdin_fd", c_int), ("on_output", OUTPUT_FN),
                ("ctx", c_void_p)]


class ExecResult(Structure):
    _fields_ = [("outcome", c_int), ("code", c_int), ("signal", c_int), ("err", c_int),
                ("message", c_char * 256), ("user_fallback", c_int), ("cancelled", c_int),
                ("note", c_char * 200), ("pid", c_int64), ("seconds", c_double)]


class XferOpts(Structure):
    _fields_ = [("timeout_s", c_double), ("make_readable", c_int), ("names", POINTER(c_char_p)),
                ("skip_unsafe", c_int), ("links", c_int), ("exclude", POINTER(c_char_p)),
                ("archive_copy", c_char_p), ("force_walk", c_int), ("progress", PROGRESS_FN),
                ("ctx", c_void_p)]


class XferStats(Structure):
    _fields_ = [("files", c_uint64), ("dirs", c_uint64), ("links", c_uint64),
                ("data_bytes", c_uint64), ("archive_bytes", c_uint64),
                ("sha256", c_uint8 * 32), ("seconds", c_double), ("note", c_char * 512)]


class RunOpts(Structure):
    _fields_ = [("run_dir", c_char_p), ("argv", POINTER(c_char_p)), ("env", POINTER(c_char_p)),
                ("env_clear", c_int), ("cwd", c_char_p), ("user", c_char_p),
                ("timeout_s", c_double), ("grace_s", c_double), ("log_max", c_int64)]


class RunStatus(Structure):
    _fields_ = [("state", c_char * 16), ("alive", c_int), ("has_receipt", c_int),
                ("activation", c_int64), ("log_size", c_int64)]


class Receipt(Structure):
    _fields_ = [("json", c_void_p), ("len", c_size_t), ("verified", c_int),
                ("trigger", c_char * 16), ("status", c_int), ("timed_out", c_int),
                ("cancelled", c_int), ("expired_before_launch", c_int), ("launched", c_int),
                ("termination_witnessed", c_int), ("exit_code", c_int),
                ("exit_signal", c_int), ("kill_rounds", c_int64), ("activation", c_int64),
                ("oom_kills", c_int64)]


class Resources(Structure):
    _fields_ = [("cpu", c_double), ("memory_mib", c_int64), ("pids", c_int64),
                ("disk_gib", c_double)]


class CreateOpts(Structure):
    _fields_ = [("image", c_char_p), ("name", c_char_p), ("arch", c_char_p),
                ("agent_dir", c_char_p), ("agent", c_char_p),
                ("engine_args", POINTER(c_char_p)), ("privileged", c_int),
                ("resources", Resources)]


class OpenOpts(Structure):
    _fields_ = [("agent_dir", c_char_p), ("agent", c_char_p), ("timeout_s", c_double),
                ("brief", c_int)]


class Sandbox(Structure):
    _fields_ = [("spec", c_char * 192), ("kind", c_char_p), ("state", c_char * 32),
                ("running", c_int), ("pid", c_int64), ("created_ns", c_int64),
                ("image", c_char * 1024), ("arch", c_char * 16), ("id", c_char * 80),
                ("paused", c_int), ("resources", Resources)]


class Hello(Structure):
    _fields_ = [("proto", c_int), ("proto_min", c_int64), ("proto_max", c_int64),
                ("agent_version", c_char * 32), ("arch", c_char * 16), ("uid", c_int64),
                ("euid", c_int64), ("gid", c_int64), ("egid", c_int64), ("pid", c_int64),
                ("kernel", c_char * 128), ("caps", c_int64), ("cgroup", c_int),
                ("sha256", c_uint8 * 32), ("max_payload", c_int64), ("window", c_int64),
                ("fwd", c_int)]


# The structs whose layout tests/python/test_abi.py checks against the C compiler.
STRUCTS = {"sbx_err": Err, "sbx_exec_opts": ExecOpts, "sbx_exec_result": ExecResult,
           "sbx_xfer_opts": XferOpts, "sbx_xfer_stats": XferStats, "sbx_run_opts": RunOpts,
           "sbx_run_status": RunStatus, "sbx_receipt": Receipt, "sbx_resources": Resources,
           "sbx_create_opts": CreateOpts, "sbx_open_opts": OpenOpts, "sbx_sandbox": Sandbox,
           "sbx_hello": Hello}

S = c_void_p  # struct sbx_session *
OP = c_void_p  # struct sbx_op *
E = POINTER(Err)


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_proto("sbx_version", c_char_p)
_proto("sbx_now_ns", c_int64)
_proto("sbx_err_class_name", c_char_p, c_int)
# sessions and runners
_proto("sbx_open", c_int, c_char_p, POINTER(OpenOpts), POINTER(S), E)
_proto("sbx_session_close", None, S)
_proto("sbx_session_hello", POINTER(Hello), S)
_proto("sbx_session_channel", c_char_p, S)
_proto("sbx_session_set_timeout", None, S, c_double)
_proto("sbx_session_stderr", c_char_p, S)
_proto("sbx_session_fds", c_int, S, POINTER(PollFd), c_int, POINTER(c_int64))
_proto("sbx_session_step", c_int, S)
_proto("sbx_session_next_done", OP, S)
_proto("sbx_session_ops", c_size_t, S)
_proto("sbx_sandbox_create", c_int, c_char_p, POINTER(CreateOpts), c_char_p, c_size_t, E)
_proto("sbx_sandbox_status", c_int, c_char_p, POINTER(Sandbox), E)
_proto("sbx_sandbox_remove", c_int, c_char_p, E)
_proto("sbx_sandbox_pause", c_int, c_char_p, E)
_proto("sbx_sandbox_resume", c_int, c_char_p, E)
_proto("sbx_agent_dir", c_int, c_char_p, c_size_t, E)
# operations
_proto("sbx_op_done", c_int, OP)
_proto("sbx_op_status", c_int, OP, E)
_proto("sbx_op_cancel", None, OP)
_proto("sbx_op_set_deadline", None, OP, c_double)
_proto("sbx_op_set_tag", None, OP, c_uintptr_t)
_proto("sbx_op_tag", c_uintptr_t, OP)
_proto("sbx_op_name", c_char_p, OP)
_proto("sbx_op_free", None, OP)
_proto("sbx_ping_async", OP, S, E)
_proto("sbx_ping_result", c_int, OP, POINTER(c_double), E)
_proto("sbx_kind_async", OP, S, c_char_p, E)
_proto("sbx_kind_result", c_int, OP, POINTER(c_int), E)
_proto("sbx_exec_opts_init", None, POINTER(ExecOpts))
_proto("sbx_exec_async", OP, S, POINTER(ExecOpts), E)
_proto("sbx_exec_result", c_int, OP, POINTER(ExecResult), E)
_proto("sbx_xfer_opts_init", None, POINTER(XferOpts))
_proto("sbx_upload_dir_async", OP, S, c_char_p, c_char_p, POINTER(XferOpts), E)
_proto("sbx_upload_path_async", OP, S, c_char_p, c_char_p, POINTER(XferOpts), E)
_proto("sbx_upload_result", c_int, OP, POINTER(XferStats), E)
_proto("sbx_download_dir_async", OP, S, c_char_p, c_char_p, POINTER(XferOpts), E)
_proto("sbx_download_path_async", OP, S, c_char_p, c_char_p, POINTER(XferOpts), E)
_proto("sbx_download_result", c_int, OP, POINTER(c_int), POINTER(XferStats), E)
_proto("sbx_upload_archive_async", OP, S, c_char_p, c_int, c_char_p, POINTER(c_char_p),
       c_size_t, POINTER(XferOpts), E)
_proto("sbx_upload_archive_result", c_int, OP, POINTER(c_int), POINTER(c_void_p),
       POINTER(XferStats), E)
_proto("sbx_lands_clear", c_int, S, c_char_p, POINTER(c_char_p), c_size_t, POINTER(c_int),
       POINTER(c_void_p), POINTER(c_void_p), E)
# supervision
_proto("sbx_run_opts_init", None, POINTER(RunOpts))
_proto("sbx_run_start_async", OP, S, POINTER(RunOpts), E)
_proto("sbx_run_start_result", c_int, OP, POINTER(c_int64), POINTER(c_uint8 * 32), E)
_proto("sbx_run_stop_async", OP, S, c_char_p, E)
_proto("sbx_run_expire_async", OP, S, c_char_p, c_char_p, E)
_proto("sbx_run_expire_result", c_int, OP, POINTER(c_int), E)
_proto("sbx_run_status_async", OP, S, c_char_p, E)
_proto("sbx_run_status_result", c_int, OP, POINTER(RunStatus), E)
_proto("sbx_run_read_async", OP, S, c_char_p, c_char_p, c_int64, c_size_t, E)
_proto("sbx_run_read_result", c_int, OP, POINTER(c_void_p), POINTER(c_size_t),
       POINTER(c_int64), E)
_proto("sbx_receipt_parse", c_int, c_char_p, c_size_t, c_char_p, POINTER(c_uint8), c_size_t,
       POINTER(Receipt), E)
_proto("sbx_receipt_free", None, POINTER(Receipt))

libc = ctypes.CDLL(None)
libc.free.argtypes = [c_void_p]
libc.free.restype = None


def take_string(ptr, length=None):
    """The bytes of a malloc'd buffer libsbx handed over, freed."""
    if not ptr:
        return None
    data = ctypes.string_at(ptr, length) if length is not None else ctypes.string_at(ptr)
    libc.free(ptr)
    return data


def cstr_array(items):
    """A NULL-terminated char*[] of items (str or bytes); the array keeps the strings."""
    if items is None:
        return None
    words = [w.encode() if isinstance(w, str) else bytes(w) for w in items]
    for w in words:
        if b"\0" in w:
            raise ValueError("a NUL byte in %r" % (w,))
    arr = (c_char_p * (len(words) + 1))(*words, None)
    return ctypes.cast(arr, POINTER(c_char_p)), arr


def enc(s):
    if s is None:
        return None
    b = s.encode() if isinstance(s, str) else bytes(s)
    if b"\0" in b:
        raise ValueError("a NUL byte in %r" % (s,))
    return b


class ShVal(Structure):
    _fields_ = [("name", c_char_p), ("kind", c_int), ("scalar", c_char_p),
                ("items", POINTER(c_char_p))]


SHVAL_SCALAR, SHVAL_ARRAY, SHVAL_MAP = 0, 1, 2
STRUCTS["sbx_shval"] = ShVal
_proto("sbx_shell_assignments", c_void_p, POINTER(ShVal), c_size_t, POINTER(Err))
_proto("sbx_run_rearm_async", OP, S, c_char_p, POINTER(Err))
_proto("sbx_run_close_async", OP, S, c_char_p, POINTER(Err))


# ---- terminal sessions (host/sbx.h, docs/pty.md) ----

class PtySpec(Structure):
    _fields_ = [("command", c_char_p), ("argv", POINTER(c_char_p)), ("env", POINTER(c_char_p)),
                ("env_clear", c_int), ("cwd", c_char_p), ("user", c_char_p), ("rows", c_int),
                ("cols", c_int), ("pipe", c_int), ("retain", c_size_t)]


class PtyInfo(Structure):
    _fields_ = [("id", c_char * 17), ("pipe", c_int), ("pid", c_int64), ("retain", c_int64),
                ("head", c_int64), ("base", c_int64), ("head_err", c_int64),
                ("base_err", c_int64), ("held", c_int), ("exited", c_int), ("code", c_int),
                ("signal", c_int)]


class PtyAttachInfo(Structure):
    _fields_ = [("start", c_int64), ("lost", c_int64), ("start_err", c_int64),
                ("lost_err", c_int64), ("st", PtyInfo), ("ticket", c_uint8 * 16)]


STRUCTS.update({"sbx_pty_spec": PtySpec, "sbx_pty_info": PtyInfo,
                "sbx_pty_attach_info": PtyAttachInfo})
PTY = c_void_p  # struct sbx_pty *
_proto("sbx_pty_spawn_async", OP, S, POINTER(PtySpec), E)
_proto("sbx_pty_spawn_result", c_int, OP, c_char_p, E)
_proto("sbx_pty_attach_async", OP, S, c_char_p, c_int, c_int64, c_int64, E)
_proto("sbx_pty_attach_result", c_int, OP, POINTER(PtyAttachInfo), E)
_proto("sbx_pty_open", PTY, S, c_char_p, POINTER(PtyAttachInfo), E)
_proto("sbx_pty_op", OP, PTY)
_proto("sbx_pty_take", c_size_t, PTY, c_int, c_void_p, c_size_t, POINTER(c_int))
_proto("sbx_pty_put", ctypes.c_ssize_t, PTY, c_char_p, c_size_t, E)
_proto("sbx_pty_end_status", c_int, PTY, POINTER(c_int), E)
_proto("sbx_pty_detach", None, PTY)
_proto("sbx_pty_resize_async", OP, S, c_char_p, c_int, c_int, E)
_proto("sbx_pty_signal_async", OP, S, c_char_p, c_char_p, E)
_proto("sbx_pty_close_async", OP, S, c_char_p, E)
_proto("sbx_pty_status_async", OP, S, c_char_p, E)
_proto("sbx_pty_status_result", c_int, OP, POINTER(PtyInfo), E)
_proto("sbx_pty_op_result", c_int, OP, E)


# ---- TCP forwarding over the session (host/sbx.h, docs/forwarding.md) ----

EVENT_FN = ctypes.CFUNCTYPE(None, c_void_p, c_char_p)


class ForwardOpts(Structure):
    _fields_ = [("out", POINTER(c_char_p)), ("n_out", c_size_t), ("in", POINTER(c_char_p)),
                ("n_in", c_size_t), ("target", c_char_p), ("ready_file", c_char_p),
                ("max_conn", c_int), ("on_event", EVENT_FN), ("ctx", c_void_p)]


STRUCTS["sbx_forward_opts"] = ForwardOpts
# Bound only when the library has them: a libsbx built before forwarding still loads, and
# sbx.providers says what is missing (validate_port_forwarding) instead of the import failing.
try:
    _proto("sbx_forward_async", OP, S, POINTER(ForwardOpts), E)
    _proto("sbx_forward_ready", c_int, OP)
    _proto("sbx_forward_port", c_int, OP, c_size_t)
    _proto("sbx_forward_counts", None, OP, POINTER(c_size_t), POINTER(c_uint64))
    HAVE_FORWARD = True
except AttributeError:
    HAVE_FORWARD = False
