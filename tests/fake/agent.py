#!/usr/bin/env python3
"""An impersonated sbx agent: speaks protocol 1 on stdin/stdout and misbehaves on request.

The host is driven through it with `sbx --via 'python3 tests/fake/agent.py MODE[=ARG][,...]'`.
Without a mode it behaves like a plain agent for the operations the tests need (probes, exec,
downloads of a tar it builds, uploads it swallows, supervision files held in memory), so each
mode changes one thing. Modes are functions named mode_NAME here or in tests/fake/modes_*.py;
each receives the Agent and patches it (handlers, HELLO fields, timings). Standard library
only. Diagnostics go to stderr; stdout carries frames only.
"""
import glob
import hashlib
import io
import os
import struct
import sys
import tarfile
import time
import zlib

HELLO, WELCOME, PING, PONG = 0x01, 0x02, 0x03, 0x04
REQUEST, RESPONSE, DATA, CREDIT, CANCEL = 0x10, 0x11, 0x12, 0x13, 0x14
END = 0x01
CANARY = b"\r\n\n\r\0\x7f\x1b\x03\x04\x1a\xff\xfe\r"
WINDOW = 4096 * 1024
CHUNK = 64 * 1024

# Tags (shared/proto.h).
T = dict(STATUS=1, ERRNO=2, MESSAGE=3, OP=4, PROTO_MIN=10, PROTO_MAX=11, VERSION=12,
         AGENT_VERSION=13, ARCH=14, UID=15, EUID=16, KERNEL=17, CAPS=18, CGROUP=19,
         SELF_SHA256=20, CANARY=21, MAX_PAYLOAD=22, WINDOW=23, PID=24, GID=25, EGID=26,
         PATH=30, KIND=31, ENTRY=32, TYPE=33, MODE=34, GID_OF=35, UID_OF=36, SIZE=37,
         MTIME_NS=38, TARGET=39, KEEP_OUT=40, CLEAR=41, PHYSICAL=42,
         ARGV=50, SHELL=51, CWD=52, ENV=53, ENV_CLEAR=54, USER=55, TIMEOUT_MS=56, STDIN=57,
         OUTCOME=58, CODE=59, SIGNAL=60, USER_FALLBACK=61, DURATION_NS=62, LINGER_MS=63,
         NOTE=64, CANCELLED=65,
         RUN_DIR=70, GRACE_MS=71, LOG_MAX=72, KEY=73, OFFSET=74, LENGTH=75, BYTES=76,
         NAME=77, STATE=78, ALIVE=79, HAS_RECEIPT=80, ACTIVATION=81,
         XMODE=90, READABLE=91, OPEN=92, FORCE_WALK=93, SHA256=94, FILES=95, DIRS=96,
         LINKS=97, JOB=98, NAMES=99, EXCLUDE=100, SKIP_UNSAFE=101, ARCHIVE_BYTES=102,
         SKIPPED=103, EXCLUDED=104, STAGE=105, TOKEN=110, SECRET=111, NONCE=112, MAC=113,
         KEEP=114)
OP = dict(KIND=1, STAT=2, RESOLVE=3, LANDS_CLEAR=4, EXEC=5, SUP_RUN=10, SUP_SIGNAL=11,
          SUP_STATUS=12, SUP_READ=13, SUP_REARM=14, SUP_CLOSE=15, UPLOAD=20, DOWNLOAD=21,
          COMMIT=22, DIRECT=23, AUTH=24, SETUP=25)
OPNAME = {v: k for k, v in OP.items()}


def log(*a):
    print("fake-agent:", *a, file=sys.stderr, flush=True)


def header(ftype, flags, stream, length):
    h = struct.pack(">BBBBII", 0x53, 0x42, ftype, flags, stream, length)
    return h + struct.pack(">I", zlib.crc32(h) & 0xFFFFFFFF)


class Msg:
    """A message writer: fields appended in order."""

    def __init__(self):
        self.parts = []

    def raw(self, tag, val):
        if isinstance(tag, str):
            tag = T[tag]
        self.parts.append(struct.pack(">HI", tag, len(val)) + val)
        return self

    def i64(self, tag, v):
        return self.raw(tag, struct.pack(">q", v))

    def str(self, tag, s):
        return self.raw(tag, s if isinstance(s, bytes) else s.encode("utf-8", "surrogateescape"))

    def bytes(self):
        return b"".join(self.parts)


def parse(payload):
    """[(tag, value bytes)] of a message."""
    out, pos = [], 0
    while pos < len(payload):
        tag, n = struct.unpack_from(">HI", payload, pos)
        pos += 6
        out.append((tag, payload[pos:pos + n]))
        pos += n
    return out


def fget(fields, name, default=None):
    for tag, val in fields:
        if tag == T[name]:
            return val
    return default


def fall(fields, name):
    return [val for tag, val in fields if tag == T[name]]


def i64(val):
    return struct.unpack(">q", val)[0]


def ok():
    return Msg().i64("STATUS", 0)


def err(cls, message, errno_=0):
    return Msg().i64("STATUS", cls).i64("ERRNO", errno_).str("MESSAGE", message)


class Agent:
    def __init__(self):
        self.inp = sys.stdin.buffer.raw if hasattr(sys.stdin.buffer, "raw") else sys.stdin.buffer
        self.out = sys.stdout.buffer
        self.rbuf = b""
        self.hello_delay = 0.0
        self.hello = dict(arch="x86_64", kernel="6.1.0-fake", agent_version="0.1.0",
                          uid=0, euid=0, gid=0, egid=0)
        self.hello_extra = []  # (tag, bytes) appended to HELLO
        self.credit = {}  # stream -> bytes the host lets us send on stdout/stderr
        self.handlers = {}  # op number -> function(agent, stream, fields)
        self.on_frame = None  # optional hook(agent, ftype, flags, stream, payload) -> handled
        self.stdin_bufs = {}  # stream -> bytearray of an upload's stdin
        self.stdin_end = {}
        self.pending_commit = {}  # upload stream -> fields of its request
        self.files = {}  # supervision: (session, name) -> bytes
        self.state = {}  # session -> state word
        self.tar = None  # bytes of the archive a DOWNLOAD sends (default: one file "f")
        self.download_kind = None  # "dir" / "file" / None: by the KIND probe answer
        self.kinds = {}  # path -> kind word for KIND (default "dir")
        self.sent_sha = None  # override the SHA256 a DOWNLOAD reports
        self.stderr_lines = []

    # ---- frames ----

    def send(self, ftype, stream, payload=b"", flags=0):
        if isinstance(payload, Msg):
            payload = payload.bytes()
        self.out.write(header(ftype, flags, stream, len(payload)) + payload)
        self.out.flush()

    def respond(self, stream, msg):
        self.send(RESPONSE, stream, msg)

    def read_frame(self, block=True):
        """(type, flags, stream, payload), or None at EOF."""
        while True:
            if len(self.rbuf) >= 16:
                ftype, flags, stream, length = struct.unpack_from(">xxBBII", self.rbuf, 0)
                if len(self.rbuf) >= 16 + length:
                    payload = self.rbuf[16:16 + length]
                    self.rbuf = self.rbuf[16 + length:]
                    return ftype, flags, stream, payload
            chunk = os.read(self.inp.fileno(), 1 << 20)
            if not chunk:
                return None
            self.rbuf += chunk

    def send_data(self, stream, chan, data, end=True):
        """DATA within the host's credit (waits for CREDIT frames as needed)."""
        key = (stream, chan)
        self.credit.setdefault(key, WINDOW)
        pos = 0
        while pos < len(data):
            while self.credit[key] <= 0:
                if not self.serve_one():
                    return False
            n = min(CHUNK, len(data) - pos, self.credit[key])
            self.send(DATA, stream, bytes([chan]) + data[pos:pos + n])
            self.credit[key] -= n
            pos += n
        if end:
            self.send(DATA, stream, bytes([chan]), END)
        return True

    # ---- the handshake and the loop ----

    def send_hello(self):
        if self.hello_delay:
            time.sleep(self.hello_delay)
        h = self.hello
        m = (Msg().i64("PROTO_MIN", 1).i64("PROTO_MAX", 1).str("AGENT_VERSION", h["agent_version"])
             .str("ARCH", h["arch"]).i64("UID", h["uid"]).i64("EUID", h["euid"])
             .i64("GID", h["gid"]).i64("EGID", h["egid"]).i64("PID", os.getpid())
             .str("KERNEL", h["kernel"]).i64("CAPS", 0x7f).i64("CGROUP", 1)
             .raw("SELF_SHA256", b"\0" * 32).raw("CANARY", CANARY)
             .i64("MAX_PAYLOAD", 1 << 20).i64("WINDOW", WINDOW))
        for tag, val in self.hello_extra:
            m.raw(tag, val)
        self.send(HELLO, 0, m)

    def run(self):
        for line in self.stderr_lines:
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
        self.send_hello()
        f = self.read_frame()
        if f is None or f[0] != WELCOME:
            log("no WELCOME" if f is None else "first frame %#x, not WELCOME" % f[0])
            return 3
        while self.serve_one():
            pass
        return 0

    def serve_one(self):
        f = self.read_frame()
        if f is None:
            return False
        ftype, flags, stream, payload = f
        if self.on_frame is not None and self.on_frame(self, ftype, flags, stream, payload):
            return True
        if ftype == PING:
            self.send(PONG, stream, payload)
        elif ftype == CREDIT:
            chan, n = struct.unpack(">BI", payload)
            key = (stream, chan)
            self.credit[key] = self.credit.get(key, WINDOW) + n
        elif ftype == DATA:
            buf = self.stdin_bufs.setdefault(stream, bytearray())
            buf += payload[1:]
            if len(payload) > 1:
                self.send(CREDIT, stream, struct.pack(">BI", 0, len(payload) - 1))
            if flags & END:
                self.stdin_end[stream] = True
        elif ftype == CANCEL:
            pass
        elif ftype == REQUEST:
            fields = parse(payload)
            op = i64(fget(fields, "OP", struct.pack(">q", 0)))
            h = self.handlers.get(op) or DEFAULTS.get(op)
            if h is None:
                self.respond(stream, err(5, "unknown operation %d" % op))
            else:
                h(self, stream, fields)
        return True


# ---- default handlers: a plain agent, as far as the tests need one ----

def h_kind(a, stream, fields):
    path = fget(fields, "PATH").decode("utf-8", "surrogateescape")
    a.respond(stream, ok().str("KIND", a.kinds.get(path, "dir")))


def h_stat(a, stream, fields):
    m = ok()
    for p in fall(fields, "PATH"):
        e = (Msg().raw("PATH", p).str("TYPE", "file").i64("MODE", 0o644).i64("UID_OF", 0)
             .i64("GID_OF", 0).i64("SIZE", 1).i64("MTIME_NS", 0))
        m.raw("ENTRY", e.bytes())
    a.respond(stream, m)


def h_resolve(a, stream, fields):
    a.respond(stream, ok().raw("PHYSICAL", fget(fields, "PATH")))


def h_lands_clear(a, stream, fields):
    a.respond(stream, ok().i64("CLEAR", 1).raw("PHYSICAL", fget(fields, "PATH")))


def h_exec(a, stream, fields):
    a.send_data(stream, 1, b"", end=True)
    a.send_data(stream, 2, b"", end=True)
    a.respond(stream, ok().i64("OUTCOME", 0).i64("CODE", 0).i64("PID", 4242)
              .i64("DURATION_NS", 1000))


def default_tar():
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo("f")
        data = b"fake\n"
        ti.size = len(data)
        ti.mode = 0o644
        t.addfile(ti, io.BytesIO(data))
    return b.getvalue()


def h_download(a, stream, fields):
    path = fget(fields, "PATH").decode("utf-8", "surrogateescape")
    kind = a.download_kind or a.kinds.get(path, "dir")
    tar = a.tar if a.tar is not None else default_tar()
    if kind != "absent":
        a.send_data(stream, 1, tar, end=True)
    else:
        a.send_data(stream, 1, b"", end=True)
    sha = a.sent_sha if a.sent_sha is not None else hashlib.sha256(tar).digest()
    m = ok().str("KIND", kind)
    if kind != "absent":
        m.raw("SHA256", sha).i64("FILES", 1).i64("DIRS", 0).i64("LINKS", 0)
        m.i64("BYTES", 5).i64("ARCHIVE_BYTES", len(tar))
    a.respond(stream, m)


def h_upload(a, stream, fields):
    a.pending_commit[stream] = fields  # answered when COMMIT comes


def h_commit(a, stream, fields):
    job = i64(fget(fields, "JOB"))
    sha = fget(fields, "SHA256")
    a.respond(stream, ok())
    if job in a.pending_commit:
        del a.pending_commit[job]
        data = bytes(a.stdin_bufs.pop(job, b""))
        m = ok().raw("SHA256", hashlib.sha256(data).digest() if sha is None else sha)
        m.i64("FILES", 1).i64("DIRS", 0).i64("LINKS", 0).i64("BYTES", 0)
        m.i64("ARCHIVE_BYTES", len(data))
        a.respond(job, m)


def run_dir_of(fields):
    return fget(fields, "RUN_DIR", b"").decode("utf-8", "surrogateescape")


def h_sup_run(a, stream, fields):
    a.state[run_dir_of(fields)] = "running"
    a.respond(stream, ok().i64("PID", 4343))


def h_sup_signal(a, stream, fields):
    a.respond(stream, ok().i64("CLEAR", 1))


def h_sup_status(a, stream, fields):
    s = run_dir_of(fields)
    has = (s, "receipt.json") in a.files
    m = ok().str("STATE", a.state.get(s, "none")).i64("ALIVE", 0).i64("HAS_RECEIPT", int(has))
    m.i64("ACTIVATION", 1).i64("SIZE", len(a.files.get((s, "output.log"), b"")))
    a.respond(stream, m)


def h_sup_read(a, stream, fields):
    s = run_dir_of(fields)
    name = fget(fields, "NAME", b"").decode()
    off = i64(fget(fields, "OFFSET", struct.pack(">q", 0)))
    want = i64(fget(fields, "LENGTH", struct.pack(">q", 512 * 1024)))
    data = a.files.get((s, name))
    if data is None:
        a.respond(stream, err(5, name, 2))
        return
    a.respond(stream, ok().i64("SIZE", len(data)).raw("BYTES", data[off:off + want]))


def h_sup_ok(a, stream, fields):
    a.respond(stream, ok())


DEFAULTS = {
    OP["KIND"]: h_kind, OP["STAT"]: h_stat, OP["RESOLVE"]: h_resolve,
    OP["LANDS_CLEAR"]: h_lands_clear, OP["EXEC"]: h_exec, OP["DOWNLOAD"]: h_download,
    OP["UPLOAD"]: h_upload, OP["COMMIT"]: h_commit, OP["SUP_RUN"]: h_sup_run,
    OP["SUP_SIGNAL"]: h_sup_signal, OP["SUP_STATUS"]: h_sup_status, OP["SUP_READ"]: h_sup_read,
    OP["SUP_REARM"]: h_sup_ok, OP["SUP_CLOSE"]: h_sup_ok,
}


# ---- helpers for modes ----

def tar_of(members):
    """A pax archive from [(TarInfo, data bytes or None)]."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in members:
            if data is not None:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)
    return b.getvalue()


def member(name, kind="file", data=b"", mode=0o644, target=""):
    ti = tarfile.TarInfo(name)
    ti.mode = mode
    ti.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
               "link": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
    ti.linkname = target
    return ti, (data if kind == "file" else None)


# ---- built-in modes ----

def mode_plain(a):
    """No misbehaviour."""


def mode_slow_hello(a, seconds="1"):
    """HELLO only after SECONDS (a slow start: QEMU, a loaded machine)."""
    a.hello_delay = float(seconds)


# ---- answers that do not match their questions (issue 15, class 7) ----

def mode_stat_wrong_path(a):
    """STAT entries name another path than the one asked at their place."""
    def h(a, stream, fields):
        m = ok()
        for p in fall(fields, "PATH"):
            m.raw("ENTRY", Msg().raw("PATH", p + b".other").str("TYPE", "file").bytes())
        a.respond(stream, m)
    a.handlers[OP["STAT"]] = h


def mode_stat_extra(a):
    """One STAT entry more than paths asked."""
    def h(a, stream, fields):
        m = ok()
        for p in fall(fields, "PATH") + [b"/etc/shadow"]:
            m.raw("ENTRY", Msg().raw("PATH", p).str("TYPE", "file").bytes())
        a.respond(stream, m)
    a.handlers[OP["STAT"]] = h


def mode_unasked_response(a):
    """A RESPONSE on a stream the host never opened, before the real answer."""
    def h(a, stream, fields):
        a.respond(stream + 1000, ok().str("KIND", "file"))
        h_kind(a, stream, fields)
    a.handlers[OP["KIND"]] = h


def mode_double_response(a):
    """Every KIND answered twice."""
    def h(a, stream, fields):
        h_kind(a, stream, fields)
        h_kind(a, stream, fields)
    a.handlers[OP["KIND"]] = h


def mode_pong_for_request(a):
    """A KIND answered with a PONG."""
    a.handlers[OP["KIND"]] = lambda a, stream, fields: a.send(PONG, stream, b"")


def mode_data_on_probe(a):
    """DATA on a probe's stream."""
    def h(a, stream, fields):
        a.send(DATA, stream, b"\x01stolen")
        h_kind(a, stream, fields)
    a.handlers[OP["KIND"]] = h


def mode_download_stderr(a):
    """A download that sends bytes on channel 2, which transfers do not have."""
    def h(a, stream, fields):
        a.send(DATA, stream, b"\x02not an archive")
        h_download(a, stream, fields)
    a.handlers[OP["DOWNLOAD"]] = h


def mode_data_after_end(a):
    """Command output that goes on after its END."""
    def h(a, stream, fields):
        a.send_data(stream, 1, b"one", end=True)
        a.send(DATA, stream, b"\x01more")
        h_exec(a, stream, fields)
    a.handlers[OP["EXEC"]] = h


def mode_upload_early_ok(a):
    """An upload answered with success as soon as it starts, before any COMMIT."""
    def h(a, stream, fields):
        a.respond(stream, ok().raw("SHA256", b"\0" * 32).i64("FILES", 1))
    a.handlers[OP["UPLOAD"]] = h


def mode_read_oversize(a):
    """SUP_READ answers with more bytes than asked for."""
    def h(a, stream, fields):
        want = i64(fget(fields, "LENGTH", struct.pack(">q", 512 * 1024)))
        data = b"x" * (want + 100)
        a.respond(stream, ok().i64("SIZE", len(data)).raw("BYTES", data))
    a.handlers[OP["SUP_READ"]] = h


def mode_read_past_size(a):
    """SUP_READ answers with more bytes than the size it reports."""
    def h(a, stream, fields):
        a.respond(stream, ok().i64("SIZE", 3).raw("BYTES", b"0123456789"))
    a.handlers[OP["SUP_READ"]] = h


# ---- reads that would never end (issue 15, class 4) ----

def mode_log_grows(a):
    """The output log grows by more than each read takes, for ever."""
    def h(a, stream, fields):
        off = i64(fget(fields, "OFFSET", struct.pack(">q", 0)))
        want = i64(fget(fields, "LENGTH", struct.pack(">q", 512 * 1024)))
        a.respond(stream, ok().i64("SIZE", off + 2 * want + 1).raw("BYTES", b"L" * want))
    a.handlers[OP["SUP_READ"]] = h


def mode_log_huge(a):
    """The output log claims to be 1 TiB."""
    def h(a, stream, fields):
        want = i64(fget(fields, "LENGTH", struct.pack(">q", 512 * 1024)))
        a.respond(stream, ok().i64("SIZE", 1 << 40).raw("BYTES", b"L" * want))
    a.handlers[OP["SUP_READ"]] = h


def mode_stderr_flood(a):
    """stderr written without pause from before HELLO until the end."""
    import threading

    def flood():
        line = b"E" * 65535 + b"\n"
        try:
            while True:
                os.write(2, line)
        except OSError:
            pass
    threading.Thread(target=flood, daemon=True).start()


# ---- trust: the run key never goes to an impostor (issue 15, class 8) ----

def log_request(path, fields):
    """One line: the request's op number, then the tags of its fields."""
    op = i64(fget(fields, "OP", struct.pack(">q", 0)))
    with open(path, "a") as f:
        f.write("%d: %s\n" % (op, " ".join(str(t) for t, _ in fields)))


def mode_log_requests(a, path):
    """Appends every REQUEST's op and field tags to PATH, one line each: what the host sent an
    impostor."""
    prev = a.on_frame

    def hook(a, ftype, flags, stream, payload):
        if ftype == REQUEST:
            log_request(path, parse(payload))
        return prev(a, ftype, flags, stream, payload) if prev else False
    a.on_frame = hook


def mode_auth_guess(a):
    """Answers AUTH with a MAC it made up, and SETUP with ok."""
    a.handlers[OP["AUTH"]] = lambda a, stream, fields: a.respond(stream, ok().raw("MAC", b"\x42" * 32))
    a.handlers[OP["SETUP"]] = lambda a, stream, fields: a.respond(stream, ok())


def mode_forged_receipt(a):
    """A finished run whose receipt is signed with keys an impostor could know (none was sent:
    a zero key, and the HMAC of nothing)."""
    import hmac
    body = (b'{"version":2,"run_dir":"/s","activation":1,"trigger":"exit","status":0,'
            b'"launched":true,"exit":{"code":0},"termination_witnessed":true}\n')
    sig = hmac.new(b"\0" * 32, body, hashlib.sha256).hexdigest().encode() + b"\n"

    def status(a, stream, fields):
        a.respond(stream, ok().str("STATE", "done").i64("ALIVE", 0).i64("HAS_RECEIPT", 1)
                  .i64("ACTIVATION", 1).i64("SIZE", 0))

    def read(a, stream, fields):
        name = fget(fields, "NAME", b"").decode()
        data = body if name == "receipt.json" else sig if name == "receipt.sig" else b""
        a.respond(stream, ok().i64("SIZE", len(data)).raw("BYTES", data))
    a.handlers[OP["SUP_STATUS"]] = status
    a.handlers[OP["SUP_READ"]] = read


def mode_mitm(a, spec):
    """A relay between the host and a real agent: SPEC is "ACTION:COMMAND..." where COMMAND
    (split on spaces) starts the real agent's channel and ACTION says what to do with a run
    request on its way: "pass" (relay it unchanged), "argv" (replace the harness's argv with
    /bin/touch /tmp/sbx-mitm-ran), "replay" (send it twice). Frames are relayed whole; the
    relay logs each REQUEST's tags like log_requests when $FAKE_LOG is set."""
    import subprocess
    import threading
    action, _, cmd = spec.partition(":")
    child = subprocess.Popen(cmd.split(" "), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    logpath = os.environ.get("FAKE_LOG")

    def frames(fd):
        buf = b""
        while True:
            while len(buf) >= 16:
                ftype, flags, stream, length = struct.unpack_from(">xxBBII", buf, 0)
                if len(buf) < 16 + length:
                    break
                yield ftype, flags, stream, buf[16:16 + length]
                buf = buf[16 + length:]
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return
            buf += chunk

    def up():  # agent -> host, unchanged
        for ftype, flags, stream, payload in frames(child.stdout.fileno()):
            a.send(ftype, stream, payload, flags)
        os._exit(0)
    threading.Thread(target=up, daemon=True).start()

    def down(ftype, flags, stream, payload):
        if ftype == REQUEST:
            fields = parse(payload)
            if logpath:
                log_request(logpath, fields)
            op = i64(fget(fields, "OP", struct.pack(">q", 0)))
            if op == OP["SUP_RUN"] and action == "argv":
                m = Msg()
                done = False
                for tag, val in fields:
                    if tag == T["ARGV"]:
                        if not done:
                            m.str("ARGV", "/bin/touch").str("ARGV", "/tmp/sbx-mitm-ran")
                            done = True
                        continue
                    m.raw(tag, val)
                payload = m.bytes()
            if op == OP["SUP_RUN"] and action == "replay":
                a.replayed = (stream, payload)
        out = child.stdin
        out.write(header(ftype, flags, stream, len(payload)) + payload)
        out.flush()
        return True

    def run():
        # The real agent's HELLO goes up through the relay; the host's frames come down.
        for f in frames(a.inp.fileno()):
            down(*f)
        child.stdin.close()
        child.wait()
        return 0
    a.run = run
    a.replayed = None


def load_modes():
    modes = {k[5:]: v for k, v in globals().items() if k.startswith("mode_")}
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "modes_*.py"))):
        ns = {"__name__": os.path.basename(path)[:-3]}
        ns.update({k: v for k, v in globals().items() if not k.startswith("__")})
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), ns)
        for k, v in ns.items():
            # a mode defined twice would silently replace the first (two files once both
            # had fwd_in_echo): refused
            if k.startswith("mode_") and k[5:] in modes and modes[k[5:]] is not v:
                raise SystemExit("fake-agent: mode %s defined twice (%s)" % (k[5:], path))
        modes.update({k[5:]: v for k, v in ns.items() if k.startswith("mode_")})
    return modes


def main(argv):
    modes = load_modes()
    a = Agent()
    names = [m for arg in argv[1:] for m in arg.split(",") if m]
    for n in names:
        n, _, arg = n.partition("=")
        if n not in modes:
            log("unknown mode %r (known: %s)" % (n, " ".join(sorted(modes))))
            return 2
        if arg:
            modes[n](a, arg)
        else:
            modes[n](a)
    try:
        return a.run()
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
